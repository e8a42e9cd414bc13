package bench

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/tollgate/tollgate/impl/upstreamconn"
)

// Relay returns a handler that forwards every request to upstream (a base URL such as
// http://127.0.0.1:8090): the same method, path, Content-Type and body, and answers with the
// upstream's status, Content-Type and body, flushing after every read of a streamed body. It
// has the gateway's HTTP layers (served by impl/h1server, calling through impl/upstreamconn)
// and none of its work: no authentication, rate limit, validation, metering or conversion. The
// bench runs it as its own process beside the gateway, so that what a bare relay adds shows
// how much of the gateway's added latency is the second process hop itself on the machine.
func Relay(upstream string) http.Handler {
	upstream = strings.TrimSuffix(upstream, "/")
	transport := &upstreamconn.Transport{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := relayBuffers.Get().(*[]byte)
		defer relayBuffers.Put(buf)
		body, err := readAll(r.Body, (*buf)[:0])
		*buf = body[:0]
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Header["Content-Type"] = r.Header["Content-Type"]
		res, err := transport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		h := w.Header()
		h["Content-Type"] = res.Header["Content-Type"]
		if res.ContentLength >= 0 {
			h["Content-Length"] = res.Header["Content-Length"]
		}
		w.WriteHeader(res.StatusCode)
		rc := http.NewResponseController(w)
		chunk := (*buf)[:cap(*buf)]
		for {
			n, err := res.Body.Read(chunk)
			if n > 0 {
				if _, werr := w.Write(chunk[:n]); werr != nil {
					return
				}
				if res.ContentLength < 0 {
					_ = rc.Flush()
				}
			}
			if err != nil {
				return
			}
		}
	})
}

// relayBuffers recycles the relay's request and copy buffers.
var relayBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// readAll appends what r yields to dst.
func readAll(r io.Reader, dst []byte) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}
