package upstreamconn

import (
	"bufio"
	"encoding/hex"
	"net/http"

	"go.opentelemetry.io/otel/trace"
)

// writeTraceContext writes the W3C traceparent of the request's span, so that the upstream
// continues the gateway's trace, unless the request carries its own. The tracestate is not
// written: it holds what the caller's tracing vendors put there for the caller's own systems,
// and the provider is a third party called with the gateway's credentials (the rule of
// telemetry.Inject). Without a span (tracing off) it writes nothing and allocates nothing;
// with one, the header is formatted in the write buffer.
func writeTraceContext(w *bufio.Writer, req *http.Request) {
	sc := trace.SpanContextFromContext(req.Context())
	if !sc.IsValid() {
		return
	}
	if _, ok := req.Header["Traceparent"]; ok {
		return
	}
	b := traceparent(sc)
	_, _ = w.WriteString("Traceparent: ")
	_, _ = w.Write(b[:])
	_, _ = w.WriteString("\r\n")
}

// traceparent is sc as a W3C traceparent value: 00-<trace id>-<span id>-<flags>.
func traceparent(sc trace.SpanContext) [55]byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	var b [55]byte
	copy(b[:3], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return b
}

// withTraceContext is req with the traceparent of its span added to a copy of its headers,
// for a transport that does not write it itself; req itself when it has no span or carries
// a traceparent already.
func withTraceContext(req *http.Request) *http.Request {
	sc := trace.SpanContextFromContext(req.Context())
	if !sc.IsValid() {
		return req
	}
	if _, ok := req.Header["Traceparent"]; ok {
		return req
	}
	b := traceparent(sc)
	r := new(http.Request)
	*r = *req
	r.Header = req.Header.Clone()
	if r.Header == nil {
		r.Header = make(http.Header, 1)
	}
	r.Header["Traceparent"] = []string{string(b[:])}
	return r
}
