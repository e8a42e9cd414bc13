package upstreamconn

import (
	"bufio"
	"encoding/hex"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// writeTraceContext writes the W3C trace context of the request's span (traceparent, and
// tracestate when it has one), so that the upstream continues the gateway's trace, unless the
// request carries its own. Without a span (tracing off) it writes nothing and allocates
// nothing; with one, the header is formatted in the write buffer.
func writeTraceContext(w *bufio.Writer, req *http.Request) {
	sc := trace.SpanContextFromContext(req.Context())
	if !sc.IsValid() {
		return
	}
	if _, ok := req.Header["Traceparent"]; ok {
		return
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	var b [55]byte // 00-<32 hex>-<16 hex>-<2 hex>
	copy(b[:3], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	_, _ = w.WriteString("Traceparent: ")
	_, _ = w.Write(b[:])
	_, _ = w.WriteString("\r\n")
	if ts := sc.TraceState().String(); ts != "" {
		_, _ = w.WriteString("Tracestate: ")
		_, _ = w.WriteString(ts)
		_, _ = w.WriteString("\r\n")
	}
}

// noteTry adds an "upstream.try" event to the request's span when it is recording: the
// answer's status, or the failure's kind. An attempt's retries (impl/provider tries an
// upstream up to three times) are then visible on its span one by one.
func noteTry(req *http.Request, res *http.Response, err error) {
	span := trace.SpanFromContext(req.Context())
	if !span.IsRecording() {
		return
	}
	if err != nil {
		kind := "connection"
		if req.Context().Err() != nil {
			kind = "canceled"
		}
		span.AddEvent("upstream.try", trace.WithAttributes(attribute.String("error.type", kind)))
		return
	}
	span.AddEvent("upstream.try", trace.WithAttributes(attribute.Int("http.response.status_code", res.StatusCode)))
}
