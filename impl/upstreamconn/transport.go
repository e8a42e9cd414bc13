// Package upstreamconn is an HTTP/1.1 client transport for plain http:// upstreams that does
// each round trip in the caller's goroutine.
//
// net/http's Transport hands every request to a writer goroutine that owns the connection and
// gets the response back from a reader goroutine that owns it too. That design lets it notice
// at once when a server closes an idle connection, and it carries TLS, HTTP/2 and proxies, but
// every round trip pays for channel sends, a select and two goroutine wake-ups. On a small
// machine serving a thousand requests a second those hand-offs are a visible share of the
// latency the gateway adds to each request. Upstreams reached over plain http:// (local
// inference servers, sidecars and the built-in simulator) need none of what those goroutines
// provide, so the gateway sends their requests through this package and everything else
// (https:// providers, HTTP/2) through net/http; SchemeDispatch makes that choice.
//
// Transport keeps a bounded stack of idle keep-alive connections per host:port and reuses the
// most recently used one first. It writes the request itself and reads the response from the
// connection's buffered reader: a common, well-formed head that is already buffered is parsed
// in place with few allocations, any other with http.ReadResponse, and both give the same
// *http.Response (see readResponse). The body it returns puts the connection back in the pool
// only when it was read to the end and both sides allowed keep-alive; closing a body early
// discards its connection. Because nothing watches an idle connection, a request on a reused
// connection that the server has meanwhile closed fails; when that happens before any byte of
// the response arrived and the request body can be sent again, the request is retried once on
// a new connection. Cancelling the request's context interrupts a blocked write or read, and
// the connection is then discarded.
//
// Against a hostile or broken upstream it holds the limits net/http's Transport holds by
// default. A response head may take at most MaxResponseHeaderBytes (10 MiB by default, as in
// net/http) from the connection, counted across any 1xx responses before the final one; past
// that the round trip fails with ErrResponseHeaderTooLarge and the connection is closed, so an
// upstream sending endless header lines costs at most that much memory. An upstream may
// answer before it has read the whole request body (a 413 after the head of a large body) and
// then neither read on nor close the connection; net/http's reader goroutine returns such an
// answer at once, and here, where the caller's goroutine writes the body itself, a write that
// stays blocked for 10 ms looks at the socket without blocking (one peek, only while the
// upstream is not reading) and, when the answer has begun, stops writing and returns it. The
// connection is never reused after an answer that came before the whole request was sent.
//
// It does not speak TLS or HTTP/2, use proxies, send chunked request bodies or trailers, add
// Accept-Encoding or decompress responses; RoundTrip refuses requests that would need those.
// On platforms other than Linux, macOS and the BSDs the socket is not inspected, so an early
// answer is found only once the upstream reads the body or closes the connection.
package upstreamconn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Defaults of the Transport's zero-valued fields.
const (
	DefaultDialTimeout    = 30 * time.Second
	DefaultKeepAlive      = 30 * time.Second
	DefaultMaxIdlePerHost = 100
	DefaultIdleTimeout    = 90 * time.Second
	// DefaultMaxResponseHeaderBytes is net/http's Transport's default for the same limit.
	DefaultMaxResponseHeaderBytes = 10 << 20
)

// connBufferSize is the size of each connection's read and write buffers.
const connBufferSize = 4 << 10

// max1xxResponses bounds the informational responses skipped before the final one.
const max1xxResponses = 5

// ErrResponseHeaderTimeout is returned when the response headers did not arrive within
// Transport.ResponseHeaderTimeout after the request was written.
var ErrResponseHeaderTimeout = errors.New("upstreamconn: timeout awaiting response headers")

// ErrResponseHeaderTooLarge is returned when the response head, 1xx responses included, went
// on past Transport.MaxResponseHeaderBytes; the connection is closed.
var ErrResponseHeaderTooLarge = errors.New("upstreamconn: the response head is too large")

