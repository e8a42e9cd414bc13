package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/sim"
)

// TestOutputBoundIsClamped: an output bound beyond the model's limit (Claude Code asks 32000,
// some clients a million) is served, not refused, on every route, streamed and not, whether the
// upstream speaks the client's format or is translated: the upstream is sent the limit, the
// x-tollgate-clamped-fields header names the field and the limit, and the reservation and the
// bill follow the clamp, so an account that could not cover the bound asked for is served.
func TestOutputBoundIsClamped(t *testing.T) {
	cfg := contractConfig(t)
	g := apitest.Start(t, apitest.Options{Config: cfg})
	c := g.Client(t)
	limits := map[string]int{}
	for _, m := range cfg.Models {
		limits[m.ID] = m.MaxOutputTokens
	}
	cases := []struct {
		route, model, field string
		body                func(stream bool) string
		sent                string // the upstream's bound field
	}{
		{"/v1/chat/completions", "service-flint-base", "max_tokens", func(s bool) string {
			return fmt.Sprintf(`{"model":"service-flint-base","max_tokens":1000000,"stream":%t,"messages":[{"role":"user","content":"hi [[sim words=30]]"}]}`, s)
		}, "max_tokens"},
		{"/v1/chat/completions", "service-flint-base", "max_completion_tokens", func(s bool) string {
			return fmt.Sprintf(`{"model":"service-flint-base","max_completion_tokens":1000000,"stream":%t,"messages":[{"role":"user","content":"hi [[sim words=30]]"}]}`, s)
		}, "max_completion_tokens"},
		{"/v1/responses", "test-responses", "max_output_tokens", func(s bool) string {
			return fmt.Sprintf(`{"model":"test-responses","max_output_tokens":1000000,"stream":%t,"input":"hi [[sim words=30]]"}`, s)
		}, "max_output_tokens"},
		{"/v1/responses", "service-flint-base", "max_output_tokens", func(s bool) string { // translated to chat
			return fmt.Sprintf(`{"model":"service-flint-base","max_output_tokens":1000000,"stream":%t,"input":"hi [[sim words=30]]"}`, s)
		}, "max_completion_tokens"},
		{"/v1/messages", "service-sonnet", "max_tokens", func(s bool) string {
			return fmt.Sprintf(`{"model":"service-sonnet","max_tokens":1000000,"stream":%t,"messages":[{"role":"user","content":"hi [[sim words=30]]"}]}`, s)
		}, "max_tokens"},
		{"/v1/messages", "messages-via-chat", "max_tokens", func(s bool) string { // translated to chat
			return fmt.Sprintf(`{"model":"messages-via-chat","max_tokens":1000000,"stream":%t,"messages":[{"role":"user","content":"hi [[sim words=30]]"}]}`, s)
		}, "max_completion_tokens"},
	}
	for i, tc := range cases {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s %s %s stream=%t", tc.route, tc.model, tc.field, stream), func(t *testing.T) {
				limit := limits[tc.model]
				// Enough credit for the limit, far too little for a million tokens.
				tenant := g.NewTenant(t, fmt.Sprintf("acme-%d-%t", i, stream), 0, 2_000_000)
				bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
				status, hdr, body := do(t, c, g.URL, request{"POST", tc.route, tc.body(stream)}, bearer)
				if status != 200 {
					t.Fatalf("%d %s", status, body)
				}
				if got, want := hdr.Get("x-tollgate-clamped-fields"), fmt.Sprintf("%s=%d", tc.field, limit); got != want {
					t.Errorf("clamped %q, want %q", got, want)
				}
				if stream && !strings.Contains(string(body), "data:") {
					t.Errorf("not a stream: %s", body)
				}
				var sent map[string]any
				if err := json.Unmarshal(g.Sim.LastRequest().Body, &sent); err != nil {
					t.Fatal(err)
				}
				if got, _ := sent[tc.sent].(float64); int(got) != limit {
					t.Errorf("the upstream was sent %s %v, want %d: %s", tc.sent, sent[tc.sent], limit, g.Sim.LastRequest().Body)
				}
				rec := latestUsage(t, g, tenant.Account, 1)
				if rec.OutputTokens == 0 || rec.OutputTokens > int64(limit) || rec.CostMicros <= 0 {
					t.Errorf("usage record %+v", rec)
				}
			})
		}
	}

	// A Messages thinking budget must stay below max_tokens: clamped with it.
	thinker := g.NewTenant(t, "thinker", 0, 2_000_000)
	status, hdr, body := do(t, c, g.URL, request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":100000,"thinking":{"type":"enabled","budget_tokens":90000},"messages":[{"role":"user","content":"hi"}]}`},
		map[string]string{"Authorization": "Bearer " + thinker.Key})
	var sentThinking struct {
		MaxTokens int `json:"max_tokens"`
		Thinking  struct {
			BudgetTokens int `json:"budget_tokens"`
		} `json:"thinking"`
	}
	_ = json.Unmarshal(g.Sim.LastRequest().Body, &sentThinking)
	if status != 200 || hdr.Get("x-tollgate-clamped-fields") != "max_tokens=64000, thinking.budget_tokens=63999" || sentThinking.MaxTokens != 64000 || sentThinking.Thinking.BudgetTokens != 63999 {
		t.Errorf("thinking budget: %d %q, sent %s: %s", status, hdr.Get("x-tollgate-clamped-fields"), g.Sim.LastRequest().Body, body)
	}

	// A bound too large for any integer type is clamped too.
	status, hdr, body = do(t, c, g.URL, request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":99999999999999999999,"messages":[{"role":"user","content":"hi"}]}`},
		map[string]string{"Authorization": "Bearer " + thinker.Key})
	if status != 200 || hdr.Get("x-tollgate-clamped-fields") != "max_tokens=64000" {
		t.Errorf("a huge bound: %d %q: %s", status, hdr.Get("x-tollgate-clamped-fields"), body)
	}

	// A bound within the limit is sent as it is, with no header.
	tenant := g.NewTenant(t, "within", 0, 2_000_000)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	status, hdr, body = do(t, c, g.URL, request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":32000,"messages":[{"role":"user","content":"hi"}]}`}, bearer)
	if status != 200 || hdr.Get("x-tollgate-clamped-fields") != "" {
		t.Errorf("within the limit: %d clamped %q: %s", status, hdr.Get("x-tollgate-clamped-fields"), body)
	}
}

