package h1server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// envelope is the ErrorBody of the tests: a JSON object naming the status, reason and target.
func envelope(status int, reason, target string) (string, []byte) {
	b, _ := json.Marshal(map[string]any{"status": status, "reason": reason, "target": target})
	return "application/json", b
}

// readAnswer reads one response from c and its body, and then whether the server closed the
// connection (a read that ends without a byte).
func readAnswer(t *testing.T, r *bufio.Reader, c interface{ SetReadDeadline(time.Time) error }) (*http.Response, string, bool) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(guard))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	_, err = r.ReadByte()
	return resp, string(body), err == io.EOF
}

// TestAmbiguousLengthIsRefused: a request with both Content-Length and Transfer-Encoding, in
// either order, is answered 400 and its connection closed (RFC 9112 section 6.1); neither it
// nor a request pipelined behind it reaches the handler, so a front that framed it by
// Content-Length cannot smuggle the second one in. net/http served both.
func TestAmbiguousLengthIsRefused(t *testing.T) {
	heads := map[string]string{
		"length first":   "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\nTransfer-Encoding: chunked\r\n\r\n",
		"encoding first": "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 30\r\n\r\n",
	}
	for name, head := range heads {
		for _, withBody := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ErrorBody=%v", name, withBody), func(t *testing.T) {
				var served atomic.Int64
				_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					served.Add(1)
					_, _ = io.Copy(io.Discard, r.Body)
				}), func(s *Server) {
					if withBody {
						s.ErrorBody = envelope
					}
				})
				c := dial(t, addr)
				if _, err := io.WriteString(c, head+"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				resp, body, closed := readAnswer(t, bufio.NewReader(c), c)
				if resp.StatusCode != http.StatusBadRequest || !resp.Close {
					t.Errorf("status %d close=%v, want 400 and Connection: close", resp.StatusCode, resp.Close)
				}
				if !closed {
					t.Error("the connection stayed open after the refusal")
				}
				wantType, wantBody := "text/plain; charset=utf-8", "400 Bad Request: the request has both Content-Length and Transfer-Encoding"
				if withBody {
					ct, b := envelope(http.StatusBadRequest, "the request has both Content-Length and Transfer-Encoding", "/a")
					wantType, wantBody = ct, string(b)
				}
				if got := resp.Header.Get("Content-Type"); got != wantType || body != wantBody {
					t.Errorf("answer %q %q, want %q %q", got, body, wantType, wantBody)
				}
				if got, want := resp.Header.Get("X-Should-Retry"), map[bool]string{true: "false"}[withBody]; got != want {
					t.Errorf("X-Should-Retry %q, want %q", got, want)
				}
				if n := served.Load(); n != 0 {
					t.Errorf("the handler served %d requests, want none", n)
				}
			})
		}
	}
}

// TestErrorBodyReplacesNetHTTPAnswers: the answers net/http writes itself to a head it cannot
// read (on the hand-off path) come in the Server's ErrorBody, with net/http's status and reason,
// and say X-Should-Retry: false: the same head is refused again, and the OpenAI and Anthropic
// SDKs sent a 501 or 505's request again (three times in all by default) without it.
func TestErrorBodyReplacesNetHTTPAnswers(t *testing.T) {
	cases := []struct {
		name, request string
		status        int
		reason        string
	}{
		{"missing host", "GET /a HTTP/1.1\r\nX: y\r\n\r\n", http.StatusBadRequest, "missing required Host header"},
		{"unknown transfer coding", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", http.StatusNotImplemented, "unsupported transfer encoding"},
		{"another HTTP version", "GET /a HTTP/3.0\r\nHost: x\r\n\r\n", http.StatusHTTPVersionNotSupported, "unsupported protocol version"},
		{"head too large", "GET /a HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-Filler: "+strings.Repeat("f", 1000)+"\r\n", 40) + "\r\n", http.StatusRequestHeaderFieldsTooLarge, ""},
		// A bare CR in a header value: net/http's plain 400 says nothing, the reason names the
		// header (a key pasted from a file with Windows line ends ends with one).
		{"a key pasted with its CR", "GET /a HTTP/1.1\r\nHost: x\r\nauthorization: Bearer tgk_x\r\r\n\r\n", http.StatusBadRequest,
			"the Authorization header holds a carriage return: a key pasted from a file with Windows line ends? Send the key without it"},
		{"an x-api-key pasted with its CR", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nX-Api-Key: sk-x\r\r\n\r\n{}", http.StatusBadRequest,
			"the X-Api-Key header holds a carriage return: a key pasted from a file with Windows line ends? Send the key without it"},
		{"a CR within another header's value", "GET /a HTTP/1.1\r\nHost: x\r\nX-Trace: a\rb\r\n\r\n", http.StatusBadRequest,
			"the X-Trace header holds a carriage return, which a header value may not"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				t.Errorf("the handler was called for %s", r.URL)
			}), func(s *Server) {
				s.ErrorBody = envelope
				s.MaxHeaderBytes = 8 << 10
			})
			c := dial(t, addr)
			if _, err := io.WriteString(c, tc.request); err != nil {
				t.Fatal(err)
			}
			resp, body, _ := readAnswer(t, bufio.NewReader(c), c)
			ct, want := envelope(tc.status, tc.reason, "/a")
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != ct || body != string(want) || !resp.Close {
				t.Errorf("got %d %q %q close=%v, want %d %q %q and Connection: close", resp.StatusCode, resp.Header.Get("Content-Type"), body, resp.Close, tc.status, ct, want)
			}
			if got := resp.Header.Get("X-Should-Retry"); got != "false" {
				t.Errorf("X-Should-Retry %q, want false", got)
			}
		})
	}
}

