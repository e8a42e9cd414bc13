package h1server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestStreaming checks that every Flush reaches the client before the handler writes the next
// event: the handler waits for the client to have read each event.
func TestStreaming(t *testing.T) {
	next := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range 5 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			if err := rc.Flush(); err != nil {
				t.Errorf("flush: %v", err)
				return
			}
			select {
			case <-next:
			case <-time.After(guard):
				t.Error("client did not read the event")
				return
			}
		}
	})
	srv, addr, _ := startH1(t, h, nil)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.TransferEncoding == nil || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("TransferEncoding = %v, want chunked", resp.TransferEncoding)
	}
	br := bufio.NewReader(resp.Body)
	for i := range 5 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("data: %d\n", i); line != want {
			t.Fatalf("event %d: %q, want %q", i, line, want)
		}
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		next <- struct{}{} // the handler writes the next event only now
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("end of stream: %q, %v", rest, err)
	}
	if n := srv.handoffs.Load(); n != 0 {
		t.Errorf("%d hand-offs, want the lean path", n)
	}
}

// slowHandler signals each request on started and waits until release is closed or the request's
// context ends, then reports the context's error on result.
type slowHandler struct {
	started chan *http.Request
	release chan struct{}
	result  chan error
}

func newSlowHandler() *slowHandler {
	return &slowHandler{started: make(chan *http.Request, 10), release: make(chan struct{}), result: make(chan error, 10)}
}

func (h *slowHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/slow" {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s body=%q", r.Method, r.URL, body)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	h.started <- r
	select {
	case <-h.release:
	case <-r.Context().Done():
	case <-time.After(guard):
	}
	h.result <- r.Context().Err()
	_, _ = io.WriteString(w, "slow done")
}

// TestContextCancelledWhenClientCloses checks that a client closing the connection cancels a
// running request's context, for requests with and without a body, with a short and with the
// default watch delay.
func TestContextCancelledWhenClientCloses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		delay   time.Duration
		request string
	}{
		{"no body", time.Millisecond, get("/slow")},
		{"with body", time.Millisecond, post("/slow", "some body")},
		{"body sent later", time.Millisecond, "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n"},
		{"default delay", 0, get("/slow")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSlowHandler()
			_, addr, _ := startH1(t, h, func(s *Server) { s.WatchDelay = tc.delay })
			c := dial(t, addr)
			if _, err := io.WriteString(c, tc.request); err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(tc.request, "\r\n\r\n") && strings.HasPrefix(tc.request, "POST") {
				time.Sleep(5 * time.Millisecond) // let the timer fire before the body ends (either order must work)
				_, _ = io.WriteString(c, "body")
			}
			waitFor(t, h.started, "the handler")
			_ = c.Close()
			if err := waitFor(t, h.result, "the handler's context"); !errors.Is(err, context.Canceled) {
				t.Errorf("context error %v, want context.Canceled", err)
			}
		})
	}
}

// TestContextCancelledOnWriteError checks that a failed write cancels the request's context
// (with the watcher disabled, so that it is the write that notices).
func TestContextCancelledOnWriteError(t *testing.T) {
	closed := make(chan struct{})
	result := make(chan error, 1)
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		waitFor(t, closed, "the client to close")
		rc := http.NewResponseController(w)
		chunk := strings.Repeat("x", 64<<10)
		deadline := time.Now().Add(guard)
		for time.Now().Before(deadline) {
			_, _ = io.WriteString(w, chunk)
			if err := rc.Flush(); err != nil {
				result <- r.Context().Err()
				return
			}
		}
		result <- errors.New("writes never failed")
	})
	_, addr, _ := startH1(t, h, func(s *Server) { s.WatchDelay = -1 })
	c := dial(t, addr)
	if _, err := io.WriteString(c, get("/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, started, "the handler")
	_ = c.(*net.TCPConn).SetLinger(0) // reset, so the server's writes fail
	_ = c.Close()
	close(closed)
	if err := waitFor(t, result, "the handler"); !errors.Is(err, context.Canceled) {
		t.Errorf("context error after a failed write: %v, want context.Canceled", err)
	}
}

// TestContextCancelledWhenHandlerReturns checks that the context ends with the handler.
func TestContextCancelledWhenHandlerReturns(t *testing.T) {
	ctxs := make(chan context.Context, 2) // the request's and the probe's
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Err() != nil {
			t.Error("context ended during the handler")
		}
		ctxs <- r.Context()
	})
	_, addr, _ := startH1(t, h, nil)
	got := transcript(t, addr, one(get("/")))
	if !strings.Contains(got[0], "200 OK") {
		t.Fatalf("response: %s", got[0])
	}
	ctx := waitFor(t, ctxs, "the handler")
	select {
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("context error %v", ctx.Err())
		}
	case <-time.After(guard):
		t.Error("context not cancelled after the handler returned")
	}
}

