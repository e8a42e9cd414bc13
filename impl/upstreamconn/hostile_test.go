package upstreamconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The tests here send the same requests to hostile upstreams through this Transport and through
// net/http's, and hold this one to what net/http does: the limits and deadlines net/http's
// Transport applies by default must hold here too.

// hostileGuard bounds each round trip of the hostile tests, so that a transport that hangs
// fails the test instead of stalling it. It only turns a hang into a failure.
const hostileGuard = 10 * time.Second

// hostileUpstream is one misbehaving upstream: serve answers the first connection (it may read
// the request head from br) and then closes it; every later connection gets plain,
// well-behaved answers.
type hostileUpstream struct {
	name     string
	bodySize int // the size of the POST body sent
	serve    func(c net.Conn, br *bufio.Reader, quit <-chan struct{})
	// racy, when set, is the transcript this Transport must give where net/http's depends on
	// timing (and is then only logged).
	racy string
}

// headerLines returns header lines adding up to about size bytes.
func headerLines(size int) string {
	line := "X-Filler: " + strings.Repeat("f", 8<<10) + "\r\n"
	return strings.Repeat(line, size/len(line)+1)
}

// readHead reads a request head from br and leaves its body unread.
func readHead(br *bufio.Reader) bool {
	_, err := http.ReadRequest(br)
	return err == nil
}

