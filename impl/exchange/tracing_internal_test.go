package exchange

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/routing"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// TestTryMaxTokensIsWhatTheUpstreamWasAsked: a try's gen_ai.request.max_tokens is the bound its
// request carried ("the maximum number of tokens the model generates for a request"): a bound
// under the Responses API's minimum is raised to it for a Responses upstream (upstreamBody), and
// the span says so; other upstreams are asked for the bound itself.
func TestTryMaxTokensIsWhatTheUpstreamWasAsked(t *testing.T) {
	for _, c := range []struct {
		kind  llm.Format
		bound int
		want  int64
	}{
		{llm.FormatResponses, 8, minResponsesOutput},
		{llm.FormatResponses, 100, 100},
		{llm.FormatChat, 8, 8},
		{llm.FormatMessages, 8, 8},
	} {
		o := tryObserver{x: &Exchange{model: &routing.Model{ID: "service-flint"}}, n: 1, bound: c.bound,
			e: routing.Expert{Key: "p/m", Provider: "p", Model: "m", Kind: c.kind}}
		var got int64 = -1
		for _, kv := range o.tryAttributes(nil) {
			if kv.Key == telemetry.GenAIRequestMaxTokens {
				got = kv.Value.AsInt64()
			}
		}
		if got != c.want {
			t.Errorf("%s, bound %d: gen_ai.request.max_tokens %d, want %d", c.kind, c.bound, got, c.want)
		}
	}
}

// TestResponseModelOnlyWhenTheUpstreamSaidIt: the answering try's gen_ai.response.model is the
// model the upstream's answer named ("the name of the model that generated the response");
// an answer that named none leaves it out instead of repeating the model asked for.
func TestResponseModelOnlyWhenTheUpstreamSaidIt(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	for _, said := range []string{"sim-general-2026-01-01", ""} {
		_, span := tp.Tracer("test").Start(context.Background(), "chat sim-general")
		x := &Exchange{eng: &Engine{}, model: &routing.Model{ID: "service-flint-base"},
			expert: routing.Expert{Key: "p/sim-general", Provider: "p", Model: "sim-general", Kind: llm.FormatChat},
			tr:     &exchangeTrace{attempt: span, responseModel: said, responseID: "chatcmpl-1", finishReason: "stop"}}
		x.tries = tryObserver{x: x, e: x.expert, n: 1, bound: 16}
		x.finishAttempt("ok")
		ended := rec.Ended()
		got, has := "", false
		for _, kv := range ended[len(ended)-1].Attributes() {
			if kv.Key == telemetry.GenAIResponseModel {
				got, has = kv.Value.AsString(), true
			}
		}
		if said != "" && got != said {
			t.Errorf("gen_ai.response.model %q, want the upstream's %q", got, said)
		}
		if said == "" && has {
			t.Errorf("gen_ai.response.model %q for an answer that named no model", got)
		}
	}
}