// TestPipelinedAfterWatcher sends a second request while the first is still running and its
// watcher is reading the connection: the watcher must keep what it read, the first request's
// context must stay alive, and both requests must be answered in order.
func TestPipelinedAfterWatcher(t *testing.T) {
	h := newSlowHandler()
	watchStarted := make(chan struct{}, 10)
	watchEnded := make(chan struct{}, 10)
	_, addr, _ := startH1(t, h, func(s *Server) {
		s.WatchDelay = time.Millisecond
		s.testHookWatch = func(ev string) {
			if ev == "start" {
				watchStarted <- struct{}{}
			} else {
				watchEnded <- struct{}{}
			}
		}
	})
	c := dial(t, addr)
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, post("/slow", "first body")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, h.started, "the first handler")
	waitFor(t, watchStarted, "the watcher")
	if _, err := io.WriteString(c, post("/echo", "second body")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, watchEnded, "the watcher to read the second request")
	close(h.release)
	if err := waitFor(t, h.result, "the first handler"); err != nil {
		t.Errorf("first request's context ended: %v", err)
	}
	for i, want := range []string{"slow done", `POST /echo body="second body"`} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if string(body) != want {
			t.Errorf("response %d: %q, want %q", i, body, want)
		}
	}
}

// TestWatcherStopsQuietly checks that a request slower than the watch delay, whose client stays,
// ends without its context being cancelled and leaves the connection usable.
func TestWatcherStopsQuietly(t *testing.T) {
	h := newSlowHandler()
	watchStarted := make(chan struct{}, 10)
	_, addr, _ := startH1(t, h, func(s *Server) {
		s.WatchDelay = time.Millisecond
		s.testHookWatch = func(ev string) {
			if ev == "start" {
				watchStarted <- struct{}{}
			}
		}
	})
	c := dial(t, addr)
	br := bufio.NewReader(c)
	for i := range 3 {
		if _, err := io.WriteString(c, get("/slow")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, h.started, "the handler")
		waitFor(t, watchStarted, "the watcher")
		h.release <- struct{}{}
		if err := waitFor(t, h.result, "the handler"); err != nil {
			t.Errorf("request %d: context ended: %v", i, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}
}

// startOwned starts an h1server whose Serve result the test checks itself.
func startOwned(t *testing.T, h http.Handler) (*Server, string, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h, ErrorLog: nil}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return s, ln.Addr().String(), done
}

// expectClosed waits until the server closes c, discarding what it still sends.
func expectClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(guard))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: connection not closed", what)
	}
}

