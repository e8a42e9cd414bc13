package httpapi_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/bench"
	"github.com/tollgate/tollgate/impl/devkit/jaegertest"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/sim"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// Issue 20's request traces, read back from a real Jaeger (impl/devkit/jaegertest): the span
// tree and attributes of a JSON request, a stream, a failover and a 402; an incoming
// traceparent continued; the trace id in the traceresponse header, in the usage record, sent
// upstream and in the metrics' exemplars; prompts recorded only for an account that opted in.
// Tracing is process-wide, so these tests do not run in parallel.

// startTracing turns tracing on, to endpoint, for the rest of the test; spans are exported
// every 20 ms. capture lists the accounts whose content is recorded.
func startTracing(t *testing.T, endpoint string, m *metrics.Metrics, edit func(*telemetry.Settings), capture ...uuid.UUID) {
	t.Helper()
	s, err := telemetry.Resolve(config.Telemetry{Endpoint: endpoint}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	s.BatchTimeout = 20 * time.Millisecond
	for _, id := range capture {
		s.CaptureContent[id] = struct{}{}
	}
	if edit != nil {
		edit(&s)
	}
	tr, err := telemetry.Start(context.Background(), s, telemetry.Options{OnDrop: m.TraceSpansDropped})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
}

// upstreamRecorder serves the simulator and keeps the traceparent and tracestate of every
// request it gets.
type upstreamRecorder struct {
	mu     sync.Mutex
	parent []string
	state  []string
}

func (u *upstreamRecorder) states() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.state...)
}

func (u *upstreamRecorder) parents() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.parent...)
}

