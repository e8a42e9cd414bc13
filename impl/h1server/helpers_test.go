package h1server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// guard bounds every network wait in the tests. It only turns a hang into a failure; no test
// asserts how long anything takes.
const guard = 10 * time.Second

// logBuffer collects a server's ErrorLog output.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startH1 serves h with an h1server on a loopback port; configure may adjust the server first.
func startH1(t testing.TB, h http.Handler, configure func(*Server)) (*Server, string, *logBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	s := &Server{Handler: h, ErrorLog: log.New(logs, "", 0)}
	if configure != nil {
		configure(s)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		_ = s.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return s, ln.Addr().String(), logs
}

// startNetHTTP serves h with net/http on a loopback port, with the timeouts and limits of an
// h1server that configure would produce, for the differential tests, and with h1server's one
// rule on top of net/http's: a request with a Transfer-Encoding, and an HTTP/1.0 request, end
// their connection once answered (request smuggling; handoffHandler). The cases that show that rule against plain
// net/http are TestTransferEncodingEndsTheConnection's.
func startNetHTTP(t testing.TB, h http.Handler, configure func(*Server)) (string, *logBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var model Server
	if configure != nil {
		configure(&model)
	}
	logs := &logBuffer{}
	closeAfterTE := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 || !r.ProtoAtLeast(1, 1) {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
	s := &http.Server{
		Handler:           closeAfterTE,
		ReadTimeout:       model.ReadTimeout,
		ReadHeaderTimeout: model.ReadHeaderTimeout,
		WriteTimeout:      model.WriteTimeout,
		IdleTimeout:       model.IdleTimeout,
		MaxHeaderBytes:    model.MaxHeaderBytes,
		ErrorLog:          log.New(logs, "", 0),
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return ln.Addr().String(), logs
}

// dial connects to addr with the guard as the connection's deadline.
func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(guard))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// describeResponse renders a response (status, headers except Date, framing, body and how the
// body ended) for comparison.
func describeResponse(resp *http.Response) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", resp.Proto, resp.Status)
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		if k != "Date" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %q\n", k, resp.Header[k])
	}
	_, hasDate := resp.Header["Date"]
	fmt.Fprintf(&b, "date=%v te=%v cl=%d close=%v\n", hasDate, resp.TransferEncoding, resp.ContentLength, resp.Close)
	body, err := io.ReadAll(resp.Body)
	fmt.Fprintf(&b, "body=%q", truncate(string(body)))
	if err != nil {
		fmt.Fprintf(&b, " body-error=%s", normaliseError(err))
	}
	if len(resp.Trailer) > 0 {
		fmt.Fprintf(&b, " trailer=%v", resp.Trailer)
	}
	return b.String()
}

// truncate shortens long bodies in transcripts, keeping their length.
func truncate(s string) string {
	if len(s) <= 300 {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:300], len(s))
}

// normaliseError maps the ways a connection can end to one word, so that a reset and an end of
// file, which depend on timing, compare equal; only a timeout (a hang) stands apart.
func normaliseError(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "none"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "ended"
	}
}

// step is one write of raw bytes followed by reading one response per method listed.
type step struct {
	pause      time.Duration // waited before sending, to trickle a request in over time
	send       string
	methods    []string
	closeWrite bool // half-close after sending (no probe follows)
}

// probeRequest is sent after the steps to learn whether the server kept the connection open.
const probeRequest = "GET /probe HTTP/1.1\r\nHost: probe\r\n\r\n"

// transcript sends the steps on one connection and returns what came back, followed by whether
// a probe request is still answered.
func transcript(t testing.TB, addr string, steps []step) []string {
	t.Helper()
	c := dial(t, addr)
	br := bufio.NewReader(c)
	var out []string
	read := func(method string) bool {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			out = append(out, "no response: "+normaliseError(err))
			return false
		}
		out = append(out, describeResponse(resp))
		return true
	}
	for _, st := range steps {
		time.Sleep(st.pause)
		if _, err := io.WriteString(c, st.send); err != nil {
			out = append(out, "write failed")
			return out
		}
		if st.closeWrite {
			_ = c.(*net.TCPConn).CloseWrite()
		}
		for _, m := range st.methods {
			if !read(m) {
				return out
			}
		}
		if st.closeWrite {
			if _, err := br.ReadByte(); err != nil {
				out = append(out, "then: "+normaliseError(err))
			} else {
				out = append(out, "then: more bytes")
			}
			return out
		}
	}
	if _, err := io.WriteString(c, probeRequest); err != nil {
		return append(out, "probe: closed")
	}
	if !read(http.MethodGet) {
		out[len(out)-1] = "probe: " + out[len(out)-1]
	}
	return out
}

// waitFor waits for a value on ch, failing the test after the guard.
func waitFor[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// shutdownCtx returns a context bounded by the guard.
func shutdownCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}