// TestBareCRIsNamedWhateverTheRequestLine: a bare CR in a header value is named in the 400
// whatever sent the head to net/http before its headers were scanned (an absolute-form target,
// HTTP/1.0, a bare LF on an earlier line), with ErrorBody and in net/http's plain text. Such a
// head lost the header's name: the lean path's scan stopped at the request line, before the CR.
func TestBareCRIsNamedWhateverTheRequestLine(t *testing.T) {
	const keyReason = "the X-Api-Key header holds a carriage return: a key pasted from a file with Windows line ends? Send the key without it"
	cases := []struct{ name, request, target string }{
		{"absolute form", "POST http://x/v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: k\r\r\nContent-Length: 2\r\n\r\n{}", "http://x/v1/messages"},
		{"HTTP/1.0", "POST /v1/messages HTTP/1.0\r\nHost: x\r\nX-Api-Key: k\r\r\nContent-Length: 2\r\n\r\n{}", "/v1/messages"},
		{"a bare LF before", "POST /v1/messages HTTP/1.1\r\nHost: x\nX-Api-Key: k\r\r\nContent-Length: 2\r\n\r\n{}", "/v1/messages"},
	}
	for _, tc := range cases {
		for _, withBody := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ErrorBody=%v", tc.name, withBody), func(t *testing.T) {
				_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					t.Errorf("the handler was called for %s", r.URL)
				}), func(s *Server) {
					if withBody {
						s.ErrorBody = envelope
					}
				})
				c := dial(t, addr)
				if _, err := io.WriteString(c, tc.request); err != nil {
					t.Fatal(err)
				}
				resp, body, _ := readAnswer(t, bufio.NewReader(c), c)
				want := "400 Bad Request: " + keyReason
				if withBody {
					_, b := envelope(http.StatusBadRequest, keyReason, tc.target)
					want = string(b)
				}
				if resp.StatusCode != http.StatusBadRequest || body != want {
					t.Errorf("got %d %q, want 400 %q", resp.StatusCode, body, want)
				}
			})
		}
	}
}

// TestBareCRReasonRepeatsNoSendersBytes: the refusal of a bare CR names the header only when
// its name is a token, so that a name holding a CR of the sender's is not repeated: the plain
// answer puts the reason in its status line, where that CR would be a line end the sender
// chose (the envelope escapes it, but still repeats bytes that name no header).
func TestBareCRReasonRepeatsNoSendersBytes(t *testing.T) {
	const plain = "a header line holds a carriage return, which HTTP/1.1 allows only before a line's end"
	for _, withBody := range []bool{false, true} {
		t.Run(fmt.Sprintf("ErrorBody=%v", withBody), func(t *testing.T) {
			_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				t.Errorf("the handler was called for %s", r.URL)
			}), func(s *Server) {
				if withBody {
					s.ErrorBody = envelope
				}
			})
			c := dial(t, addr)
			request := "POST /v1/messages HTTP/1.0\r\nHost: x\r\nX\rSet-Cookie: a\r\r\nContent-Length: 2\r\n\r\n{}"
			if _, err := io.WriteString(c, request); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(guard))
			answer, err := io.ReadAll(c)
			if err != nil {
				t.Fatal(err)
			}
			statusLine, _, _ := strings.Cut(string(answer), "\n")
			want := "HTTP/1.1 400 Bad Request: " + plain + "\r"
			if withBody {
				want = "HTTP/1.1 400 Bad Request\r"
			}
			if statusLine != want {
				t.Errorf("status line %q, want %q", statusLine, want)
			}
			if strings.Contains(string(answer), "et-Cookie") {
				t.Errorf("the answer repeats the name: %q", answer)
			}
		})
	}
}

