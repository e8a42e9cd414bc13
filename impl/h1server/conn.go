package h1server

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// readBufferSize is the size of a connection's read buffer, and so of the largest request head
// the lean path serves (net/http's default buffer size as well).
const readBufferSize = 4 << 10

// writeBufferSize is the size of a connection's output buffer (net/http's as well).
const writeBufferSize = 4 << 10

// rstAvoidanceDelay is how long a connection stays half-closed after a response that left a
// request body unread, so that the client reads the response before the reset (net/http's).
const rstAvoidanceDelay = 500 * time.Millisecond

// aLongTimeAgo is a read deadline in the past, which interrupts a blocked read.
var aLongTimeAgo = time.Unix(1, 0)

// Connection states, for Shutdown.
const (
	stateNew    int32 = iota // accepted, no request yet
	stateActive              // reading or serving a request
	stateIdle                // waiting for the next request
)

// connBuffers are a connection's buffers, pooled across connections.
type connBuffers struct {
	rbuf [readBufferSize]byte
	bw   *bufio.Writer // output, to the connection
	pre  *bufio.Writer // the body before the framing decision, to chunkWriter
	scan headScan
	hbuf []byte   // the serialised header snapshot of the current response
	keys []string // scratch for sorting header keys
}

var buffersPool = sync.Pool{New: func() any {
	return &connBuffers{
		bw:   bufio.NewWriterSize(nil, writeBufferSize),
		pre:  bufio.NewWriterSize(nil, bufferBeforeChunking),
		scan: headScan{fields: make([]field, 0, 32)},
	}
}}

// conn is one accepted connection while the lean path owns it. Its goroutine reads request
// heads, runs the handler and writes the response; only the watcher (watcher.go) runs beside it.
type conn struct {
	srv        *Server
	rwc        net.Conn
	remoteAddr string
	ctx        context.Context // http.ServerContextKey and http.LocalAddrContextKey
	acceptedAt int64           // UnixNano
	state      atomic.Int32

	bufs *connBuffers
	r, w int // the unread bytes are bufs.rbuf[r:w]

	rdl      time.Time // the read deadline last set on rwc
	rdlKnown bool      // rwc's read deadline is rdl (false after others set one)
	reqStart time.Time // when the current request began, if a timeout needs it
	bodyDL   time.Time // the read deadline while the handler runs (ReadTimeout), or zero
	userRDL  bool      // the handler set a read deadline: reads keep it (guarded by wmu)
	wdlSet   bool      // a write deadline is set and is cleared after the response

	lastPOST  bool  // net/http skips up to 4 CR or LF bytes after a POST request
	werr      error // the first write error
	rerr      error // a read error seen while the handler ran: the connection ends after it
	cancelReq context.CancelFunc
	res       *response

	// The watcher's state; see watcher.go.
	wmu       sync.Mutex
	wstate    watchState
	bodyEOF   bool
	skipFires int
	timer     *time.Timer
	watchDone chan struct{}
}

func newConn(s *Server, rwc net.Conn) *conn {
	c := &conn{srv: s, rwc: rwc, acceptedAt: time.Now().UnixNano()}
	c.state.Store(stateNew)
	return c
}

// serve runs the connection until it ends or is handed off.
func (c *conn) serve() {
	if ra := c.rwc.RemoteAddr(); ra != nil {
		c.remoteAddr = ra.String()
	}
	c.ctx = context.WithValue(c.srv.baseCtx, http.LocalAddrContextKey, c.rwc.LocalAddr())
	c.bufs = buffersPool.Get().(*connBuffers)
	c.bufs.bw.Reset(connWriter{c})
	c.bufs.pre.Reset(chunkWriter{c})
	handedOff := false
	defer func() {
		if !handedOff {
			c.close()
		}
		c.srv.trackConn(c, false)
	}()

	// Like net/http, the first request's header timeout starts with the connection.
	if d := c.srv.readHeaderTimeout(); d > 0 {
		c.setReadDeadline(time.Unix(0, c.acceptedAt).Add(d))
	}
	for first := true; ; first = false {
		v := c.readHead(first)
		if c.srv.shuttingDown() {
			return // as net/http: a request read during shutdown is not served
		}
		switch v {
		case handOff:
			handedOff = c.handOff()
			return
		case ambiguousLength:
			sc := &c.bufs.scan
			c.refuseHead(Refusal{Kind: RefusedAmbiguousLength, Status: http.StatusBadRequest,
				Reason: "the request has both Content-Length and Transfer-Encoding",
				Target: string(c.bufs.rbuf[c.r+sc.targetStart : c.r+sc.targetEnd]),
				Method: string(c.bufs.rbuf[c.r : c.r+sc.methodEnd]), RemoteAddr: c.remoteAddr})
			return
		case connEnded:
			return
		}
		ex := &exchange{}
		if !buildRequest(c.bufs.rbuf[c.r:c.w], &c.bufs.scan, &ex.head) {
			handedOff = c.handOff()
			return
		}
		c.r += c.bufs.scan.n
		if !c.serveRequest(ex) {
			return
		}
	}
}

