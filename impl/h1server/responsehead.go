package h1server

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// The response header keys whose lines writeHead may leave out. Their order is their order
// in a sorted header, which writeHead relies on.
const (
	keyConnection = iota
	keyContentLength
	keyContentType
	keyTransferEncoding
	numSpecialKeys
)

var specialKeys = [numSpecialKeys]string{"Connection", "Content-Length", "Content-Type", "Transfer-Encoding"}

// excludedHeadersNoBody is what net/http leaves out of 1xx responses.
var excludedHeadersNoBody = map[string]bool{"Content-Length": true, "Transfer-Encoding": true}

// snapshot is the handler's header as it was at WriteHeader, which is what net/http sends even
// if the handler changes the map afterwards. Instead of cloning the map, as net/http does, it
// keeps the header lines already serialised (sorted, invalid names dropped, newlines in values
// replaced, as http.Header.WriteSubset does) in the connection's buffer, plus the few facts
// writeHead decides on.
type snapshot struct {
	n              int // length of the serialised lines in conn.bufs.hbuf
	spans          [numSpecialKeys]struct{ start, end int }
	present        [numSpecialKeys]bool
	hasDate        bool
	te, conn, ce   string // first Transfer-Encoding, Connection and Content-Encoding values
	trailers       bool   // trailers were declared or set with http.TrailerPrefix
	protocolSwitch bool   // a 101 with Upgrade and Connection: Upgrade
}

// takeSnapshot records the handler's header for the head, at WriteHeader.
func (w *response) takeSnapshot() {
	h := w.handlerHeader
	if len(h) == 0 {
		return
	}
	sn := &w.snap
	bufs := w.c.bufs
	keys := bufs.keys[:0]
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			sn.trailers = true
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	buf := bufs.hbuf[:0]
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		start := len(buf)
		for _, v := range h[k] {
			buf = append(buf, k...)
			buf = append(buf, ": "...)
			buf = appendHeaderValue(buf, v)
			buf = append(buf, "\r\n"...)
		}
		if i := specialKeyIndex(k); i >= 0 {
			sn.spans[i].start, sn.spans[i].end = start, len(buf)
		}
	}
	clear(keys)
	bufs.keys = keys[:0]
	bufs.hbuf = buf
	sn.n = len(buf)

	for i, k := range specialKeys {
		_, sn.present[i] = h[k]
	}
	_, sn.hasDate = h["Date"]
	sn.te = headerGet(h, "Transfer-Encoding")
	sn.conn = headerGet(h, "Connection")
	sn.ce = headerGet(h, "Content-Encoding")
	if tv := h["Trailer"]; len(tv) > 0 {
		sn.trailers = true
		for _, v := range tv {
			foreachHeaderElement(v, w.declareTrailer)
		}
	}
	sn.protocolSwitch = w.status == http.StatusSwitchingProtocols && headerGet(h, "Upgrade") != "" &&
		httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade")
}

// declareTrailer notes a trailer key declared in the Trailer header, as net/http does.
func (w *response) declareTrailer(k string) {
	k = http.CanonicalHeaderKey(k)
	if !httpguts.ValidTrailerHeader(k) {
		return
	}
	w.trailers = append(w.trailers, k)
}

