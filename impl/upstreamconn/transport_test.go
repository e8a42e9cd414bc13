package upstreamconn

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// countingServer is an httptest server that counts the connections it accepted.
type countingServer struct {
	*httptest.Server
	accepted atomic.Int64
}

func newCountingServer(t *testing.T, h http.Handler) *countingServer {
	t.Helper()
	s := &countingServer{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.accepted.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// rawServer accepts TCP connections and hands each to serve, counting them.
type rawServer struct {
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
}

func newRawServer(t *testing.T, serve func(n int64, c net.Conn)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := s.accepted.Add(1)
			s.wg.Go(func() {
				defer c.Close()
				serve(n, c)
			})
		}
	})
	t.Cleanup(func() { _ = ln.Close(); s.wg.Wait() })
	return s
}

func (s *rawServer) URL() string { return "http://" + s.ln.Addr().String() }

// readRequestFrom reads one request from the connection and its body.
func readRequestFrom(br *bufio.Reader) (*http.Request, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, req.Body)
	return req, err
}

func mustRequest(t *testing.T, ctx context.Context, method, url string, body []byte) *http.Request {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// fetch sends req and returns the whole body.
func fetch(t *testing.T, rt http.RoundTripper, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", req.Method, req.URL, err)
	}
	return res, string(b)
}

func TestRequestIsWrittenAsGiven(t *testing.T) {
	var got struct {
		method, uri, host, ua, contentType, body string
		contentLength                            int64
		multi                                    []string
	}
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.method, got.uri, got.host, got.ua = r.Method, r.RequestURI, r.Host, r.UserAgent()
		got.contentType, got.body, got.contentLength = r.Header.Get("Content-Type"), string(b), r.ContentLength
		got.multi = r.Header.Values("X-Multi")
		io.WriteString(w, "ok")
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	req := mustRequest(t, context.Background(), http.MethodPost, srv.URL+"/v1/a%2Fb/chat?x=1&y=%20", []byte(`{"a":1}`))
	req.Host = "upstream.example"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("X-Multi", "one")
	req.Header.Add("X-Multi", "two")
	res, body := fetch(t, tr, req)
	if res.StatusCode != http.StatusOK || body != "ok" {
		t.Fatalf("got %d %q", res.StatusCode, body)
	}
	if got.method != "POST" || got.uri != "/v1/a%2Fb/chat?x=1&y=%20" || got.host != "upstream.example" ||
		got.ua != defaultUserAgent || got.contentType != "application/json" || got.body != `{"a":1}` || got.contentLength != 7 ||
		strings.Join(got.multi, ",") != "one,two" {
		t.Errorf("the server received %+v", got)
	}

	// An empty POST still carries Content-Length: 0; a GET without a body carries none.
	req = mustRequest(t, context.Background(), http.MethodPost, srv.URL+"/empty", nil)
	req.Header.Set("User-Agent", "tollgate")
	fetch(t, tr, req)
	if got.method != "POST" || got.uri != "/empty" || got.contentLength != 0 || got.ua != "tollgate" {
		t.Errorf("the server received %+v", got)
	}
}

func TestKeepAliveConnectionIsReused(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "answer to %s", r.URL.Path)
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	for i := range 10 {
		path := fmt.Sprintf("/%d", i)
		_, body := fetch(t, tr, mustRequest(t, context.Background(), http.MethodPost, srv.URL+path, []byte("question")))
		if body != "answer to "+path {
			t.Fatalf("got %q", body)
		}
	}
	if n := srv.accepted.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}
}