// connEnded is readHead's verdict when the connection ended, failed or timed out.
const connEnded verdict = -1

// readHead reads until the buffer holds a complete request head or the lean path's answer is
// known. It waits for a next request as net/http does (which peeks at 4 bytes): under the idle
// timeout until 4 bytes arrived, and if the connection ends before, silently. Then, and for the
// first request from the connection's start, the header timeout applies.
func (c *conn) readHead(first bool) verdict {
	b := &c.bufs.rbuf
	waiting := !first && c.w-c.r < 4
	var start time.Time
	if first {
		start = time.Unix(0, c.acceptedAt)
	} else if !waiting && c.srv.ReadTimeout > 0 {
		start = time.Now()
	}
	var idleSince time.Time
	c.bufs.scan.reset()
	for {
		if c.w > c.r && !waiting {
			if c.lastPOST {
				if c.w-c.r >= 4 {
					c.r += numLeadingCRorLF(b[c.r : c.r+4])
					c.lastPOST = false
					continue
				}
			} else {
				v := scanHead(b[c.r:c.w], &c.bufs.scan)
				if v != needMore {
					c.reqStart = start
					return v
				}
				if c.r == 0 && c.w == len(b) {
					c.reqStart = start
					return handOff // larger than the lean path's buffer
				}
			}
		}

		if c.r == c.w {
			c.r, c.w = 0, 0
		} else if c.w == len(b) {
			c.w = copy(b[:], b[c.r:c.w])
			c.r = 0
		}
		var dl time.Time
		if waiting {
			if d := c.srv.idleTimeout(); d > 0 {
				if idleSince.IsZero() {
					idleSince = time.Now()
				}
				dl = idleSince.Add(d)
			}
			c.state.Store(stateIdle)
		} else if d := c.srv.readHeaderTimeout(); d > 0 {
			if start.IsZero() {
				start = time.Now()
			}
			dl = start.Add(d)
		}
		if !first || waiting {
			c.setReadDeadline(dl)
		}
		n, err := c.rwc.Read(b[c.w:])
		if n > 0 {
			c.w += n
			if waiting && c.w-c.r >= 4 {
				waiting = false
				if c.srv.ReadTimeout > 0 {
					start = time.Now()
				}
			}
			if !waiting {
				c.state.Store(stateActive)
			}
			continue
		}
		if err == nil {
			continue
		}
		if err == io.EOF && c.w > c.r && !waiting {
			c.reqStart = start
			return handOff // net/http answers a truncated head its own way
		}
		return connEnded
	}
}

// numLeadingCRorLF counts the CR and LF bytes at the start of v.
func numLeadingCRorLF(v []byte) int {
	n := 0
	for _, b := range v {
		if b != '\r' && b != '\n' {
			break
		}
		n++
	}
	return n
}