// Transport is an http.RoundTripper for http:// URLs that performs each round trip in the
// calling goroutine over a pool of keep-alive connections. The zero value is ready to use; a
// Transport must not be copied after first use and is safe for concurrent use.
type Transport struct {
	// DialTimeout bounds establishing a TCP connection (DefaultDialTimeout when 0).
	DialTimeout time.Duration
	// KeepAlive is the TCP keep-alive period of new connections (DefaultKeepAlive when 0;
	// negative disables TCP keep-alive).
	KeepAlive time.Duration
	// MaxIdlePerHost bounds the idle connections kept per host:port
	// (DefaultMaxIdlePerHost when 0; negative keeps none).
	MaxIdlePerHost int
	// IdleTimeout is how long an unused connection stays in the pool (DefaultIdleTimeout when 0).
	IdleTimeout time.Duration
	// ResponseHeaderTimeout, when positive, bounds the wait for the response headers after the
	// request has been written. It does not bound reading the body.
	ResponseHeaderTimeout time.Duration
	// MaxResponseHeaderBytes bounds what is read from the connection until the final response
	// head has been read, informational (1xx) responses and bytes read ahead included, as
	// net/http's Transport counts its field of the same name (DefaultMaxResponseHeaderBytes
	// when 0 or negative). Beyond it the round trip fails with ErrResponseHeaderTooLarge.
	MaxResponseHeaderBytes int64

	mu sync.Mutex
	// idle holds, per host:port, the idle connections, the most recently used last.
	idle map[string]*idleStack
	// pruneTimer closes connections idle for longer than IdleTimeout; pruneScheduled reports
	// whether it is armed.
	pruneTimer     *time.Timer
	pruneScheduled bool
}

// idleStack is the idle connections of one host:port, oldest first.
type idleStack struct {
	conns []*conn
}

// WritesTraceContext reports that t writes each request's W3C traceparent itself, with the
// head (writeTraceContext): impl/provider leaves the configured headers as they are.
func (t *Transport) WritesTraceContext() bool { return true }

// RoundTrip sends req and returns the response once its headers have arrived. The caller must
// read the body to the end and close it for the connection to be reused. Only http:// URLs are
// accepted; other schemes, and requests this transport cannot send faithfully, get an error.
// When the request's context carries a span, its traceparent goes with the head
// (tracecontext.go); what the answer was is the caller's to note on the span.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	addr, host, err := checkRequest(req)
	if err != nil {
		closeRequestBody(req.Body)
		return nil, err
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeRequestBody(req.Body) // and leave the idle connections alone
		return nil, err
	}
	c, reused, err := t.getConn(ctx, addr)
	if err != nil {
		closeRequestBody(req.Body)
		return nil, err
	}
	res, err := t.exchange(ctx, c, req, host, req.Body)
	stale, isStale := err.(*staleConnError)
	if !isStale {
		return res, err
	}
	if !reused || !replayable(req) {
		return nil, stale.err
	}
	// The server closed the idle connection before it saw the request: send it again on a new
	// connection, not on another idle one that may be just as stale.
	body, err := rewindBody(req)
	if err != nil {
		return nil, fmt.Errorf("upstreamconn: rewinding the request body to retry: %w", err)
	}
	if c, err = t.dial(ctx, addr); err != nil {
		closeRequestBody(body)
		return nil, err
	}
	res, err = t.exchange(ctx, c, req, host, body)
	if stale, isStale := err.(*staleConnError); isStale {
		return nil, stale.err
	}
	return res, err
}

// CloseIdleConnections closes the connections in the pool; connections in use are not affected.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	var conns []*conn
	for _, s := range t.idle {
		conns = append(conns, s.conns...)
	}
	t.idle = nil
	t.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// staleConnError is a failure of a connection before any byte of the response arrived, which
// on a reused connection means the server most likely closed it while it was idle.
type staleConnError struct {
	err error
}

func (e *staleConnError) Error() string { return e.err.Error() }
func (e *staleConnError) Unwrap() error { return e.err }

