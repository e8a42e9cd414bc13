package h1server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// bufferBeforeChunking is how much body the response holds back before it must choose between
// Content-Length and chunked encoding: a handler that finishes within it, without flushing, gets
// a Content-Length. It is net/http's bufferBeforeChunkingSize, so both servers choose alike.
const bufferBeforeChunking = 2048

// errHandlerDone is returned by a ResponseWriter used after its handler returned.
var errHandlerDone = errors.New("h1server: ResponseWriter used after the handler returned")

// exchange holds what a lean request needs besides the http.Request and the header map, in one
// allocation: the parsed head (with the URL and header value storage), the response writer and
// the body.
type exchange struct {
	head parsedHead
	res  response
	body body
}

// response is the http.ResponseWriter of a lean request. Like net/http's it writes through two
// buffers: the connection's 2 KiB pre-buffer (conn.bufs.pre), whose first flush calls writeHead
// to decide the framing, and the connection's 4 KiB output buffer (conn.bufs.bw), so a small
// response leaves in one write. It also implements http.Flusher, FlushError, io.StringWriter and
// the deadline and full-duplex methods that http.ResponseController looks for.
type response struct {
	c       *conn
	req     *http.Request
	reqBody io.ReadCloser // the Body the request was served with; the handler may replace req.Body

	handlerHeader http.Header // made on the first call of Header
	calledHeader  bool
	wroteHeader   bool // the status was (logically) written
	status        int
	contentLength int64 // declared by the handler or computed by writeHead; -1 when unknown
	written       int64

	wantsClose          bool // the request asked to close the connection
	closeAfterReply     bool
	fullDuplex          bool
	requestBodyLimitHit bool
	handlerDone         bool
	finished            bool // finish ran: the writer is unusable

	headWritten bool // writeHead ran (net/http's chunkWriter.wroteHeader)
	chunking    bool
	trailers    []string // declared trailer keys
	snap        snapshot
}

var (
	_ http.ResponseWriter = (*response)(nil)
	_ http.Flusher        = (*response)(nil)
	_ io.StringWriter     = (*response)(nil)
)

// Header returns the handler's header map. Changes after WriteHeader do not reach the response
// head, as in net/http.
func (w *response) Header() http.Header {
	if w.handlerHeader == nil {
		w.handlerHeader = make(http.Header)
	}
	w.calledHeader = true
	return w.handlerHeader
}

// WriteHeader is net/http's: the first non-1xx status wins and later calls are logged; 1xx
// informational statuses other than 101 are written and flushed at once.
func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		caller := relevantCaller()
		w.c.srv.logf("http: superfluous response.WriteHeader call from %s (%s:%d)", caller.Function, path.Base(caller.File), caller.Line)
		return
	}
	// Like net/http: only three-digit codes, and a panic helps find the bug.
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		bw := w.c.bufs.bw
		writeStatusLine(bw, code)
		_ = w.handlerHeader.WriteSubset(bw, excludedHeadersNoBody)
		_, _ = bw.WriteString("\r\n")
		_ = bw.Flush()
		return
	}
	w.wroteHeader = true
	w.status = code
	if w.calledHeader {
		w.takeSnapshot()
	}
	if cl := headerGet(w.handlerHeader, "Content-Length"); cl != "" {
		v, err := strconv.ParseInt(cl, 10, 64)
		if err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.c.srv.logf("http: invalid Content-Length of %q", cl)
			w.handlerHeader.Del("Content-Length")
		}
	}
}

func (w *response) Write(p []byte) (int, error) { return w.write(len(p), p, "") }

func (w *response) WriteString(s string) (int, error) { return w.write(len(s), nil, s) }