// TestClampWithFusionExperts: a fusion model whose experts have different output limits sends
// a bound beyond all of them to the expert that can produce the most (clamped to the model's
// limit), a bound only one expert can produce to that expert (unclamped), and clamps to a
// short expert's limit only when no other expert is left.
func TestClampWithFusionExperts(t *testing.T) {
	cfg := config.Default()
	cfg.Models = append(cfg.Models,
		config.Model{ID: "mixed-limits", Family: config.FamilyChat, OwnedBy: "test",
			Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, MaxOutputTokens: 2048,
			Experts: []config.Upstream{
				{Provider: "sim-openai-chat", Model: "sim-short", MaxOutputTokens: 16, Strengths: []string{"general", "fast"}},
				{Provider: "sim-anthropic", Model: "sim-long", Strengths: []string{"code"}},
			}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "mixed-limits")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	cases := []struct {
		bound           int
		stream          bool
		expert, clamped string
		sentField       string
		sent            int
	}{
		{100000, false, "sim-anthropic/sim-long", "max_tokens=2048", "max_tokens", 2048},
		{100000, true, "sim-anthropic/sim-long", "max_tokens=2048", "max_tokens", 2048},
		{1000, false, "sim-anthropic/sim-long", "", "max_tokens", 1000},
		{8, false, "sim-openai-chat/sim-short", "", "max_tokens", 8}, // both can: the router's first choice
	}
	for _, tc := range cases {
		status, hdr, body := do(t, c, g.URL, request{"POST", "/v1/chat/completions", chatBody("mixed-limits", "hi", tc.stream, tc.bound)}, bearer)
		if status != 200 || hdr.Get("x-tollgate-expert") != tc.expert || hdr.Get("x-tollgate-clamped-fields") != tc.clamped {
			t.Errorf("bound %d: %d expert %q clamped %q: %.200s", tc.bound, status, hdr.Get("x-tollgate-expert"), hdr.Get("x-tollgate-clamped-fields"), body)
			continue
		}
		var sent map[string]any
		_ = json.Unmarshal(g.Sim.LastRequest().Body, &sent)
		if got, _ := sent[tc.sentField].(float64); int(got) != tc.sent {
			t.Errorf("bound %d: the upstream was sent %s", tc.bound, g.Sim.LastRequest().Body)
		}
	}
	// The long expert failing before the first byte leaves the short one: the bound is clamped
	// to its limit rather than refused.
	for range 3 {
		g.Sim.Enqueue("sim-long", sim.Fault{Kind: sim.FaultStatus, Status: 502})
	}
	status, hdr, body := do(t, c, g.URL, request{"POST", "/v1/chat/completions", chatBody("mixed-limits", "hi [[sim words=40]]", false, 100000)}, bearer)
	if status != 200 || hdr.Get("x-tollgate-expert") != "sim-openai-chat/sim-short" || hdr.Get("x-tollgate-clamped-fields") != "max_tokens=16" {
		t.Errorf("failover to the short expert: %d expert %q clamped %q: %.200s", status, hdr.Get("x-tollgate-expert"), hdr.Get("x-tollgate-clamped-fields"), body)
	}
	if rec := latestUsage(t, g, tenant.Account, int64(len(cases)+1)); rec.OutputTokens > 16 {
		t.Errorf("billed %d output tokens for a bound clamped to 16", rec.OutputTokens)
	}
}
