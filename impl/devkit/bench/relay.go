package bench

import (
	"bytes"
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
		bufs := relayBuffers.Get().(*relayBuffer)
		defer relayBuffers.Put(bufs)
		bufs.req.Reset()
		if _, err := bufs.req.ReadFrom(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(bufs.req.Bytes()))
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
		chunk := bufs.chunk[:]
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

// relayBuffer holds a request's body and the chunks of its answer on their way through.
type relayBuffer struct {
	req   bytes.Buffer
	chunk [16 << 10]byte
}

// relayBuffers recycles the relay's buffers.
var relayBuffers = sync.Pool{New: func() any { return new(relayBuffer) }}
