package telemetry

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
)

// startNeverSampling turns tracing on with a parent-based sampler that samples no new trace,
// for the length of the test.
func startNeverSampling(t testing.TB) {
	s, err := Resolve(config.Telemetry{Endpoint: "http://127.0.0.1:9", Sampler: "parentbased_traceidratio", SamplerArg: "0"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Start(context.Background(), s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
}

// TestStartServerContinuesTheCallersTrace: StartServer continues an incoming traceparent
// (sampled or not, as the caller decided) and starts a new trace without one; a span that
// records carries the request's method and path.
func TestStartServerContinuesTheCallersTrace(t *testing.T) {
	startNeverSampling(t)
	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"

	r := httptest.NewRequest("POST", "/v1/messages", nil)
	r.Header.Set("traceparent", "00-"+callerTrace+"-00f067aa0ba902b7-01")
	ctx, span := StartServer(r)
	if TraceID(ctx) != callerTrace || !span.IsRecording() {
		t.Errorf("a sampled caller's trace: got trace %q recording %v, want %s recording", TraceID(ctx), span.IsRecording(), callerTrace)
	}
	EndServer(span, ServerEnd{Method: "POST", Path: "/v1/messages", Route: "/v1/messages", Status: 200})

	r.Header.Set("traceparent", "00-"+callerTrace+"-00f067aa0ba902b7-00")
	ctx, span = StartServer(r)
	if TraceID(ctx) != callerTrace || span.IsRecording() {
		t.Errorf("an unsampled caller's trace: got trace %q recording %v, want %s not recording", TraceID(ctx), span.IsRecording(), callerTrace)
	}
	EndServer(span, ServerEnd{Method: "POST", Path: "/v1/messages", Route: "/v1/messages", Status: 200})

	r = httptest.NewRequest("POST", "/v1/messages", nil)
	ctx, span = StartServer(r)
	if id := TraceID(ctx); id == "" || id == callerTrace || span.IsRecording() {
		t.Errorf("no traceparent: got trace %q recording %v, want a new trace, not recording at ratio 0", id, span.IsRecording())
	}
	EndServer(span, ServerEnd{Method: "POST", Path: "/v1/messages", Route: "/v1/messages", Status: 200})
}