// TestErrorBodyIsToldTheTarget: ErrorBody is told the request target of the head it refuses,
// on the lean path and on the hand-off path, whatever form the target has and whatever made
// the lean path hand the head off (so that an API server answers in the envelope of the route
// the request was meant for), and nothing when there is no request line to read one from. A
// later head on a connection net/http serves is told its own target, pipelined or sent after
// the answer, behind a body that looks like a request line too; it was told none, and the
// gateway answered in the chat-completions envelope whatever the route. Only behind a head
// too long to place (over maxTrackedHead) is it told none.
func TestErrorBodyIsToldTheTarget(t *testing.T) {
	cases := []struct {
		name, request string
		then          string // sent once the answers before the refusal are read
		answers       int    // the refusal is the last of these
		status        int
		target        string
	}{
		{"lean refusal", "POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", "", 1, http.StatusBadRequest, "/v1/messages?beta=true"},
		{"hand-off refusal", "POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", "", 1, http.StatusNotImplemented, "/v1/messages"},
		{"a CR in a value", "POST /api/mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\r\n\r\n", "", 1, http.StatusBadRequest, "/api/mcp"},
		{"absolute form", "POST http://x/v1/messages HTTP/1.1\r\nX-Api-Key: k\r\r\n\r\n", "", 1, http.StatusBadRequest, "http://x/v1/messages"},
		{"HTTP/1.0", "POST /v1/messages HTTP/1.0\r\nHost: x\r\nX-Api-Key: k\r\r\n\r\n", "", 1, http.StatusBadRequest, "/v1/messages"},
		{"empty lines first", "\r\n\r\nGET /v1/models HTTP/1.1\r\nX: y\r\n\r\n", "", 1, http.StatusBadRequest, "/v1/models"},
		{"no request line", "NOT-HTTP\r\n\r\n", "", 1, http.StatusBadRequest, ""},
		{"a later head", "GET /v1/messages HTTP/1.1\r\nHost: x\r\nUpgrade: foo\r\n\r\nGET /v1/models HTTP/1.1\r\nX: y\r\n\r\n", "", 2, http.StatusBadRequest, "/v1/models"},
		{"a later head sent after the answer", "GET /v1/messages HTTP/1.1\r\nHost: x\r\nUpgrade: foo\r\n\r\n", "POST /api/mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\r\n\r\n", 2, http.StatusBadRequest, "/api/mcp"},
		{"a later head behind a body", "POST /v1/messages HTTP/1.1\r\nHost: x\r\nUpgrade: foo\r\nContent-Length: 25\r\n\r\nGET /v1/models HTTP/1.1\r\n" +
			"POST /api/mcp HTTP/1.1\r\nX: y\r\n\r\n", "", 2, http.StatusBadRequest, "/api/mcp"},
		{"a third head", "GET /v1/messages HTTP/1.1\r\nHost: x\r\nUpgrade: foo\r\n\r\nPOST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" +
			"\r\n\r\nPOST /v1/messages?beta=true HTTP/1.1\r\nTransfer-Encoding: gzip\r\nHost: x\r\n\r\n", "", 3, http.StatusNotImplemented, "/v1/messages?beta=true"},
		{"a later head past a long head", "GET /v1/messages HTTP/1.1\r\nHost: x\r\nX-Long: " + strings.Repeat("a", 3*readBufferSize) + "\r\n\r\n" +
			"GET /v1/models HTTP/1.1\r\nX: y\r\n\r\n", "", 2, http.StatusBadRequest, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var targets []string
			var mu sync.Mutex
			_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), func(s *Server) {
				s.ErrorBody = func(status int, reason, target string) (string, []byte) {
					mu.Lock()
					targets = append(targets, target)
					mu.Unlock()
					return envelope(status, reason, target)
				}
			})
			c := dial(t, addr)
			if _, err := io.WriteString(c, tc.request); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(c)
			for range tc.answers - 1 {
				_ = c.SetReadDeadline(time.Now().Add(guard))
				served, err := http.ReadResponse(r, nil)
				if err != nil {
					t.Fatalf("no answer to the first request: %v", err)
				}
				_, _ = io.Copy(io.Discard, served.Body)
			}
			if _, err := io.WriteString(c, tc.then); err != nil {
				t.Fatal(err)
			}
			resp, _, _ := readAnswer(t, r, c)
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode != tc.status || !slices.Equal(targets, []string{tc.target}) {
				t.Errorf("status %d, ErrorBody told %q; want %d and %q", resp.StatusCode, targets, tc.status, tc.target)
			}
		})
	}
}