// write is net/http's: an implicit 200, ErrBodyNotAllowed for bodiless statuses and
// ErrContentLength beyond a declared length (counting the refused bytes too, as net/http does).
func (w *response) write(n int, b []byte, s string) (int, error) {
	if w.finished {
		return 0, errHandlerDone
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if n == 0 {
		return 0, nil
	}
	if !bodyAllowedForStatus(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(n)
	if w.contentLength != -1 && w.written > w.contentLength {
		return 0, http.ErrContentLength
	}
	if b != nil {
		return w.c.bufs.pre.Write(b)
	}
	return w.c.bufs.pre.WriteString(s)
}

// Flush sends everything written so far to the client.
func (w *response) Flush() { _ = w.FlushError() }

// FlushError is Flush reporting the write error, for http.ResponseController.
func (w *response) FlushError() error {
	if w.finished {
		return errHandlerDone
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	err := w.c.bufs.pre.Flush()
	if !w.headWritten {
		w.writeHead(nil)
	}
	if e2 := w.c.bufs.bw.Flush(); err == nil {
		err = e2
	}
	return err
}

// SetReadDeadline sets the connection's read deadline, for http.ResponseController. The server
// leaves read deadlines alone for the rest of the request.
func (w *response) SetReadDeadline(t time.Time) error {
	c := w.c
	c.wmu.Lock()
	c.userRDL = true
	c.wmu.Unlock()
	c.rdlKnown = false
	return c.rwc.SetReadDeadline(t)
}

// SetWriteDeadline sets the connection's write deadline, for http.ResponseController; it is
// cleared after the response, as in net/http.
func (w *response) SetWriteDeadline(t time.Time) error {
	w.c.wdlSet = true
	return w.c.rwc.SetWriteDeadline(t)
}

// EnableFullDuplex lets the handler write the response while it still reads the request body,
// for http.ResponseController: the unread body is then not discarded before the response head.
func (w *response) EnableFullDuplex() error {
	w.fullDuplex = true
	return nil
}

// finish completes the response after the handler returned: the implicit status, the held-back
// body, the end of a chunked body and one flush.
func (w *response) finish() {
	w.handlerDone = true
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	_ = w.c.bufs.pre.Flush()
	if !w.headWritten {
		w.writeHead(nil)
	}
	if w.chunking {
		bw := w.c.bufs.bw
		_, _ = bw.WriteString("0\r\n")
		if t := w.finalTrailers(); t != nil {
			_ = t.Write(bw)
		}
		_, _ = bw.WriteString("\r\n")
	}
	_ = w.c.bufs.bw.Flush()
	w.finished = true
}

// shouldReuseConnection is net/http's rule for keeping the connection after the response.
func (w *response) shouldReuseConnection() bool {
	if w.closeAfterReply {
		return false
	}
	if w.req.Method != http.MethodHead && w.contentLength != -1 && bodyAllowedForStatus(w.status) && w.contentLength != w.written {
		return false // wrote less than declared: the client would read the next response as body
	}
	if w.c.werr != nil {
		return false
	}
	return !w.closedRequestBodyEarly()
}

func (w *response) closedRequestBodyEarly() bool {
	b, ok := w.req.Body.(*body)
	return ok && b.didEarlyClose()
}

// requestTooLarge is net/http's reaction to a body too large to discard.
func (w *response) requestTooLarge() {
	w.closeAfterReply = true
	w.requestBodyLimitHit = true
}

// finalTrailers collects the trailers after the handler returned, as net/http does: the keys
// declared in the Trailer header and any key set with http.TrailerPrefix.
func (w *response) finalTrailers() http.Header {
	var t http.Header
	for k, vv := range w.handlerHeader {
		if kk, found := strings.CutPrefix(k, http.TrailerPrefix); found {
			if t == nil {
				t = make(http.Header)
			}
			t[kk] = vv
		}
	}
	for _, k := range w.trailers {
		if t == nil {
			t = make(http.Header)
		}
		for _, v := range w.handlerHeader[k] {
			t.Add(k, v)
		}
	}
	return t
}

// chunkWriter receives the body from the pre-buffer: on its first write it writes the head, and
// then it frames the data as chunks when the response is chunked. A HEAD response swallows it.
// It holds only the connection so that it fits in an interface without an allocation.
type chunkWriter struct{ c *conn }

func (cw chunkWriter) Write(p []byte) (int, error) {
	w := cw.c.res
	if !w.headWritten {
		w.writeHead(p)
	}
	if w.req.Method == http.MethodHead {
		return len(p), nil
	}
	bw := cw.c.bufs.bw
	if w.chunking {
		b := strconv.AppendInt(bw.AvailableBuffer(), int64(len(p)), 16)
		if _, err := bw.Write(append(b, '\r', '\n')); err != nil {
			_ = cw.c.rwc.Close()
			return 0, err
		}
	}
	n, err := bw.Write(p)
	if w.chunking && err == nil {
		_, err = bw.WriteString("\r\n")
	}
	if err != nil {
		_ = cw.c.rwc.Close()
	}
	return n, err
}

// connWriter writes to the connection and, like net/http's checkConnErrorWriter, remembers the
// first error and cancels the request's context on it.
type connWriter struct{ c *conn }

func (cw connWriter) Write(p []byte) (int, error) {
	n, err := cw.c.rwc.Write(p)
	if err != nil && cw.c.werr == nil {
		cw.c.werr = err
		if cw.c.cancelReq != nil {
			cw.c.cancelReq()
		}
	}
	return n, err
}

// pkgPrefix is this package's path with a trailing dot, for relevantCaller.
var pkgPrefix = reflect.TypeFor[response]().PkgPath() + "."

// relevantCaller finds the first caller outside net/http and this package (its tests count as
// outside), for log messages.
func relevantCaller() runtime.Frame {
	pc := make([]uintptr, 16)
	n := runtime.Callers(1, pc)
	frames := runtime.CallersFrames(pc[:n])
	var frame runtime.Frame
	for {
		f, more := frames.Next()
		internal := strings.HasPrefix(f.Function, "net/http.") ||
			strings.HasPrefix(f.Function, pkgPrefix) && !strings.HasSuffix(f.File, "_test.go")
		if !internal {
			return f
		}
		frame = f
		if !more {
			break
		}
	}
	return frame
}
