package telemetry

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkUnsampledRequest measures what a request the sampler leaves out pays while tracing
// is on: its SERVER span begun and ended, and the traceparent written for its upstream. The
// exporter is never reached (nothing is sampled).
func BenchmarkUnsampledRequest(b *testing.B) {
	startNeverSampling(b)
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	b.ReportAllocs()
	for b.Loop() {
		ctx, span := StartServer(r)
		if span.IsRecording() {
			b.Fatal("sampled")
		}
		h := http.Header{}
		Inject(ctx, h)
		EndServer(span, "POST", "/v1/chat/completions", 200)
	}
}
