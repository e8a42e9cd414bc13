package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/price"
)

// TestAgentTurnsBilledPerKind: an agent's model calls are billed per token kind like any
// request. service-flint's one expert here is a stand-in OpenAI chat upstream priced from the
// catalog as gpt-4.1-mini ($0.40 input, $0.10 cached input, $1.60 output per million,
// https://platform.openai.com/docs/pricing) that reports, in the documented chat usage shape
// (https://platform.openai.com/docs/api-reference/chat/object), three quarters of each
// prompt as read from its cache. Each turn's usage record carries the cache reads and costs
// them at the cached-input price, the model_call event shows them, and the session's spend is
// the sum of the records.
func TestAgentTurnsBilledPerKind(t *testing.T) {
	type reported struct{ prompt, cached, output int64 }
	var mu sync.Mutex
	var calls []reported
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rep := reported{prompt: int64(len(body) / 4), output: 7}
		rep.cached = rep.prompt * 3 / 4
		mu.Lock()
		calls = append(calls, rep)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"The cache says hello."},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d},"completion_tokens_details":{"reasoning_tokens":0}},"service_tier":"default"}`,
			rep.prompt, rep.output, rep.prompt+rep.output, rep.cached)
	}))
	t.Cleanup(upstream.Close)
	w := newWorld(t, flintOnStandIn(t, upstream.URL))
	n := w.start()
	svc := n.gw.Agents
	acme := w.tenant(n, "acme", 5_000_000)
	ctx := context.Background()
	res, err := svc.Spawn(ctx, acme.p, "main", "Say hello from the cache.", "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateReady)
	if _, err := svc.SendMessage(ctx, acme.p, "main", "Once more.", ""); err != nil {
		t.Fatal(err)
	}
	s = waitSession(t, svc, acme.p, res.SessionID, agent.StateReady)
	for s.Turns < 2 {
		s = waitSession(t, svc, acme.p, res.SessionID, agent.StateReady)
	}
	usage := usageOf(t, w, acme.p, res.SessionID, s.SpentMicros)
	mu.Lock()
	defer mu.Unlock()
	if len(usage) != 2 || len(calls) != 2 {
		t.Fatalf("%d usage records and %d upstream calls for 2 turns", len(usage), len(calls))
	}
	gpt41mini := price.Rates{Input: 400_000, CacheRead: 100_000, CacheWrite5m: 400_000, CacheWrite1h: 400_000, Output: 1_600_000}
	var modelCalls []agent.Event
	for _, e := range allEvents(t, svc, acme.p, res.SessionID) {
		if e.Kind == "model_call" {
			modelCalls = append(modelCalls, e)
		}
	}
	for turn := 1; turn <= 2; turn++ {
		r := usage[agent.RequestID(uuidOf(res.SessionID), turn)]
		c := calls[turn-1]
		want := price.Cost(price.Tokens{Uncached: c.prompt - c.cached, CacheRead: c.cached, Output: c.output}, price.Price{Rates: gpt41mini})
		if r.Price == nil || r.Price.Rates != gpt41mini || r.CacheReadTokens != c.cached || r.InputTokens != c.prompt ||
			r.Costs != want || r.CostMicros != want.Total() || r.WaivedMicros != 0 {
			t.Errorf("turn %d: record %+v (price %+v), want %d cached of %d at %+v = %d", turn, r, r.Price, c.cached, c.prompt, want, want.Total())
		}
		var data map[string]any
		if err := json.Unmarshal(modelCalls[turn-1].Data, &data); err != nil {
			t.Fatal(err)
		}
		if data["cache_read_tokens"] != float64(c.cached) || data["cost_micros"] != float64(want.Total()) {
			t.Errorf("turn %d: model_call event %v, want cache_read_tokens %d and cost %d", turn, data, c.cached, want.Total())
		}
	}
}

// TestAgentTurnWithoutUsageBillsItsText: an agent's model call to an upstream that reports no
// usage is billed as an HTTP answer without usage is: its output from its text and from the
// reasoning the answer carries beside it (DeepSeek's message.reasoning_content), four
// characters a token, its input counted from the request; and the model_call event shows the
// counts billed. The review of e142fb0: the in-process call billed no output at all; later, it
// billed the text's 10 tokens and not the reasoning's 100.
func TestAgentTurnWithoutUsageBillsItsText(t *testing.T) {
	const text = "Forty characters of answer text, exactly"                   // 10 tokens
	thought := strings.Repeat("Weighing the question before answering. ", 10) // 100 tokens
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":%q,"reasoning_content":%q},"finish_reason":"stop"}]}`, text, thought)
	}))
	t.Cleanup(upstream.Close)
	w := newWorld(t, flintOnStandIn(t, upstream.URL))
	n := w.start()
	svc := n.gw.Agents
	acme := w.tenant(n, "acme", 5_000_000)
	res, err := svc.Spawn(context.Background(), acme.p, "main", "Say it.", "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateReady)
	usage := usageOf(t, w, acme.p, res.SessionID, s.SpentMicros)
	r, ok := usage[agent.RequestID(uuidOf(res.SessionID), 1)]
	if !ok || r.OutputTokens != 110 || r.InputTokens <= 0 || r.CostMicros <= 0 {
		t.Fatalf("the turn's record %+v (found %v): want 110 output tokens from the text and the reasoning, the input counted, a cost", r, ok)
	}
	for _, e := range allEvents(t, svc, acme.p, res.SessionID) {
		if e.Kind != "model_call" {
			continue
		}
		var data map[string]any
		if err := json.Unmarshal(e.Data, &data); err != nil {
			t.Fatal(err)
		}
		if data["output_tokens"] != float64(r.OutputTokens) || data["input_tokens"] != float64(r.InputTokens) {
			t.Errorf("model_call event %v, want the billed %d input and %d output tokens", data, r.InputTokens, r.OutputTokens)
		}
	}
}