// serveRequest serves one lean request and reports whether the connection stays open.
func (c *conn) serveRequest(ex *exchange) (keepAlive bool) {
	srv := c.srv
	ph := &ex.head
	ctx, cancel := context.WithCancel(c.ctx)
	w := &ex.res
	r := http.Request{
		Method:        ph.method,
		URL:           ph.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        ph.header,
		Body:          http.NoBody,
		ContentLength: ph.contentLength,
		Close:         ph.close,
		Host:          ph.host,
		RemoteAddr:    c.remoteAddr,
		RequestURI:    ph.requestURI,
	}
	if ph.contentLength > 0 {
		ex.body = body{c: c, remaining: ph.contentLength, closing: ph.close}
		r.Body = &ex.body
	}
	req := r.WithContext(ctx)
	*w = response{c: c, req: req, reqBody: req.Body, contentLength: -1, wantsClose: ph.close}

	c.res = w
	c.cancelReq = cancel
	c.userRDL = false
	if d := srv.ReadTimeout; d > 0 {
		c.bodyDL = c.reqStart.Add(d)
	} else {
		c.bodyDL = time.Time{}
	}
	if d := srv.WriteTimeout; d > 0 {
		_ = c.rwc.SetWriteDeadline(time.Now().Add(d))
		c.wdlSet = true
	}
	c.bufs.pre.Reset(chunkWriter{c})
	c.armWatch(ph.contentLength == 0)

	panicked := c.runHandler(w, req)
	cancel()
	if panicked {
		// As net/http: what reached the output buffer is flushed and the connection closed.
		c.disarmWatch()
		w.finished = true
		if ex.body.c != nil {
			ex.body.abandon()
		}
		_ = c.bufs.bw.Flush()
		return false
	}
	w.finish()
	c.disarmWatch()
	if c.wdlSet {
		_ = c.rwc.SetWriteDeadline(time.Time{})
		c.wdlSet = false
	}
	if w.closeAfterReply {
		// What is read of the body after an answer that closes the connection only keeps
		// the answer from a reset: for rstAvoidanceDelay at most, not the body read timeout.
		// Before, a stalled body kept the connection that long after its answer: a 401 to a
		// request without a key too, whose caller keeps no connection.
		c.bodyDL = earliest(c.bodyDL, time.Now().Add(rstAvoidanceDelay))
	}
	_ = w.reqBody.Close()
	if req.MultipartForm != nil {
		_ = req.MultipartForm.RemoveAll()
	}
	c.lastPOST = ph.method == http.MethodPost
	c.res = nil

	if !w.shouldReuseConnection() {
		if w.requestBodyLimitHit || w.closedRequestBodyEarly() {
			c.closeWriteAndWait()
		}
		return false
	}
	if c.rerr != nil || !srv.doKeepAlives() {
		return false
	}
	return true
}

// runHandler calls the handler and recovers a panic, logging it as net/http does.
func (c *conn) runHandler(w *response, req *http.Request) (panicked bool) {
	defer func() {
		if err := recover(); err != nil {
			panicked = true
			if err != http.ErrAbortHandler {
				const size = 64 << 10
				buf := make([]byte, size)
				buf = buf[:runtime.Stack(buf, false)]
				c.srv.logf("http: panic serving %v: %v\n%s", c.remoteAddr, err, buf)
			}
		}
	}()
	c.srv.handler().ServeHTTP(w, req)
	return false
}

// readBody reads body bytes into p (already limited to the body's length): from the buffer when
// it holds any, else from the connection, directly into p when p is at least as large as the
// buffer. A read error cancels the request's context, as net/http's connReader does.
func (c *conn) readBody(p []byte) (int, error) {
	b := &c.bufs.rbuf
	if c.w > c.r {
		n := copy(p, b[c.r:c.w])
		c.r += n
		return n, nil
	}
	if c.rerr != nil {
		// The connection's reads failed already (a stalled client's deadline, say): the
		// failure stands, rather than a new deadline for another wait.
		return 0, c.rerr
	}
	if len(p) >= len(b) {
		c.prepareHandlerRead()
		n, err := c.rwc.Read(p)
		if n > 0 {
			return n, nil
		}
		if err != nil {
			c.readFailed(err)
		}
		return 0, err
	}
	if err := c.fillBuffer(); err != nil || c.w == 0 {
		return 0, err
	}
	c.r = copy(p, b[:c.w])
	return c.r, nil
}

// fillBuffer reads from the connection into the empty buffer, under the handler's read
// deadline. A read error cancels the request's context, as net/http's connReader does, and
// is the answer to every later read of the connection.
func (c *conn) fillBuffer() error {
	if c.rerr != nil {
		return c.rerr // as in readBody: a failed connection is not read again
	}
	c.prepareHandlerRead()
	c.r, c.w = 0, 0
	n, err := c.rwc.Read(c.bufs.rbuf[:])
	if n == 0 {
		if err != nil {
			c.readFailed(err)
		}
		return err
	}
	c.w = n
	return nil
}

