package httpapi

import (
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestTraceResponseFormat: the traceresponse header is W3C's version-traceid-spanid-flags, as
// the ids' own String methods write them.
func TestTraceResponseFormat(t *testing.T) {
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled} {
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
			SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
			TraceFlags: flags,
		})
		want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
		if got := traceResponse(sc); got != want {
			t.Errorf("traceResponse = %q, want %q", got, want)
		}
	}
	if got := traceResponse(trace.SpanContext{}); got != "00-00000000000000000000000000000000-0000000000000000-00" {
		t.Errorf("the empty span context: %q", got)
	}
}
