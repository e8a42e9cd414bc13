// Package h1server is an HTTP/1.1 server for plain TCP that serves the common request itself
// and hands every other connection to net/http.
//
// # Why
//
// net/http's server pays, for every request, for a background-read goroutine that watches the
// connection while the handler runs (started per request and stopped again with a past read
// deadline, a wake-up and a condition-variable wait), for several read-deadline changes and for a
// handful of allocations that a pooled, connection-owned design does not need. On a small
// machine each goroutine wake-up is expensive, and together they roughly double the latency of a
// loopback round trip through a trivial handler. The gateway's public listener serves plain,
// well-formed HTTP/1.1 requests from known clients almost exclusively, so this package gives
// that case a lean path and leaves everything else to net/http.
//
// # Lean path and hand-off
//
// The Server owns every accepted connection. Its goroutine reads into the connection's own
// buffer and parses each request head there without consuming it. When the head is a plain,
// strictly valid HTTP/1.1 request (origin-form target, exactly one Host, at most one numeric
// Content-Length, no Transfer-Encoding, Expect or Upgrade, no obsolete line folding, only CRLF
// line endings, and small enough to fit the 4 KiB read buffer) the request is served in the
// connection's goroutine: no goroutine per request, no channel operation, and for a request that
// arrives in one packet and a small response, one read and one write system call.
//
// Anything else (HTTP/1.0, the HTTP/2 preface, chunked or otherwise framed bodies, CONNECT,
// asterisk- or absolute-form targets, malformed or oversized heads, an early end of input) is
// handed off: the connection, with the bytes of that request replayed first, is passed through
// an in-memory listener to an internal *http.Server built from the same Handler, timeouts and
// ErrorLog, which owns the connection from then on. net/http therefore produces its exact
// behaviour for those requests, including its 400, 431, 501 and 505 answers, 100-continue,
// HTTP/1.0 keep-alive and Hijack for protocol upgrades (with Server.ErrorBody set, those
// answers carry its body in place of net/http's plain text, ErrorBody being told the refused
// request's target so that the body can take the envelope of the route it was meant for, and
// X-Should-Retry: false, since the same head is refused again, and X-Content-Type-Options:
// nosniff, since the body may echo the target; a later head on the connection
// is told its own target, found behind the request before it by that request's head and
// Content-Length). Differences on purpose, against request smuggling (RFC 9112 section 6.1):
// a head the lean path reads whole with both Content-Length and Transfer-Encoding is refused
// (400) and the connection closed; and any
// request net/http serves with a Transfer-Encoding (handed off for another reason too: an
// Expect line, a large head, an earlier request on the connection) ends its connection once
// answered, so that nothing behind its body is read, and so does every HTTP/1.0 request (whose
// Transfer-Encoding net/http drops unseen, framing it by Content-Length). net/http serves such
// requests and reads on. A bare CR in a header value (RFC 9112 section 2.2 lets a recipient
// refuse it or read it as a space) is refused by both, but the 400 names the header where
// net/http's says nothing (whatever the request line: absolute form and HTTP/1.0 too), and asks, for Authorization or X-Api-Key, whether a key was pasted
// from a file with Windows line ends; it is not read as a space, which a front taking the CR
// for a line's end would read otherwise. Requests served on the lean path see
// http.ServerContextKey set to that internal server as well, so handlers find one server either
// way.
//
// The response writer mirrors net/http's: the same 2 KiB buffer before the decision between
// Content-Length and chunked encoding, Content-Type sniffing, the Date header, the header
// snapshot taken at WriteHeader, the rules for closing the connection and for discarding an
// unread request body (up to 256 KiB), trailers, 1xx informational responses, Flush and the
// ResponseController deadlines. The differential tests send the same bytes to both servers and
// compare what comes back.
//
// While a handler runs, nothing reads the connection unless the request is still running after
// WatchDelay and its body has been read to the end: only then is a watcher started (in the timer's
// goroutine, or when the body reaches its end) that reads from the connection to notice the client
// going away, and the request's context is cancelled when that read fails. Bytes it reads are kept
// as the start of the next, pipelined request. Fast requests never pay for it.
//
// # Deadlines across both paths
//
// A request's deadlines run from its start wherever it is served. The header timeout
// (ReadHeaderTimeout, or ReadTimeout) starts when the connection is accepted, or for a later
// request when its first bytes arrive, as in net/http, and a hand-off does not restart it: the
// handed-off connection holds net/http's header and whole-request deadlines to the ones the lean
// path started, so a head trickled in byte by byte is cut off at the timeout however late it
// shows the line that sends it to net/http.
//
// BodyReadTimeout (DefaultBodyReadTimeout, 60 s, when zero), which net/http does not have,
// bounds each wait for request body bytes on both paths: the handler's reads, and the reads by
// which the server discards what a handler left unread. A client that announces a body and
// stalls gets the handler's answer to a failed read at the timeout and then loses its
// connection, instead of holding the handler, its buffers and the connection for ever. The
// deadline applies to each wait, not to the whole transfer, so a slow client that keeps sending
// is not cut off; it is not in force once the body has ended, so the read that watches for the
// client going away during a long streamed answer is not bounded by it.
//
// # What it does not do
//
// It does not speak TLS or HTTP/2. A client that starts HTTP/2 with prior knowledge (h2c without
// an upgrade, "PRI * HTTP/2.0") gets the server's preface (an empty SETTINGS frame) and a GOAWAY
// with HTTP_1_1_REQUIRED whose debug data says "HTTP/2 without TLS is not served here; use
// HTTP/1.1 (or TLS with ALPN h2 at your front)", and the connection ends (RFC 9113 sections 3.4
// and 7): an HTTP/2 client reads a refusal it understands where net/http, unconfigured, passes
// the preface to the handler, whose mux answers a bare HTTP/1.1 400. The refusal is told to
// RefusedHead (kind RefusedHTTP2, status 505, reason HTTP2Refusal). On the lean path a ResponseWriter cannot be hijacked
// (requests that ask for an upgrade are handed off, so WebSocket handlers still can), has no
// CloseNotify and no ReadFrom (io.Copy works, without sendfile). It has no ConnState, BaseContext or ConnContext hooks.
// http.MaxBytesReader cannot tell the lean path that its limit was hit (the method it looks for
// is unexported), so after such a response the connection is kept alive when the rest of the
// body can be discarded (under 256 KiB), where net/http would close it.
package h1server