// tracedGateway starts a gateway whose providers are the simulator behind an upstreamRecorder.
func tracedGateway(t *testing.T, m *metrics.Metrics) (*apitest.Gateway, *upstreamRecorder) {
	t.Helper()
	rec := &upstreamRecorder{}
	simulator := sim.New(sim.Options{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.parent = append(rec.parent, r.Header.Get("traceparent"))
		if ts := r.Header.Get("tracestate"); ts != "" {
			rec.state = append(rec.state, ts)
		}
		rec.mu.Unlock()
		simulator.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	cfg := config.Default()
	for i, p := range cfg.Providers {
		if p.BaseURL == config.SimulatorURL {
			cfg.Providers[i].BaseURL = up.URL
			if p.Kind != config.KindAnthropicMessages {
				cfg.Providers[i].BaseURL += "/v1"
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return apitest.Start(t, apitest.Options{Config: cfg, Metrics: m, Sim: simulator}), rec
}

// tracedPost sends body to path with key (and extra headers) and returns the status, the headers
// and the whole body.
func tracedPost(t *testing.T, g *apitest.Gateway, key, path, body string, extra ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	res, err := g.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, string(b)
}

// traceOf reads the trace id and server span id from a traceresponse header.
func traceOf(t *testing.T, h http.Header) (traceID, spanID string) {
	t.Helper()
	parts := strings.Split(h.Get("traceresponse"), "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[1]) != 32 || len(parts[2]) != 16 {
		t.Fatalf("traceresponse %q, want 00-<trace id>-<span id>-<flags>", h.Get("traceresponse"))
	}
	return parts[1], parts[2]
}

// clientSpans are the trace's CLIENT spans (the upstream attempts).
func clientSpans(tr *jaegertest.Trace) []*jaegertest.Span {
	var out []*jaegertest.Span
	for _, s := range tr.Spans {
		if s.Kind == "client" {
			out = append(out, s)
		}
	}
	return out
}

// scrapeOpenMetrics reads the metrics in the OpenMetrics format (with exemplars).
func scrapeOpenMetrics(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, req)
	return w.Body.String()
}

// lineWith reports whether a line of text holds every part.
func lineWith(text string, parts ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// metricValue is the value of the sample line that starts with prefix (-1 when none).
func metricValue(text, prefix string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(strings.TrimPrefix(line, prefix))
			if len(f) > 0 {
				v, _ := strconv.ParseFloat(f[0], 64)
				return v
			}
		}
	}
	return -1
}

func TestRequestTracesInJaeger(t *testing.T) {
	j := jaegertest.Start(t)
	m := metrics.New()
	g, upstream := tracedGateway(t, m)
	tenant := g.NewTenant(t, "traced", 0, 100_000_000)
	opted := g.NewTenant(t, "opted-in", 0, 100_000_000)
	broke := g.NewTenant(t, "broke", 0, 10)
	startTracing(t, j.OTLPHTTP, m, nil, opted.Account.ID)

	t.Run("a JSON chat completion", func(t *testing.T) {
		status, h, body := tracedPost(t, g, tenant.Key, "/v1/chat/completions", chatBody("service-flint-base", "hello there", false, 16))
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		traceID, serverSpanID := traceOf(t, h)
		tr := j.WaitTrace(t, traceID, 5)
		server := tr.One(t, "POST /v1/chat/completions")
		if server.Kind != "server" || server.SpanID != serverSpanID || server.Attr("http.response.status_code") != "200" ||
			server.Attr("tollgate.account.id") != tenant.Account.ID.String() || server.Attr("tollgate.key.id") != tenant.KeyID.String() ||
			server.Attr("tollgate.request.id") != h.Get("x-request-id") || server.Attr("http.request.method") != "POST" ||
			server.Attr("url.path") != "/v1/chat/completions" || server.Attr("http.route") != "/v1/chat/completions" {
			t.Errorf("server span:\n%s", tr)
		}
		for _, name := range []string{"authenticate", "admission", "settle"} {
			if s := tr.One(t, name); s.Parent != server {
				t.Errorf("%s is not a child of the server span:\n%s", name, tr)
			}
		}
		if a := tr.One(t, "admission"); a.Attr("tollgate.admission.outcome") != "admitted" || a.Attr("tollgate.reservation.micros") == "" || a.Attr("tollgate.reservation.micros") == "0" {
			t.Errorf("admission span:\n%s", tr)
		}
		if s := tr.One(t, "settle"); s.Attr("tollgate.settlement.status") != "ok" || s.Attr("tollgate.cost.micros") == "0" || s.Attr("tollgate.cost.micros") == "" {
			t.Errorf("settle span:\n%s", tr)
		}
		attempts := clientSpans(tr)
		if len(attempts) != 1 {
			t.Fatalf("%d attempt spans, want 1:\n%s", len(attempts), tr)
		}
		a := attempts[0]
		model := a.Attr("gen_ai.request.model")
		want := map[string]string{
			"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.max_tokens": "16",
			"gen_ai.response.model": model, "tollgate.model": "service-flint-base",
			// The provider's address, from its base URL (trial h8 D8).
			"server.address": "127.0.0.1",
		}
		if port, _ := strconv.Atoi(a.Attr("server.port")); port <= 0 {
			t.Errorf("attempt span server.port = %q", a.Attr("server.port"))
		}
		for k, v := range want {
			if a.Attr(k) != v {
				t.Errorf("attempt span %s = %q, want %q", k, a.Attr(k), v)
			}
		}
		if a.Name != "chat "+model || model == "" || a.Parent != server || a.Error {
			t.Errorf("attempt span %q under %v:\n%s", a.Name, a.Parent, tr)
		}
		for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
			if n, _ := strconv.Atoi(a.Attr(k)); n <= 0 {
				t.Errorf("attempt span %s = %q", k, a.Attr(k))
			}
		}
		if a.Attr("gen_ai.response.finish_reasons") != `["stop"]` {
			t.Errorf("finish reasons %s, want the upstream's [\"stop\"]", a.Attr("gen_ai.response.finish_reasons"))
		}
		for _, k := range []string{"gen_ai.response.id"} {
			if !a.Has(k) || a.Attr(k) == "" {
				t.Errorf("attempt span without %s:\n%s", k, tr)
			}
		}
		if a.Has("gen_ai.request.choice.count") {
			t.Errorf("a request of one choice has gen_ai.request.choice.count:\n%s", tr)
		}
		// No content for an account that did not opt in.
		if a.Has(string(telemetry.AttrInput)) || a.Has(string(telemetry.AttrOutput)) || strings.Contains(tr.String(), "hello there") {
			t.Errorf("content recorded for an account that did not opt in:\n%s", tr)
		}
		// The upstream continued the attempt's span.
		found := false
		for _, p := range upstream.parents() {
			found = found || p == "00-"+traceID+"-"+a.SpanID+"-01"
		}
		if !found {
			t.Errorf("the upstream got traceparents %q, want one naming the attempt span %s", upstream.parents(), a.SpanID)
		}
		// The usage record keeps the trace id.
		rec := latestUsage(t, g, tenant.Account, 1)
		if hex.EncodeToString(rec.TraceID[:]) != traceID {
			t.Errorf("usage record trace id %x, want %s", rec.TraceID, traceID)
		}
		// The metrics count the operation, with the trace id as an exemplar.
		text := scrapeOpenMetrics(t, m)
		// The metrics' gen_ai_request_model is the span's (the upstream's model), tollgate_model
		// the gateway's.
		labels := []string{`gen_ai_operation_name="chat"`, `gen_ai_provider_name="openai"`, `gen_ai_request_model="` + model + `"`, `tollgate_model="service-flint-base"`}
		for _, want := range [][]string{
			append([]string{`gen_ai_client_token_usage_count{`, `gen_ai_token_type="input"`}, labels...),
			append([]string{`gen_ai_client_token_usage_count{`, `gen_ai_token_type="output"`}, labels...),
			append([]string{`gen_ai_client_operation_duration_seconds_count{`}, labels...),
			{`tollgate_added_seconds_count{route="POST /v1/chat/completions"}`},
			{`gen_ai_client_operation_duration_seconds_bucket{`, `# {trace_id="` + traceID + `"}`},
			{`tollgate_added_seconds_bucket{route="POST /v1/chat/completions"`, `# {trace_id="` + traceID + `"}`},
			{`tollgate_http_request_duration_seconds_bucket{route="POST /v1/chat/completions"`, `# {trace_id="` + traceID + `"}`},
		} {
			if !lineWith(text, want...) {
				t.Errorf("metrics lack a line with %q", want)
			}
		}
	})

	t.Run("n choices", func(t *testing.T) {
		// A request for three choices says so on its attempt span: the conventions require
		// gen_ai.request.choice.count when it is not 1 (and the JSON completion above, of one
		// choice, has none).
		status, h, body := tracedPost(t, g, tenant.Key, "/v1/chat/completions",
			`{"model":"service-flint-base","n":3,"max_tokens":8,"messages":[{"role":"user","content":"three ways"}]}`)
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		traceID, _ := traceOf(t, h)
		tr := j.WaitTrace(t, traceID, 5)
		attempts := clientSpans(tr)
		if len(attempts) != 1 {
			t.Fatalf("%d attempt spans, want 1:\n%s", len(attempts), tr)
		}
		if got := attempts[0].Attr("gen_ai.request.choice.count"); got != "3" {
			t.Errorf("attempt span gen_ai.request.choice.count = %q, want 3:\n%s", got, tr)
		}
		// gen_ai.response.finish_reasons has one reason for each generation, the answer's own.
		var answer struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(body), &answer); err != nil || len(answer.Choices) != 3 {
			t.Fatalf("the answer's choices (%v): %s", err, body)
		}
		var want []string
		for _, c := range answer.Choices {
			want = append(want, c.FinishReason)
		}
		var reasons []string
		if err := json.Unmarshal([]byte(attempts[0].Attr("gen_ai.response.finish_reasons")), &reasons); err != nil ||
			strings.Join(reasons, " ") != strings.Join(want, " ") {
			t.Errorf("attempt span gen_ai.response.finish_reasons = %s, want the three choices' %q:\n%s",
				attempts[0].Attr("gen_ai.response.finish_reasons"), want, tr)
		}
	})

	t.Run("a stream", func(t *testing.T) {
		status, h, body := tracedPost(t, g, tenant.Key, "/v1/messages", `{"model":"service-sonnet","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"stream please"}]}`)
		if status != 200 || !strings.Contains(body, "message_stop") {
			t.Fatalf("status %d: %s", status, body)
		}
		traceID, _ := traceOf(t, h)
		tr := j.WaitTrace(t, traceID, 5)
		server := tr.One(t, "POST /v1/messages")
		attempts := clientSpans(tr)
		if len(attempts) != 1 || attempts[0].Parent != server {
			t.Fatalf("attempt spans:\n%s", tr)
		}
		a := attempts[0]
		if a.Attr("gen_ai.provider.name") != "anthropic" || a.Event("gen_ai.first_token") == nil {
			t.Errorf("stream attempt span:\n%s", tr)
		}
		if ttfc, err := strconv.ParseFloat(a.Attr("gen_ai.response.time_to_first_chunk"), 64); err != nil || ttfc <= 0 || a.Attr("gen_ai.request.stream") != "true" {
			t.Errorf("time to first chunk %q, gen_ai.request.stream %q:\n%s", a.Attr("gen_ai.response.time_to_first_chunk"), a.Attr("gen_ai.request.stream"), tr)
		}
		if n, _ := strconv.Atoi(a.Attr("gen_ai.usage.output_tokens")); n <= 0 || a.Attr("gen_ai.response.finish_reasons") == "" {
			t.Errorf("stream usage and finish reason:\n%s", tr)
		}
		if v := metricValue(scrapeOpenMetrics(t, m), `gen_ai_server_time_to_first_token_seconds_count{gen_ai_operation_name="chat",gen_ai_provider_name="anthropic",gen_ai_request_model="service-sonnet"}`); v < 1 {
			t.Errorf("time to first token observations: %v", v)
		}
	})

	t.Run("a stream cut before its usage", func(t *testing.T) {
		// A chat stream the upstream cuts after three content events reports no usage: the
		// attempt span says nothing of tokens rather than 0 (trial h8 D5), and its time to the
		// first token, a failed response's, is not observed in the metric (D9).
		text := scrapeOpenMetrics(t, m)
		const ttft = `gen_ai_server_time_to_first_token_seconds_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="service-flint-base"}`
		before := metricValue(text, ttft)
		status, h, body := tracedPost(t, g, tenant.Key, "/v1/chat/completions", `{"model":"service-flint-base","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"cut me [[sim fault=midstream after=3 tag=cut-usage]]"}]}`)
		if status != 200 || !strings.Contains(body, "error") {
			t.Fatalf("status %d: %s", status, body)
		}
		traceID, _ := traceOf(t, h)
		tr := j.WaitTrace(t, traceID, 5)
		attempts := clientSpans(tr)
		if len(attempts) != 1 {
			t.Fatalf("attempt spans:\n%s", tr)
		}
		if a := attempts[0]; a.Has("gen_ai.usage.input_tokens") || a.Has("gen_ai.usage.output_tokens") || !a.Error {
			t.Errorf("the cut stream's attempt span reports usage the upstream never sent, or no error:\n%s", tr)
		}
		if after := metricValue(scrapeOpenMetrics(t, m), ttft); after != before {
			t.Errorf("time to first token observed for a failed stream: %v -> %v", before, after)
		}
	})

	t.Run("Responses WebSocket turns", func(t *testing.T) {
		// Each response.create on a socket is a request of its own: its own trace, rooted in a
		// "response.create" server span (linked to the socket's), with its own trace id in its
		// usage record; before, every turn of a socket shared the handshake's trace, which
		// ended only with the socket (trial h8 D20).
		ws := g.NewTenant(t, "ws-traced", 0, 100_000_000)
		conn, _, err := dialResponses(t, g, ws.Key)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			sendCreate(t, conn, map[string]any{"model": "service-flint-base", "store": false, "max_output_tokens": 16,
				"input": []any{userMessage(fmt.Sprintf("socket turn %d", i+1))}})
			if evs := readResponse(t, conn); evs[len(evs)-1].Type != "response.completed" {
				t.Fatalf("turn %d: %s", i+1, evs[len(evs)-1].raw)
			}
		}
		waitSettled(t, g, ws.Account, 2)
		recs, err := g.Store.UsageRecords(context.Background(), ws.Account.ID, 2)
		if err != nil || len(recs) != 2 {
			t.Fatalf("usage records: %v %v", recs, err)
		}
		if recs[0].TraceID == recs[1].TraceID || recs[0].TraceID == ([16]byte{}) {
			t.Fatalf("the two turns' trace ids: %x and %x, want two", recs[0].TraceID, recs[1].TraceID)
		}
		for _, rec := range recs {
			tr := j.WaitTrace(t, hex.EncodeToString(rec.TraceID[:]), 3)
			turn := tr.One(t, "response.create /v1/responses")
			if turn.Kind != "server" || turn.Parent != nil || len(clientSpans(tr)) != 1 || clientSpans(tr)[0].Parent != turn {
				t.Errorf("a socket turn's trace:\n%s", tr)
			}
		}
	})

	t.Run("an agent spawn names its session", func(t *testing.T) {
		// The request that spawns a session names it on its server span, so that its trace
		// leads to the session's (trial h8 D17: only the session's span linked back).
		agents := g.NewTenant(t, "traced-agents", 0, 100_000_000)
		g.AssignSlot(t, agents.Account.ID, "main")
		status, h, body := tracedPost(t, g, agents.Key, "/v1/agents", `{"slot":"main","prompt":"Say hello."}`)
		if status != http.StatusAccepted {
			t.Fatalf("status %d: %s", status, body)
		}
		var res struct {
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal([]byte(body), &res); err != nil || res.SessionID == "" {
			t.Fatalf("spawn answer %s: %v", body, err)
		}
		traceID, _ := traceOf(t, h)
		tr := j.WaitTrace(t, traceID, 2) // the server span and its authentication
		if server := tr.One(t, "POST /v1/agents"); server.Attr("tollgate.agent.session_id") != res.SessionID {
			t.Errorf("the spawn's server span names session %q, want %s:\n%s", server.Attr("tollgate.agent.session_id"), res.SessionID, tr)
		}
		// The session's model call is in the session's trace (its usage record keeps the trace
		// id), and its attempt span names the session as gen_ai.conversation.id, which the
		// conventions require on an inference span when it is known, as the session's own spans do.
		rec := latestUsage(t, g, agents.Account, 1)
		if rec.AgentSessionID.String() != res.SessionID {
			t.Fatalf("the usage record's session %v, want %s", rec.AgentSessionID, res.SessionID)
		}
		session := j.WaitTrace(t, hex.EncodeToString(rec.TraceID[:]), 5) // invoke_agent, the step, admission, the attempt, settle
		attempts := clientSpans(session)
		if len(attempts) == 0 {
			t.Fatalf("no attempt span in the session's trace:\n%s", session)
		}
		for _, a := range attempts {
			if got := a.Attr("gen_ai.conversation.id"); got != res.SessionID {
				t.Errorf("the session's attempt span gen_ai.conversation.id = %q, want %s:\n%s", got, res.SessionID, session)
			}
		}
	})

	t.Run("prompt-cache counts", func(t *testing.T) {
		// The simulator plays Anthropic's prompt cache: the first request writes the prefix,
		// the second reads it.
		body := fmt.Sprintf(`{"model":"service-sonnet","max_tokens":16,"system":[{"type":"text","text":%q,"cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"cached?"}]}`, longPrompt(6_000))
		var spans [2]*jaegertest.Span
		for i := range spans {
			status, h, answer := tracedPost(t, g, tenant.Key, "/v1/messages", body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, answer)
			}
			traceID, _ := traceOf(t, h)
			tr := j.WaitTrace(t, traceID, 5)
			spans[i] = clientSpans(tr)[0]
		}
		if n, _ := strconv.Atoi(spans[0].Attr("gen_ai.usage.cache_creation.input_tokens")); n <= 0 {
			t.Errorf("the first request's cache writes: %q", spans[0].Attr("gen_ai.usage.cache_creation.input_tokens"))
		}
		if n, _ := strconv.Atoi(spans[1].Attr("gen_ai.usage.cache_read.input_tokens")); n <= 0 {
			t.Errorf("the second request's cache reads: %q", spans[1].Attr("gen_ai.usage.cache_read.input_tokens"))
		}
	})

	t.Run("a failover", func(t *testing.T) {
		// The first expert fails its three tries; the next one answers.
		status, h, body := tracedPost(t, g, tenant.Key, "/v1/chat/completions", chatBody("service-flint", "fail over [[sim fault=502 times=3]]", false, 16))
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		traceID, _ := traceOf(t, h)
		tr := j.WaitTrace(t, traceID, 8)
		server := tr.One(t, "POST /v1/chat/completions")
		// Every try is an attempt span of its own, siblings under the server span: the first
		// expert's three tries (each failed with its status), then the next expert's answer.
		attempts := clientSpans(tr)
		if len(attempts) != 4 {
			t.Fatalf("%d attempt spans, want 4 (three tries of the first expert, one of the next):\n%s", len(attempts), tr)
		}
		failed, answered := attempts[:3], attempts[3]
		for i, a := range attempts {
			if a.Parent != server {
				t.Errorf("attempt %d is not a sibling under the server span:\n%s", i+1, tr)
			}
		}
		// Each try's span carries the upstream's status.
		tries := func(s *jaegertest.Span) (statuses []string) {
			if v, ok := s.Attrs["http.response.status_code"]; ok {
				statuses = append(statuses, fmt.Sprint(v))
			}
			return statuses
		}
		for i, a := range failed {
			if !a.Error || a.Attr("error.type") != "502" || a.Attr("tollgate.upstream.attempts") != strconv.Itoa(i+1) ||
				a.Attr("tollgate.expert") != failed[0].Attr("tollgate.expert") || strings.Join(tries(a), " ") != "502" {
				t.Errorf("failed try %d (tries %q):\n%s", i+1, tries(a), tr)
			}
		}
		if answered.Error || answered.Attr("tollgate.expert") == failed[0].Attr("tollgate.expert") ||
			answered.Attr("tollgate.expert") != h.Get("x-tollgate-expert") || strings.Join(tries(answered), " ") != "200" {
			t.Errorf("the answering attempt (expert %s, tries %q):\n%s", h.Get("x-tollgate-expert"), tries(answered), tr)
		}
	})

	t.Run("a 402", func(t *testing.T) {
		status, h, body := tracedPost(t, g, broke.Key, "/v1/chat/completions", chatBody("service-flint-base", "no money", false, 16))
		if status != 402 {
			t.Fatalf("status %d: %s", status, body)
		}
		traceID, _ := traceOf(t, h)
		tr := j.WaitTrace(t, traceID, 3)
		server := tr.One(t, "POST /v1/chat/completions")
		adm := tr.One(t, "admission")
		if adm.Parent != server || adm.Attr("tollgate.admission.outcome") != "refused" || adm.Attr("error.type") != "402" || !adm.Error {
			t.Errorf("admission span:\n%s", tr)
		}
		if server.Attr("http.response.status_code") != "402" {
			t.Errorf("server span status:\n%s", tr)
		}
		// The server span says why (trial h8 D18): the envelope's type and code.
		if server.Attr("tollgate.error.type") != "insufficient_quota" || server.Attr("tollgate.error.code") != "insufficient_quota" {
			t.Errorf("the refused request's server span does not say why:\n%s", tr)
		}
		if n := len(clientSpans(tr)); n != 0 {
			t.Errorf("%d attempt spans after a refusal:\n%s", n, tr)
		}
		if len(tr.Named("settle")) != 0 {
			t.Errorf("a refused request was settled:\n%s", tr)
		}
	})

	t.Run("an incoming traceparent is continued", func(t *testing.T) {
		const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		status, h, body := tracedPost(t, g, tenant.Key, "/v1/chat/completions", chatBody("service-flint-base", "continue", false, 16),
			"traceparent", "00-"+callerTrace+"-"+callerSpan+"-01", "tracestate", "vendor=value")
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		if traceID, _ := traceOf(t, h); traceID != callerTrace {
			t.Fatalf("trace %s, want the caller's %s", traceID, callerTrace)
		}
		tr := j.WaitTrace(t, callerTrace, 5)
		if server := tr.One(t, "POST /v1/chat/completions"); server.ParentID != callerSpan {
			t.Errorf("server span's parent %q, want the caller's span %s:\n%s", server.ParentID, callerSpan, tr)
		}
		// The caller's tracestate (its tracing vendors' data) is not handed to the provider, a
		// third party that gets only the traceparent.
		if s := upstream.states(); len(s) != 0 {
			t.Errorf("the upstream got tracestates %q", s)
		}
	})

	t.Run("a caller's unsampled trace is continued, not recorded", func(t *testing.T) {
		// The default sampler follows the caller: flags 00 leave the request out of the trace,
		// and the gateway makes no span under it (telemetry.Recording), yet still hands the
		// caller's trace on to the upstream, unsampled.
		const callerTrace, callerSpan = "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"
		fresh := g.NewTenant(t, "unsampled", 0, 100_000_000)
		status, h, body := tracedPost(t, g, fresh.Key, "/v1/chat/completions", chatBody("service-flint-base", "not traced", false, 16),
			"traceparent", "00-"+callerTrace+"-"+callerSpan+"-00")
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		if got := h.Get("traceresponse"); !strings.HasPrefix(got, "00-"+callerTrace+"-") || !strings.HasSuffix(got, "-00") {
			t.Errorf("traceresponse %q, want the caller's trace, unsampled", got)
		}
		found := false
		for _, p := range upstream.parents() {
			found = found || (strings.HasPrefix(p, "00-"+callerTrace+"-") && strings.HasSuffix(p, "-00"))
		}
		if !found {
			t.Errorf("the upstream got traceparents %q, want the caller's trace %s, unsampled", upstream.parents(), callerTrace)
		}
		if rec := latestUsage(t, g, fresh.Account, 1); rec.TraceID != ([16]byte{}) {
			t.Errorf("usage record of an unsampled request has trace id %x, which no backend holds", rec.TraceID)
		}
		// A sampled request after it reaches the backend; the unsampled one left nothing there.
		status, h, body = tracedPost(t, g, fresh.Key, "/v1/chat/completions", chatBody("service-flint-base", "traced", false, 16))
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		marker, _ := traceOf(t, h)
		j.WaitTrace(t, marker, 5)
		if _, found, err := j.Trace(context.Background(), callerTrace); err != nil || found {
			t.Errorf("the unsampled trace is in the backend (found %v, %v)", found, err)
		}
	})

	t.Run("content only for an account that opted in", func(t *testing.T) {
		status, h, body := tracedPost(t, g, opted.Key, "/v1/chat/completions", chatBody("service-flint-base", "my secret prompt", false, 16))
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		traceID, _ := traceOf(t, h)
		tr := j.WaitTrace(t, traceID, 5)
		a := clientSpans(tr)[0]
		// The GenAI conventions' input and output message schemas, structured on the span, which
		// Jaeger keeps as JSON text (trial h8 D3: the raw request body, and the answer's bare text
		// in an event).
		type part struct{ Type, Content string }
		type message struct {
			Role         string
			Parts        []part
			FinishReason *string `json:"finish_reason"`
		}
		var in, out []message
		if err := json.Unmarshal([]byte(a.Attr(string(telemetry.AttrInput))), &in); err != nil || len(in) != 1 || in[0].Role != "user" ||
			len(in[0].Parts) != 1 || in[0].Parts[0].Type != "text" || in[0].Parts[0].Content != "my secret prompt" {
			t.Errorf("gen_ai.input.messages %q (%v), want the prompt as one user message", a.Attr(string(telemetry.AttrInput)), err)
		}
		if err := json.Unmarshal([]byte(a.Attr(string(telemetry.AttrOutput))), &out); err != nil || len(out) != 1 || out[0].Role != "assistant" ||
			len(out[0].Parts) != 1 || out[0].Parts[0].Content == "" || out[0].FinishReason == nil || *out[0].FinishReason != "stop" {
			t.Errorf("gen_ai.output.messages %q (%v), want the answer as one assistant message with its finish reason", a.Attr(string(telemetry.AttrOutput)), err)
		}
		if len(a.Events) > 0 && a.Event("gen_ai.output") != nil {
			t.Errorf("a gen_ai.output event, which the conventions do not have: %+v", a.Events)
		}
	})
}

