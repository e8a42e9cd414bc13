package h1server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// conformanceHandler answers by path with the behaviours the differential test compares. The
// echo handler writes back everything a handler can observe of a request.
func conformanceHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", echo)
	mux.HandleFunc("/probe", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "probe") })
	mux.HandleFunc("/read-all", func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "read=%d deadline=%v ctxerr=%v", n, errors.Is(err, os.ErrDeadlineExceeded), r.Context().Err())
	})
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "hello")
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/sniff", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "<html><body>hi</body></html>")
	})
	mux.HandleFunc("/sniff-ce", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "identity")
		_, _ = io.WriteString(w, "<html>")
	})
	mux.HandleFunc("/204", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "5")
		w.Header().Set("X-A", "a")
		w.WriteHeader(http.StatusNoContent)
		_, err := io.WriteString(w, "x")
		w.Header().Set("X-Err", fmt.Sprint(err)) // too late to be sent
	})
	mux.HandleFunc("/304", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "5")
		w.Header().Set("Transfer-Encoding", "chunked")
		w.Header().Set("Etag", `"x"`)
		w.WriteHeader(http.StatusNotModified)
	})
	mux.HandleFunc("/cl-ok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		_, _ = io.WriteString(w, "hello")
	})
	mux.HandleFunc("/cl-short", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		_, _ = io.WriteString(w, "hello")
	})
	mux.HandleFunc("/cl-long", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "3")
		_, _ = io.WriteString(w, "hel")
		if _, err := io.WriteString(w, "lo"); err != http.ErrContentLength {
			panic(fmt.Sprintf("write beyond Content-Length: %v", err))
		}
	})
	mux.HandleFunc("/cl-invalid", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "abc")
		_, _ = io.WriteString(w, "hello")
	})
	mux.HandleFunc("/cl-head", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "42")
	})
	mux.HandleFunc("/head-body", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello")
	})
	mux.HandleFunc("/flush", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "a")
		if err := http.NewResponseController(w).Flush(); err != nil {
			panic(err)
		}
		_, _ = io.WriteString(w, "b")
	})
	mux.HandleFunc("/flush-empty", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, 3000))
	})
	mux.HandleFunc("/big-cl", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "3000")
		_, _ = io.WriteString(w, strings.Repeat("x", 3000))
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		for range 100 {
			_, _ = io.WriteString(w, strings.Repeat("y", 1000))
		}
	})
	mux.HandleFunc("/exact-2048", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("z", 2048))
	})
	mux.HandleFunc("/exact-2049", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("z", 2048))
		_, _ = io.WriteString(w, "z")
	})
	mux.HandleFunc("/close-handler", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "bye")
	})
	mux.HandleFunc("/close-handler-case", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "Close") // net/http only honours exactly "close"
		_, _ = io.WriteString(w, "bye")
	})
	mux.HandleFunc("/keep-alive-header", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "keep-alive")
		_, _ = io.WriteString(w, "hi")
	})
	mux.HandleFunc("/te-identity", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Transfer-Encoding", "identity")
		_, _ = io.WriteString(w, "stream until close")
	})
	mux.HandleFunc("/te-chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Transfer-Encoding", "chunked")
		_, _ = io.WriteString(w, "chunky")
	})
	mux.HandleFunc("/te-cl", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Transfer-Encoding", "chunked")
		w.Header().Set("Content-Length", "5")
		_, _ = io.WriteString(w, "hello")
	})
	mux.HandleFunc("/snapshot", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Before", "1")
		w.WriteHeader(http.StatusAccepted)
		h.Set("X-After", "2") // not sent: the head is what it was at WriteHeader
		_, _ = io.WriteString(w, "body")
	})
	mux.HandleFunc("/snapshot-late-header", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		w.Header().Set("Content-Type", "text/late") // not sent; the body is sniffed
		_, _ = io.WriteString(w, "plain text")
	})
	mux.HandleFunc("/status-unknown", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(599)
	})
	mux.HandleFunc("/status-999", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(999)
		_, _ = io.WriteString(w, "odd")
	})
	mux.HandleFunc("/early-hints", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.Header().Set("Content-Length", "99") // left out of the 103
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Content-Length")
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "final")
	})
	mux.HandleFunc("/superfluous", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("/panic", func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	mux.HandleFunc("/panic-written", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "partial")
		panic("boom")
	})
	mux.HandleFunc("/panic-abort", func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) })
	mux.HandleFunc("/panic-after-flush", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		panic("boom")
	})
	mux.HandleFunc("/trailers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-T, Authorization") // Authorization is not allowed in trailers
		_, _ = io.WriteString(w, "body")
		w.Header().Set("X-T", "declared")
		w.Header().Set("Authorization", "not a trailer")
		w.Header().Set(http.TrailerPrefix+"X-U", "prefixed")
	})
	mux.HandleFunc("/no-date", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Date"] = nil
		_, _ = io.WriteString(w, "x")
	})
	mux.HandleFunc("/own-date", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", "yesterday")
		_, _ = io.WriteString(w, "x")
	})
	mux.HandleFunc("/odd-headers", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("X-Multi", "1")
		h.Add("X-Multi", "2")
		h["Bad Name"] = []string{"dropped"}
		h["x-lower"] = []string{"kept as is"}
		h.Set("X-Injection", " a\r\nInjected: 1 ")
		h["X-Empty"] = nil
		_, _ = io.WriteString(w, "x")
	})
	mux.HandleFunc("/read-partial", func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 3)
		n, err := io.ReadFull(r.Body, buf)
		fmt.Fprintf(w, "%q %v", buf[:n], err)
	})
	mux.HandleFunc("/ignore-body", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ignored")
	})
	mux.HandleFunc("/close-body", func(w http.ResponseWriter, r *http.Request) {
		err := r.Body.Close()
		_, rerr := r.Body.Read(make([]byte, 1))
		fmt.Fprintf(w, "close=%v read=%v", err, rerr)
	})
	mux.HandleFunc("/replace-body", func(w http.ResponseWriter, r *http.Request) {
		r.Body = io.NopCloser(strings.NewReader("mine"))
		_, _ = io.WriteString(w, "replaced")
	})
	mux.HandleFunc("/max-bytes", func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4))
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		fmt.Fprint(w, err)
	})
	mux.HandleFunc("/full-duplex", func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			panic(err)
		}
		_, _ = io.WriteString(w, "first ")
		w.(http.Flusher).Flush()
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})
	mux.HandleFunc("/hijack", func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			fmt.Fprint(w, err)
			return
		}
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		_ = conn.Close()
	})
	mux.HandleFunc("/string-writer", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("s", 5000))
	})
	return mux
}

