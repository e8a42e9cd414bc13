package upstreamconn

import (
	"net/http"
	"net/url"
)

// SchemeDispatch is an http.RoundTripper that sends http:// requests through Plain and every
// other request (https://, which needs TLS and may use HTTP/2) through Other, typically a
// configured *http.Transport. Plain speaks to the upstream directly: when Proxy names a proxy
// for a plain request (http.ProxyFromEnvironment reads HTTP_PROXY and NO_PROXY), the request
// goes through Other, which knows how to use it.
type SchemeDispatch struct {
	Plain *Transport
	Other http.RoundTripper
	Proxy func(*http.Request) (*url.URL, error)
}

// RoundTrip sends req through the transport for its URL's scheme.
func (d *SchemeDispatch) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL != nil && req.URL.Scheme == "http" && !d.proxied(req) {
		return d.Plain.RoundTrip(req)
	}
	return d.Other.RoundTrip(withTraceContext(req))
}

// WritesTraceContext reports that a request sent through d carries its span's W3C
// traceparent whichever transport takes it: Plain writes it with the head, and the requests
// for Other get it added here. impl/provider then leaves the configured headers as they are.
func (d *SchemeDispatch) WritesTraceContext() bool { return true }

func (d *SchemeDispatch) proxied(req *http.Request) bool {
	if d.Proxy == nil {
		return false
	}
	u, err := d.Proxy(req)
	return err != nil || u != nil
}

// CloseIdleConnections closes the idle connections of both transports.
func (d *SchemeDispatch) CloseIdleConnections() {
	d.Plain.CloseIdleConnections()
	if c, ok := d.Other.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
