package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
)

// BenchmarkUnsampledRequest measures what a request the sampler leaves out pays while tracing
// is on: its SERVER span begun and ended, and the traceparent written for its upstream. The
// exporter is never reached (nothing is sampled).
func BenchmarkUnsampledRequest(b *testing.B) {
	s, err := Resolve(config.Telemetry{Endpoint: "http://127.0.0.1:9", Sampler: "parentbased_traceidratio", SamplerArg: "0"}, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	tr, err := Start(context.Background(), s, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()
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