func TestBodyClosedBeforeItsEndDiscardsTheConnection(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 64<<10))
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	res, err := tr.RoundTrip(mustRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(res.Body, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if _, err := res.Body.Read(make([]byte, 1)); !errors.Is(err, http.ErrBodyReadAfterClose) {
		t.Errorf("Read after Close: %v, want http.ErrBodyReadAfterClose", err)
	}
	fetch(t, tr, mustRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	if n := srv.accepted.Load(); n != 2 {
		t.Errorf("the server accepted %d connections, want 2 (the first one must not be reused)", n)
	}
}

func TestIdleConnectionClosedByTheServerIsRetried(t *testing.T) {
	var handled atomic.Int64
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		handled.Add(1)
		w.Write(b)
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	fetch(t, tr, mustRequest(t, context.Background(), http.MethodPost, srv.URL, []byte("first")))
	srv.CloseClientConnections() // closes the connection idle in the pool

	_, body := fetch(t, tr, mustRequest(t, context.Background(), http.MethodPost, srv.URL, []byte("second")))
	if body != "second" {
		t.Errorf("got %q", body)
	}
	if n := srv.accepted.Load(); n != 2 {
		t.Errorf("the server accepted %d connections, want 2", n)
	}
	if n := handled.Load(); n != 2 {
		t.Errorf("the server handled %d requests, want 2", n)
	}
}

// onceReader is a request body that cannot be rewound (the request has no GetBody).
type onceReader struct{ io.Reader }

func (onceReader) Close() error { return nil }

// TestIdleConnectionClosedByTheServerIsNotUsed: a connection the server closed while it was
// idle is noticed when it is taken from the pool, so even a request whose body cannot be sent
// twice goes out once, on a new connection.
func TestIdleConnectionClosedByTheServerIsNotUsed(t *testing.T) {
	var bodies atomic.Int64
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bodies.Add(1)
		io.Copy(w, r.Body)
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	fetch(t, tr, mustRequest(t, context.Background(), http.MethodPost, srv.URL, []byte("first")))
	srv.CloseClientConnections()

	req := mustRequest(t, context.Background(), http.MethodPost, srv.URL, nil)
	req.Body, req.ContentLength = onceReader{strings.NewReader("second")}, 6
	if _, body := fetch(t, tr, req); body != "second" {
		t.Fatalf("got %q", body)
	}
	if n := srv.accepted.Load(); n != 2 {
		t.Errorf("the server accepted %d connections, want 2", n)
	}
	if n := bodies.Load(); n != 2 {
		t.Errorf("the server received %d requests, want 2 (each sent once)", n)
	}
}

// TestStrayBytesOnAnIdleConnectionAreNeverAnAnswer: an upstream that sends a second, unasked
// response after the first must not have it read as the answer to the next request (which may
// be another tenant's): the connection is dropped when it is taken from the pool.
func TestStrayBytesOnAnIdleConnectionAreNeverAnAnswer(t *testing.T) {
	sendStray, strayWritten := make(chan struct{}), make(chan struct{})
	srv := newRawServer(t, func(n int64, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequestFrom(br); err != nil {
			return
		}
		answer := fmt.Sprintf("answer-%d", n)
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer)
		if n == 1 {
			// Only once the first answer has been read and the connection is idle in the pool.
			<-sendStray
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray")
			close(strayWritten)
		}
		_, _ = readRequestFrom(br) // hold the connection open until the client goes
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	if _, body := fetch(t, tr, mustRequest(t, context.Background(), http.MethodGet, srv.URL(), nil)); body != "answer-1" {
		t.Fatalf("first answer %q", body)
	}
	close(sendStray)
	<-strayWritten // on loopback the bytes are in the client's socket once written
	if _, body := fetch(t, tr, mustRequest(t, context.Background(), http.MethodGet, srv.URL(), nil)); body != "answer-2" {
		t.Fatalf("second request got %q, want the answer of a new connection", body)
	}
}

func TestRequestFailingOnAFreshConnectionIsNotRetried(t *testing.T) {
	srv := newRawServer(t, func(_ int64, c net.Conn) {
		readRequestFrom(bufio.NewReader(c)) // then close without answering
	})
	tr := &Transport{}
	_, err := tr.RoundTrip(mustRequest(t, context.Background(), http.MethodPost, srv.URL(), []byte("x")))
	if err == nil {
		t.Fatal("no error")
	}
	if n := srv.accepted.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}
}

func TestConnectionCloseIsHonoured(t *testing.T) {
	var sawClose atomic.Bool
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Close {
			sawClose.Store(true)
		}
		if r.URL.Path == "/server-closes" {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, "ok")
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()

	fetch(t, tr, mustRequest(t, context.Background(), http.MethodGet, srv.URL+"/server-closes", nil))
	fetch(t, tr, mustRequest(t, context.Background(), http.MethodGet, srv.URL+"/", nil))
	if n := srv.accepted.Load(); n != 2 {
		t.Errorf("after the server's Connection: close the server accepted %d connections, want 2", n)
	}

	req := mustRequest(t, context.Background(), http.MethodGet, srv.URL+"/", nil)
	req.Close = true
	fetch(t, tr, req)
	if !sawClose.Load() {
		t.Error("the request's Close was not sent as Connection: close")
	}
	fetch(t, tr, mustRequest(t, context.Background(), http.MethodGet, srv.URL+"/", nil))
	// The Close request went out on the second connection, which is then not reused.
	if n := srv.accepted.Load(); n != 3 {
		t.Errorf("after the client's Connection: close the server accepted %d connections, want 3", n)
	}
}

func TestChunkedResponse(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 5 {
			fmt.Fprintf(w, "part %d;", i)
			w.(http.Flusher).Flush()
		}
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	for range 2 {
		res, body := fetch(t, tr, mustRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
		if len(res.TransferEncoding) != 1 || res.TransferEncoding[0] != "chunked" {
			t.Errorf("TransferEncoding %v, want chunked", res.TransferEncoding)
		}
		if body != "part 0;part 1;part 2;part 3;part 4;" {
			t.Errorf("got %q", body)
		}
	}
	if n := srv.accepted.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}
}

func TestStreamIsReadIncrementally(t *testing.T) {
	release := make(chan struct{})
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: second\n\n")
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	res, err := tr.RoundTrip(mustRequest(t, context.Background(), http.MethodPost, srv.URL, []byte("{}")))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	// The server is still holding the rest back: the first event must be readable now.
	line, err := br.ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: second\n\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
	fetch(t, tr, mustRequest(t, context.Background(), http.MethodPost, srv.URL, []byte("{}")))
	if n := srv.accepted.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1 (a stream read to its end is reusable)", n)
	}
}

func TestCancelWhileAwaitingHeaders(t *testing.T) {
	arrived, gone := make(chan struct{}), make(chan struct{})
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server watches for the client going away once the body is read
		close(arrived)
		<-r.Context().Done()
		close(gone)
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		res, err := tr.RoundTrip(mustRequest(t, ctx, http.MethodPost, srv.URL, []byte("{}")))
		if err == nil {
			res.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("RoundTrip: %v, want context.Canceled", err)
	}
	<-gone // the connection was closed
}

func TestCancelWhileReadingBody(t *testing.T) {
	gone := make(chan struct{})
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := tr.RoundTrip(mustRequest(t, ctx, http.MethodGet, srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	first := make([]byte, len("data: first\n\n"))
	if _, err := io.ReadFull(res.Body, first); err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := res.Body.Read(make([]byte, 100)) // blocks: the server sends nothing more
		readErr <- err
	}()
	cancel()
	if err := <-readErr; !errors.Is(err, context.Canceled) {
		t.Errorf("Read after cancel: %v, want context.Canceled", err)
	}
	<-gone
	if _, err := res.Body.Read(make([]byte, 1)); err == nil {
		t.Error("a second Read after cancel succeeded")
	}
}

func TestCloseInterruptsABlockedRead(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "start")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	res, err := tr.RoundTrip(mustRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(res.Body, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		_, err := res.Body.Read(make([]byte, 100))
		readErr <- err
	}()
	<-started
	res.Body.Close()
	if err := <-readErr; err == nil {
		t.Error("the blocked Read succeeded after Close")
	}
}

func TestNoBodyResponses(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		default:
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "hello")
		}
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	for _, c := range []struct{ method, path string }{{"HEAD", "/"}, {"GET", "/204"}, {"GET", "/304"}, {"HEAD", "/"}, {"GET", "/"}} {
		res, body := fetch(t, tr, mustRequest(t, context.Background(), c.method, srv.URL+c.path, nil))
		want := ""
		if c.method == "GET" && c.path == "/" {
			want = "hello"
		}
		if body != want {
			t.Errorf("%s %s: body %q, want %q", c.method, c.path, body, want)
		}
		if c.method == "HEAD" && res.ContentLength != 5 {
			t.Errorf("HEAD: ContentLength %d, want 5", res.ContentLength)
		}
	}
	if n := srv.accepted.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}
}