// TestTransferEncodingEndsTheConnection: a request that reaches net/http (handed off for any
// reason: an Expect or Upgrade line, two Content-Lengths, an absolute-form target, a head
// larger than the lean buffer, or an earlier request on the connection that was handed off)
// with a Transfer-Encoding ends its connection once answered, so that a request hidden behind
// its body, which a front framing by Content-Length would forward as its own, is never served.
// Plain net/http serves it by its Transfer-Encoding and reads on (the review of c737e21, whose
// refusal covered only heads the lean path reads whole).
func TestTransferEncodingEndsTheConnection(t *testing.T) {
	const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	ambiguous := func(line, extra string) string {
		return line + "\r\nHost: x\r\nContent-Length: 30\r\nTransfer-Encoding: chunked\r\n" + extra + "\r\n0\r\n\r\n" + smuggled
	}
	cases := map[string]string{
		"expect":          ambiguous("POST /a HTTP/1.1", "Expect: 100-continue\r\n"),
		"upgrade":         ambiguous("POST /a HTTP/1.1", "Upgrade: x\r\n"),
		"two lengths":     ambiguous("POST /a HTTP/1.1", "Content-Length: 30\r\n"),
		"absolute target": ambiguous("POST http://x/a HTTP/1.1", ""),
		"large head":      ambiguous("POST /a HTTP/1.1", "X-Pad: "+strings.Repeat("p", 9000)+"\r\n"),
		"after a hand-off": "POST /first HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
			ambiguous("POST /a HTTP/1.1", ""),
		"chunked, then a pipelined request": "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" + smuggled,
		// HTTP/1.0: net/http drops the Transfer-Encoding unseen and frames by Content-Length
		// (the review of the rule above), or reads no body at all.
		"HTTP/1.0 keep-alive, both":     "POST /a HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + smuggled,
		"HTTP/1.0 keep-alive, encoding": "POST /a HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
	}
	for name, send := range cases {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var served []string
			_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				mu.Lock()
				served = append(served, r.URL.Path)
				mu.Unlock()
			}), func(s *Server) { s.ErrorBody = envelope })
			c := dial(t, addr)
			if _, err := io.WriteString(c, send); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadAll(c); err != nil {
				t.Fatalf("the connection did not end: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if slices.Contains(served, "/smuggled") {
				t.Errorf("served %q: the request behind the body was read", served)
			}
		})
	}
}

// TestErrorBodyKeepsHandlerAnswers: on the hand-off path only net/http's own answers to a head
// it cannot read are replaced through ErrorBody, never a handler's, even a plain-text error
// with Connection: close (the review of c737e21: such a 404 was replaced, its Date header read
// as the reason).
func TestErrorBodyKeepsHandlerAnswers(t *testing.T) {
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A sniffed text/plain 404: net/http writes its Content-Type right before its
		// Connection: close, as in its own answers.
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "not here")
	}), func(s *Server) { s.ErrorBody = envelope })
	for _, request := range []string{
		"GET /x HTTP/1.1\r\nHost: x\r\nUpgrade: foo\r\nConnection: close\r\n\r\n", // handed off: Upgrade
		"GET /x HTTP/1.0\r\nHost: x\r\n\r\n",                                      // handed off: HTTP/1.0
	} {
		c := dial(t, addr)
		if _, err := io.WriteString(c, request); err != nil {
			t.Fatal(err)
		}
		resp, body, _ := readAnswer(t, bufio.NewReader(c), c)
		if resp.StatusCode != http.StatusNotFound || body != "not here" {
			t.Errorf("%q: got %d %q, want the handler's 404 \"not here\"", request, resp.StatusCode, body)
		}
	}
}

