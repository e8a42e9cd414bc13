package exchange

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tollgate/tollgate/impl/config"
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

// TestTryProviderIsTheProviders: a try's gen_ai.provider.name (on its span and in the GenAI
// metrics, both providerName's) is the conventions' name of the provider its base URL reaches,
// whatever API it is spoken to in (a well-known value that applies must be used): Bedrock and
// Vertex AI behind the OpenAI chat API, Azure OpenAI, DeepSeek; a provider the conventions do
// not name keeps its kind's (openai, anthropic).
func TestTryProviderIsTheProviders(t *testing.T) {
	cfg := config.Default()
	for _, c := range []struct{ name, kind, baseURL string }{
		{"bedrock", config.KindOpenAIChat, "https://bedrock-runtime.us-east-1.amazonaws.com/openai/v1"},
		{"vertex", config.KindOpenAIChat, "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/endpoints/openapi"},
		{"azure", config.KindOpenAIResponses, "https://acme.openai.azure.com/openai/v1"},
		{"deepseek", config.KindOpenAIChat, "https://api.deepseek.com/v1"},
		{"anthropic", config.KindAnthropicMessages, "https://api.anthropic.com"},
		{"own-chat", config.KindOpenAIChat, "http://10.0.0.7:8000/v1"},
		{"own-messages", config.KindAnthropicMessages, "https://llm.internal.example"},
	} {
		cfg.Providers = append(cfg.Providers, config.Provider{Name: c.name, Kind: c.kind, BaseURL: c.baseURL})
		m := cfg.Models[len(cfg.Models)-1]
		m.ID, m.Backend = "via-"+c.name, &config.Upstream{Provider: c.name, Model: "m"}
		cfg.Models = append(cfg.Models, m)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := routing.NewRegistry(cfg)
	for name, want := range map[string]string{"bedrock": "aws.bedrock", "vertex": "gcp.vertex_ai", "azure": "azure.ai.openai",
		"deepseek": "deepseek", "anthropic": "anthropic", "own-chat": "openai", "own-messages": "anthropic"} {
		m, ok := reg.Model("via-" + name)
		if !ok || len(m.Experts) != 1 {
			t.Fatalf("no model via-%s", name)
		}
		o := tryObserver{x: &Exchange{model: m}, e: m.Experts[0], n: 1, bound: 16}
		got := ""
		for _, kv := range o.tryAttributes(nil) {
			if kv.Key == telemetry.GenAIProviderName {
				got = kv.Value.AsString()
			}
		}
		if got != want {
			t.Errorf("%s: gen_ai.provider.name %q, want %q", name, got, want)
		}
	}
}

// TestReasoningTokensOnTheAttempt: the answering try's span carries
// gen_ai.usage.reasoning.output_tokens when the upstream reported reasoning tokens (a part of
// gen_ai.usage.output_tokens, as the conventions ask), and none when it reported none.
func TestReasoningTokensOnTheAttempt(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	for _, reasoning := range []int64{20, 0} {
		_, span := tp.Tracer("test").Start(context.Background(), "chat sim-reasoner")
		x := &Exchange{eng: &Engine{}, model: &routing.Model{ID: "service-flint"},
			expert: routing.Expert{Key: "p/sim-reasoner", Provider: "p", Model: "sim-reasoner", Kind: llm.FormatResponses},
			usage:  llm.Usage{InputTokens: 10, OutputTokens: 30, ReasoningTokens: reasoning},
			tr:     &exchangeTrace{attempt: span, responseModel: "sim-reasoner", finishReason: "completed"}}
		x.tries = tryObserver{x: x, e: x.expert, n: 1, bound: 64}
		x.finishAttempt("ok")
		ended := rec.Ended()
		got := int64(-1)
		for _, kv := range ended[len(ended)-1].Attributes() {
			if kv.Key == telemetry.GenAIUsageReasoning {
				got = kv.Value.AsInt64()
			}
		}
		if want := map[bool]int64{true: reasoning, false: -1}[reasoning > 0]; got != want {
			t.Errorf("reported %d reasoning tokens: gen_ai.usage.reasoning.output_tokens %d (-1: absent), want %d", reasoning, got, want)
		}
	}
}