func TestInformationalResponsesAreSkipped(t *testing.T) {
	srv := newRawServer(t, func(_ int64, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := readRequestFrom(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"+
				"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	for range 2 {
		res, body := fetch(t, tr, mustRequest(t, context.Background(), http.MethodPost, srv.URL(), []byte("{}")))
		if res.StatusCode != http.StatusOK || body != "ok" {
			t.Errorf("got %d %q", res.StatusCode, body)
		}
	}
	if n := srv.accepted.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}
}

func TestLargeResponseBody(t *testing.T) {
	const size = 16 << 20
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	want := sha256.Sum256(payload)
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			for p := payload; len(p) > 0; p = p[min(len(p), 100_000):] {
				w.Write(p[:min(len(p), 100_000)])
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(size))
		w.Write(payload)
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	for _, path := range []string{"/", "/chunked", "/"} {
		res, err := tr.RoundTrip(mustRequest(t, context.Background(), http.MethodGet, srv.URL+path, nil))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		n, err := io.Copy(h, res.Body)
		res.Body.Close()
		if err != nil || n != size || !bytes.Equal(h.Sum(nil), want[:]) {
			t.Errorf("%s: read %d bytes, %v; content matches: %v", path, n, err, bytes.Equal(h.Sum(nil), want[:]))
		}
	}
	if n := srv.accepted.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}
}

