package bench

import (
	"bytes"
	"io"
	"net/http"
	"strings"

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
		body, err := io.ReadAll(r.Body)
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
		buf := make([]byte, 32<<10)
		for {
			n, err := res.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
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
