package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/tollgate/tollgate/impl/telemetry/otlp"
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
		EndServer(span, ServerEnd{Method: "POST", Path: "/v1/chat/completions", Route: "/v1/chat/completions", Status: 200})
	}
}

// discard is a span processor that keeps nothing: what the SDK costs without an exporter.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

// BenchmarkSampledRequestSpans measures what the SDK costs a sampled request for its five
// spans (server, authentication, admission, upstream attempt, settlement) and their
// attributes, the export left out.
func BenchmarkSampledRequestSpans(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(discard{}))
	tracer := tp.Tracer(instrumentation)
	b.ReportAllocs()
	for b.Loop() {
		makeRequestSpans(tracer)
	}
}

// recordedRequestSpans returns the ended spans of n traced requests.
func recordedRequestSpans(n int) []sdktrace.ReadOnlySpan {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("tollgate"))))
	tracer := tp.Tracer(instrumentation)
	for range n {
		makeRequestSpans(tracer)
	}
	return rec.Ended()
}

// BenchmarkExportBatch measures exporting one full batch (510 spans: 102 requests') over
// OTLP/HTTP to a local server that discards it, per span: with the OpenTelemetry library's
// exporter, and with impl/telemetry/otlp's that the gateway uses.
func BenchmarkExportBatch(b *testing.B) {
	spans := recordedRequestSpans(DefaultBatchSize / 5)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(srv.Close)
	library, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	for _, x := range []struct {
		name string
		exp  sdktrace.SpanExporter
	}{{"library", library}, {"tollgate", otlp.NewHTTPExporter(otlp.HTTPOptions{URL: srv.URL + "/v1/traces"})}} {
		b.Run(x.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := x.exp.ExportSpans(context.Background(), spans); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
		})
	}
}

// BenchmarkEncodeBatch measures encoding one full batch as OTLP protobuf, the post left out.
func BenchmarkEncodeBatch(b *testing.B) {
	spans := recordedRequestSpans(DefaultBatchSize / 5)
	var enc otlp.Encoder
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = enc.Append(buf[:0], spans)
	}
	b.ReportMetric(float64(len(buf))/float64(len(spans)), "bytes/span")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
}
