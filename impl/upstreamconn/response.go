package upstreamconn

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/tollgate/tollgate/impl/httpfield"
)

// readResponse reads one response, the answer to req, from br. The common, well-formed head is
// parsed straight from the bytes br already holds (see parseBufferedResponse), with about half
// the allocations http.ReadResponse makes; every other head is left to http.ReadResponse.
// Either way the result is what http.ReadResponse would have returned.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	if res := parseBufferedResponse(br, req); res != nil {
		return res, nil
	}
	return http.ReadResponse(br, req)
}

// parseBufferedResponse parses the response head held in br's buffer and returns the response,
// equal in every field to what http.ReadResponse would return, with a body that reads exactly
// what http.ReadResponse's body would. It returns nil, having consumed nothing, unless all of
// these hold:
//
//   - req is not a HEAD request;
//   - the whole head, up to the empty line, is already buffered;
//   - every line of the head ends in CRLF;
//   - the status line is "HTTP/1.1" or "HTTP/1.0", one or more spaces, a three-digit status
//     from 200 to 599 other than 204 and 304, and nothing more or a space and a reason phrase
//     without control characters other than tabs;
//   - every header line is a token, a colon and a value without control characters other
//     than tabs (so no obs-fold continuation lines and no bare CR or LF);
//   - there is no Trailer header;
//   - the body is delimited either by exactly one Content-Length of at most 18 decimal digits
//     and no Transfer-Encoding, or, in HTTP/1.1, by exactly one Transfer-Encoding of exactly
//     "chunked" and no Content-Length.
func parseBufferedResponse(br *bufio.Reader, req *http.Request) *http.Response {
	if req != nil && req.Method == http.MethodHead {
		return nil
	}
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		return nil
	}
	raw := buf[:end+2] // the status and header lines, each with its CRLF
	statusLen := bytes.Index(raw, []byte("\r\n"))
	minor, code, ok := parseStatusLine(raw[:statusLen])
	if !ok {
		return nil
	}
	head, fields, ok := canonicalHead(raw, statusLen+2)
	if !ok {
		return nil
	}
	h := parseHeader(head[statusLen+2:], fields)

	// What http.ReadResponse does to the header and how it finds the body's end, restricted
	// to the cases accepted here.
	if _, ok := h["Trailer"]; ok {
		return nil
	}
	te, chunked := h["Transfer-Encoding"]
	lengths, hasLength := h["Content-Length"]
	var length int64
	switch {
	case chunked && (hasLength || minor == 0 || len(te) != 1 || te[0] != "chunked"):
		return nil
	case chunked:
		delete(h, "Transfer-Encoding")
		length = -1
	case !hasLength || len(lengths) != 1:
		return nil // a body until the connection closes, or repeated lengths
	default:
		if length, ok = httpfield.ParseContentLength(lengths[0]); !ok {
			return nil
		}
	}
	closing := httpguts.HeaderValuesContainsToken(h["Connection"], "close")
	if minor == 0 {
		closing = closing || !httpguts.HeaderValuesContainsToken(h["Connection"], "keep-alive")
	} else if closing {
		delete(h, "Connection")
	}
	if pragma := h["Pragma"]; len(pragma) > 0 && pragma[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}

	p := &parsedResponse{}
	res := &p.res
	*res = http.Response{
		Status:        strings.TrimLeft(head[len("HTTP/1.1 "):statusLen], " "),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    minor,
		Header:        h,
		ContentLength: length,
		Close:         closing,
		Request:       req,
	}
	if minor == 0 {
		res.Proto = "HTTP/1.0"
	}
	switch {
	case chunked:
		p.transferEncoding[0] = "chunked"
		res.TransferEncoding = p.transferEncoding[:]
		p.body = messageBody{chunks: httputil.NewChunkedReader(br), br: br, res: res, closing: closing}
		res.Body = &p.body
	case length == 0:
		res.Body = http.NoBody
	default:
		p.body = messageBody{length: io.LimitedReader{R: br, N: length}, closing: closing}
		res.Body = &p.body
	}
	_, _ = br.Discard(len(raw) + 2)
	return res
}

