package h1server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// handoffListener is the in-memory net.Listener through which connections reach the internal
// net/http server. Hand-offs are rare (they happen at most once per connection, for requests
// the lean path does not serve), so a channel is fine here.
type handoffListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newHandoffListener() *handoffListener {
	return &handoffListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept returns the next handed-off connection, or net.ErrClosed once the listener is closed.
func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close makes Accept and hand fail from now on.
func (l *handoffListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

// Addr returns a placeholder address: the listener has none of its own.
func (l *handoffListener) Addr() net.Addr { return handoffAddr{} }

// hand passes c to the internal server's accept loop and reports whether it was taken; it fails
// once the listener is closed (the server is shutting down), and the caller then closes c.
func (l *handoffListener) hand(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

type handoffAddr struct{}

func (handoffAddr) Network() string { return "h1server-handoff" }
func (handoffAddr) String() string  { return "h1server-handoff" }

// replayConn is a handed-off connection: reads return the bytes the lean path had already read
// (the start of the request it did not serve, and anything after it) before reading the
// connection again, so net/http sees the byte stream exactly as the client sent it.
//
// It also keeps the lean path's deadlines. net/http starts its header timeout when it takes the
// connection, which would give a head trickled in until the lean path handed it off a second
// timeout; so the first read deadline net/http sets (its header deadline) is held to headDL,
// and the second (its whole-request deadline, set once the head is read) to reqDL, both
// counted from the request's start as the lean path counted it. And a handoffBody adds the
// body read deadline to whatever net/http asked for.
type replayConn struct {
	net.Conn
	pending []byte
	// errorResponse is the Server's errorResponse, which replaces an answer net/http writes
	// itself to a head it cannot read: every such answer when the Server has an ErrorBody
	// (errorBody), and otherwise its plain 400 to a head whose header value holds a bare CR,
	// which the reason then names (bareCRReason).
	errorResponse func(status int, reason, target string) []byte
	errorBody     bool
	// refusedHead is the Server's noteRefusedHead, told of every answer net/http writes itself
	// to a head it cannot read, replaced or not.
	refusedHead func(Refusal)

	// headMu guards head and the counts that place it in the connection's bytes (Read may run
	// in net/http's background read while a handler writes).
	headMu sync.Mutex
	// head is what net/http has read of the head it reads next (or is reading: the one a
	// refusal is for), from its first byte and at most maxTrackedHead bytes, for the target
	// that errorResponse is told (requestLine) and the header a bare CR is in. At the
	// hand-off it is what the lean path had read; each request net/http passes on moves it to
	// the head behind that request (nextHead).
	head []byte
	// read counts the bytes net/http has read of the connection, the replayed ones included,
	// and next is where among them the head in head starts (-1: not known any more, after a
	// request whose head or body length could not be placed; head is nil then).
	read, next int64

	mu sync.Mutex
	// headDL and reqDL are the lean path's head and whole-request deadlines of the handed-off
	// request (zero: none).
	headDL, reqDL time.Time
	// sets counts net/http's SetReadDeadline calls, up to 2.
	sets int
	// asked is the read deadline net/http asked for last, as held to headDL or reqDL.
	asked time.Time
	// bodyDL is the body read deadline in force (zero: none); clearOnSet ends it at net/http's
	// next SetReadDeadline, and stuck keeps it (it has passed) until the connection ends.
	bodyDL            time.Time
	clearOnSet, stuck bool
	// detached is set once a handler hijacked the connection: deadlines are its own from then.
	detached bool
}

// netHTTPErrorHeaders are the header lines of every answer net/http writes itself, in one
// write straight to the connection, to a head it cannot read: "HTTP/1.1 " + status (and
// ": " + reason) + netHTTPErrorHeaders + a plain-text body.
const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// Write writes p, or the Server's own answer in place of one net/http writes itself to a head
// it cannot read (its status line followed at once by netHTTPErrorHeaders, which a handler's
// response, with the Date header net/http adds before them, never is), through ErrorBody, told
// that head's target. net/http's plain 400 (or its "invalid header value") to a head with a
// bare CR in a header value is given the reason naming that header, with or without an
// ErrorBody. Every such answer, replaced or not, is told to the Server's RefusedHead.
func (c *replayConn) Write(p []byte) (int, error) {
	status, reason, ok := netHTTPErrorAnswer(p)
	if !ok {
		return c.Conn.Write(p)
	}
	c.headMu.Lock()
	head := c.head
	c.headMu.Unlock()
	replace := c.errorBody
	if status == http.StatusBadRequest && (reason == "" || reason == "invalid header value") {
		if cr := bareCRReason(head); cr != "" {
			reason, replace = cr, true
		}
	}
	method, target := requestLine(head)
	c.refusedHead(Refusal{Kind: refusalKind(status), Status: status, Reason: reason, Target: target,
		Method: method, RemoteAddr: addrString(c.RemoteAddr())})
	if !replace {
		return c.Conn.Write(p)
	}
	if _, err := c.Conn.Write(c.errorResponse(status, reason, target)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// requestLine is the method and the target in the request line that head starts with (its
// first and second words: "POST", "/v1/messages?x=1" or "http://host/v1/messages"), or both
// empty when head holds no complete request line of three words. Empty lines before the
// request line, which net/http skips, are skipped. It runs only for a refusal.
func requestLine(head []byte) (method, target string) {
	line, _, ok := bytes.Cut(bytes.TrimLeft(head, "\r\n"), []byte("\n"))
	if !ok {
		return "", ""
	}
	m, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return "", ""
	}
	t, _, ok := bytes.Cut(rest, []byte(" "))
	if !ok {
		return "", ""
	}
	return string(m), string(t)
}

// netHTTPErrorAnswer reads the status and reason of an answer net/http writes itself to a head
// it cannot read ("HTTP/1.1 400 Bad Request: missing required Host header" and its plain-text
// headers, or the reason in its body when the status line has none); ok is false for anything
// else.
func netHTTPErrorAnswer(p []byte) (status int, reason string, ok bool) {
	const prefix = "HTTP/1.1 "
	if !bytes.HasPrefix(p, []byte(prefix)) {
		return 0, "", false
	}
	end := bytes.Index(p, []byte(netHTTPErrorHeaders))
	if end < 0 || end < len(prefix)+3 || bytes.IndexByte(p[:end], '\n') >= 0 {
		// Not those two header lines right after the status line: a handler's response
		// (net/http adds its Date, and Content-Length or chunking, to every one).
		return 0, "", false
	}
	line := string(p[len(prefix):end])
	status, err := strconv.Atoi(line[:3])
	if err != nil || status < 400 || status > 599 {
		return 0, "", false
	}
	if _, r, found := strings.Cut(line, ": "); found {
		reason = r
	} else if body := string(p[end+len(netHTTPErrorHeaders):]); body != line {
		// No reason in the status line: the body says it ("Unsupported transfer encoding").
		reason = strings.ToLower(body[:min(len(body), 1)]) + body[min(len(body), 1):]
	}
	return status, reason, true
}

func (c *replayConn) Read(p []byte) (int, error) {
	var n int
	var err error
	if len(c.pending) > 0 {
		n = copy(p, c.pending)
		c.pending = c.pending[n:]
	} else {
		n, err = c.Conn.Read(p)
	}
	c.track(p[:n])
	return n, err
}

// maxTrackedHead bounds head: a head longer than that has its target and its first headers
// in it, and the request it begins cannot be placed (nextHead) to find the one behind it.
const maxTrackedHead = 2 * readBufferSize

// track counts b, the bytes just read, and adds to head those of them that continue it.
func (c *replayConn) track(b []byte) {
	c.headMu.Lock()
	defer c.headMu.Unlock()
	from := c.read
	c.read += int64(len(b))
	if c.next < 0 {
		return
	}
	end := c.next + int64(len(c.head)) // where head's bytes end among those read
	if end < from || end >= c.read || len(c.head) >= maxTrackedHead {
		return // before the head (a body), past what head can hold, or known already
	}
	b = b[end-from:]
	c.head = append(c.head, b[:min(len(b), maxTrackedHead-len(c.head))]...)
}

// nextHead is called as net/http passes on r, the request whose head head holds: head moves to
// the head behind r's (its Content-Length body), so that a refusal of a later head on the
// connection is told that head's target, not the first one's, nor none. A head or body that
// cannot be placed (a head longer than maxTrackedHead, a body without a length, which ends the
// connection anyway) ends the tracking: later refusals are told no target.
func (c *replayConn) nextHead(r *http.Request) {
	c.headMu.Lock()
	defer c.headMu.Unlock()
	if c.next < 0 {
		return
	}
	n := headLength(c.head)
	if n < 0 || r.ContentLength < 0 {
		c.next, c.head = -1, nil
		return
	}
	skip := int64(n) + r.ContentLength
	c.next += skip
	c.head = append([]byte(nil), c.head[min(skip, int64(len(c.head))):]...)
}

// headLength is the length of the head that b starts with (empty lines before its request
// line, which net/http skips after a POST, included), through the empty line that ends it;
// -1 when b does not hold all of it.
func headLength(b []byte) int {
	for i := len(b) - len(bytes.TrimLeft(b, "\r\n")); ; {
		nl := bytes.IndexByte(b[i:], '\n')
		if nl < 0 {
			return -1
		}
		line := b[i : i+nl]
		i += nl + 1
		if len(line) == 0 || (len(line) == 1 && line[0] == '\r') {
			return i // the first empty line after the request line
		}
	}
}

// SetReadDeadline is net/http's (or a hijacking handler's) read deadline, held to the lean
// path's deadlines for the handed-off request and to the body read deadline in force.
func (c *replayConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.detached {
		return c.Conn.SetReadDeadline(t)
	}
	switch c.sets {
	case 0:
		t = earliest(t, c.headDL)
	case 1:
		t = earliest(t, c.reqDL)
	}
	c.sets = min(c.sets+1, 2)
	if c.clearOnSet && !c.stuck {
		// net/http is done discarding what the handler left of the body. If the deadline
		// passed meanwhile, the discarding most likely failed on it: keep it, so that the
		// connection ends instead of waiting for a next request amid the rest of the body.
		c.clearOnSet = false
		if time.Now().Before(c.bodyDL) {
			c.bodyDL = time.Time{}
		} else {
			c.stuck = true
		}
	}
	c.asked = t
	return c.Conn.SetReadDeadline(earliest(t, c.bodyDL))
}

// setBodyDeadline puts the body read deadline in force (or ends it, for the zero time), unless
// an earlier one expired; untilSet ends it at net/http's next SetReadDeadline instead.
func (c *replayConn) setBodyDeadline(t time.Time, untilSet bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stuck || c.detached {
		return
	}
	c.bodyDL, c.clearOnSet = t, untilSet
	_ = c.Conn.SetReadDeadline(earliest(c.asked, t))
}

// bodyStalled keeps the expired body read deadline until the connection ends, so that no later
// read (net/http discarding the rest of the body, or waiting for a next request) waits again.
func (c *replayConn) bodyStalled() {
	c.mu.Lock()
	c.stuck = true
	c.mu.Unlock()
}

// SetDeadline is called on the connection only once a handler hijacked it (net/http clears
// both deadlines then): from that point on the handler's deadlines are passed on as they are.
func (c *replayConn) SetDeadline(t time.Time) error {
	c.headMu.Lock()
	c.next, c.head = -1, nil // the connection carries no more heads of net/http's
	c.headMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.detached, c.bodyDL, c.clearOnSet, c.stuck = true, time.Time{}, false, false
	return c.Conn.SetDeadline(t)
}

// CloseWrite half-closes a TCP connection; net/http uses it (when present) to let the client read
// an error response before the connection is reset.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// replayConnKey is the context key under which withReplayConn stores a handed-off connection.
type replayConnKey struct{}

// withReplayConn is the internal server's ConnContext: it lets handoffHandler find the
// connection of a request.
func withReplayConn(ctx context.Context, c net.Conn) context.Context {
	if rc, ok := c.(*replayConn); ok {
		return context.WithValue(ctx, replayConnKey{}, rc)
	}
	return ctx
}

// handoffHandler is the internal server's Handler. It refuses the HTTP/2 connection preface
// (refuseHTTP2, told to the Server's RefusedHead) and, when there is a body read timeout, gives the Server's handler the request
// with its body read under that timeout (handoffBody), and bounds net/http's own reads of the
// body too (discarding what the handler left unread, before the answer's head or after the
// handler).
//
// The body read deadline is in force from the handler's start until the body ends (or fails),
// moved on by each Read of the handler, and again from the handler's return until net/http sets
// the next request's deadline. Only reads of the body happen in that time (net/http watches for
// the client going away only once the body has ended), so nothing else is cut short by it.
type handoffHandler struct {
	s *Server
	// timeout is the body read timeout (0: none).
	timeout time.Duration
}

func (h *handoffHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isHTTP2Preface(r) {
		// Unencrypted HTTP/2 is not served: without this, the handler's mux answered a bare
		// 400 in HTTP/1.1, which an HTTP/2 client reads as a broken frame. The refusal is told
		// as the 505 it is (and answers without a hijackable connection), with its own reason.
		h.s.noteRefusedHead(Refusal{Kind: RefusedHTTP2, Status: http.StatusHTTPVersionNotSupported, Reason: HTTP2Refusal,
			Target: r.RequestURI, Method: r.Method, RemoteAddr: r.RemoteAddr})
		refuseHTTP2(w)
		return
	}
	if tooManyHeaderFields(r.Header) {
		h.s.noteRefusedHead(Refusal{Kind: RefusedTooLarge, Status: http.StatusRequestHeaderFieldsTooLarge, Reason: TooManyHeaderFields,
			Target: r.RequestURI, Method: r.Method, RemoteAddr: r.RemoteAddr})
		h.s.refuseHead(w, http.StatusRequestHeaderFieldsTooLarge, TooManyHeaderFields, r.RequestURI)
		return
	}
	if len(r.TransferEncoding) > 0 || !r.ProtoAtLeast(1, 1) {
		// A body framed by Transfer-Encoding ends its connection once answered: net/http
		// serves a request that has a Content-Length too by its Transfer-Encoding (and has
		// removed the Content-Length by now, so it cannot be refused here), and a front that
		// framed it by its Content-Length would send what follows as a request of its own
		// (request smuggling; RFC 9112 section 6.1 requires the close). Whatever follows on
		// the connection is never read. So does an HTTP/1.0 request (keep-alive asked or not):
		// net/http removes its Transfer-Encoding unseen and frames it by Content-Length, where
		// a front may have read it chunked (the review of that rule).
		w.Header().Set("Connection", "close")
	}
	rc, ok := r.Context().Value(replayConnKey{}).(*replayConn)
	if ok {
		rc.nextHead(r)
	}
	if h.timeout <= 0 || !ok || r.Body == nil || r.Body == http.NoBody {
		h.s.handler().ServeHTTP(w, r)
		return
	}
	// A shallow copy: net/http keeps its own request, whose Body it inspects afterwards.
	hr := r.WithContext(r.Context())
	b := &handoffBody{ReadCloser: r.Body, c: rc, timeout: h.timeout}
	hr.Body = b
	rc.setBodyDeadline(time.Now().Add(h.timeout), false)
	h.s.handler().ServeHTTP(w, hr)
	if hr.MultipartForm != nil && hr.MultipartForm != r.MultipartForm {
		_ = hr.MultipartForm.RemoveAll() // net/http removes only its own request's
	}
	if b.mu.TryLock() { // a handler that left a Read running on its own has the body still
		if !b.ended {
			// net/http reads up to 256 KiB of what is left after the handler returns (to keep
			// the connection), then sets the next request's deadline. It does so also when the
			// answer closes the connection, where what it reads only keeps the answer from a
			// reset: then it reads for rstAvoidanceDelay at most. Before, a stalled body kept
			// its handed-off request, head and all (up to 1 MiB), for the whole body read
			// timeout after its answer: a 401 to a request without a key too. (The lean path's
			// heads are at most 4 KiB: what a stalled body keeps there is the connection's.)
			wait := h.timeout
			if closes(w.Header()) {
				wait = min(wait, rstAvoidanceDelay)
			}
			rc.setBodyDeadline(time.Now().Add(wait), true)
		}
		b.mu.Unlock()
	}
}

// closes reports whether a handler's answer with header h closes its connection (Connection:
// close).
func closes(h http.Header) bool {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "close") {
				return true
			}
		}
	}
	return false
}

// MaxHeaderFields is the most header fields a request head may have: a head with more is
// refused 431 (TooManyHeaderFields) before its handler runs, its connection closed. Within
// MaxHeaderBytes (1 MiB) a head of short fields ("x1:", "x2:", ...) holds some 150,000 of them,
// which net/http's parsed header keeps at about twelve times the head's size, 12 MiB, for as
// long as the handler runs: a hundred such requests whose bodies stall took 1.2 GiB of heap.
// The lean path's heads, within its 4 KiB buffer, cannot hold this many, so only handed-off
// heads are counted (Apache's LimitRequestFields is 100, Envoy's and HAProxy's about as many;
// the SDKs and browsers send a few dozen).
const MaxHeaderFields = 1024

// TooManyHeaderFields is the reason of the 431 that refuses a head of more than MaxHeaderFields
// fields.
const TooManyHeaderFields = "more than 1024 header fields"

// tooManyHeaderFields reports whether h holds more than MaxHeaderFields field lines.
func tooManyHeaderFields(h http.Header) bool {
	if len(h) > MaxHeaderFields {
		return true
	}
	n := 0
	for _, v := range h {
		if n += len(v); n > MaxHeaderFields {
			return true
		}
	}
	return false
}

// refuseHead answers a handed-off request the server refuses before its handler, as the
// answers net/http writes itself to a head are answered (errorResponse: ErrorBody's body, or
// plain text, X-Should-Retry: false, X-Content-Type-Options: nosniff, Connection: close), on the
// connection taken from net/http, which is then closed: net/http would first wait, for up to
// the body read timeout, to discard the body of a request it answered, keeping the request (and
// its parsed header) that long. Like net/http's own refusals, it half-closes the connection and
// reads what the client still sends for a moment, so that the answer is not lost to a reset.
func (s *Server) refuseHead(w http.ResponseWriter, status int, reason, target string) {
	answer := s.errorResponse(status, reason, target)
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		w.Header().Set("Connection", "close")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Should-Retry", "false")
		http.Error(w, reason, status)
		return
	}
	_ = c.SetDeadline(time.Now().Add(rstAvoidanceDelay))
	out := c
	if rc, ok := c.(*replayConn); ok {
		// Past the replayConn's Write, which would take the answer for one net/http wrote
		// itself and tell RefusedHead of it a second time.
		out = rc.Conn
	}
	if _, err := out.Write(answer); err != nil {
		c.Close()
		return
	}
	// The wait is the connection's alone: the request, which net/http keeps until the
	// handler returns, is let go at once.
	go func() {
		defer c.Close()
		lingerAfterAnswer(c)
	}()
}

// lingerAfterAnswer half-closes a taken-over connection whose answer was written and reads
// what the client still sends (64 KiB at most, until the connection's deadline), so that the
// answer is not lost to a reset, as net/http does after its own refusals; the caller closes c.
func lingerAfterAnswer(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// handoffBody is a handed-off request's Body: each Read moves the body read deadline to the
// timeout from its start, and its end (or failure) ends the deadline, so that net/http's read
// watching for the client going away (started when the body ends) is not bounded by it.
type handoffBody struct {
	io.ReadCloser
	c       *replayConn
	timeout time.Duration

	mu    sync.Mutex
	ended bool // the body reached its end or failed
}

func (b *handoffBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return b.ReadCloser.Read(p)
	}
	b.c.setBodyDeadline(time.Now().Add(b.timeout), false)
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.c.bodyStalled()
	default:
		b.c.setBodyDeadline(time.Time{}, false)
	}
	b.ended = err != nil
	return n, err
}