// TestShutdown checks graceful shutdown: idle connections (lean and handed-off) close at once,
// the active request finishes with Connection: close, Serve returns ErrServerClosed and Shutdown
// returns when the last connection is gone.
func TestShutdown(t *testing.T) {
	h := newSlowHandler()
	s, addr, served := startOwned(t, h)

	idle := dial(t, addr)
	idleBR := bufio.NewReader(idle)
	_, _ = io.WriteString(idle, get("/hello"))
	if _, err := http.ReadResponse(idleBR, nil); err != nil {
		t.Fatal(err)
	}
	idle10 := dial(t, addr) // handed to net/http, idle there
	idle10BR := bufio.NewReader(idle10)
	_, _ = io.WriteString(idle10, "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	if resp, err := http.ReadResponse(idle10BR, nil); err != nil {
		t.Fatal(err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	active := dial(t, addr)
	activeBR := bufio.NewReader(active)
	_, _ = io.WriteString(active, get("/slow"))
	waitFor(t, h.started, "the handler")

	shutdown := make(chan error, 1)
	go func() { shutdown <- s.Shutdown(shutdownCtx(t)) }()
	if err := waitFor(t, served, "Serve to return"); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve: %v, want ErrServerClosed", err)
	}
	expectClosed(t, idle, "idle connection")
	expectClosed(t, idle10, "idle handed-off connection")
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned %v while a request was active", err)
	default:
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		_ = c.Close()
		t.Error("the listener still accepts")
	}

	close(h.release)
	resp, err := http.ReadResponse(activeBR, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "slow done" || !resp.Close {
		t.Errorf("active response: %q close=%v, want the body and Connection: close", body, resp.Close)
	}
	expectClosed(t, active, "active connection after its response")
	if err := waitFor(t, shutdown, "Shutdown"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestShutdownContextEnds checks that Shutdown returns the context's error while a request is
// still active.
func TestShutdownContextEnds(t *testing.T) {
	h := newSlowHandler()
	s, addr, _ := startOwned(t, h)
	c := dial(t, addr)
	_, _ = io.WriteString(c, get("/slow"))
	waitFor(t, h.started, "the handler")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown: %v, want context.Canceled", err)
	}
	close(h.release)
}

// TestClose checks that Close ends every connection at once and Serve returns ErrServerClosed.
func TestClose(t *testing.T) {
	h := newSlowHandler()
	s, addr, served := startOwned(t, h)
	idle := dial(t, addr)
	_, _ = io.WriteString(idle, get("/hello"))
	if _, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil {
		t.Fatal(err)
	}
	active := dial(t, addr)
	_, _ = io.WriteString(active, get("/slow"))
	waitFor(t, h.started, "the handler")
	handedOff := dial(t, addr)
	_, _ = io.WriteString(handedOff, "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	if _, err := http.ReadResponse(bufio.NewReader(handedOff), nil); err != nil {
		t.Fatal(err)
	}

	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := waitFor(t, served, "Serve to return"); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve: %v, want ErrServerClosed", err)
	}
	expectClosed(t, idle, "idle connection")
	expectClosed(t, active, "active connection")
	expectClosed(t, handedOff, "handed-off connection")
	close(h.release)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve after Close: %v", err)
	}
}

// TestHTTPClient drives the server with net/http's client: keep-alive reuse on the lean path,
// request bodies, HEAD, and a chunked upload that is handed off.
func TestHTTPClient(t *testing.T) {
	h := newSlowHandler()
	s, addr, _ := startH1(t, h, nil)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	var reused atomic.Int32
	do := func(method, path string, body io.Reader) string {
		t.Helper()
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			if info.Reused {
				reused.Add(1)
			}
		}}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), method, "http://"+addr+path, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for i := range 5 {
		if got, want := do("GET", fmt.Sprintf("/get?i=%d", i), nil), fmt.Sprintf("GET /get?i=%d body=\"\"", i); got != want {
			t.Errorf("GET: %q, want %q", got, want)
		}
	}
	if got := do("POST", "/post", strings.NewReader("hello")); got != `POST /post body="hello"` {
		t.Errorf("POST: %q", got)
	}
	if got := do("HEAD", "/head", nil); got != "" {
		t.Errorf("HEAD: %q", got)
	}
	if n := reused.Load(); n != 6 {
		t.Errorf("%d of 7 requests reused the connection, want 6", n)
	}
	if n := s.handoffs.Load(); n != 0 {
		t.Errorf("%d hand-offs before the chunked upload", n)
	}
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, "streamed ")
		_, _ = io.WriteString(pw, "upload")
		_ = pw.Close()
	}()
	if got := do("PUT", "/chunked", pr); got != `PUT /chunked body="streamed upload"` {
		t.Errorf("chunked PUT: %q", got)
	}
	if n := s.handoffs.Load(); n != 1 {
		t.Errorf("%d hand-offs after the chunked upload, want 1", n)
	}
}