// parsedResponse holds a response parsed by parseBufferedResponse with its body and its
// TransferEncoding, so that they take one allocation.
type parsedResponse struct {
	res              http.Response
	body             messageBody
	transferEncoding [1]string
}

// parseStatusLine checks a status line (without its CRLF) of the form parseBufferedResponse
// accepts and returns the minor HTTP version and the status code.
func parseStatusLine(line []byte) (minor, code int, ok bool) {
	if len(line) < len("HTTP/1.1 ") || string(line[:len("HTTP/1.")]) != "HTTP/1." ||
		(line[7] != '0' && line[7] != '1') || line[8] != ' ' {
		return 0, 0, false
	}
	minor = int(line[7] - '0')
	status := bytes.TrimLeft(line[len("HTTP/1.1 "):], " ")
	if len(status) < 3 || len(status) > 3 && status[3] != ' ' {
		return 0, 0, false
	}
	for _, c := range status[:3] {
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		code = code*10 + int(c-'0')
	}
	if code < 200 || code > 599 || code == http.StatusNoContent || code == http.StatusNotModified {
		return 0, 0, false
	}
	for _, c := range status[3:] {
		if !httpfield.ValidValueByte(c) {
			return 0, 0, false
		}
	}
	return minor, code, true
}

// canonicalHead checks the header lines of raw, which start at offset start and each end in
// CRLF, and returns raw as one string in which every header line is reduced to its field name
// in canonical form (as textproto.CanonicalMIMEHeaderKey gives it), a colon and its value
// without surrounding spaces and tabs. fields is the number of header lines.
func canonicalHead(raw []byte, start int) (head string, fields int, ok bool) {
	var b strings.Builder
	b.Grow(len(raw))
	b.Write(raw[:start])
	for rest := raw[start:]; len(rest) > 0; fields++ {
		i := bytes.Index(rest, []byte("\r\n"))
		name, value, found := bytes.Cut(rest[:i], []byte(":"))
		if !found || !httpfield.IsToken(name) {
			return "", 0, false
		}
		upper := true
		for _, c := range name {
			if upper && 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			} else if !upper && 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
			upper = c == '-'
		}
		for _, c := range value {
			if !httpfield.ValidValueByte(c) {
				return "", 0, false
			}
		}
		b.WriteByte(':')
		b.Write(bytes.Trim(value, " \t"))
		b.WriteString("\r\n")
		rest = rest[i+2:]
	}
	return b.String(), fields, true
}

// parseHeader builds the header from the fields header lines that canonicalHead left in lines.
// Keys and values are substrings of lines, and the values share one backing array, each
// key's first value with a capacity of one, as in textproto.Reader.ReadMIMEHeader.
func parseHeader(lines string, fields int) http.Header {
	h := make(http.Header, fields)
	values := make([]string, fields)
	for lines != "" {
		var line string
		line, lines, _ = strings.Cut(lines, "\r\n")
		key, value, _ := strings.Cut(line, ":")
		if vv := h[key]; vv != nil {
			h[key] = append(vv, value)
			continue
		}
		vv := values[:1:1]
		values = values[1:]
		vv[0] = value
		h[key] = vv
	}
	return h
}

// Errors of a chunked body's trailer, worded as net/http words them.
var (
	errTrailerEOF  = errors.New("http: unexpected EOF reading trailer")
	errLongTrailer = errors.New("http: suspiciously long trailer after chunked body")
)

