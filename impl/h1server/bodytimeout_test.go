package h1server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// The tests here hold BodyReadTimeout to its promise on both paths: a stalled upload ends at
// the timeout (the handler's read fails, the connection closes after the answer), a body the
// handler left unread cannot hold the connection either, and a client that keeps sending, or a
// long answer after the body, is not cut off. net/http has no such setting, so these are not
// differential tests. Timeouts are short; the guard only turns a hang into a failure.

// bodyTimeout is the BodyReadTimeout of these tests.
const bodyTimeout = 300 * time.Millisecond

// stalledUploads are the heads of uploads that send part of their body and stall: one the lean
// path serves, and ones handed to net/http.
var stalledUploads = []struct {
	name, head, part string
	handoff          bool
}{
	{name: "lean", head: "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", part: strings.Repeat("a", 3000)},
	{name: "chunked", handoff: true, head: "POST /read HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", part: "bb8\r\n" + strings.Repeat("a", 3000) + "\r\n"},
	{name: "expect continue", handoff: true, head: "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n", part: strings.Repeat("a", 3000)},
}

// bodyHandler reads the body on /read (and says whether that ended at a deadline) and leaves
// it unread on /ignore; /stream reads the body and then answers in pieces for longer than the
// body timeout, and says whether its context was cancelled meanwhile.
func bodyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/read":
			n, err := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "read=%d deadline=%v", n, errors.Is(err, os.ErrDeadlineExceeded))
		case "/ignore":
			io.WriteString(w, "ignored")
		case "/ignore-big": // the head leaves while the handler runs
			io.WriteString(w, strings.Repeat("i", 64<<10))
		case "/stream":
			n, err := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "read=%d err=%v\n", n, err)
			for range 4 {
				w.(http.Flusher).Flush()
				time.Sleep(bodyTimeout / 2)
				fmt.Fprintf(w, "ctx=%v\n", r.Context().Err())
			}
		}
	})
}

// readAnswerThenEnd reads one response from c and then expects the connection to end (not to
// time out, which would mean it hung).
func readAnswerThenEnd(t *testing.T, c net.Conn, br *bufio.Reader) string {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if _, err := br.ReadByte(); normaliseError(err) != "ended" {
		t.Errorf("after the answer the connection did not end: %v", err)
	}
	return string(body)
}

// TestBodyReadTimeoutEndsStalledUploads: the handler's read fails at the timeout, and the
// connection closes after its answer, on both paths.
func TestBodyReadTimeoutEndsStalledUploads(t *testing.T) {
	for _, u := range stalledUploads {
		t.Run(u.name, func(t *testing.T) {
			srv, addr, _ := startH1(t, bodyHandler(), func(s *Server) { s.BodyReadTimeout = bodyTimeout })
			c := dial(t, addr)
			io.WriteString(c, u.head+u.part)
			br := bufio.NewReader(c)
			if strings.Contains(u.head, "100-continue") {
				if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusContinue {
					t.Fatalf("no 100 Continue: %v", err)
				}
			}
			if got := readAnswerThenEnd(t, c, br); got != "read=3000 deadline=true" {
				t.Errorf("the handler saw %q", got)
			}
			if handed := srv.handoffs.Load() > 0; handed != u.handoff {
				t.Errorf("handed off = %v, want %v", handed, u.handoff)
			}
		})
	}
}

// TestBodyReadTimeoutEndsUnreadBodies: a handler that answers without reading the body leaves
// the server to discard it (before the answer's head, as net/http does) to keep the connection;
// a client that stalls there cannot hold the connection for ever, whether the head leaves after
// the handler or while it runs.
func TestBodyReadTimeoutEndsUnreadBodies(t *testing.T) {
	for _, u := range stalledUploads {
		if strings.Contains(u.head, "100-continue") {
			continue // no 100 Continue, no body: nothing to discard
		}
		for path, want := range map[string]string{"/ignore": "ignored", "/ignore-big": strings.Repeat("i", 64<<10)} {
			t.Run(u.name+path, func(t *testing.T) {
				_, addr, _ := startH1(t, bodyHandler(), func(s *Server) { s.BodyReadTimeout = bodyTimeout })
				c := dial(t, addr)
				io.WriteString(c, strings.Replace(u.head, "/read", path, 1)+u.part)
				if got := readAnswerThenEnd(t, c, bufio.NewReader(c)); got != want {
					t.Errorf("the handler answered %q", truncate(got))
				}
			})
		}
	}
}