func TestMalformedResponses(t *testing.T) {
	answers := []string{
		"HTTP/1.1 OK\r\n\r\n",
		"garbage\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", // then the connection closes
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
	}
	for _, answer := range answers {
		t.Run(strings.Fields(answer)[0]+"…", func(t *testing.T) {
			srv := newRawServer(t, func(n int64, c net.Conn) {
				br := bufio.NewReader(c)
				if _, err := readRequestFrom(br); err != nil {
					return
				}
				if n == 1 {
					io.WriteString(c, answer)
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			})
			tr := &Transport{}
			defer tr.CloseIdleConnections()
			res, err := tr.RoundTrip(mustRequest(t, context.Background(), http.MethodGet, srv.URL(), nil))
			if err == nil {
				_, err = io.ReadAll(res.Body)
				res.Body.Close()
			}
			if err == nil {
				t.Fatalf("no error for %q", answer)
			}
			_, body := fetch(t, tr, mustRequest(t, context.Background(), http.MethodGet, srv.URL(), nil))
			if body != "ok" {
				t.Errorf("the next request got %q", body)
			}
			if n := srv.accepted.Load(); n != 2 {
				t.Errorf("the server accepted %d connections, want 2 (the broken one discarded)", n)
			}
		})
	}
}

func TestResponseReadUntilCloseIsNotReused(t *testing.T) {
	srv := newRawServer(t, func(_ int64, c net.Conn) {
		if _, err := readRequestFrom(bufio.NewReader(c)); err == nil {
			io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\nuntil the end")
		}
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	for range 2 {
		if _, body := fetch(t, tr, mustRequest(t, context.Background(), http.MethodGet, srv.URL(), nil)); body != "until the end" {
			t.Errorf("got %q", body)
		}
	}
	if n := srv.accepted.Load(); n != 2 {
		t.Errorf("the server accepted %d connections, want 2", n)
	}
}

func TestResponseHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	tr := &Transport{ResponseHeaderTimeout: 1} // expires at once, whatever the machine's speed
	defer tr.CloseIdleConnections()
	_, err := tr.RoundTrip(mustRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	if !errors.Is(err, ErrResponseHeaderTimeout) {
		t.Errorf("got %v, want ErrResponseHeaderTimeout", err)
	}
}

func TestIdleTimeoutRetiresConnections(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	tr := &Transport{IdleTimeout: 1} // every idle connection is already too old when taken
	defer tr.CloseIdleConnections()
	for range 3 {
		fetch(t, tr, mustRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	}
	if n := srv.accepted.Load(); n != 3 {
		t.Errorf("the server accepted %d connections, want 3", n)
	}
}

func TestIdlePoolIsBounded(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	tr := &Transport{MaxIdlePerHost: 2}
	defer tr.CloseIdleConnections()
	var open []*http.Response
	for range 4 { // four connections in use at once
		res, err := tr.RoundTrip(mustRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, res)
	}
	for _, res := range open {
		io.ReadAll(res.Body)
		res.Body.Close()
	}
	tr.mu.Lock()
	idle := 0
	for _, s := range tr.idle {
		idle += len(s.conns)
	}
	tr.mu.Unlock()
	if idle != 2 {
		t.Errorf("%d idle connections, want 2", idle)
	}
}

// closeTracker records whether a request body was closed.
type closeTracker struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeTracker) Close() error { c.closed.Store(true); return nil }

func TestUnsupportedRequestsAreRefused(t *testing.T) {
	cases := map[string]func(*http.Request){
		"https":              func(r *http.Request) { r.URL.Scheme = "https" },
		"unknown length":     func(r *http.Request) { r.ContentLength = -1 },
		"chunked":            func(r *http.Request) { r.TransferEncoding = []string{"chunked"} },
		"trailer":            func(r *http.Request) { r.Trailer = http.Header{"X-T": nil} },
		"header injection":   func(r *http.Request) { r.Header.Set("X-Evil", "a\r\nHost: elsewhere") },
		"invalid field name": func(r *http.Request) { r.Header["Bad Name"] = []string{"x"} },
		"user info":          func(r *http.Request) { r.URL.User = url.UserPassword("u", "p") },
		"query injection":    func(r *http.Request) { r.URL.RawQuery = "a=1 HTTP/1.1\r\nX-Injected: yes" },
		"opaque control":     func(r *http.Request) { r.URL.Opaque = "/a\r\nX-Injected: yes" },
	}
	tr := &Transport{}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			body := &closeTracker{Reader: strings.NewReader("{}")}
			req := mustRequest(t, context.Background(), http.MethodPost, "http://127.0.0.1:1/", nil)
			req.Body, req.ContentLength = body, 2
			mutate(req)
			if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "upstreamconn:") {
				t.Errorf("got %v, want an upstreamconn error", err)
			}
			if !body.closed.Load() {
				t.Error("the request body was not closed")
			}
		})
	}
}

