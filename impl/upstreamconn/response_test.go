package upstreamconn

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The tests here hold readResponse to its promise: on the same bytes, read in the same pieces,
// readFinalResponse gives what it gave when it called http.ReadResponse (referenceFinalResponse),
// field by field and Read by Read, and leaves the same bytes unread.

// referenceFinalResponse is readFinalResponse as it was before readResponse: http.ReadResponse
// for every head.
func referenceFinalResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for skipped := 0; ; skipped++ {
		res, err := http.ReadResponse(br, req)
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

// piecewiseReader returns data in reads of the given sizes, the last size repeating (all of it
// at once when there are none), then err (io.EOF when nil), like a connection on which the bytes
// arrive in several segments before the peer closes it or it fails.
type piecewiseReader struct {
	data  []byte
	sizes []int
	err   error
}

// errReset stands for a connection that fails after the bytes that arrived.
var errReset = errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer")

func (r *piecewiseReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		return 0, io.EOF
	}
	size := len(r.data)
	if len(r.sizes) > 0 {
		size = r.sizes[0]
		if len(r.sizes) > 1 {
			r.sizes = r.sizes[1:]
		}
	}
	n := copy(p, r.data[:min(size, len(r.data))])
	r.data = r.data[n:]
	return n, nil
}

// readSizes are the buffer sizes of the successive body reads, in a cycle: small and large
// ones, one larger than the connection's buffer (which bufio reads into directly) and an empty
// one.
var readSizes = []int{3, 1, 512, 0, 5000, 17, 64 << 10}

// readOutcome is what one Read of a body returned.
type readOutcome struct {
	Data string
	Err  string
}

// responseOutcome is everything a caller can observe of reading one response and its body.
type responseOutcome struct {
	Err              string
	Status           string
	StatusCode       int
	Proto            string
	ProtoMajor       int
	ProtoMinor       int
	Header           http.Header
	ContentLength    int64
	TransferEncoding []string
	Close            bool
	Uncompressed     bool
	SameRequest      bool
	NoTLS            bool
	NoBody           bool
	Reads            []readOutcome // until the first error, and one more
	CloseErr         string
	ReadAfterClose   string
	Trailer          http.Header // after the body was read or closed
	Rest             string      // what is left on the connection afterwards
	RestErr          string
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// observe reads a response to a method request from src, as exchange does (after a first
// Peek), with read (readFinalResponse or referenceFinalResponse). It then reads the body with
// readSizes until it fails and once more, or, when closeEarly, reads once and closes it.
func observe(src io.Reader, method string, closeEarly bool,
	read func(*bufio.Reader, *http.Request) (*http.Response, error)) responseOutcome {
	br := bufio.NewReaderSize(src, connBufferSize)
	req := &http.Request{Method: method}
	var o responseOutcome
	_, _ = br.Peek(1)
	res, err := read(br, req)
	if err != nil {
		o.Err = err.Error()
	} else {
		o.Status, o.StatusCode, o.Proto, o.ProtoMajor, o.ProtoMinor = res.Status, res.StatusCode, res.Proto, res.ProtoMajor, res.ProtoMinor
		o.Header, o.ContentLength, o.TransferEncoding, o.Close = res.Header, res.ContentLength, res.TransferEncoding, res.Close
		o.Uncompressed, o.SameRequest, o.NoTLS, o.NoBody = res.Uncompressed, res.Request == req, res.TLS == nil, res.Body == http.NoBody
		buf := make([]byte, slices.Max(readSizes))
		failed := false
		for i := 0; i < 100_000 && !(closeEarly && i == 1); i++ {
			p := buf[:readSizes[i%len(readSizes)]]
			n, err := res.Body.Read(p)
			o.Reads = append(o.Reads, readOutcome{Data: string(p[:n]), Err: errString(err)})
			if failed {
				break
			}
			failed = err != nil
		}
		o.CloseErr = errString(res.Body.Close())
		_, err := res.Body.Read(make([]byte, 10))
		o.ReadAfterClose = errString(err)
		o.Trailer = res.Trailer
	}
	rest, err := io.ReadAll(br)
	o.Rest, o.RestErr = string(rest), errString(err)
	return o
}

// leanParse reports whether parseBufferedResponse parses the first head of data when it
// arrives in reads of sizes.
func leanParse(data []byte, sizes []int, method string) bool {
	br := bufio.NewReaderSize(&piecewiseReader{data: data, sizes: sizes}, connBufferSize)
	_, _ = br.Peek(1)
	return parseBufferedResponse(br, &http.Request{Method: method}) != nil
}

// checkSameResponse fails t when readFinalResponse and referenceFinalResponse differ on data
// arriving in reads of sizes and then ending with err (io.EOF when nil).
func checkSameResponse(t *testing.T, data []byte, sizes []int, err error, method string, closeEarly bool) {
	t.Helper()
	got := observe(&piecewiseReader{data: data, sizes: sizes, err: err}, method, closeEarly, readFinalResponse)
	want := observe(&piecewiseReader{data: data, sizes: sizes, err: err}, method, closeEarly, referenceFinalResponse)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s request, reads of %v ending in %v, close early %v, on\n%q\ngot  %+v\nwant %+v", method, sizes, err, closeEarly, data, got, want)
	}
}