// TestBodyReadTimeoutSparesSteadyClients: a body that arrives in pieces, each within the
// timeout but all of them together over it, is read whole; and an answer that goes on after
// the body for longer than the timeout is not cut off (its context is not cancelled), on both
// paths.
func TestBodyReadTimeoutSparesSteadyClients(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			srv, addr, _ := startH1(t, bodyHandler(), func(s *Server) { s.BodyReadTimeout = bodyTimeout })
			c := dial(t, addr)
			const pieces, size = 5, 1000
			if chunked {
				io.WriteString(c, "POST /stream HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
			} else {
				fmt.Fprintf(c, "POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", pieces*size)
			}
			for range pieces {
				time.Sleep(bodyTimeout / 3)
				piece := strings.Repeat("p", size)
				if chunked {
					piece = fmt.Sprintf("%x\r\n%s\r\n", size, piece)
				}
				io.WriteString(c, piece)
			}
			if chunked {
				io.WriteString(c, "0\r\n\r\n")
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			want := fmt.Sprintf("read=%d err=<nil>\n", pieces*size) + strings.Repeat("ctx=<nil>\n", 4)
			if string(body) != want {
				t.Errorf("got %q, want %q", body, want)
			}
			if handed := srv.handoffs.Load() > 0; handed != chunked {
				t.Errorf("handed off = %v, want %v", handed, chunked)
			}
			if chunked {
				// A request framed by Transfer-Encoding ends its connection (request smuggling).
				if !resp.Close {
					t.Error("the connection of a chunked request stays open")
				}
				return
			}
			// The connection is still usable.
			io.WriteString(c, "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
			resp, err = http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("the next request: %v", err)
			}
			if b, _ := io.ReadAll(resp.Body); string(b) != "read=2 deadline=false" {
				t.Errorf("the next request got %q", b)
			}
		})
	}
}

// TestBodyReadTimeoutNegativeMeansNone: with a negative BodyReadTimeout a stalled upload waits
// (here until the client gives up), as with net/http.
func TestBodyReadTimeoutNegativeMeansNone(t *testing.T) {
	done := make(chan string, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		done <- fmt.Sprint(errors.Is(err, os.ErrDeadlineExceeded))
	})
	_, addr, _ := startH1(t, h, func(s *Server) { s.BodyReadTimeout = -1 })
	c := dial(t, addr)
	io.WriteString(c, stalledUploads[0].head+stalledUploads[0].part)
	time.Sleep(2 * bodyTimeout)
	select {
	case got := <-done:
		t.Fatalf("the read ended (deadline %s) with no body timeout", got)
	default:
	}
	c.Close()
	if got := waitFor(t, done, "the handler"); got != "false" {
		t.Errorf("the read ended at a deadline")
	}
}

// TestBodyReadTimeoutMatchesNetHTTPAtAStall: at a body that stalls right after the head,
// BodyReadTimeout ends the exchange as net/http's ReadTimeout of the same length does (net/http
// has no body read timeout of its own): the same answer, the same closing of the connection,
// whether the handler reads the body or leaves it to the server, on both paths.
func TestBodyReadTimeoutMatchesNetHTTPAtAStall(t *testing.T) {
	h := conformanceHandler()
	heads := map[string]string{
		"lean":    "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789",
		"chunked": "POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n",
	}
	for name, head := range heads {
		for _, path := range []string{"/read-all", "/ignore-body", "/big"} {
			t.Run(name+path, func(t *testing.T) {
				t.Parallel()
				steps := one(fmt.Sprintf(head, path))
				stdAddr, _ := startNetHTTP(t, h, func(s *Server) { s.ReadTimeout = bodyTimeout })
				_, h1Addr, _ := startH1(t, h, func(s *Server) { s.BodyReadTimeout = bodyTimeout })
				want := transcript(t, stdAddr, steps)
				got := transcript(t, h1Addr, steps)
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("responses differ\nnet/http (ReadTimeout):\n%s\nh1server (BodyReadTimeout):\n%s", strings.Join(want, "\n---\n"), strings.Join(got, "\n---\n"))
				}
			})
		}
	}
}

// TestStalledUploadWaitsOneTimeout: once a stalled upload's read has failed at the timeout, the
// connection is not read again: the handler's answer leaves at once (no second wait to discard
// the rest of the body before its head) and the connection closes after it (no third wait to
// drain it), on the lean path, as net/http's connection does once its deadline has passed. The
// timeout is long against the bound, so that a busy host does not fail the test: before, each
// of the two waits took the whole timeout.
func TestStalledUploadWaitsOneTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	failed := make(chan time.Time, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		failed <- time.Now()
		fmt.Fprintf(w, "deadline=%v", errors.Is(err, os.ErrDeadlineExceeded))
	})
	_, addr, _ := startH1(t, h, func(s *Server) { s.BodyReadTimeout = timeout })
	c := dial(t, addr)
	io.WriteString(c, "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 70\r\n\r\n{\"model\":")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	answered := time.Now()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "deadline=true" {
		t.Errorf("the handler saw %q", body)
	}
	if _, err := br.ReadByte(); normaliseError(err) != "ended" {
		t.Errorf("after the answer the connection did not end: %v", err)
	}
	closed := time.Now()
	readFailed := <-failed
	if wait := answered.Sub(readFailed); wait > timeout/2 {
		t.Errorf("the answer left %v after the handler's read failed: the server waited again", wait)
	}
	if wait := closed.Sub(answered); wait > timeout/2 {
		t.Errorf("the connection closed %v after the answer: the server waited again", wait)
	}
}