// TestTimeouts checks that ReadHeaderTimeout ends a connection whose head never completes and
// IdleTimeout ends an idle one (only that they end, not when).
func TestTimeouts(t *testing.T) {
	h := newSlowHandler()
	_, addr, _ := startH1(t, h, func(s *Server) {
		s.ReadHeaderTimeout = 20 * time.Millisecond
		s.IdleTimeout = 20 * time.Millisecond
	})
	slow := dial(t, addr)
	_, _ = io.WriteString(slow, "GET /hello HTTP/1.1\r\nHost:")
	expectClosed(t, slow, "incomplete head")

	idle := dial(t, addr)
	_, _ = io.WriteString(idle, get("/hello"))
	if _, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, idle, "idle connection")
}

// TestResponseController checks the ResponseController methods on the lean path: deadlines are
// honoured (a handler's read deadline is not overridden), Hijack is not supported.
func TestResponseController(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if _, _, err := rc.Hijack(); !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("Hijack: %v, want ErrNotSupported", err)
		}
		if err := rc.SetWriteDeadline(time.Now().Add(guard)); err != nil {
			t.Errorf("SetWriteDeadline: %v", err)
		}
		if err := rc.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
			t.Errorf("SetReadDeadline: %v", err)
		}
		_, err := io.ReadAll(r.Body) // the client never sends the whole body
		fmt.Fprintf(w, "deadline=%v", errors.Is(err, os.ErrDeadlineExceeded))
	})
	_, addr, _ := startH1(t, h, nil)
	c := dial(t, addr)
	_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "deadline=true" {
		t.Errorf("body %q", body)
	}
}

// TestBodyAfterHandler checks that a request body read after its handler returned fails.
func TestBodyAfterHandler(t *testing.T) {
	bodies := make(chan io.Reader, 2) // the request's and the probe's
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { bodies <- r.Body })
	_, addr, _ := startH1(t, h, nil)
	transcript(t, addr, one(post("/", "unread body")))
	b := waitFor(t, bodies, "the handler")
	if _, err := b.Read(make([]byte, 4)); !errors.Is(err, http.ErrBodyReadAfterClose) {
		t.Errorf("read after the handler: %v, want ErrBodyReadAfterClose", err)
	}
}

// TestKeepAlivesDisabled checks SetKeepAlivesEnabled(false): responses close the connection.
func TestKeepAlivesDisabled(t *testing.T) {
	s, addr, _ := startH1(t, conformanceHandler(), nil)
	s.SetKeepAlivesEnabled(false)
	got := transcript(t, addr, one(get("/hello")))
	if !strings.Contains(got[0], "close=true") || got[1] != "probe: no response: ended" {
		t.Errorf("transcript:\n%s", strings.Join(got, "\n---\n"))
	}
}

// countingConn counts the system calls a connection makes.
type countingConn struct {
	net.Conn
	reads, writes *atomic.Int32
}

func (c countingConn) Read(p []byte) (int, error)  { c.reads.Add(1); return c.Conn.Read(p) }
func (c countingConn) Write(p []byte) (int, error) { c.writes.Add(1); return c.Conn.Write(p) }

type countingListener struct {
	net.Listener
	reads, writes atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, &l.reads, &l.writes}, nil
}

// TestSyscalls checks that a small response leaves in one write, and that a request that arrives
// whole is read with one read (plus the read that waits for the next request).
func TestSyscalls(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	s := &Server{Handler: conformanceHandler()}
	go func() { _ = s.Serve(cl) }()
	defer s.Close()
	c := dial(t, ln.Addr().String())
	br := bufio.NewReader(c)
	const n = 5
	for i := range n {
		_, _ = io.WriteString(c, post("/echo", "small body"))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if w := cl.writes.Load(); w != int32(i+1) {
			t.Fatalf("after %d responses, %d writes", i+1, w)
		}
	}
	// Each request is one read, and one more read may already wait for the next request. A read
	// may rarely find only part of a request, which is why this is a bound.
	if r := cl.reads.Load(); r < n || r > 2*n+1 {
		t.Errorf("%d reads for %d requests", r, n)
	}
}