// TestRefusedHeadIsTold: the Server's RefusedHead is told of every head the server refuses
// before any handler, once, with its kind and the status, reason and target the answer is
// built from (a server counts by the kind, not by the reason's words: session 12), the
// request line's method when it was read and the connection's peer address (an operator could
// not tell who sent the head: session 12): on
// the lean path (both Content-Length and Transfer-Encoding) and on the hand-off path
// (net/http's 400, 431, 501 and 505, its 400 to a bare CR), with an ErrorBody and without one
// (net/http's own plain answers, passed on unchanged, are told too). A request a handler
// answers, even with an error, is not a refused head. Such refusals were told nowhere: an
// operator could not see a client sending broken heads.
func TestRefusedHeadIsTold(t *testing.T) {
	cases := []struct {
		name, request string
		want          Refusal
	}{
		{"lean path, both lengths", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			Refusal{RefusedAmbiguousLength, http.StatusBadRequest, "the request has both Content-Length and Transfer-Encoding", "/a", "POST", ""}},
		{"missing host", "GET /a HTTP/1.1\r\nX: y\r\n\r\n", Refusal{RefusedMalformed, http.StatusBadRequest, "missing required Host header", "/a", "GET", ""}},
		{"a bare CR", "GET /a HTTP/1.1\r\nHost: x\r\nX-Trace: a\rb\r\n\r\n",
			Refusal{RefusedMalformed, http.StatusBadRequest, "the X-Trace header holds a carriage return, which a header value may not", "/a", "GET", ""}},
		{"a malformed request line", "GET\r\nHost: x\r\n\r\n", Refusal{RefusedMalformed, http.StatusBadRequest, "", "", "", ""}},
		{"head too large", "GET /a HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-Filler: "+strings.Repeat("f", 1000)+"\r\n", 40) + "\r\n",
			Refusal{RefusedTooLarge, http.StatusRequestHeaderFieldsTooLarge, "", "/a", "GET", ""}},
		{"an unknown transfer coding", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
			Refusal{RefusedTransferCoding, http.StatusNotImplemented, "unsupported transfer encoding", "/a", "POST", ""}},
		{"another HTTP version", "GET /a HTTP/3.0\r\nHost: x\r\n\r\n", Refusal{RefusedVersion, http.StatusHTTPVersionNotSupported, "unsupported protocol version", "/a", "GET", ""}},
		{"too many header fields", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n" + strings.Repeat("a:\r\n", MaxHeaderFields) + "\r\nhello",
			Refusal{RefusedTooLarge, http.StatusRequestHeaderFieldsTooLarge, TooManyHeaderFields, "/a", "POST", ""}},
		{"as many header fields as allowed", "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + strings.Repeat("a:\r\n", MaxHeaderFields-1) + "\r\n", Refusal{}},
		{"a handler's error", "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", Refusal{}},
		{"a handler's error, handed off", "GET /a HTTP/1.0\r\nHost: x\r\n\r\n", Refusal{}},
	}
	for _, tc := range cases {
		for _, withBody := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ErrorBody=%v", tc.name, withBody), func(t *testing.T) {
				var (
					mu   sync.Mutex
					told []Refusal
				)
				_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					http.Error(w, "not here", http.StatusBadRequest)
				}), func(s *Server) {
					if withBody {
						s.ErrorBody = envelope
					}
					s.MaxHeaderBytes = 8 << 10
					s.RefusedHead = func(r Refusal) {
						mu.Lock()
						told = append(told, r)
						mu.Unlock()
					}
				})
				c := dial(t, addr)
				if _, err := io.WriteString(c, tc.request); err != nil {
					t.Fatal(err)
				}
				resp, _, _ := readAnswer(t, bufio.NewReader(c), c)
				mu.Lock()
				defer mu.Unlock()
				want := []Refusal{tc.want}
				want[0].RemoteAddr = c.LocalAddr().String() // the connection's peer, as the server sees it
				if tc.want == (Refusal{}) {
					want = nil
				}
				if !slices.Equal(told, want) {
					t.Errorf("answered %d; RefusedHead told %+v, want %+v", resp.StatusCode, told, want)
				}
			})
		}
	}
}