// writeHead writes the status line and header into the output buffer; p is the first part of
// the body, for sniffing and, when the handler is done, for the Content-Length. It is net/http's
// chunkWriter.writeHeader for HTTP/1.1 requests, rule for rule.
func (w *response) writeHead(p []byte) {
	if w.headWritten {
		return
	}
	w.headWritten = true
	c := w.c
	sn := &w.snap
	keepAlives := c.srv.doKeepAlives()
	isHEAD := w.req.Method == http.MethodHead
	code := w.status

	var del uint8 // the special keys left out, as bits
	clen := int64(-1)
	var contentType, connection, transferEncoding string

	hasTE := sn.te != ""
	if w.handlerDone && !sn.trailers && !hasTE && bodyAllowedForStatus(code) && !sn.present[keyContentLength] && (!isHEAD || len(p) > 0) {
		w.contentLength = int64(len(p))
		clen = w.contentLength
	}
	hasCL := w.contentLength != -1

	if w.wantsClose || sn.conn == "close" || !keepAlives {
		w.closeAfterReply = true
	}

	// Like net/http, settle the request body before answering: clients that send the whole
	// request before reading can deadlock otherwise. A body small enough is read and dropped;
	// a larger one closes the connection.
	if w.req.ContentLength != 0 && !w.closeAfterReply && !w.fullDuplex {
		var discard, tooBig bool
		if b, ok := w.req.Body.(*body); ok {
			closed, sawEOF, remaining := b.state()
			switch {
			case closed:
				if !sawEOF {
					w.closeAfterReply = true
				}
			case remaining >= maxPostHandlerReadBytes:
				tooBig = true
			default:
				discard = true
			}
		} else {
			discard = true
		}
		if discard {
			_, err := discardAll(w.reqBody, maxPostHandlerReadBytes+1)
			switch err {
			case nil:
				tooBig = true
			case http.ErrBodyReadAfterClose:
			case io.EOF:
				if w.reqBody.Close() != nil {
					w.closeAfterReply = true
				}
			default:
				w.closeAfterReply = true
			}
		}
		if tooBig {
			w.requestTooLarge()
			del |= 1 << keyConnection
			connection = "close"
		}
	}

	if bodyAllowedForStatus(code) {
		if sn.ce == "" && !sn.present[keyContentType] && !hasTE && len(p) > 0 {
			contentType = http.DetectContentType(p)
		}
	} else {
		del |= 1<<keyContentLength | 1<<keyTransferEncoding
		if code == http.StatusNotModified {
			del |= 1 << keyContentType
		}
	}

	if hasCL && hasTE && sn.te != "identity" {
		c.srv.logf("http: WriteHeader called with both Transfer-Encoding of %q and a Content-Length of %d", sn.te, w.contentLength)
		del |= 1 << keyContentLength
		hasCL = false
	}

	switch {
	case isHEAD || !bodyAllowedForStatus(code) || code == http.StatusNoContent, hasCL:
		del |= 1 << keyTransferEncoding
	case hasTE && sn.te == "identity":
		w.chunking = false
		w.closeAfterReply = true
		del |= 1 << keyTransferEncoding
	default:
		w.chunking = true
		transferEncoding = "chunked"
		if hasTE && sn.te == "chunked" {
			del |= 1 << keyTransferEncoding
		}
	}
	if w.chunking {
		del |= 1 << keyContentLength
	}

	if w.closeAfterReply && (!keepAlives || !hasToken(sn.conn, "close")) && !sn.protocolSwitch {
		del |= 1 << keyConnection
		connection = "close"
	}

	bw := c.bufs.bw
	writeStatusLine(bw, code)
	hb := c.bufs.hbuf[:sn.n]
	pos := 0
	for i := range numSpecialKeys {
		if s := sn.spans[i]; del&(1<<i) != 0 && s.end > s.start {
			_, _ = bw.Write(hb[pos:s.start])
			pos = s.end
		}
	}
	_, _ = bw.Write(hb[pos:])
	// The added headers, in net/http's order. They are formatted in the output buffer's free
	// space (AvailableBuffer), which a stack array would not save: it escapes through Write.
	if !sn.hasDate {
		b := append(bw.AvailableBuffer(), "Date: "...)
		b = appendDate(b)
		_, _ = bw.Write(append(b, "\r\n"...))
	}
	if clen >= 0 {
		b := append(bw.AvailableBuffer(), "Content-Length: "...)
		b = strconv.AppendInt(b, clen, 10)
		_, _ = bw.Write(append(b, "\r\n"...))
	}
	for i, v := range [...]string{contentType, connection, transferEncoding} {
		if v != "" {
			_, _ = bw.WriteString([...]string{"Content-Type: ", "Connection: ", "Transfer-Encoding: "}[i])
			_, _ = bw.WriteString(v)
			_, _ = bw.WriteString("\r\n")
		}
	}
	_, _ = bw.WriteString("\r\n")
}