// echo writes back what a handler can observe of a request: request line, URL, header, body,
// reads past the end, and the context values.
func echo(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	fmt.Fprintf(&b, "method=%q uri=%q url=%q path=%q rawpath=%q query=%q\n", r.Method, r.RequestURI, r.URL.String(), r.URL.Path, r.URL.RawPath, r.URL.RawQuery)
	fmt.Fprintf(&b, "proto=%s %d.%d host=%q cl=%d te=%v close=%v trailer=%v\n", r.Proto, r.ProtoMajor, r.ProtoMinor, r.Host, r.ContentLength, r.TransferEncoding, r.Close, r.Trailer)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, r.Header[k])
	}
	body, err := io.ReadAll(r.Body)
	n, again := r.Body.Read(make([]byte, 1))
	fmt.Fprintf(&b, "body=%q err=%v again=%d,%v nobody=%v\n", body, err, n, again, r.Body == http.NoBody)
	_, isServer := r.Context().Value(http.ServerContextKey).(*http.Server)
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	fmt.Fprintf(&b, "server=%v local=%v remote=%s ctxerr=%v", isServer, local != nil, host, r.Context().Err())
	_, _ = io.WriteString(w, b.String())
}

// conformanceCase is one entry of the differential table.
type conformanceCase struct {
	name    string
	steps   []step
	handoff bool // h1server must hand this connection to net/http at some point
	// configure adjusts both servers (timeouts, limits).
	configure func(*Server)
	// difference, when set, says why the two servers are expected to answer differently; the
	// test then checks that they do and logs both transcripts.
	difference string
}

