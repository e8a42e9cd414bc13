package upstreamconn

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// defaultUserAgent is sent when the request sets no User-Agent, as net/http does.
const defaultUserAgent = "Go-http-client/1.1"

// connWriteError is a failure to write to the connection, as opposed to a failure to read the
// request body.
type connWriteError struct {
	err error
}

func (e *connWriteError) Error() string { return e.err.Error() }
func (e *connWriteError) Unwrap() error { return e.err }

// checkRequest refuses requests this transport cannot send faithfully and returns the
// host:port to dial and the Host header to send.
func checkRequest(req *http.Request) (addr, host string, err error) {
	u := req.URL
	switch {
	case u == nil:
		return "", "", errors.New("upstreamconn: request has no URL")
	case u.Scheme != "http":
		return "", "", fmt.Errorf("upstreamconn: unsupported URL scheme %q; only http:// is supported", u.Scheme)
	case u.Host == "":
		return "", "", errors.New("upstreamconn: request URL has no host")
	case u.User != nil:
		return "", "", errors.New("upstreamconn: URLs with user information are not supported; set an Authorization header")
	case len(req.TransferEncoding) > 0:
		return "", "", errors.New("upstreamconn: request Transfer-Encoding is not supported; set ContentLength")
	case len(req.Trailer) > 0:
		return "", "", errors.New("upstreamconn: request trailers are not supported")
	case !httpguts.ValidHeaderFieldName(req.Method) && req.Method != "":
		return "", "", fmt.Errorf("upstreamconn: invalid method %q", req.Method)
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	switch {
	case hasBody && req.ContentLength <= 0:
		return "", "", fmt.Errorf("upstreamconn: request body of unknown length (ContentLength %d) is not supported; set ContentLength", req.ContentLength)
	case !hasBody && req.ContentLength > 0:
		return "", "", fmt.Errorf("upstreamconn: ContentLength is %d but the request has no body", req.ContentLength)
	}
	host = req.Host
	if host == "" {
		host = u.Host
	}
	if !validHostHeader(host) {
		return "", "", fmt.Errorf("upstreamconn: invalid Host %q", host)
	}
	// The escaped path cannot hold either (url.URL escapes them); the opaque form and the raw
	// query are sent as they are.
	if !validRequestTarget(u.Opaque) || !validRequestTarget(u.RawQuery) {
		return "", "", errors.New("upstreamconn: the request URL holds a space or a control character")
	}
	for name, values := range req.Header {
		if !httpguts.ValidHeaderFieldName(name) {
			return "", "", fmt.Errorf("upstreamconn: invalid header field name %q", name)
		}
		for _, v := range values {
			if !httpguts.ValidHeaderFieldValue(v) {
				return "", "", fmt.Errorf("upstreamconn: invalid header field value for %q", name)
			}
		}
	}
	if _, port, err := net.SplitHostPort(u.Host); err == nil && port != "" {
		return u.Host, host, nil
	}
	return net.JoinHostPort(u.Hostname(), "80"), host, nil
}

// writeRequest writes req with body, and host as its Host (both already checked by
// checkRequest), to c. A failure to write is a *connWriteError; a failure of the body is
// returned as it is.
func writeRequest(c *conn, req *http.Request, host string, body io.Reader) error {
	w := c.bw
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	_, _ = w.WriteString(method)
	_ = w.WriteByte(' ')
	_, _ = w.WriteString(req.URL.RequestURI())
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.WriteString(host)
	_, _ = w.WriteString("\r\n")
	if _, ok := req.Header["User-Agent"]; !ok {
		_, _ = w.WriteString("User-Agent: " + defaultUserAgent + "\r\n")
	}
	for name, values := range req.Header {
		switch name {
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		case "User-Agent":
			if len(values) > 0 && values[0] == "" {
				continue // an empty User-Agent means none, as in net/http
			}
		}
		for _, v := range values {
			_, _ = w.WriteString(name)
			_, _ = w.WriteString(": ")
			_, _ = w.WriteString(v)
			_, _ = w.WriteString("\r\n")
		}
	}
	writeTraceContext(w, req)
	if req.Close && !httpguts.HeaderValuesContainsToken(req.Header["Connection"], "close") {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	length := req.ContentLength
	if body == nil || body == http.NoBody {
		length = 0
	}
	if length > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		_, _ = w.WriteString("Content-Length: ")
		_, _ = w.Write(strconv.AppendInt(w.AvailableBuffer(), length, 10))
		_, _ = w.WriteString("\r\n")
	}
	_, _ = w.WriteString("\r\n")
	if length > 0 {
		return writeBody(c, body, length)
	}
	if err := w.Flush(); err != nil {
		return &connWriteError{err: err}
	}
	return nil
}

// writeBody sends exactly length bytes of body after the buffered header and fails when body
// holds fewer or more. A body that fits in the write buffer is read straight into it, so the
// whole request leaves in one write; a larger one is copied to the connection in large writes
// by copyBody, which stops early (errEarlyAnswer) when the upstream answers before reading it.
func writeBody(c *conn, body io.Reader, length int64) error {
	w := c.bw
	if length <= int64(w.Available())-1 { // one spare byte to check that the body ends
		buf := w.AvailableBuffer()[:length+1]
		n, err := io.ReadAtLeast(body, buf, int(length))
		switch {
		case n > int(length):
			return fmt.Errorf("upstreamconn: request body is longer than its ContentLength %d", length)
		case err != nil:
			return bodyReadError(err, int64(n), length)
		}
		// io.ReadAtLeast stops as soon as it has length bytes; the body must end there.
		if m, err := body.Read(buf[n:]); m > 0 {
			return fmt.Errorf("upstreamconn: request body is longer than its ContentLength %d", length)
		} else if err != nil && err != io.EOF {
			return fmt.Errorf("upstreamconn: reading the request body: %w", err)
		}
		_, _ = w.Write(buf[:n])
		if err := w.Flush(); err != nil {
			return &connWriteError{err: err}
		}
		return nil
	}
	if err := w.Flush(); err != nil {
		return &connWriteError{err: err}
	}
	return copyBody(c, body, length)
}

// earlyAnswerPoll is how long a write of a request body may stay blocked before writeBody
// looks whether the upstream has begun to answer. An upstream that refuses a large body (a
// 413 after its head, say) may stop reading it and keep the connection open: the write then
// blocks for ever, while net/http's Transport, which reads in another goroutine, returns the
// answer at once. Looking costs a non-blocking peek at the socket, and only while a write is
// blocked; a body that the upstream reads as fast as it is written is never interrupted.
const earlyAnswerPoll = 10 * time.Millisecond

// copyBuffers holds the buffers through which copyBody sends bodies larger than the write
// buffer.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyBody sends exactly length bytes of body to the connection in large writes, and fails
// when body holds fewer or more. When the upstream begins to answer while a write is blocked,
// it stops and returns errEarlyAnswer: the rest of the body is not sent, and the connection
// must not be reused.
func copyBody(c *conn, body io.Reader, length int64) error {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	_ = c.nc.SetWriteDeadline(time.Now().Add(earlyAnswerPoll))
	defer func() { _ = c.nc.SetWriteDeadline(time.Time{}) }()
	var sent int64
	for sent < length {
		n, err := body.Read(buf[:min(int64(len(buf)), length-sent)])
		if n > 0 {
			if werr := c.writeWatchingForAnswer(buf[:n]); werr != nil {
				return werr
			}
			sent += int64(n)
		}
		if err != nil {
			if err == io.EOF && sent == length {
				break
			}
			return bodyReadError(err, sent, length)
		}
	}
	var one [1]byte
	if m, err := body.Read(one[:]); m > 0 {
		return fmt.Errorf("upstreamconn: request body is longer than its ContentLength %d", length)
	} else if err != nil && err != io.EOF {
		return fmt.Errorf("upstreamconn: reading the request body: %w", err)
	}
	return nil
}

// writeWatchingForAnswer writes p under the write deadline copyBody set. Each time the deadline
// passes with the write blocked, it looks at the socket: when the upstream has sent something
// (or closed it), it returns errEarlyAnswer; otherwise it extends the deadline and goes on.
func (c *conn) writeWatchingForAnswer(p []byte) error {
	for len(p) > 0 {
		n, err := c.nc.Write(p)
		p = p[n:]
		if err == nil {
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return &connWriteError{err: err}
		}
		if c.peerSpoke() {
			return errEarlyAnswer
		}
		_ = c.nc.SetWriteDeadline(time.Now().Add(earlyAnswerPoll))
	}
	return nil
}

// errEarlyAnswer is copyBody's report that the upstream began to answer before it had read the
// whole request body.
var errEarlyAnswer = errors.New("upstreamconn: the upstream answered before reading the whole request body")

// bodyReadError describes a request body that failed or ended after n of its length bytes.
func bodyReadError(err error, n, length int64) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("upstreamconn: request body has %d bytes, fewer than its ContentLength %d", n, length)
	}
	return fmt.Errorf("upstreamconn: reading the request body: %w", err)
}

// validHostHeader reports whether h can be sent as the Host header.
func validHostHeader(h string) bool {
	for i := 0; i < len(h); i++ {
		if c := h[i]; c <= ' ' || c == 0x7f || c == '/' {
			return false
		}
	}
	return h != ""
}

// validRequestTarget reports whether s may go into the request line: no spaces, no control
// characters (which would end the line or split it, as net/http also refuses).
func validRequestTarget(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