// discardAll reads and drops up to n bytes of a request body, like io.CopyN(io.Discard, rc, n),
// without copying when the body is the server's own.
func discardAll(rc io.Reader, n int64) (int64, error) {
	if b, ok := rc.(*body); ok {
		return b.discard(n)
	}
	return io.CopyN(io.Discard, rc, n)
}

// writeStatusLine writes an HTTP/1.1 status line as net/http does.
func writeStatusLine(bw *bufio.Writer, code int) {
	if code == http.StatusOK {
		_, _ = bw.WriteString("HTTP/1.1 200 OK\r\n")
		return
	}
	if text := http.StatusText(code); text != "" {
		b := append(bw.AvailableBuffer(), "HTTP/1.1 "...)
		b = strconv.AppendInt(b, int64(code), 10)
		b = append(b, ' ')
		b = append(b, text...)
		_, _ = bw.Write(append(b, "\r\n"...))
		return
	}
	_, _ = fmt.Fprintf(bw, "HTTP/1.1 %03d status code %d\r\n", code, code)
}

// dateValue is the Date header value of one second, shared by all connections so that it is
// formatted once a second rather than once a response.
type dateValue struct {
	unix int64
	b    []byte
}

var currentDate atomic.Pointer[dateValue]

// appendDate appends the current time in http.TimeFormat.
func appendDate(dst []byte) []byte {
	now := time.Now()
	sec := now.Unix()
	if d := currentDate.Load(); d != nil && d.unix == sec {
		return append(dst, d.b...)
	}
	d := &dateValue{unix: sec, b: now.UTC().AppendFormat(make([]byte, 0, len(http.TimeFormat)), http.TimeFormat)}
	currentDate.Store(d)
	return append(dst, d.b...)
}

// appendHeaderValue appends v as http.Header.WriteSubset writes it: without surrounding
// whitespace and with CR and LF replaced by spaces.
func appendHeaderValue(dst []byte, v string) []byte {
	for len(v) > 0 && isASCIISpace(v[0]) {
		v = v[1:]
	}
	for len(v) > 0 && isASCIISpace(v[len(v)-1]) {
		v = v[:len(v)-1]
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		dst = append(dst, c)
	}
	return dst
}

func isASCIISpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func specialKeyIndex(k string) int {
	switch k {
	case "Connection":
		return keyConnection
	case "Content-Length":
		return keyContentLength
	case "Content-Type":
		return keyContentType
	case "Transfer-Encoding":
		return keyTransferEncoding
	}
	return -1
}

// headerGet is net/http's Header.get: the first value of an already canonical key.
func headerGet(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= 100 && status <= 199, status == http.StatusNoContent, status == http.StatusNotModified:
		return false
	}
	return true
}

// foreachHeaderElement splits a comma-separated header value into trimmed non-empty elements,
// as net/http does.
func foreachHeaderElement(v string, fn func(string)) {
	v = textproto.TrimString(v)
	if v == "" {
		return
	}
	if !strings.Contains(v, ",") {
		fn(v)
		return
	}
	for f := range strings.SplitSeq(v, ",") {
		if f = textproto.TrimString(f); f != "" {
			fn(f)
		}
	}
}

// hasToken is net/http's check for a token in a header value (case-insensitive, bounded by
// spaces, commas or tabs).
func hasToken(v, token string) bool {
	if len(token) > len(v) || token == "" {
		return false
	}
	if v == token {
		return true
	}
	for sp := 0; sp <= len(v)-len(token); sp++ {
		if b := v[sp]; b != token[0] && b|0x20 != token[0] {
			continue
		}
		if sp > 0 && !isTokenBoundary(v[sp-1]) {
			continue
		}
		if end := sp + len(token); end != len(v) && !isTokenBoundary(v[end]) {
			continue
		}
		if strings.EqualFold(v[sp:sp+len(token)], token) {
			return true
		}
	}
	return false
}

func isTokenBoundary(b byte) bool { return b == ' ' || b == ',' || b == '\t' }