// responseCase is a differential test case: the bytes an upstream sends, in reads of sizes,
// for a request with method, and whether parseBufferedResponse should parse its first head.
type responseCase struct {
	name   string
	data   string
	method string // GET when empty
	sizes  []int
	lean   bool
}

const longValue = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

var responseCases = []responseCase{
	// Typical upstream answers.
	{name: "go json", lean: true, data: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Sat, 22 Nov 2025 10:00:00 GMT\r\nContent-Length: 27\r\n\r\n{\"id\":\"chatcmpl-1\",\"ok\":1}\n"},
	{name: "go sse", lean: true, data: "HTTP/1.1 200 OK\r\nCache-Control: no-cache\r\nConnection: keep-alive\r\nContent-Type: text/event-stream\r\nDate: Sat, 22 Nov 2025 10:00:00 GMT\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"1c\r\ndata: {\"choices\":[{\"i\":0}]}\n\n\r\n10\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"},
	{name: "uvicorn lowercase", lean: true, data: "HTTP/1.1 200 OK\r\ndate: Sat, 22 Nov 2025 10:00:00 GMT\r\nserver: uvicorn\r\ncontent-length: 5\r\ncontent-type: application/json\r\n\r\nhello"},
	{name: "uvicorn stream", lean: true, data: "HTTP/1.1 200 OK\r\ndate: Sat, 22 Nov 2025 10:00:00 GMT\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n6\r\ndata: \r\n3\r\nx\n\n\r\n0\r\n\r\n"},
	{name: "openai style", lean: true, data: "HTTP/1.1 200 OK\r\nDate: Sat, 22 Nov 2025 10:00:00 GMT\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: keep-alive\r\naccess-control-expose-headers: X-Request-ID\r\nopenai-organization: org-x\r\nopenai-processing-ms: 312\r\nopenai-version: 2020-10-01\r\nx-ratelimit-limit-requests: 10000\r\nx-ratelimit-remaining-tokens: 149999\r\nx-request-id: req_abc\r\nstrict-transport-security: max-age=31536000; includeSubDomains; preload\r\nCF-RAY: 8e-SJC\r\nalt-svc: h3=\":443\"; ma=86400\r\n\r\n{}"},
	{name: "nginx 502", lean: true, data: "HTTP/1.1 502 Bad Gateway\r\nServer: nginx/1.25.3\r\nDate: Sat, 22 Nov 2025 10:00:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 20\r\nConnection: keep-alive\r\n\r\n<html>502</html>\r\n\r\n"},
	{name: "429 retry after", lean: true, data: "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 20\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"error\":429}"},
	{name: "500", lean: true, data: "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 3\r\n\r\nbad"},
	{name: "599", lean: true, data: "HTTP/1.1 599 Whatever\r\nContent-Length: 1\r\n\r\nx"},
	{name: "404 empty", lean: true, data: "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"},
	{name: "205 empty", lean: true, data: "HTTP/1.1 205 Reset Content\r\nContent-Length: 0\r\n\r\n"},
	{name: "lowercase length without space", lean: true, data: "HTTP/1.1 200 OK\r\ncontent-length:2\r\n\r\nok"},
	{name: "many headers", lean: true, data: "HTTP/1.1 200 OK\r\n" + manyHeaders(60) + "Content-Length: 2\r\n\r\nok"},
	{name: "repeated headers", lean: true, data: "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-A: one\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\nx-a: two\r\nSet-Cookie: c=3\r\nX-a: three\r\n\r\nok"},
	{name: "odd spacing", lean: true, data: "HTTP/1.1 200 OK\r\nA:x\r\nB:    spaced   \r\nC:\ttabbed\t\r\nD: \t mixed \t \r\nE:\r\nF:   \r\nG: inner  spaces\tand\ttabs\r\nContent-Length:   2   \r\n\r\nok"},
	{name: "mixed case names", lean: true, data: "HTTP/1.1 200 OK\r\nCONTENT-LENGTH: 2\r\nx-ReQuEsT-iD: 1\r\nETag: \"x\"\r\nWWW-Authenticate: Basic\r\ncontent-TYPE: a/b\r\nx-a: 1\r\nX-A: 2\r\n--x--: 3\r\na1-2b-c: 4\r\n~!#$%&'*+.^_`|: 5\r\n\r\nok"},
	{name: "obs-text values", lean: true, data: "HTTP/1.1 200 OK\r\nX-Name: caf\xc3\xa9 \xff\x80\r\nContent-Length: 2\r\n\r\nok"},
	{name: "no reason", lean: true, data: "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok"},
	{name: "reason trailing space", lean: true, data: "HTTP/1.1 200 \r\nContent-Length: 2\r\n\r\nok"},
	{name: "spaces before status", lean: true, data: "HTTP/1.1   201 Created\r\nContent-Length: 2\r\n\r\nok"},
	{name: "odd reason", lean: true, data: "HTTP/1.1 200 Everything\tis  fine \xe2\x9c\x93 \r\nContent-Length: 2\r\n\r\nok"},
	{name: "pragma no-cache", lean: true, data: "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 2\r\n\r\nok"},
	{name: "pragma with cache-control", lean: true, data: "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nCache-Control: max-age=5\r\nContent-Length: 2\r\n\r\nok"},
	{name: "pragma other", lean: true, data: "HTTP/1.1 200 OK\r\nPragma: x, no-cache\r\nContent-Length: 2\r\n\r\nok"},

	// Content-Length.
	{name: "length padded", lean: true, data: "HTTP/1.1 200 OK\r\nContent-Length: \t 5 \t\r\n\r\nhello"},
	{name: "length leading zeros", lean: true, data: "HTTP/1.1 200 OK\r\nContent-Length: 005\r\n\r\nhello"},
	{name: "length zero then next", lean: true, data: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n"},
	{name: "large length in pieces", lean: true, sizes: []int{80, 1000, 7, 4096, 33000}, data: "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("0123456789", 10_000)},
	{name: "large length one piece", lean: true, data: "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("abcdefghij", 10_000)},
	{name: "body then stray bytes", lean: true, data: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"},
	{name: "body shorter than length", lean: true, data: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"},
	{name: "body missing", lean: true, data: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"},
	{name: "head split across reads", sizes: []int{20, 5}, data: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"},
	{name: "head in bytes", sizes: []int{1}, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{name: "length max", data: "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\nab"},
	{name: "length 18 digits", lean: true, data: "HTTP/1.1 200 OK\r\nContent-Length: 999999999999999999\r\n\r\nab"},
	{name: "length overflow", data: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nab"},
	{name: "length repeated equal", data: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"},
	{name: "length repeated different", data: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"},
	{name: "length list", data: "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok"},
	{name: "length not a number", data: "HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nok"},
	{name: "length empty", data: "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\nok"},
	{name: "length negative", data: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nok"},
	{name: "length plus", data: "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"},
	{name: "length hex", data: "HTTP/1.1 200 OK\r\nContent-Length: 0x2\r\n\r\nok"},
	{name: "length underscore", data: "HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\nok"},
	{name: "no length", data: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end"},
	{name: "no length no headers", data: "HTTP/1.1 200 OK\r\n\r\nuntil the end"},

	// Chunked.
	{name: "chunked", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n"},
	{name: "chunked in pieces", lean: true, sizes: []int{48, 1, 2, 3}, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n"},
	{name: "chunked empty", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{name: "chunked extensions", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n3 ; a=\"b;c\"\r\nabc\r\n0;last\r\n\r\n"},
	{name: "chunked hex sizes", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0a\r\n0123456789\r\n0\r\n\r\n"},
	{name: "chunked trailers", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Checksum: abc\r\nx-usage: 12\r\nX-Checksum: def\r\n\r\n"},
	{name: "chunked trailers in pieces", lean: true, sizes: []int{48, 3}, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Checksum: abc\r\n\r\nHTTP/1.1"},
	{name: "chunked then next response", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	{name: "chunked bad trailer", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nno colon here\r\n\r\nrest"},
	{name: "chunked trailer cut", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"},
	{name: "chunked trailer cut short", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX"},
	{name: "chunked trailer unterminated", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-A: b\r\n"},
	{name: "chunked trailer too long", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-A: " + strings.Repeat("x", 5000) + "\r\n\r\n"},
	{name: "chunked bare LF trailer", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\n\r\n\r\n"},
	{name: "chunked bad size", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"},
	{name: "chunked size overflow", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\nx\r\n0\r\n\r\n"},
	{name: "chunked cut mid chunk", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nhello"},
	{name: "chunked bad chunk end", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n"},
	{name: "chunked too much overhead", lean: true, data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("1;"+longValue+longValue+longValue+"\r\nx\r\n", 200) + "0\r\n\r\n"},
	{name: "chunked connection close", lean: true, data: "HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{name: "chunked capitalised", data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
	{name: "chunked declared trailer", data: "HTTP/1.1 200 OK\r\nTrailer: X-Checksum\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Checksum: abc\r\n\r\n"},
	{name: "chunked forbidden trailer", data: "HTTP/1.1 200 OK\r\nTrailer: Content-Length\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
	{name: "trailer without chunks", data: "HTTP/1.1 200 OK\r\nTrailer: X-Checksum\r\nContent-Length: 2\r\n\r\nok"},
	{name: "te gzip chunked", data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
	{name: "te identity", data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n\r\nok"},
	{name: "te twice", data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
	{name: "te and length", data: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
	{name: "te empty", data: "HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\nContent-Length: 2\r\n\r\nok"},

	// Connection management.
	{name: "connection close", lean: true, data: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"},
	{name: "connection Close", lean: true, data: "HTTP/1.1 200 OK\r\nconnection: Close\r\nContent-Length: 2\r\n\r\nokrest"},
	{name: "connection list", lean: true, data: "HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nConnection: upgrade\r\nContent-Length: 2\r\n\r\nok"},
	{name: "connection keep-alive", lean: true, data: "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\nok"},
	{name: "connection closed-ish", lean: true, data: "HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 2\r\n\r\nok"},
	{name: "http/1.0", lean: true, data: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nokrest"},
	{name: "http/1.0 keep-alive", lean: true, data: "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nokrest"},
	{name: "http/1.0 close", lean: true, data: "HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 2\r\n\r\nokrest"},
	{name: "http/1.0 empty", lean: true, data: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\nrest"},
	{name: "http/1.0 no length", data: "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end"},
	{name: "http/1.0 chunked", data: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
	{name: "http/1.2", data: "HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "http/2.0", data: "HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok"},

	// Statuses and methods left to http.ReadResponse.
	{name: "100 then 200", data: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "103 then chunked", data: "HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
	{name: "too many 1xx", data: strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 7) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "101", data: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"},
	{name: "204", data: "HTTP/1.1 204 No Content\r\n\r\nrest"},
	{name: "204 with length", data: "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nrest"},
	{name: "204 chunked", data: "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\nrest"},
	{name: "304 with length", data: "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\nContent-Type: a/b\r\n\r\nrest"},
	{name: "HEAD", method: "HEAD", data: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nrest"},
	{name: "HEAD chunked", method: "HEAD", data: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nrest"},
	{name: "HEAD bad length", method: "HEAD", data: "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\nrest"},
	{name: "head lowercase method", method: "head", lean: true, data: "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nrest"},
	{name: "600", data: "HTTP/1.1 600 Beyond\r\nContent-Length: 2\r\n\r\nok"},
	{name: "999", data: "HTTP/1.1 999 Beyond\r\nContent-Length: 2\r\n\r\nok"},
	{name: "099", data: "HTTP/1.1 099 Low\r\nContent-Length: 2\r\n\r\nok"},
	{name: "000", data: "HTTP/1.1 000 Zero\r\nContent-Length: 2\r\n\r\nok"},

	// Malformed status lines.
	{name: "empty", data: ""},
	{name: "only CRLF", data: "\r\n\r\n"},
	{name: "garbage", data: "garbage\r\n\r\n"},
	{name: "no status", data: "HTTP/1.1 OK\r\n\r\n"},
	{name: "short status", data: "HTTP/1.1 20 OK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "long status", data: "HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "letters status", data: "HTTP/1.1 abc OK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "plus status", data: "HTTP/1.1 +12 OK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "minus status", data: "HTTP/1.1 -12 OK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "tab after status", data: "HTTP/1.1 200\tOK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "lowercase proto", data: "http/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "control in reason", data: "HTTP/1.1 200 O\x01K\r\nContent-Length: 2\r\n\r\nok"},
	{name: "CR in reason", data: "HTTP/1.1 200 O\rK\r\nContent-Length: 2\r\n\r\nok"},
	{name: "status line cut", data: "HTTP/1.1 200 OK"},
	{name: "head cut", data: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"},
	{name: "leading CRLF", data: "\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},

	// Malformed or unusual header lines.
	{name: "space in name", data: "HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 2\r\n\r\nok"},
	{name: "space before colon", data: "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok"},
	{name: "NUL in name", data: "HTTP/1.1 200 OK\r\nBa\x00d: x\r\nContent-Length: 2\r\n\r\nok"},
	{name: "separator in name", data: "HTTP/1.1 200 OK\r\n(comment): x\r\nContent-Length: 2\r\n\r\nok"},
	{name: "non-ASCII name", data: "HTTP/1.1 200 OK\r\nNa\xc3\xafve: x\r\nContent-Length: 2\r\n\r\nok"},
	{name: "empty name", data: "HTTP/1.1 200 OK\r\n: novalue\r\nContent-Length: 2\r\n\r\nok"},
	{name: "no colon", data: "HTTP/1.1 200 OK\r\nNoColon\r\nContent-Length: 2\r\n\r\nok"},
	{name: "NUL in value", data: "HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 2\r\n\r\nok"},
	{name: "DEL in value", data: "HTTP/1.1 200 OK\r\nX: a\x7fb\r\nContent-Length: 2\r\n\r\nok"},
	{name: "CR in value", data: "HTTP/1.1 200 OK\r\nX: a\rb\r\nContent-Length: 2\r\n\r\nok"},
	{name: "CR before CRLF", data: "HTTP/1.1 200 OK\r\nX: a\r\r\nContent-Length: 2\r\n\r\nok"},
	{name: "obs-fold", data: "HTTP/1.1 200 OK\r\nX: a\r\n  b\r\n\tc\r\nContent-Length: 2\r\n\r\nok"},
	{name: "fold first line", data: "HTTP/1.1 200 OK\r\n X: a\r\nContent-Length: 2\r\n\r\nok"},
	{name: "bare LF", data: "HTTP/1.1 200 OK\nContent-Length: 2\n\nok"},
	{name: "bare LF at end", data: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\nok"},
	{name: "bare LF inside", data: "HTTP/1.1 200 OK\r\nX: a\nContent-Length: 2\r\n\r\nok"},
	{name: "bare LF status", data: "HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\nok"},
	{name: "head larger than the buffer", data: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat(longValue, 80) + "\r\nContent-Length: 2\r\n\r\nok"},
	{name: "head just fits the buffer", lean: true, data: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Big: " + strings.Repeat("y", connBufferSize-len("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Big: \r\n\r\n")) + "\r\n\r\nok"},
	{name: "head one byte over the buffer", data: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Big: " + strings.Repeat("y", connBufferSize+1-len("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Big: \r\n\r\n")) + "\r\n\r\nok"},
}

// manyHeaders returns n distinct header lines.
func manyHeaders(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "X-Header-%d: value %d %s\r\n", i, i, longValue[:i%len(longValue)])
	}
	return b.String()
}

func TestReadResponseMatchesReadResponse(t *testing.T) {
	for _, c := range responseCases {
		t.Run(c.name, func(t *testing.T) {
			method := c.method
			if method == "" {
				method = http.MethodGet
			}
			if lean := leanParse([]byte(c.data), c.sizes, method); lean != c.lean {
				t.Errorf("parsed in place: %v, want %v", lean, c.lean)
			}
			// The case as given, then with the bytes arriving in other pieces, and with the
			// connection failing instead of ending after them.
			for _, sizes := range [][]int{c.sizes, {1}, {7}, {len(c.data) - 1, 1}} {
				for _, end := range []error{nil, errReset} {
					for _, closeEarly := range []bool{false, true} {
						checkSameResponse(t, []byte(c.data), sizes, end, method, closeEarly)
					}
				}
			}
		})
	}
}

// FuzzResponseHead holds readFinalResponse to referenceFinalResponse on arbitrary bytes. first
// is the size of the first read from the connection (all the bytes when 0), then reads are
// of 1 + first%13 bytes; reset fails the connection after data instead of ending it;
// closeEarly closes the body after one Read; crlf turns every bare LF of data into CRLF
// first, which steers the fuzzer towards heads parsed in place.
func FuzzResponseHead(f *testing.F) {
	for _, c := range responseCases {
		if len(c.data) <= 2*connBufferSize { // larger inputs slow the fuzzer down to a crawl
			f.Add([]byte(c.data), uint16(0), c.method == "HEAD", false, false, false)
		}
	}
	for _, seed := range fuzzSeeds {
		f.Add([]byte(seed), uint16(0), false, false, false, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, first uint16, head, reset, closeEarly, crlf bool) {
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		var sizes []int
		if first > 0 {
			sizes = []int{int(first), 1 + int(first%13)}
		}
		if crlf {
			data = bareLFToCRLF(data)
		}
		var end error
		if reset {
			end = errReset
		}
		checkSameResponse(t, data, sizes, end, method, closeEarly)
	})
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// joinReads folds an outcome's body reads into the bytes read and the last error, which do
// not depend on how the bytes arrived, and clears them from the outcome.
func joinReads(o *responseOutcome) (body, lastErr string) {
	var b strings.Builder
	for _, r := range o.Reads {
		b.WriteString(r.Data)
		lastErr = r.Err
	}
	o.Reads = nil
	return b.String(), lastErr
}

// FuzzResponseHeadLimit holds the response head limit to its promise on arbitrary bytes. With
// the connection limited to limit bytes as exchange limits it (from before the first Peek
// until the final head is read), readFinalResponse never takes more than limit bytes from it;
// when the heads, 1xx responses included, end within limit bytes it gives exactly what the
// unlimited reference gives, body and trailer included; when they do not, it fails with the
// limit spent. limit is where the reference's heads end (or where it failed) plus slack.
func FuzzResponseHeadLimit(f *testing.F) {
	for _, c := range responseCases {
		if len(c.data) <= 2*connBufferSize {
			for _, slack := range []int16{-1, 0, 1, -100} {
				f.Add([]byte(c.data), uint16(0), slack, false)
			}
		}
	}
	f.Add([]byte("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), uint16(5), int16(-3), false)
	f.Add([]byte("HTTP/1.1 100 Continue\n\nHTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n2\nok\n0\nX-T: 1\n\n"), uint16(0), int16(0), true)
	for _, seed := range fuzzSeeds {
		f.Add([]byte(seed), uint16(0), int16(0), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, first uint16, slack int16, crlf bool) {
		if crlf {
			data = bareLFToCRLF(data)
		}
		var sizes []int
		if first > 0 {
			sizes = []int{int(first), 1 + int(first%13)}
		}
		const method = http.MethodGet
		counted := &countingReader{r: &piecewiseReader{data: data, sizes: sizes}}
		br := bufio.NewReaderSize(counted, connBufferSize)
		_, _ = br.Peek(1)
		_, refErr := referenceFinalResponse(br, &http.Request{Method: method})
		headEnd := counted.n - int64(br.Buffered())
		limit := max(1, headEnd+int64(slack))

		lim := &headLimit{r: &piecewiseReader{data: data, sizes: sizes}, n: limit}
		var taken int64
		spent := false
		got := observe(lim, method, false, func(br *bufio.Reader, req *http.Request) (*http.Response, error) {
			res, err := readFinalResponse(br, req)
			taken, spent = limit-lim.n, lim.n <= 0
			lim.n = unlimited
			return res, err
		})
		want := observe(&piecewiseReader{data: data, sizes: sizes}, method, false, referenceFinalResponse)
		if taken > limit {
			t.Fatalf("took %d bytes from the connection, over the limit of %d", taken, limit)
		}
		switch {
		case refErr != nil:
			if got.Err == "" {
				t.Fatalf("limit %d: succeeded where the reference failed (%v) on %q", limit, refErr, data)
			}
		case headEnd <= limit:
			gotBody, gotErr := joinReads(&got)
			wantBody, wantErr := joinReads(&want)
			if !reflect.DeepEqual(got, want) || gotBody != wantBody || gotErr != wantErr {
				t.Fatalf("heads end at %d, limit %d, on %q:\ngot  %+v body %q (%s)\nwant %+v body %q (%s)", headEnd, limit, data, got, gotBody, gotErr, want, wantBody, wantErr)
			}
		default:
			if got.Err == "" || !spent {
				t.Fatalf("heads end at %d, over the limit of %d, yet: %+v (limit spent: %v) on %q", headEnd, limit, got, spent, data)
			}
		}
	})
}

// bareLFToCRLF returns data with a CR added before every LF that lacks one.
func bareLFToCRLF(data []byte) []byte {
	out := make([]byte, 0, len(data)+len(data)/8)
	for i, c := range data {
		if c == '\n' && (i == 0 || data[i-1] != '\r') {
			out = append(out, '\r')
		}
		out = append(out, c)
	}
	return out
}

// fuzzSeeds are inputs the fuzzer found interesting, kept as seeds (with crlf set).
var fuzzSeeds = []string{
	"HTTP/1.0 200 \n0AAAAAA:\n0AAAA:\n0A:\n0AA:\n:\n\n",
	"HTTP/1.1 200 \nTrAnsfer-EnCoding:chunked\n\n7\n0000000\n0\n\n",
	"HTTP/1.1 200 \ntrAnsfer-enCoding: Chunked \n\n6\n000000\n0\n\n",
	"HTTP/1.0 200\nContent-length:2\n\n0",
	"HTTP/1.0  0\n\n",
	"HTTP/1.1 100 \n\nHTTP/1.1 000 \n\n",
	"HTTP/1.1 200 00\nContent-Length:07\n\n0000",
	"HTTP/1.1 200 \nTransfer-Encoding: chunked\n\n2\n00\n0\n000000000:0000\n\n",
	"HTTP/1.0 200 \na0Aa:\x00\x02\x00\x00\n\n",
	"HTTP/1.1 200 \nSet-Cookie:\nX-A:\nSet-Cookie:\n0:\nX-A:\nSet-Cookie:\nX-A:\nContent-Length: 1\n\n0",
	"HTTP/1.0 200 \n0:\nA:  0\nB: 0\nC:   0  \nX:\nY:   \nZ:  0\nAAAAA:   0   \n\n",
	"HTTP/1.1 200 00\nTrAnsfer-EnCoding: chunked\n\nA\n0000000000\n0A\n0000000000\n0\n0",
	"HTTP/1.1 200 \nTrAnsfer-EnCoding:chunked\n\n0\n00000",
	"HTTP/1.1 000\nTrAnsfer-EnCoding:Chunked\n\n700\n000\n0\n00000000\n00",
	"HTTP/0.0 100\n\nHTTP/0.0 000\n\n",
}

// BenchmarkReadResponse compares readResponse with http.ReadResponse on typical upstream
// answers held in memory, head and body, without the network's noise.
func BenchmarkReadResponse(b *testing.B) {
	answers := []struct{ name, data string }{
		{"json", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Sat, 22 Nov 2025 10:00:00 GMT\r\nContent-Length: 2\r\n\r\n{}"},
		{"sse", "HTTP/1.1 200 OK\r\nCache-Control: no-cache\r\nConnection: keep-alive\r\nContent-Type: text/event-stream\r\nDate: Sat, 22 Nov 2025 10:00:00 GMT\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"},
		{"lowercase", "HTTP/1.1 200 OK\r\ndate: Sat, 22 Nov 2025 10:00:00 GMT\r\nserver: uvicorn\r\ncontent-length: 2\r\ncontent-type: application/json\r\nx-request-id: 4f1c\r\n\r\n{}"},
	}
	readers := []struct {
		name string
		read func(*bufio.Reader, *http.Request) (*http.Response, error)
	}{{"readResponse", readResponse}, {"http.ReadResponse", http.ReadResponse}}
	for _, a := range answers {
		for _, r := range readers {
			b.Run(a.name+"/"+r.name, func(b *testing.B) {
				data := []byte(a.data)
				src := bytes.NewReader(data)
				br := bufio.NewReaderSize(src, connBufferSize)
				req := &http.Request{Method: http.MethodPost}
				buf := make([]byte, 512)
				b.ReportAllocs()
				for b.Loop() {
					src.Reset(data)
					br.Reset(src)
					_, _ = br.Peek(1)
					res, err := r.read(br, req)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(res.Body, buf[:2]); err != nil {
						b.Fatal(err)
					}
					if n, err := res.Body.Read(buf); n != 0 || err != io.EOF {
						b.Fatalf("after the body: %d, %v", n, err)
					}
				}
			})
		}
	}
}
