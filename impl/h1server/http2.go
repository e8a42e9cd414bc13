package h1server

import (
	"bufio"
	"encoding/binary"
	"net/http"
	"time"
)

// HTTP2Refusal is the sentence that refuses HTTP/2 with prior knowledge (h2c without an
// upgrade): the debug data of the GOAWAY frame that answers it, and the reason the Server's
// RefusedHead is told of that refusal (whose kind, RefusedHTTP2, tells it from the others).
const HTTP2Refusal = "HTTP/2 without TLS is not served here; use HTTP/1.1 (or TLS with ALPN h2 at your front)"

// http2Settings is the server's connection preface (RFC 9113 section 3.4): an empty SETTINGS
// frame.
var http2Settings = http2Frame(nil, 0x4, nil)

// http2GoAway is a GOAWAY frame that processed no stream (last stream id 0), with the error code
// HTTP_1_1_REQUIRED (0xd, RFC 9113 section 7) and HTTP2Refusal as its debug data, so that an
// HTTP/2 client reads a refusal it understands and a person reading the bytes reads the
// sentence.
var http2GoAway = http2Frame(nil, 0x7, append(binary.BigEndian.AppendUint64(nil, 0xd), HTTP2Refusal...))

// http2Frame appends to b the frame of type typ, with no flags on stream 0, carrying payload.
func http2Frame(b []byte, typ byte, payload []byte) []byte {
	b = append(b, byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload)), typ, 0, 0, 0, 0, 0)
	return append(b, payload...)
}

// isHTTP2Preface reports whether r is the request line of the HTTP/2 connection preface ("PRI *
// HTTP/2.0"), which net/http passes to the handler.
func isHTTP2Preface(r *http.Request) bool {
	return r.Method == "PRI" && r.ProtoMajor == 2 && r.RequestURI == "*"
}

// refuseHTTP2 answers an HTTP/2 connection preface and closes the connection: it sends the
// server's preface at once, reads the client's frames until its first request (HEADERS) for
// at most http2RefusalWait, then sends http2GoAway, half-closes and reads what else comes for
// up to rstAvoidanceDelay, so that the frames are not lost to a reset. Waiting for the request
// lets the client refuse that request with the GOAWAY's code (golang.org/x/net/http2: "received
// GOAWAY from server ErrCode:HTTP_1_1_REQUIRED") rather than find its connection closed before
// it could send it ("client conn could not be established"). Without a hijackable connection
// it answers 505 with the sentence.
func refuseHTTP2(w http.ResponseWriter) {
	c, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		w.Header().Set("Connection", "close")
		http.Error(w, HTTP2Refusal, http.StatusHTTPVersionNotSupported)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(http2RefusalWait))
	if _, err := c.Write(http2Settings); err != nil {
		return
	}
	awaitHTTP2Request(rw.Reader)
	_ = c.SetDeadline(time.Now().Add(rstAvoidanceDelay))
	if _, err := c.Write(http2GoAway); err != nil {
		return
	}
	lingerAfterAnswer(c)
}

// http2RefusalWait bounds how long refuseHTTP2 waits for the client's first request.
const http2RefusalWait = time.Second

// awaitHTTP2Request reads the rest of the client's preface ("SM\r\n\r\n") and its frames up to
// its first HEADERS frame, the read deadline, anything that is not HTTP/2, or 64 KiB.
func awaitHTTP2Request(r *bufio.Reader) {
	const headers = 0x1
	if rest, err := r.Peek(6); err != nil || string(rest) != "SM\r\n\r\n" {
		return
	}
	_, _ = r.Discard(6)
	for budget := 64 << 10; budget > 0; {
		h, err := r.Peek(9)
		if err != nil || h[3] == headers {
			return
		}
		n := 9 + (int(h[0])<<16 | int(h[1])<<8 | int(h[2]))
		if _, err := r.Discard(n); err != nil {
			return
		}
		budget -= n
	}
}