func TestBodyLengthMustMatchContentLength(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	for _, c := range []struct {
		body   string
		length int64
	}{{"abc", 5}, {"abcdef", 3}, {strings.Repeat("a", 10000), 10001}, {strings.Repeat("a", 10001), 10000}} {
		req := mustRequest(t, context.Background(), http.MethodPost, srv.URL, nil)
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader(c.body)), c.length
		if res, err := tr.RoundTrip(req); err == nil {
			res.Body.Close()
			t.Errorf("body %q with ContentLength %d: no error", c.body, c.length)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/stream":
			for i := range 3 {
				fmt.Fprintf(w, "data: %s %d\n\n", b, i)
				w.(http.Flusher).Flush()
			}
		case "/big":
			w.Write(bytes.Repeat([]byte("y"), 100<<10))
		default:
			w.Write(b)
		}
	}))
	tr := &Transport{MaxIdlePerHost: 4}
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				msg := fmt.Sprintf("g%d-%d", g, i)
				ctx, cancel := context.WithCancel(context.Background())
				switch i % 4 {
				case 0, 1:
					_, body := fetch(t, tr, mustRequest(t, ctx, http.MethodPost, srv.URL+"/echo", []byte(msg)))
					if body != msg {
						t.Errorf("got %q, want %q", body, msg)
					}
				case 2:
					_, body := fetch(t, tr, mustRequest(t, ctx, http.MethodPost, srv.URL+"/stream", []byte(msg)))
					if want := fmt.Sprintf("data: %s 0\n\ndata: %s 1\n\ndata: %s 2\n\n", msg, msg, msg); body != want {
						t.Errorf("got %q, want %q", body, want)
					}
				case 3: // read part of the body, then cancel and close concurrently
					res, err := tr.RoundTrip(mustRequest(t, ctx, http.MethodGet, srv.URL+"/big", nil))
					if err != nil {
						t.Error(err)
						break
					}
					io.ReadFull(res.Body, make([]byte, 1000))
					done := make(chan struct{})
					go func() { defer close(done); io.Copy(io.Discard, res.Body) }()
					cancel()
					res.Body.Close()
					<-done
				}
				cancel()
			}
		})
	}
	wg.Wait()
}

func TestSchemeDispatch(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain") }))
	other := &recordingTransport{}
	d := &SchemeDispatch{Plain: &Transport{}, Other: other}
	defer d.CloseIdleConnections()
	if _, body := fetch(t, d, mustRequest(t, context.Background(), http.MethodGet, srv.URL, nil)); body != "plain" {
		t.Errorf("http:// got %q", body)
	}
	if other.calls.Load() != 0 {
		t.Error("an http:// request went to Other")
	}
	if _, body := fetch(t, d, mustRequest(t, context.Background(), http.MethodGet, "https://provider.example/v1", nil)); body != "other" {
		t.Errorf("https:// got %q", body)
	}
	if other.calls.Load() != 1 {
		t.Error("the https:// request did not go to Other")
	}
}

