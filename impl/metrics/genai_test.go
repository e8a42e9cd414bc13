package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// TestGenAIMetrics: the GenAI histograms, the added time and the dropped spans are exposed
// with their labels, and a sampled trace's id rides as an exemplar in the OpenMetrics format.
// The client metrics' gen_ai_request_model is the upstream's model, the gateway's model id
// their tollgate_model; the time to first token, a server metric, names the gateway's model.
// A streamed operation's time to its first chunk is gen_ai.client.operation.time_to_first_chunk,
// a client metric (the conventions' for streams: none for an operation that did not stream).
func TestGenAIMetrics(t *testing.T) {
	m := New()
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	m.ObserveGenAI(GenAIOperation{Operation: "chat", Provider: "openai", RequestModel: "gpt-4.1", Model: "service-flint", InputTokens: 12, OutputTokens: 30,
		Duration: 40 * time.Millisecond, TimeToFirstToken: 5 * time.Millisecond, TimeToFirstChunk: 3 * time.Millisecond, TraceID: traceOf(traceID)})
	m.ObserveGenAI(GenAIOperation{Operation: "chat", Provider: "openai", RequestModel: "gpt-4.1", Model: "service-flint", Duration: time.Millisecond, ErrorType: "502"})
	m.ObserveAdded("POST /v1/chat/completions", 150*time.Microsecond, trace.TraceID{})
	m.ObserveAdded("POST /v1/chat/completions", -time.Microsecond, trace.TraceID{}) // clock skew: counted as 0
	m.TraceSpansDropped("queue_full", 3)

	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, req)
	text := w.Body.String()
	for _, want := range []string{
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4.1",gen_ai_token_type="input",tollgate_model="service-flint"} 12`,
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4.1",gen_ai_token_type="output",tollgate_model="service-flint"} 30`,
		`gen_ai_client_operation_duration_seconds_count{error_type="502",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4.1",tollgate_model="service-flint"} 1`,
		`gen_ai_server_time_to_first_token_seconds_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="service-flint"} 1`,
		`gen_ai_client_operation_time_to_first_chunk_seconds_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4.1",tollgate_model="service-flint"} 1`,
		`gen_ai_client_operation_time_to_first_chunk_seconds_sum{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4.1",tollgate_model="service-flint"} 0.003`,
		`tollgate_added_seconds_count{route="POST /v1/chat/completions"} 2`,
		`tollgate_trace_spans_dropped_total{reason="queue_full"} 3`,
		`# {trace_id="` + traceID + `"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the exposition lacks %s", want)
		}
	}
	// The failed operation's tokens are not observed (it reported none).
	if strings.Contains(text, `gen_ai_client_token_usage_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="gpt-4.1",gen_ai_token_type="input",tollgate_model="service-flint"} 2`) {
		t.Error("a failed operation's (absent) tokens were observed")
	}
}

// TestGenAIObservationsAllocateNothing: the per-request observations (made whether or not
// tracing is on) cost no allocation once a label set has been seen, nor do a sampled trace's
// while its buckets' exemplars are fresh.
func TestGenAIObservationsAllocateNothing(t *testing.T) {
	m := New()
	op := GenAIOperation{Operation: "chat", Provider: "openai", RequestModel: "gpt-4.1", Model: "service-flint", InputTokens: 1, OutputTokens: 2,
		Duration: time.Millisecond, TimeToFirstToken: time.Millisecond, TimeToFirstChunk: time.Millisecond}
	m.ObserveGenAI(op)
	m.ObserveAdded("POST /v1/chat/completions", time.Millisecond, trace.TraceID{})
	if n := testing.AllocsPerRun(100, func() { m.ObserveGenAI(op) }); n != 0 {
		t.Errorf("ObserveGenAI: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { m.ObserveAdded("POST /v1/chat/completions", time.Millisecond, trace.TraceID{}) }); n != 0 {
		t.Errorf("ObserveAdded: %v allocations", n)
	}
	// A sampled request's observation allocates nothing either once its bucket has an
	// exemplar less than a second old.
	op.TraceID = traceOf("4bf92f3577b34da6a3ce929d0e0e4736")
	m.ObserveGenAI(op)
	m.ObserveAdded("POST /v1/chat/completions", time.Millisecond, op.TraceID)
	if n := testing.AllocsPerRun(100, func() { m.ObserveGenAI(op) }); n != 0 {
		t.Errorf("ObserveGenAI of a sampled trace: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { m.ObserveAdded("POST /v1/chat/completions", time.Millisecond, op.TraceID) }); n != 0 {
		t.Errorf("ObserveAdded of a sampled trace: %v allocations", n)
	}
}

// TestExemplarsOncePerBucketPerSecond: a histogram bucket takes a sampled trace's id as its
// exemplar at most once a second (Prometheus keeps only the last one per bucket and scrapes
// far less often), and a bucket's first exemplar is always taken, whatever the other buckets
// took: the trace of a rare slow request is not crowded out by the common ones.
func TestExemplarsOncePerBucketPerSecond(t *testing.T) {
	now := time.Date(2026, 12, 3, 5, 0, 0, 0, time.UTC)
	exemplarClock = func() time.Time { return now }
	defer func() { exemplarClock = time.Now }()
	m := New()
	const route = "POST /v1/chat/completions"
	names := map[string]string{} // trace id -> name
	for _, n := range []string{"a", "b", "slow", "c", "d", "inf"} {
		names[traceNamed(n).String()] = n
	}
	exemplars := func() string {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
		w := httptest.NewRecorder()
		m.Handler().ServeHTTP(w, req)
		var out []string
		for _, line := range strings.Split(w.Body.String(), "\n") {
			if strings.HasPrefix(line, "tollgate_added_seconds_bucket") {
				if _, ex, ok := strings.Cut(line, `# {trace_id="`); ok {
					le := line[strings.Index(line, `le="`)+4:]
					out = append(out, le[:strings.Index(le, `"`)]+"="+names[ex[:strings.Index(ex, `"`)]])
				}
			}
		}
		return strings.Join(out, " ")
	}
	m.ObserveAdded(route, 150*time.Microsecond, traceNamed("a"))
	m.ObserveAdded(route, 160*time.Microsecond, traceNamed("b")) // the same bucket, at once: a stays
	m.ObserveAdded(route, 300*time.Millisecond, traceNamed("slow"))
	if got, want := exemplars(), "0.00025=a 0.5=slow"; got != want {
		t.Errorf("exemplars %q, want %q", got, want)
	}
	now = now.Add(999 * time.Millisecond)
	m.ObserveAdded(route, 170*time.Microsecond, traceNamed("c"))
	if got, want := exemplars(), "0.00025=a 0.5=slow"; got != want {
		t.Errorf("within the second: exemplars %q, want %q", got, want)
	}
	now = now.Add(time.Millisecond)
	m.ObserveAdded(route, 180*time.Microsecond, traceNamed("d"))
	m.ObserveAdded(route, 2*time.Second, traceNamed("inf")) // above the last bound: the +Inf bucket
	if got, want := exemplars(), "0.00025=d 0.5=slow +Inf=inf"; got != want {
		t.Errorf("a second later: exemplars %q, want %q", got, want)
	}
}

// traceOf is the trace id of 32 hex digits.
func traceOf(hex string) trace.TraceID {
	id, err := trace.TraceIDFromHex(hex)
	if err != nil {
		panic(err)
	}
	return id
}

// traceNamed is a trace id made of name's bytes, for a test that names its traces.
func traceNamed(name string) trace.TraceID {
	var id trace.TraceID
	copy(id[:], name)
	return id
}