// flintOnStandIn makes service-flint's one expert the OpenAI chat stand-in at url, priced from
// the catalog as gpt-4.1-mini.
func flintOnStandIn(t *testing.T, url string) func(*config.Config) {
	return func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "standin", Kind: config.KindOpenAIChat, BaseURL: url})
		for i, m := range c.Models {
			if m.ID == "service-flint" {
				c.Models[i].Experts = []config.Upstream{{Provider: "standin", Model: "gpt-4.1-mini", Price: &config.Price{Catalog: "gpt-4.1-mini"}}}
			}
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAgentCallBeyondItsReservationIsChargedWithinMaxSpend: an agent's model call whose
// upstream bills far more input than the reservation's estimate (a provider's count of text
// made to be dense: 1,000,000 tokens, 400,000 micro-units at gpt-4.1-mini's $0.40 a million)
// is charged beyond its reservation up to what was left of the session's max_spend (200,000),
// and no further: the session has spent its max_spend and stops with max_spend; the rest is
// waived. Before, the call was charged its reservation alone (the excess waived) and the
// session went on.
func TestAgentCallBeyondItsReservationIsChargedWithinMaxSpend(t *testing.T) {
	const maxSpend = 200_000
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000000,"completion_tokens":1,"total_tokens":1000001}}`)
	}))
	t.Cleanup(upstream.Close)
	onStandIn := flintOnStandIn(t, upstream.URL)
	w := newWorld(t, func(c *config.Config) {
		c.Agents.Profiles = map[string]config.AgentProfile{
			"standard": {MaxTurns: 50, MaxSpendMicros: maxSpend, MaxDuration: time.Hour},
		}
		onStandIn(c)
	})
	n := w.start()
	svc := n.gw.Agents
	acme := w.tenant(n, "acme", 5_000_000)
	res, err := svc.Spawn(context.Background(), acme.p, "main", "Say it.", "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateStopped, agent.StateReady, agent.StateFailed)
	usage := usageOf(t, w, acme.p, res.SessionID, s.SpentMicros)
	r, ok := usage[agent.RequestID(uuidOf(res.SessionID), 1)]
	full := price.Cost(r.Tokens(), *r.Price).Total()
	if !ok || r.CostMicros != maxSpend || r.WaivedMicros != full-maxSpend {
		t.Fatalf("the turn's record (found %v): cost %d, waived %d; want the session's max_spend %d charged and the rest of %d waived",
			ok, r.CostMicros, r.WaivedMicros, maxSpend, full)
	}
	if s.State != agent.StateStopped || s.EndReason != agent.ReasonMaxSpend || s.SpentMicros != maxSpend {
		t.Errorf("session %+v: want stopped with max_spend, %d spent", s, maxSpend)
	}
}

// TestAgentCallFittedToTheAccountsCredit: an agent's step on an account with $0.50 left, whose
// session's max_spend ($5) would allow the model's whole output bound but whose credit does not
// (service-flint priced as gpt-4.1: 65,536 output tokens at $8 a million hold $0.524288), runs
// its call with the output bound fitted to the account's free credit: the upstream is sent it,
// the usage record keeps it as fitted_output_tokens, the session goes on and the balance stays
// above zero. Before, the call was fitted to the session's max_spend only, its reservation was
// refused with 402 and the session failed.
func TestAgentCallFittedToTheAccountsCredit(t *testing.T) {
	const credit = 500_000
	var mu sync.Mutex
	var sent []map[string]any
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		sent = append(sent, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":500,"completion_tokens":2,"total_tokens":502}}`)
	}))
	t.Cleanup(upstream.Close)
	w := newWorld(t, func(c *config.Config) {
		c.Agents.Profiles = map[string]config.AgentProfile{
			"standard": {MaxTurns: 50, MaxSpendMicros: 5_000_000, MaxDuration: time.Hour},
		}
		c.Providers = append(c.Providers, config.Provider{Name: "standin", Kind: config.KindOpenAIChat, BaseURL: upstream.URL})
		for i, m := range c.Models {
			if m.ID == "service-flint" {
				c.Models[i].Experts = []config.Upstream{{Provider: "standin", Model: "gpt-4.1", Price: &config.Price{Catalog: "gpt-4.1"}}}
			}
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
	})
	n := w.start()
	svc := n.gw.Agents
	acme := w.tenant(n, "acme", credit)
	res, err := svc.Spawn(context.Background(), acme.p, "main", "Say it.", "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateStopped, agent.StateReady, agent.StateFailed)
	if s.State == agent.StateFailed {
		t.Fatalf("session %+v failed; want its step fitted to the account's credit", s)
	}
	usage := usageOf(t, w, acme.p, res.SessionID, s.SpentMicros)
	r, ok := usage[agent.RequestID(uuidOf(res.SessionID), 1)]
	mu.Lock()
	defer mu.Unlock()
	if !ok || len(sent) == 0 {
		t.Fatalf("no record of the step (%v) or no upstream call (%d)", ok, len(sent))
	}
	bound := 0
	for _, k := range []string{"max_completion_tokens", "max_tokens"} {
		if v, ok := sent[0][k].(float64); ok {
			bound = int(v)
		}
	}
	if bound < 1024 || bound >= 65536 || r.FittedOutputTokens != int64(bound) {
		t.Errorf("the upstream was sent a bound of %d, the record's fitted_output_tokens %d; want one bound below 65,536", bound, r.FittedOutputTokens)
	}
	if bal, err := w.store.Balance(context.Background(), acme.p.AccountID); err != nil || bal < 0 || bal != credit-s.SpentMicros {
		t.Errorf("balance %d (%v), spent %d of %d", bal, err, s.SpentMicros, credit)
	}
}