func allTimeouts(s *Server) {
	s.ReadTimeout, s.ReadHeaderTimeout, s.WriteTimeout, s.IdleTimeout = guard, guard, guard, guard
}

func get(path string, extra ...string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: example.com\r\n" + strings.Join(extra, "") + "\r\n"
}

func post(path, body string, extra ...string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: example.com\r\nContent-Length: %d\r\n%s\r\n%s", path, len(body), strings.Join(extra, ""), body)
}

func one(raw string) []step { return []step{{send: raw, methods: []string{"GET"}}} }

func conformanceCases() []conformanceCase {
	body300K := strings.Repeat("b", 300<<10)
	body256K := strings.Repeat("b", 256<<10)
	longHeader := "X-Long: " + strings.Repeat("v", 3900) + "\r\n"
	tooLongForLean := "X-Long: " + strings.Repeat("v", 5000) + "\r\n"
	tooLongForAll := "X-Long: " + strings.Repeat("v", (1<<20)+8192) + "\r\n"
	return []conformanceCase{
		// The lean path: keep-alive, pipelining, bodies.
		{name: "get", steps: one(get("/hello"))},
		{name: "keep-alive sequence", steps: []step{
			{send: get("/hello"), methods: []string{"GET"}},
			{send: get("/echo?a=1"), methods: []string{"GET"}},
			{send: post("/echo", "payload"), methods: []string{"POST"}},
		}},
		{name: "pipelined", steps: []step{{send: get("/hello") + post("/echo", "p1") + get("/echo?x") + "HEAD /hello HTTP/1.1\r\nHost: h\r\n\r\n", methods: []string{"GET", "POST", "GET", "HEAD"}}}},
		{name: "post body", steps: one(post("/echo", `{"model":"x","messages":[]}`, "Content-Type: application/json\r\n"))},
		{name: "body in a later packet", steps: []step{
			{send: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n"},
			{send: "hello", methods: nil},
			{send: " world", methods: []string{"POST"}},
		}},
		{name: "head split over packets", steps: []step{
			{send: "GET /echo HTTP/1.1\r\nHo"},
			{send: "st: split\r\n"},
			{send: "\r\n", methods: []string{"GET"}},
		}},
		{name: "crlf after post", steps: []step{{send: post("/echo", "abc") + "\r\n" + get("/echo"), methods: []string{"POST", "GET"}}}},
		{name: "crlf after get", handoff: true, steps: []step{{send: get("/echo") + "\r\n" + get("/echo"), methods: []string{"GET", "GET"}}}},
		{name: "zero content length", steps: one(post("/echo", ""))},
		{name: "content length leading zeros", steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length:  003 \r\n\r\nabc")},
		{name: "body on get", steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")},
		{name: "head", steps: []step{{send: "HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n", methods: []string{"HEAD"}}}},
		{name: "head with body written", steps: []step{{send: "HEAD /head-body HTTP/1.1\r\nHost: x\r\n\r\n", methods: []string{"HEAD"}}}},
		{name: "head declared length", steps: []step{{send: "HEAD /cl-head HTTP/1.1\r\nHost: x\r\n\r\n", methods: []string{"HEAD"}}}},
		{name: "head empty", steps: []step{{send: "HEAD /empty HTTP/1.1\r\nHost: x\r\n\r\n", methods: []string{"HEAD"}}}},
		{name: "head big", steps: []step{{send: "HEAD /big HTTP/1.1\r\nHost: x\r\n\r\n", methods: []string{"HEAD"}}}},

		// Echo: what the handler sees of the request.
		{name: "query and escapes", steps: one(get("/echo?q=a%20b&r=%zz&s"))},
		{name: "escaped path", steps: one(get("/echo/../echo"))},
		{name: "encoded slash", steps: one(get("/echo%2Fx"))},
		{name: "double slash", steps: one(get("//echo"))},
		{name: "fragment", steps: one(get("/echo#frag"))},
		{name: "bad escape in path", handoff: true, steps: one(get("/echo%zz"))},
		{name: "lower-case header names", steps: one("GET /echo HTTP/1.1\r\nhost: lower\r\ncontent-type: text/plain\r\nx-custom-thing: v\r\nuser-agent: ua\r\n\r\n")},
		{name: "repeated headers", steps: one(get("/echo", "X-R: 1\r\n", "x-r: 2\r\n", "X-R: 3\r\n", "Cookie: a=1\r\n", "Cookie: b=2\r\n"))},
		{name: "whitespace in values", steps: one(get("/echo", "X-Spaces: \t  padded \t \r\n", "X-Empty:\r\n", "X-Inner: a  b\tc\r\n"))},
		{name: "obs-text value", steps: one(get("/echo", "X-Bytes: caf\xc3\xa9 \xff\r\n"))},
		{name: "pragma no-cache", steps: one(get("/echo", "Pragma: no-cache\r\n"))},
		{name: "pragma with cache-control", steps: one(get("/echo", "Pragma: no-cache\r\n", "Cache-Control: max-age=1\r\n"))},
		{name: "pragma other", steps: one(get("/echo", "Pragma: foo, no-cache\r\n"))},
		{name: "host with port", steps: one("GET /echo HTTP/1.1\r\nHost: example.com:8080\r\n\r\n")},
		{name: "empty host", steps: one("GET /echo HTTP/1.1\r\nHost:\r\n\r\n")},
		{name: "ipv6 host", steps: one("GET /echo HTTP/1.1\r\nHost: [::1]:80\r\n\r\n")},
		{name: "lower-case method", steps: one("get /echo HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "custom method", steps: one("PURGE /echo HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "pri method over 1.1", steps: one("PRI /echo HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "header near the buffer size", steps: one(get("/echo", longHeader))},
		{name: "connection tokens", steps: one(get("/echo", "Connection: keep-alive, foo\r\n"))},
		{name: "trailer header on request", steps: one(get("/echo", "Trailer: X-T\r\n"))},
		{name: "connection close request", steps: one(get("/echo", "Connection: close\r\n"))},
		{name: "connection close in token list", steps: one(get("/echo", "Connection: keep-alive\r\n", "Connection: foo, CLOSE\r\n"))},
		{name: "connection close with body", steps: one(post("/ignore-body", "unread", "Connection: close\r\n"))},

		// The response side.
		{name: "empty", steps: one(get("/empty"))},
		{name: "sniff", steps: one(get("/sniff"))},
		{name: "no sniff with content-encoding", steps: one(get("/sniff-ce"))},
		{name: "204", steps: one(get("/204"))},
		{name: "304", steps: one(get("/304"))},
		{name: "declared length", steps: one(get("/cl-ok"))},
		{name: "declared length not met", steps: one(get("/cl-short"))},
		{name: "declared length exceeded", steps: one(get("/cl-long"))},
		{name: "declared length invalid", steps: one(get("/cl-invalid"))},
		{name: "flush", steps: one(get("/flush"))},
		{name: "flush without body", steps: one(get("/flush-empty"))},
		{name: "body over the buffer", steps: one(get("/big"))},
		{name: "body over the buffer with length", steps: one(get("/big-cl"))},
		{name: "huge body", steps: one(get("/huge"))},
		{name: "body of exactly the buffer", steps: one(get("/exact-2048"))},
		{name: "body one past the buffer", steps: one(get("/exact-2049"))},
		{name: "string writes", steps: one(get("/string-writer"))},
		{name: "handler closes", steps: one(get("/close-handler"))},
		{name: "handler Close in another case", steps: one(get("/close-handler-case"))},
		{name: "handler keep-alive header", steps: one(get("/keep-alive-header"))},
		{name: "handler identity encoding", steps: one(get("/te-identity"))},
		{name: "handler chunked encoding", steps: one(get("/te-chunked"))},
		{name: "handler encoding and length", steps: one(get("/te-cl"))},
		{name: "header snapshot", steps: one(get("/snapshot"))},
		{name: "header after WriteHeader", steps: one(get("/snapshot-late-header"))},
		{name: "unknown status", steps: one(get("/status-unknown"))},
		{name: "status 999", steps: one(get("/status-999"))},
		{name: "early hints", steps: []step{{send: get("/early-hints"), methods: []string{"GET", "GET"}}}},
		{name: "superfluous WriteHeader", steps: one(get("/superfluous"))},
		{name: "panic", steps: one(get("/panic"))},
		{name: "panic after write", steps: one(get("/panic-written"))},
		{name: "abort handler", steps: one(get("/panic-abort"))},
		{name: "panic after flush", steps: one(get("/panic-after-flush"))},
		{name: "trailers", steps: one(get("/trailers"))},
		{name: "no date", steps: one(get("/no-date"))},
		{name: "own date", steps: one(get("/own-date"))},
		{name: "odd response headers", steps: one(get("/odd-headers"))},
		{name: "hijack refused", difference: "Hijack is refused on the lean path (ErrNotSupported), by design; net/http hijacks", steps: one(get("/hijack"))},
		{name: "not found", steps: one(get("/nowhere"))},

		// Request bodies the handler leaves unread.
		{name: "body read partly", steps: one(post("/read-partial", "abcdefgh"))},
		{name: "body ignored", steps: one(post("/ignore-body", "abcdefgh"))},
		{name: "body ignored, large", steps: one(post("/ignore-body", body300K))},
		{name: "body ignored, at the limit", steps: one(post("/ignore-body", body256K))},
		{name: "body closed", steps: one(post("/close-body", "abcdefgh"))},
		{name: "body closed, large", steps: one(post("/close-body", body300K))},
		{name: "body replaced", steps: one(post("/replace-body", "abcdefgh"))},
		{name: "body replaced, large", steps: one(post("/replace-body", body300K))},
		{name: "full duplex", steps: one(post("/full-duplex", "second"))},
		{
			name: "max bytes reader",
			// http.MaxBytesReader tells net/http's response that the limit was hit through an
			// unexported method, which the lean path cannot implement: net/http then closes the
			// connection, the lean path discards the small rest of the body and keeps it open.
			difference: "MaxBytesReader cannot reach the lean path",
			steps:      one(post("/max-bytes", "0123456789")),
		},

		// Hand-offs: net/http must produce its own answers.
		{name: "http/1.0", handoff: true, steps: one("GET /echo HTTP/1.0\r\n\r\n")},
		{name: "http/1.0 keep-alive", handoff: true, steps: []step{
			{send: "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", methods: []string{"GET"}},
			{send: get("/echo"), methods: []string{"GET"}},
		}},
		{name: "lean then http/1.0", handoff: true, steps: []step{
			{send: get("/echo"), methods: []string{"GET"}},
			{send: "GET /echo HTTP/1.0\r\nHost: x\r\n\r\n", methods: []string{"GET"}},
		}},
		{name: "lean then chunked pipelined", handoff: true, steps: []step{{send: get("/echo") + "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" + get("/echo"), methods: []string{"GET", "POST", "GET"}}}},
		{name: "http/1.2", handoff: true, steps: one("GET /echo HTTP/1.2\r\nHost: x\r\n\r\n")},
		{name: "http/2.0", handoff: true, steps: one("GET /echo HTTP/2.0\r\nHost: x\r\n\r\n")},
		{name: "h2 preface", handoff: true, difference: "answered with HTTP/2's SETTINGS and a GOAWAY saying HTTP_1_1_REQUIRED (TestHTTP2PriorKnowledgeIsRefused); net/http passes it to the handler",
			steps: one("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")},
		{name: "lower-case version", handoff: true, steps: one("GET /echo http/1.1\r\nHost: x\r\n\r\n")},
		{name: "chunked body", handoff: true, steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")},
		{name: "unknown transfer encoding", handoff: true, steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n")},
		// Both Content-Length and Transfer-Encoding: the framing a front proxy and the server read
		// can differ (request smuggling), so the lean path refuses the request and closes the
		// connection (RFC 9112 section 6.1: the server MUST close it), in either order, and a
		// request pipelined behind it is never read.
		{name: "transfer encoding and length", difference: "refused 400 and closed; net/http serves it by its Transfer-Encoding and keeps the connection",
			steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")},
		{name: "length after transfer encoding, pipelined", difference: "refused 400 and closed; net/http serves both requests",
			steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 30\r\n\r\n0\r\n\r\n" + get("/echo"))},
		{name: "expect continue", handoff: true, steps: []step{{send: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n", methods: []string{"POST"}}, {send: "body", methods: []string{"POST"}}}},
		{name: "expect other", handoff: true, steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: teapot\r\n\r\nbody")},
		{name: "upgrade", handoff: true, steps: one(get("/echo", "Upgrade: websocket\r\n", "Connection: Upgrade\r\n"))},
		{name: "connection upgrade alone", handoff: true, steps: one(get("/echo", "Connection: keep-alive, upgrade\r\n"))},
		{name: "hijack via hand-off", handoff: true, steps: one(get("/hijack", "Upgrade: x\r\n"))},
		{name: "options asterisk", handoff: true, steps: one("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "absolute form", handoff: true, steps: one("GET http://other.example/echo?a=1 HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "connect authority", handoff: true, steps: one("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")},
		{name: "connect path", handoff: true, steps: one("CONNECT /echo HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "missing host", handoff: true, steps: one("GET /echo HTTP/1.1\r\nX-A: 1\r\n\r\n")},
		{name: "two hosts", handoff: true, steps: one("GET /echo HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")},
		{name: "two equal hosts", handoff: true, steps: one("GET /echo HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n")},
		{name: "invalid host", handoff: true, steps: one("GET /echo HTTP/1.1\r\nHost: a b\r\n\r\n")},
		{name: "host with slash", handoff: true, steps: one("GET /echo HTTP/1.1\r\nHost: a/b\r\n\r\n")},
		{name: "two equal lengths", handoff: true, steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc")},
		{name: "conflicting lengths", handoff: true, steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd")},
		{name: "invalid length", handoff: true, steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")},
		{name: "negative length", handoff: true, steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n")},
		{name: "signed length", handoff: true, steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc")},
		{name: "empty length", handoff: true, steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \r\n\r\n")},
		{name: "length list", handoff: true, steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc")},
		{name: "huge length", handoff: true, steps: one("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n")},
		{name: "folded header", handoff: true, steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-Fold: a\r\n  b\r\n\r\n")},
		{name: "leading space first header", handoff: true, steps: one("GET /echo HTTP/1.1\r\n Host: x\r\n\r\n")},
		{name: "invalid method", handoff: true, steps: one("GE(T /echo HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "space before colon", handoff: true, steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-A : 1\r\n\r\n")},
		{name: "space in name", handoff: true, steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX A: 1\r\n\r\n")},
		{name: "no colon", handoff: true, steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n")},
		{name: "empty name", handoff: true, steps: one("GET /echo HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n")},
		{name: "control in value", handoff: true, steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n")},
		{name: "nul in value", handoff: true, steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n")},
		// A bare CR in a header value is refused by both, and h1server's 400 says which header
		// holds it (net/http's says nothing): a key pasted with a Windows line end brings one.
		{name: "cr in value", handoff: true, difference: "the 400 names the header that holds the bare CR; net/http's is a plain 400",
			steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n")},
		{name: "cr ending the authorization value", handoff: true, difference: "the 400 names the Authorization header and asks whether its key was pasted with a Windows line end; net/http's is a plain 400",
			steps: one("GET /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tgk_x\r\r\nX-B: 1\r\n\r\n")},
		{name: "del in target", handoff: true, steps: one("GET /echo\x7f HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "control in target", handoff: true, steps: one("GET /echo\x01 HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "non-ascii target", handoff: true, steps: one("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "space in target", handoff: true, steps: one("GET /a b HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "empty target", handoff: true, steps: one("GET  HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "tab separator", handoff: true, steps: one("GET\t/echo HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "bare lf", handoff: true, steps: one("GET /echo HTTP/1.1\nHost: x\n\n")},
		{name: "bare lf in headers", handoff: true, steps: one("GET /echo HTTP/1.1\r\nHost: x\nX-A: 1\r\n\r\n")},
		{name: "leading crlf", handoff: true, steps: one("\r\n" + get("/echo"))},
		{name: "garbage", handoff: true, steps: one("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n")},
		{name: "head over the lean buffer", handoff: true, steps: one(get("/echo", tooLongForLean))},
		{name: "head over the limit", handoff: true, steps: one(get("/echo", tooLongForAll))},
		{name: "all timeouts set", configure: allTimeouts, steps: []step{
			{send: get("/hello"), methods: []string{"GET"}},
			{send: "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello", methods: nil},
			{send: " world", methods: []string{"POST"}},
			{send: get("/flush") + post("/echo", "p") + get("/big"), methods: []string{"GET", "POST", "GET"}},
		}},
		{name: "all timeouts set, hand-off", handoff: true, configure: allTimeouts, steps: []step{
			{send: get("/hello"), methods: []string{"GET"}},
			{send: "GET /echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", methods: []string{"GET"}},
		}},
		{name: "small MaxHeaderBytes", configure: func(s *Server) { s.MaxHeaderBytes = 100 }, steps: one(get("/echo", longHeader))},
		{name: "small MaxHeaderBytes over the lean buffer", handoff: true, configure: func(s *Server) { s.MaxHeaderBytes = 100 }, steps: one(get("/echo", tooLongForLean))},
		{name: "truncated head", handoff: true, steps: []step{{send: "GET /echo HTTP/1.1\r\nHost: x\r\n", methods: []string{"GET"}, closeWrite: true}}},
		{name: "truncated request line", handoff: true, steps: []step{{send: "GET /ec", methods: []string{"GET"}, closeWrite: true}}},
		{name: "truncated body", steps: []step{{send: post("/echo", "abcdef")[:len(post("/echo", "abcdef"))-3], methods: []string{"POST"}, closeWrite: true}}},
		{name: "nothing", steps: []step{{send: "", closeWrite: true}}},
		{name: "three bytes after a request", steps: []step{
			{send: get("/echo"), methods: []string{"GET"}},
			{send: "GET", methods: []string{"GET"}, closeWrite: true},
		}},
		{name: "four bytes after a request", handoff: true, steps: []step{
			{send: get("/echo"), methods: []string{"GET"}},
			{send: "GET ", methods: []string{"GET"}, closeWrite: true},
		}},
		{name: "crlf after post then eof", steps: []step{
			{send: post("/echo", "x"), methods: []string{"POST"}},
			{send: "\r\n", methods: []string{"GET"}, closeWrite: true},
		}},
		{name: "lone lf after a request", steps: []step{
			{send: get("/echo"), methods: []string{"GET"}},
			{send: "\n", methods: []string{"GET"}, closeWrite: true},
		}},
		{name: "one byte first", handoff: true, steps: []step{{send: "G", methods: []string{"GET"}, closeWrite: true}}},

		// The header timeout holds for the whole head, from the start of the request, also when
		// the head is handed off half-way: a head trickled in past it is never served (the
		// connection ends at the timeout, 1 s, before the last bytes at 1.4 s; a timeout
		// restarted at the hand-off, at 0.7 s, would serve it).
		{name: "head trickled past the header timeout", configure: trickleTimeouts, steps: trickledHead("X-Late: 1\r\n", endEmpty)},
		{name: "head trickled past the header timeout, handed off", handoff: true, configure: trickleTimeouts, steps: trickledHead("Upgrade: x\r\nTransfer-Encoding: chunked\r\n", endChunked)},
		{name: "head trickled past the header timeout, over the lean buffer", handoff: true, configure: trickleTimeouts, steps: trickledHead(tooLongForLean, endEmpty)},
		{name: "head trickled within the header timeout, handed off", handoff: true, configure: func(s *Server) { s.ReadHeaderTimeout = guard }, steps: trickledHead("Upgrade: x\r\nTransfer-Encoding: chunked\r\n", endChunked)},
		{name: "second head trickled past the header timeout, handed off", handoff: true, configure: trickleTimeouts, steps: append([]step{{send: get("/echo"), methods: []string{"GET"}}}, trickledHead("Upgrade: x\r\nTransfer-Encoding: chunked\r\n", endChunked)...)},
		{name: "request trickled past the read timeout, handed off", handoff: true, configure: func(s *Server) { s.ReadTimeout = time.Second },
			steps: trickledHead("Upgrade: x\r\nTransfer-Encoding: chunked\r\n", endChunked)},

		// A body that stalls ends at ReadTimeout on both paths, as in net/http, with the body read
		// deadline (60 s by default) in force as well.
		{name: "body stalled past the read timeout", configure: stallTimeouts, steps: []step{
			{send: "POST /read-all HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789", methods: []string{"POST"}},
		}},
		{name: "body stalled past the read timeout, handed off", handoff: true, configure: stallTimeouts, steps: []step{
			{send: "POST /read-all HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n", methods: []string{"POST"}},
		}},
		{name: "body in time under the read timeout, handed off", handoff: true, configure: stallTimeouts, steps: []step{
			{send: "POST /read-all HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n"},
			{pause: 100 * time.Millisecond, send: "0\r\n\r\n", methods: []string{"POST"}},
		}},
	}
}

// stallTimeouts sets the read timeout the stalled-body cases run against.
func stallTimeouts(s *Server) { s.ReadTimeout = 500 * time.Millisecond }

// trickleTimeouts sets the header timeout the trickled-head cases run against.
func trickleTimeouts(s *Server) { s.ReadHeaderTimeout = time.Second }

// The ends of trickled heads: with an empty body, and with an empty chunked body.
const (
	endEmpty   = "Content-Length: 0\r\n\r\n"
	endChunked = "\r\n0\r\n\r\n"
)

// trickledHead sends a POST request in three parts: the request line and Host at once, the line
// extra after 0.7 s and end (the rest of the head and the body) after 0.7 s more. The margins
// (0.3 s before the timeout, 0.4 s after it) are only there to be safe from a busy machine; no
// test asserts how long anything takes.
func trickledHead(extra, end string) []step {
	return []step{
		{send: "POST /echo HTTP/1.1\r\nHost: x\r\n"},
		{pause: 700 * time.Millisecond, send: extra},
		{pause: 700 * time.Millisecond, send: end, methods: []string{"POST"}},
	}
}

// TestConformance sends each case's bytes to net/http and to h1server serving the same
// handlers and compares what comes back.
func TestConformance(t *testing.T) {
	h := conformanceHandler()
	for _, tc := range conformanceCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdAddr, stdLogs := startNetHTTP(t, h, tc.configure)
			srv, h1Addr, h1Logs := startH1(t, h, tc.configure)
			want := transcript(t, stdAddr, tc.steps)
			got := transcript(t, h1Addr, tc.steps)
			if w, g := logMessages(stdLogs.String()), logMessages(h1Logs.String()); !slices.Equal(g, w) && tc.difference == "" {
				t.Errorf("logs differ\nnet/http: %q\nh1server: %q", w, g)
			}
			same := slices.Equal(got, want)
			switch {
			case tc.difference != "" && same:
				t.Errorf("expected a difference (%s), got the same:\n%s", tc.difference, strings.Join(got, "\n---\n"))
			case tc.difference != "":
				t.Logf("known difference: %s\nnet/http:\n%s\nh1server:\n%s", tc.difference, strings.Join(want, "\n---\n"), strings.Join(got, "\n---\n"))
			case !same:
				t.Errorf("responses differ\nnet/http:\n%s\nh1server:\n%s", strings.Join(want, "\n---\n"), strings.Join(got, "\n---\n"))
			}
			if handed := srv.handoffs.Load() > 0; handed != tc.handoff {
				t.Errorf("handed off = %v, want %v", handed, tc.handoff)
			}
		})
	}
}

var portPattern = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// logMessages returns the first line of each "http:" message of a server's log, without port
// numbers, leaving out stack traces.
func logMessages(log string) []string {
	var out []string
	for line := range strings.Lines(log) {
		if strings.HasPrefix(line, "http: ") {
			out = append(out, portPattern.ReplaceAllString(strings.TrimSpace(line), "127.0.0.1:PORT"))
		}
	}
	return out
}