type recordingTransport struct{ calls atomic.Int64 }

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.calls.Add(1)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("other")), Request: req}, nil
}

func TestLargeRequestBody(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(b)
		fmt.Fprintf(w, "%d %x", len(b), sum)
	}))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	sum := sha256.Sum256(payload)
	want := fmt.Sprintf("%d %x", len(payload), sum)
	for range 2 {
		if _, body := fetch(t, tr, mustRequest(t, context.Background(), http.MethodPost, srv.URL, payload)); body != want {
			t.Errorf("got %q, want %q", body, want)
		}
	}
	if n := srv.accepted.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}
}

func TestEarlyAnswerToALargeRequestIsReturned(t *testing.T) {
	srv := newRawServer(t, func(_ int64, c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		// Answer without reading the body, then close: the client's write fails.
		io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 8\r\nConnection: close\r\n\r\ntoo long")
		c.(*net.TCPConn).CloseWrite()
		io.CopyN(io.Discard, c, 64<<10)
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	res, err := tr.RoundTrip(mustRequest(t, context.Background(), http.MethodPost, srv.URL(), bytes.Repeat([]byte("x"), 32<<20)))
	if err != nil {
		t.Fatalf("the server's early answer was lost: %v", err)
	}
	defer res.Body.Close()
	if b, _ := io.ReadAll(res.Body); res.StatusCode != http.StatusRequestEntityTooLarge || string(b) != "too long" {
		t.Errorf("got %d %q", res.StatusCode, b)
	}
}

// failingReader returns some bytes and then an error.
type failingReader struct{ sent bool }

func (f *failingReader) Read(p []byte) (int, error) {
	if !f.sent {
		f.sent = true
		return copy(p, "partial"), nil
	}
	return 0, errors.New("disk on fire")
}

func TestFailingRequestBody(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	for _, length := range []int64{100, 1 << 20} { // buffered and copied bodies
		req := mustRequest(t, context.Background(), http.MethodPost, srv.URL, nil)
		req.Body, req.ContentLength = io.NopCloser(&failingReader{}), length
		if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "disk on fire") {
			t.Errorf("ContentLength %d: got %v, want the body's error", length, err)
		}
	}
}

func TestIdleConnectionsAreClosedInTheBackground(t *testing.T) {
	closed := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateClosed {
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}
	srv.Start()
	defer srv.Close()
	tr := &Transport{IdleTimeout: 1} // the pruning timer fires at once
	fetch(t, tr, mustRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	<-closed // the idle connection was closed without another request
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.idle) != 0 {
		t.Errorf("%d hosts still have idle connections", len(tr.idle))
	}
}

func TestCancelledContextLeavesThePoolAlone(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	fetch(t, tr, mustRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.RoundTrip(mustRequest(t, ctx, http.MethodGet, srv.URL, nil)); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	fetch(t, tr, mustRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	if n := srv.accepted.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}
}

// TestDispatchSendsProxiedPlainRequestsToOther checks that a plain request for which a proxy is
// configured goes through the other transport, and one without through Plain.
func TestDispatchSendsProxiedPlainRequestsToOther(t *testing.T) {
	var other countingRoundTripper
	proxy, _ := url.Parse("http://proxy.invalid:3128")
	d := &SchemeDispatch{Plain: &Transport{}, Other: &other, Proxy: func(r *http.Request) (*url.URL, error) {
		if r.URL.Host == "via-proxy.invalid" {
			return proxy, nil
		}
		return nil, nil
	}}
	req, _ := http.NewRequest("GET", "http://via-proxy.invalid/x", nil)
	if _, err := d.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if other.n != 1 {
		t.Fatalf("proxied plain request: other transport used %d times", other.n)
	}
	req, _ = http.NewRequest("GET", "https://secure.invalid/x", nil)
	if _, err := d.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if other.n != 2 {
		t.Fatalf("https request: other transport used %d times", other.n)
	}
}

type countingRoundTripper struct{ n int }

func (c *countingRoundTripper) RoundTrip(*http.Request) (*http.Response, error) {
	c.n++
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}