// stuckListener accepts connections and never answers on them.
type stuckListener struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	accepted chan struct{}
}

func newStuckListener(t *testing.T) *stuckListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stuckListener{ln: ln, accepted: make(chan struct{}, 1)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			// Read the request head, answer nothing.
			go func() { _, _ = bufio.NewReader(c).ReadString('\n') }()
			select {
			case s.accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *stuckListener) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
}

// TestTraceBackendDown: with the trace backend stuck (it accepts and never answers) or gone
// (nobody listens, or Jaeger stopped), every request still succeeds while the export cannot
// finish, and the spans that cannot be exported are counted as dropped.
func TestTraceBackendDown(t *testing.T) {
	const requests = 40
	run := func(t *testing.T, g *apitest.Gateway, key string) {
		t.Helper()
		for i := range requests {
			status, _, body := tracedPost(t, g, key, "/v1/chat/completions", chatBody("service-flint-base", "still served "+strconv.Itoa(i), i%2 == 0, 16))
			if status != 200 {
				t.Fatalf("request %d: status %d: %s", i, status, body)
			}
		}
	}

	t.Run("stuck backend", func(t *testing.T) {
		stuck := newStuckListener(t)
		m := metrics.New()
		g, _ := tracedGateway(t, m)
		tenant := g.NewTenant(t, "stuck", 0, 100_000_000)
		// A small queue, and an export that waits far longer than the test: the first batch's
		// export hangs on the stuck backend, and every span after the queue is full is dropped.
		startTracing(t, "http://"+stuck.ln.Addr().String(), m, func(s *telemetry.Settings) {
			s.QueueSize, s.BatchSize, s.ExportTimeout = 8, 8, 10*time.Minute
		})
		run(t, g, tenant.Key)
		// The export was in flight (a connection was accepted and never answered) while every
		// request completed.
		select {
		case <-stuck.accepted:
		default:
			t.Fatal("the exporter never reached the stuck backend")
		}
		if v := metricValue(scrapeOpenMetrics(t, m), `tollgate_trace_spans_dropped_total{reason="queue_full"}`); v <= 0 {
			t.Errorf("dropped spans (queue full): %v, want some", v)
		}
	})

	t.Run("nobody listens", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		m := metrics.New()
		g, _ := tracedGateway(t, m)
		tenant := g.NewTenant(t, "unreachable", 0, 100_000_000)
		startTracing(t, "http://"+addr, m, nil)
		run(t, g, tenant.Key)
		deadline := time.Now().Add(10 * time.Second)
		for metricValue(scrapeOpenMetrics(t, m), `tollgate_trace_spans_dropped_total{reason="export_failed"}`) <= 0 {
			if time.Now().After(deadline) {
				t.Fatal("no span counted as dropped for a failed export")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("jaeger stopped and restarted", func(t *testing.T) {
		j := jaegertest.Start(t)
		m := metrics.New()
		g, _ := tracedGateway(t, m)
		tenant := g.NewTenant(t, "restarted", 0, 100_000_000)
		startTracing(t, j.OTLPHTTP, m, nil)
		j.Stop()
		run(t, g, tenant.Key)
		j.Restart(t)
		// Traces flow again once the backend is back.
		status, h, body := tracedPost(t, g, tenant.Key, "/v1/chat/completions", chatBody("service-flint-base", "back again", false, 16))
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		traceID, _ := traceOf(t, h)
		j.WaitTrace(t, traceID, 5)
		if v := metricValue(scrapeOpenMetrics(t, m), `tollgate_trace_spans_dropped_total{reason="export_failed"}`); v <= 0 {
			t.Errorf("dropped spans while jaeger was down: %v, want some", v)
		}
	})
}

// TestTracesOverGRPC: OTEL_EXPORTER_OTLP_PROTOCOL=grpc sends the same trace over OTLP/gRPC.
func TestTracesOverGRPC(t *testing.T) {
	j := jaegertest.Start(t)
	m := metrics.New()
	g, _ := tracedGateway(t, m)
	tenant := g.NewTenant(t, "grpc", 0, 100_000_000)
	s, err := telemetry.Resolve(config.Telemetry{}, func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": j.OTLPGRPC, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_SERVICE_NAME": "tollgate-grpc"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	startTracing(t, "", m, func(r *telemetry.Settings) {
		batch := r.BatchTimeout
		*r = s
		r.BatchTimeout = batch
	})
	status, h, body := tracedPost(t, g, tenant.Key, "/v1/chat/completions", chatBody("service-flint-base", "over grpc", false, 16))
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	traceID, _ := traceOf(t, h)
	tr := j.WaitTrace(t, traceID, 5)
	if server := tr.One(t, "POST /v1/chat/completions"); server.Service != "tollgate-grpc" || len(clientSpans(tr)) != 1 {
		t.Errorf("trace over gRPC (service %q):\n%s", server.Service, tr)
	}
}

// BenchmarkChatTracing is BenchmarkChatDirectVsGateway's gateway side with tracing off and
// on (100 % sampling, exported over OTLP/HTTP to a local sink that discards the spans): the
// difference is what tracing costs a request.
func BenchmarkChatTracing(b *testing.B) {
	sink, err := bench.StartOTLPSink()
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	g := apitest.Start(b, apitest.Options{})
	tenant := g.NewTenant(b, "bench", 1_000_000_000, 1_000_000_000_000)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	body := `{"model":"service-flint-base","messages":[{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":16}`
	run := func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequest("POST", g.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tenant.Key)
				res, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Fatalf("status %d", res.StatusCode)
				}
			}
		})
	}
	b.Run("off", run)
	b.Run("on", func(b *testing.B) {
		s, err := telemetry.Resolve(config.Telemetry{Endpoint: sink.URL, Sampler: "always_on"}, func(string) string { return "" })
		if err != nil {
			b.Fatal(err)
		}
		tr, err := telemetry.Start(context.Background(), s, telemetry.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = tr.Shutdown(context.Background()) }()
		run(b)
	})
}