// discardBody drops up to limit body bytes, reading the connection when the buffer is empty.
func (c *conn) discardBody(limit int64) (int, error) {
	if c.w == c.r {
		if err := c.fillBuffer(); err != nil || c.w == 0 {
			return 0, err
		}
	}
	n := int(min(int64(c.w-c.r), limit))
	c.r += n
	return n, nil
}

// prepareHandlerRead sets the read deadline for a read of the request body, unless the handler
// set its own: the earlier of ReadTimeout's (counted from the start of the request) and
// BodyReadTimeout's (counted from now). It is done lazily, only when such a read reaches the
// connection, so that a request whose body arrived with its head costs no deadline change.
func (c *conn) prepareHandlerRead() {
	if c.userRDL {
		return
	}
	dl := c.bodyDL
	if d := c.srv.bodyReadTimeout(); d > 0 {
		dl = earliest(dl, time.Now().Add(d))
	}
	c.setReadDeadline(dl)
}

// earliest returns the earlier of two deadlines, where the zero time means none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

func (c *conn) readFailed(err error) {
	if c.rerr == nil {
		c.rerr = err
	}
	c.cancelReq()
}

// setReadDeadline sets the read deadline unless it is already set to t.
func (c *conn) setReadDeadline(t time.Time) {
	if c.rdlKnown && c.rdl.Equal(t) {
		return
	}
	c.rdl, c.rdlKnown = t, true
	_ = c.rwc.SetReadDeadline(t)
}

// handOff passes the connection, with its unread bytes, to the internal net/http server, and
// reports whether it did (otherwise the caller closes it).
func (c *conn) handOff() bool {
	c.srv.handoffs.Add(1)
	if c.srv.shuttingDown() {
		return false
	}
	c.disarmWatch()
	pending := bytes.Clone(c.bufs.rbuf[c.r:c.w])
	c.releaseBuffers()
	// The request's head and whole-request deadlines run from where the lean path started
	// them, not from the hand-off: replayConn holds net/http's own to them.
	var headDL, reqDL time.Time
	if !c.reqStart.IsZero() {
		if d := c.srv.readHeaderTimeout(); d > 0 {
			headDL = c.reqStart.Add(d)
		}
		if d := c.srv.ReadTimeout; d > 0 {
			reqDL = c.reqStart.Add(d)
		}
	}
	_ = c.rwc.SetReadDeadline(headDL)
	c.srv.trackConn(c, false)
	rc := &replayConn{Conn: c.rwc, pending: pending, headDL: headDL, reqDL: reqDL, asked: headDL,
		errorResponse: c.srv.errorResponse, errorBody: c.srv.ErrorBody != nil, refusedHead: c.srv.noteRefusedHead, head: pending}
	if !c.srv.handoff.hand(rc) {
		_ = c.rwc.Close()
	}
	return true
}

// refuseHead answers a head the server will not read on, as r says (its status and reason for
// its target: the Server's ErrorBody, or plain text) with Connection: close, the Server's
// RefusedHead told first; the connection then ends, its unread bytes unread.
func (c *conn) refuseHead(r Refusal) {
	c.srv.noteRefusedHead(r)
	_, _ = c.rwc.Write(c.srv.errorResponse(r.Status, r.Reason, r.Target))
	c.closeWriteAndWait()
}

// close flushes what the output buffer holds and closes the connection.
func (c *conn) close() {
	c.disarmWatch()
	_ = c.bufs.bw.Flush()
	_ = c.rwc.Close()
	c.releaseBuffers()
}

// closeWriteAndWait half-closes the connection and waits a little before it is closed, as
// net/http does after leaving a request body unread.
func (c *conn) closeWriteAndWait() {
	_ = c.bufs.bw.Flush()
	if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	time.Sleep(rstAvoidanceDelay)
}

func (c *conn) releaseBuffers() {
	b := c.bufs
	c.bufs = nil
	b.bw.Reset(nil)
	b.pre.Reset(nil)
	b.hbuf = b.hbuf[:0]
	buffersPool.Put(b)
}