// exchange writes req with body, under the Host host, on c and reads the response headers. It
// owns c: on failure c is closed, on success c belongs to the response body (or is back in the
// pool when there is no body). body is closed before exchange returns. A failure before any
// byte of the response arrived is a *staleConnError.
func (t *Transport) exchange(ctx context.Context, c *conn, req *http.Request, host string, body io.ReadCloser) (*http.Response, error) {
	var stopWatch func() bool
	if ctx.Done() != nil {
		// Cancellation closes the connection, which fails any blocked or later read or write.
		stopWatch = context.AfterFunc(ctx, c.interrupt)
	}
	fail := func(err error) (*http.Response, error) {
		if stopWatch != nil {
			stopWatch()
		}
		c.close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}

	writeErr := writeRequest(c, req, host, body)
	closeRequestBody(body)
	if writeErr != nil {
		if _, ok := writeErr.(*connWriteError); !ok && writeErr != errEarlyAnswer {
			return fail(writeErr) // the request body failed: nothing to read
		}
		// The server may have answered before reading the whole request (an early 413, say),
		// and then closed the connection (the write failed) or stopped reading it (writeBody
		// saw the answer begin and stopped writing); that answer tells more than the write
		// error, so look for it below, and never reuse the connection. A connection the server
		// had closed while idle yields nothing at once.
	}

	headerDeadline := t.ResponseHeaderTimeout > 0
	if headerDeadline {
		_ = c.nc.SetReadDeadline(time.Now().Add(t.ResponseHeaderTimeout))
	}
	// Every byte read from now until the final head is parsed counts against the limit.
	limit := t.maxResponseHeaderBytes()
	c.lr.n = limit
	if _, err := c.br.Peek(1); err != nil {
		switch {
		case headerDeadline && isTimeout(err) && ctx.Err() == nil:
			return fail(ErrResponseHeaderTimeout)
		case writeErr != nil:
			return fail(&staleConnError{err: fmt.Errorf("upstreamconn: writing the request: %w", writeErr)})
		default:
			return fail(&staleConnError{err: fmt.Errorf("upstreamconn: the connection failed before the response began: %w", err)})
		}
	}
	res, err := readFinalResponse(c.br, req)
	if err != nil {
		switch {
		case c.lr.n <= 0:
			return fail(fmt.Errorf("%w: more than %d bytes", ErrResponseHeaderTooLarge, limit))
		case headerDeadline && isTimeout(err) && ctx.Err() == nil:
			return fail(ErrResponseHeaderTimeout)
		}
		return fail(err)
	}
	c.lr.n = unlimited
	if headerDeadline {
		_ = c.nc.SetReadDeadline(time.Time{})
	}

	keepAlive := writeErr == nil && !res.Close && !req.Close && !httpguts.HeaderValuesContainsToken(req.Header["Connection"], "close")
	if res.Body == http.NoBody {
		if stopWatch != nil && !stopWatch() {
			keepAlive = false
		}
		if keepAlive {
			t.putIdle(c)
		} else {
			c.close()
		}
		return res, nil
	}
	res.Body = &responseBody{t: t, c: c, src: res.Body, ctx: ctx, stopWatch: stopWatch, keepAlive: keepAlive}
	return res, nil
}

// readFinalResponse reads responses until one that is not informational (1xx), skipping
// 100 Continue and other 1xx responses.
func readFinalResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for skipped := 0; ; skipped++ {
		res, err := readResponse(br, req)
		if err != nil {
			return nil, fmt.Errorf("upstreamconn: reading the response: %w", err)
		}
		if res.StatusCode < 100 || res.StatusCode > 199 {
			return res, nil
		}
		if res.StatusCode == http.StatusSwitchingProtocols {
			return nil, errors.New("upstreamconn: the upstream switched protocols, which is not supported")
		}
		if skipped == max1xxResponses {
			return nil, fmt.Errorf("upstreamconn: more than %d informational responses", max1xxResponses)
		}
	}
}

// replayable reports whether req's body can be sent a second time.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// rewindBody returns a fresh copy of req's body for a retry.
func rewindBody(req *http.Request) (io.ReadCloser, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req.Body, nil
	}
	return req.GetBody()
}

// closeRequestBody closes a request body, which a RoundTripper must do even on failure.
func closeRequestBody(body io.ReadCloser) {
	if body != nil {
		_ = body.Close()
	}
}

// isTimeout reports whether err is a deadline expiry, ours or the context's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (t *Transport) dialTimeout() time.Duration {
	if t.DialTimeout > 0 {
		return t.DialTimeout
	}
	return DefaultDialTimeout
}

func (t *Transport) keepAlive() time.Duration {
	if t.KeepAlive != 0 {
		return t.KeepAlive
	}
	return DefaultKeepAlive
}

func (t *Transport) maxIdlePerHost() int {
	if t.MaxIdlePerHost != 0 {
		return t.MaxIdlePerHost
	}
	return DefaultMaxIdlePerHost
}

func (t *Transport) maxResponseHeaderBytes() int64 {
	if t.MaxResponseHeaderBytes > 0 {
		return t.MaxResponseHeaderBytes
	}
	return DefaultMaxResponseHeaderBytes
}

func (t *Transport) idleTimeout() time.Duration {
	if t.IdleTimeout > 0 {
		return t.IdleTimeout
	}
	return DefaultIdleTimeout
}