// messageBody is the body of a response parsed by parseBufferedResponse: the Content-Length
// bytes that follow the head, or a chunked body with its trailer. It is a copy of the body
// http.ReadResponse returns, restricted to those two kinds, and reads exactly the bytes that
// body would read from the connection's reader, in the same calls, with the same results:
//
//   - a Content-Length body returns io.EOF with its last bytes, and io.ErrUnexpectedEOF when the
//     connection ends before them (io.EOF on later reads);
//   - a chunked body reads the trailer section after the last chunk, sets the response's
//     Trailer from it, and fails for good (http.ErrBodyReadAfterClose on later reads) when
//     the trailer is malformed;
//   - Close reads the rest of the body (unless it is a Content-Length body of a response
//     that closes the connection), after which Read returns http.ErrBodyReadAfterClose.
//
// Unlike net/http's body it is not safe for concurrent use: responseBody reads it from one
// goroutine at a time and never closes it.
type messageBody struct {
	length  io.LimitedReader // the rest of a Content-Length body; unused when chunks is set
	chunks  io.Reader        // the decoder of a chunked body, nil for a Content-Length body
	br      *bufio.Reader    // the connection's reader, from which the trailer is read
	res     *http.Response   // the response whose Trailer a chunked body sets
	closing bool             // whether the connection closes after this response
	sawEOF  bool
	closed  bool
}

// Read reads the next bytes of the body, as described on messageBody.
func (b *messageBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.sawEOF {
		return 0, io.EOF
	}
	if b.chunks != nil {
		return b.readChunks(p)
	}
	n, err := b.length.Read(p)
	switch {
	case err == io.EOF:
		b.sawEOF = true
		if b.length.N > 0 {
			err = io.ErrUnexpectedEOF
		}
	case err == nil && n > 0 && b.length.N == 0:
		// Give io.EOF with the last bytes, so that the connection can be reused without
		// another Read.
		b.sawEOF, err = true, io.EOF
	}
	return n, err
}

// readChunks reads from a chunked body and, at its end, the trailer.
func (b *messageBody) readChunks(p []byte) (int, error) {
	n, err := b.chunks.Read(p)
	if err == io.EOF {
		b.sawEOF = true
		if trailerErr := b.readTrailer(); trailerErr != nil {
			// The connection is unusable: no Read may succeed from here on.
			err = trailerErr
			b.sawEOF, b.closed = false, true
		}
	}
	return n, err
}

// readTrailer reads the trailer section that follows the last chunk, as net/http does: the
// common empty one is a bare CRLF; a longer one must end, with an empty line, within the
// reader's buffer.
func (b *messageBody) readTrailer() error {
	buf, err := b.br.Peek(2)
	if string(buf) == "\r\n" {
		_, _ = b.br.Discard(2)
		return nil
	}
	if len(buf) < 2 {
		return errTrailerEOF
	}
	if err != nil {
		return err
	}
	if !emptyLineBuffered(b.br) {
		return errLongTrailer
	}
	trailer, err := textproto.NewReader(b.br).ReadMIMEHeader()
	if err != nil {
		if err == io.EOF {
			return errTrailerEOF
		}
		return err
	}
	// The response has no Trailer to merge with: a head that declares trailers is left to
	// http.ReadResponse.
	b.res.Trailer = http.Header(trailer)
	return nil
}

// emptyLineBuffered reports whether CRLF CRLF comes up in br within its buffer's size, peeking
// (and so reading from the connection) one byte further at a time, as net/http does.
func emptyLineBuffered(br *bufio.Reader) bool {
	for size := 4; ; size++ {
		buf, err := br.Peek(size)
		if bytes.HasSuffix(buf, []byte("\r\n\r\n")) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// Close ends the body. It first reads the rest of it, trailer included, unless that is
// pointless: the body already ended, or it is a Content-Length body and the connection closes.
func (b *messageBody) Close() error {
	if b.closed {
		return nil
	}
	var err error
	if !b.sawEOF && (b.chunks != nil || !b.closing) {
		_, err = io.Copy(io.Discard, b)
	}
	b.closed = true
	return err
}
