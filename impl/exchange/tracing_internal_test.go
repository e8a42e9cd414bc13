package exchange

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/metrics"
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
		for _, kv := range o.startAttributes() {
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

// samplerSeen is a sampler that notes the name and attributes of every span it is asked about
// and samples none.
type samplerSeen struct {
	mu    sync.Mutex
	names []string
	attrs []map[attribute.Key]attribute.Value
}

func (s *samplerSeen) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range p.Attributes {
		m[kv.Key] = kv.Value
	}
	s.mu.Lock()
	s.names, s.attrs = append(s.names, p.Name), append(s.attrs, m)
	s.mu.Unlock()
	return sdktrace.SamplingResult{Decision: sdktrace.Drop}
}

func (s *samplerSeen) Description() string { return "samplerSeen" }

// TestTryStartAttributesReachTheSampler: a try's span is started with the attributes the GenAI
// conventions ask to be provided at an inference span's creation, since samplers may read
// them (gen_ai.operation.name, gen_ai.provider.name, gen_ai.request.model, server.address,
// server.port); they were set only when the try ended, which no sampler sees. They are not set
// again at its end.
func TestTryStartAttributesReachTheSampler(t *testing.T) {
	seen := &samplerSeen{}
	tr, err := telemetry.Start(context.Background(), telemetry.Settings{Enabled: true, Sampler: seen, EndpointURL: "http://127.0.0.1:9/v1/traces",
		QueueSize: 8, BatchSize: 8, BatchTimeout: time.Second, ExportTimeout: time.Second}, telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	x := &Exchange{model: &routing.Model{ID: "service-flint"}, tr: &exchangeTrace{}}
	o := x.observeTries(routing.Expert{Key: "bedrock/m", Provider: "bedrock", Model: "m", Kind: llm.FormatChat,
		GenAIProvider: "aws.bedrock", Host: "bedrock-runtime.us-east-1.amazonaws.com", Port: 443}, 16)
	o.StartTry(context.Background(), 1)
	if len(seen.names) != 1 || seen.names[0] != "chat m" {
		t.Fatalf("the sampler saw spans %v, want chat m", seen.names)
	}
	want := map[attribute.Key]attribute.Value{
		telemetry.GenAIOperationName: attribute.StringValue("chat"), telemetry.GenAIProviderName: attribute.StringValue("aws.bedrock"),
		telemetry.GenAIRequestModel: attribute.StringValue("m"), telemetry.ServerAddress: attribute.StringValue("bedrock-runtime.us-east-1.amazonaws.com"),
		telemetry.ServerPort: attribute.IntValue(443),
	}
	for k, v := range want {
		if got := seen.attrs[0][k]; got != v {
			t.Errorf("the sampler saw %s = %v, want %v", k, got.Emit(), v.Emit())
		}
	}
	for _, kv := range o.tryAttributes(nil) {
		if _, ok := want[kv.Key]; ok {
			t.Errorf("%s is set again when the try ends", kv.Key)
		}
	}
}

// TestStreamedTryTimeToFirstChunk: a streamed request's answering try says so
// (gen_ai.request.stream, which the conventions require of a streamed inference span, and only
// of one) and carries gen_ai.response.time_to_first_chunk, from the try's start to its first
// chunk, not from the request's; the same time is the try's observation in
// gen_ai.client.operation.time_to_first_chunk. A complete answer has neither.
func TestStreamedTryTimeToFirstChunk(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	m := metrics.New()
	for _, stream := range []bool{true, false} {
		_, span := tp.Tracer("test").Start(context.Background(), "chat sim-general")
		started := time.Now().Add(-time.Second)
		x := &Exchange{eng: &Engine{metrics: m}, model: &routing.Model{ID: "service-flint-base"}, stream: stream,
			expert:  routing.Expert{Key: "p/sim-general", Provider: "p", Model: "sim-general", Kind: llm.FormatChat},
			started: started, attemptStart: started.Add(400 * time.Millisecond),
			tr: &exchangeTrace{attempt: span, responseID: "chatcmpl-1", finishReason: "stop"}}
		if stream {
			x.ttft = 500 * time.Millisecond
		}
		x.tries = tryObserver{x: x, e: x.expert, n: 1, bound: 16}
		x.finishAttempt("ok")
		ended := rec.Ended()
		a := map[attribute.Key]attribute.Value{}
		for _, kv := range ended[len(ended)-1].Attributes() {
			a[kv.Key] = kv.Value
		}
		if !stream {
			if _, ok := a[attribute.Key("gen_ai.request.stream")]; ok {
				t.Errorf("a complete answer's try has gen_ai.request.stream")
			}
			if _, ok := a[attribute.Key("gen_ai.response.time_to_first_chunk")]; ok {
				t.Errorf("a complete answer's try has gen_ai.response.time_to_first_chunk")
			}
			continue
		}
		if v, ok := a[attribute.Key("gen_ai.request.stream")]; !ok || !v.AsBool() {
			t.Errorf("a stream's try: gen_ai.request.stream %v, want true", v.Emit())
		}
		if v := a[attribute.Key("gen_ai.response.time_to_first_chunk")].AsFloat64(); v < 0.0999 || v > 0.1001 {
			t.Errorf("a stream's try: gen_ai.response.time_to_first_chunk %v, want 0.1 (from the try's start)", v)
		}
	}
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	const want = `gen_ai_client_operation_time_to_first_chunk_seconds_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="sim-general",tollgate_model="service-flint-base"} 1`
	if !strings.Contains(w.Body.String(), want) {
		t.Errorf("the metrics lack %s", want)
	}
}

// TestTryOutputTypeAndSeed: a try's span has gen_ai.output.type when its request names an
// output format (json for a JSON object or schema, text for text) and gen_ai.request.seed when
// it includes a seed, both of which the conventions require in those cases, and neither
// otherwise; an in-process call (no view) names its format in its neutral request.
func TestTryOutputTypeAndSeed(t *testing.T) {
	for _, c := range []struct {
		format     llm.Format
		body       string
		ir         *llm.Request
		outputType string
		seed       string
	}{
		{llm.FormatChat, `{"model":"m","messages":[],"response_format":{"type":"json_object"},"seed":42}`, nil, "json", "42"},
		{llm.FormatChat, `{"model":"m","messages":[],"response_format":{"type":"text"}}`, nil, "text", ""},
		{llm.FormatChat, `{"model":"m","messages":[]}`, nil, "", ""},
		{llm.FormatResponses, `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":{}}}}`, nil, "json", ""},
		{llm.FormatResponses, `{"model":"m","input":"hi","text":{"verbosity":"low"}}`, nil, "", ""},
		{llm.FormatMessages, `{"model":"m","max_tokens":8,"messages":[],"output_format":{"type":"json_schema","schema":{}}}`, nil, "json", ""},
		{llm.FormatMessages, `{"model":"m","max_tokens":8,"messages":[],"output_config":{"format":{"type":"json_schema","schema":{}}}}`, nil, "json", ""},
		{llm.FormatMessages, `{"model":"m","max_tokens":8,"messages":[]}`, nil, "", ""},
		{llm.FormatChat, "", &llm.Request{ResponseFormat: &llm.ResponseFormat{Type: "json_schema"}}, "json", ""},
		{llm.FormatChat, "", &llm.Request{}, "", ""},
	} {
		x := &Exchange{model: &routing.Model{ID: "service-flint"}, client: c.format, ir: c.ir}
		if c.body != "" {
			x.view = &jsonview.View{}
			if err := x.view.Parse([]byte(c.body)); err != nil {
				t.Fatal(err)
			}
		}
		o := tryObserver{x: x, e: routing.Expert{Key: "p/m", Provider: "p", Model: "m", Kind: c.format}, n: 1, bound: 16}
		got := map[attribute.Key]string{}
		for _, kv := range o.tryAttributes(nil) {
			got[kv.Key] = kv.Value.Emit()
		}
		if got["gen_ai.output.type"] != c.outputType || got["gen_ai.request.seed"] != c.seed {
			t.Errorf("%s %s: gen_ai.output.type %q, gen_ai.request.seed %q, want %q and %q",
				c.format, c.body, got["gen_ai.output.type"], got["gen_ai.request.seed"], c.outputType, c.seed)
		}
	}
}
