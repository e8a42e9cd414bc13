package h1server

import (
	"encoding/binary"
	"io"
	"net/http"
	"time"
)

// http2Refusal is the sentence that refuses HTTP/2 with prior knowledge (h2c without an
// upgrade): the debug data of the GOAWAY frame that answers it.
const http2Refusal = "HTTP/2 without TLS is not served here; use HTTP/1.1 (or TLS with ALPN h2 at your front)"

// http2Frames is the whole answer to an HTTP/2 connection preface (RFC 9113 section 3.4): the
// server's preface, an empty SETTINGS frame, then a GOAWAY frame that processed no stream (last
// stream id 0) with the error code HTTP_1_1_REQUIRED (0xd, section 7) and http2Refusal as its
// debug data, so that an HTTP/2 client reads a refusal it understands and a person reading the
// bytes reads the sentence.
var http2Frames = func() []byte {
	frame := func(b []byte, typ byte, payload []byte) []byte {
		b = append(b, byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload)), typ, 0, 0, 0, 0, 0)
		return append(b, payload...)
	}
	const settings, goAway, http11Required = 0x4, 0x7, 0xd
	payload := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 0), http11Required)
	return frame(frame(nil, settings, nil), goAway, append(payload, http2Refusal...))
}()

// isHTTP2Preface reports whether r is the request line of the HTTP/2 connection preface ("PRI *
// HTTP/2.0"), which net/http passes to the handler.
func isHTTP2Preface(r *http.Request) bool {
	return r.Method == "PRI" && r.ProtoMajor == 2 && r.RequestURI == "*"
}

// refuseHTTP2 answers an HTTP/2 connection preface with http2Frames and closes the connection,
// after reading what the client sent meanwhile (the rest of the preface, its SETTINGS, its first
// request) for up to rstAvoidanceDelay, so that the frames are not lost to a reset. Without a
// hijackable connection it answers 505 with the sentence.
func refuseHTTP2(w http.ResponseWriter) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		w.Header().Set("Connection", "close")
		http.Error(w, http2Refusal, http.StatusHTTPVersionNotSupported)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(rstAvoidanceDelay))
	if _, err := c.Write(http2Frames); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}