func hostileUpstreams() []hostileUpstream {
	return []hostileUpstream{
		{name: "head over the limit", serve: func(c net.Conn, br *bufio.Reader, _ <-chan struct{}) {
			if _, err := readRequestFrom(br); err == nil {
				io.WriteString(c, "HTTP/1.1 200 OK\r\n"+headerLines(11<<20)+"Content-Length: 2\r\n\r\nok")
			}
		}},
		{name: "head within the limit", serve: func(c net.Conn, br *bufio.Reader, _ <-chan struct{}) {
			if _, err := readRequestFrom(br); err == nil {
				io.WriteString(c, "HTTP/1.1 200 OK\r\n"+headerLines(9<<20)+"Content-Length: 2\r\nConnection: close\r\n\r\nok")
			}
		}},
		{name: "1xx heads over the limit together", serve: func(c net.Conn, br *bufio.Reader, _ <-chan struct{}) {
			if _, err := readRequestFrom(br); err == nil {
				early := "HTTP/1.1 103 Early Hints\r\n" + headerLines(3<<20) + "\r\n"
				io.WriteString(c, strings.Repeat(early, 4)+"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}
		}},
		{name: "1xx heads within the limit together", serve: func(c net.Conn, br *bufio.Reader, _ <-chan struct{}) {
			if _, err := readRequestFrom(br); err == nil {
				early := "HTTP/1.1 103 Early Hints\r\n" + headerLines(2<<20) + "\r\n"
				io.WriteString(c, strings.Repeat(early, 3)+"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			}
		}},
		{name: "endless head", serve: func(c net.Conn, br *bufio.Reader, _ <-chan struct{}) {
			if _, err := readRequestFrom(br); err == nil {
				io.WriteString(c, "HTTP/1.1 200 OK\r\n")
				line := []byte("X-Filler: " + strings.Repeat("f", 8<<10) + "\r\n")
				for sent := 0; sent < 64<<20; sent += len(line) { // stops when the client closes
					if _, err := c.Write(line); err != nil {
						return
					}
				}
			}
		}},
		{name: "early 413, connection kept open", bodySize: 6 << 20, serve: func(c net.Conn, br *bufio.Reader, quit <-chan struct{}) {
			if readHead(br) {
				io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 8\r\n\r\ntoo long")
				<-quit // neither reads the body nor closes
			}
		}},
		// net/http's write error can win over the answer here (it then fails the request).
		{name: "early 413, connection closed", bodySize: 6 << 20, racy: `413 "too long"; then 200 "next"; connections 2`, serve: func(c net.Conn, br *bufio.Reader, _ <-chan struct{}) {
			if readHead(br) {
				io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 8\r\nConnection: close\r\n\r\ntoo long")
				c.(*net.TCPConn).CloseWrite()
				io.CopyN(io.Discard, c, 64<<10)
			}
		}},
		{name: "early 200, body read after", bodySize: 6 << 20, serve: func(c net.Conn, br *bufio.Reader, _ <-chan struct{}) {
			if readHead(br) {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
				io.CopyN(io.Discard, br, 6<<20)
			}
		}},
		{name: "slow reader, then an answer", bodySize: 4 << 20, serve: func(c net.Conn, br *bufio.Reader, _ <-chan struct{}) {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			for {
				time.Sleep(2 * time.Millisecond)
				if _, err := io.CopyN(io.Discard, req.Body, 64<<10); err != nil {
					break
				}
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		}},
	}
}

// roundTripOutcome sends a POST with a body of size bytes through rt to url and describes what
// came back: the status and body, or that it failed.
func roundTripOutcome(rt http.RoundTripper, url string, size int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), hostileGuard)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(bytes.Repeat([]byte("x"), size)))
	if err != nil {
		return "", err
	}
	res, err := rt.RoundTrip(req)
	if err != nil {
		return "error", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Sprintf("%d, then the body failed", res.StatusCode), err
	}
	return fmt.Sprintf("%d %q", res.StatusCode, b), nil
}

// hostileTranscript sends a request to a fresh upstream that misbehaves as u says, then a
// second one (answered normally), and describes both outcomes and how many connections the
// upstream saw: a connection that misbehaved must not be reused.
func hostileTranscript(t *testing.T, u hostileUpstream, rt http.RoundTripper) (string, error) {
	quit := make(chan struct{})
	srv := newRawServer(t, func(n int64, c net.Conn) {
		br := bufio.NewReader(c)
		if n == 1 {
			u.serve(c, br, quit)
			return
		}
		for {
			if _, err := readRequestFrom(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext")
		}
	})
	t.Cleanup(func() { close(quit) }) // runs before the server's cleanup, which waits for serve
	first, err := roundTripOutcome(rt, srv.URL(), u.bodySize)
	second, _ := roundTripOutcome(rt, srv.URL(), 2)
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	return fmt.Sprintf("%s; then %s; connections %d", first, second, srv.accepted.Load()), err
}

// TestHostileUpstreamsMatchNetHTTP: for each hostile upstream, this Transport gives what
// net/http's gives (an answer, or a failure), and never reuses the connection it came on.
// Response heads over 10 MiB (1xx responses included) fail, as in net/http; an upstream that
// answers a large body early and keeps the connection open gets its answer returned at once.
func TestHostileUpstreamsMatchNetHTTP(t *testing.T) {
	for _, u := range hostileUpstreams() {
		t.Run(u.name, func(t *testing.T) {
			want, _ := hostileTranscript(t, u, &http.Transport{})
			got, err := hostileTranscript(t, u, &Transport{})
			if u.racy != "" {
				t.Logf("net/http: %s", want)
				want = u.racy
			}
			if got != want {
				t.Errorf("upstreamconn: %s (%v)\nnet/http:     %s", got, err, want)
			}
			if strings.HasPrefix(want, "error") && strings.Contains(u.name, "head") && !errors.Is(err, ErrResponseHeaderTooLarge) {
				t.Errorf("the failure is %v, want ErrResponseHeaderTooLarge", err)
			}
		})
	}
}

// TestResponseHeadLimitIsConfigurable: MaxResponseHeaderBytes moves the limit.
func TestResponseHeadLimitIsConfigurable(t *testing.T) {
	u := hostileUpstream{serve: func(c net.Conn, br *bufio.Reader, _ <-chan struct{}) {
		if _, err := readRequestFrom(br); err == nil {
			io.WriteString(c, "HTTP/1.1 200 OK\r\n"+headerLines(64<<10)+"Content-Length: 2\r\n\r\nok")
		}
	}}
	for _, tc := range []struct {
		limit int64
		want  string // the first outcome
	}{
		{32 << 10, "error;"},
		{128 << 10, `200 "ok";`},
	} {
		got, err := hostileTranscript(t, u, &Transport{MaxResponseHeaderBytes: tc.limit})
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("limit %d: %s (%v), want %s…", tc.limit, got, err, tc.want)
		}
	}
}
