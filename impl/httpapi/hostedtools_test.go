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

// searchPrice is what the built-in configuration charges per web search of the simulator.
const searchPrice = 10_000

// TestHostedToolsMetered: a web search priced for the upstream (the built-in configuration
// prices the simulator's at 10,000 micro-units a call, at most 5 a request) goes through to a
// same-format upstream with the upstream's own cap set to that bound, and every search the
// upstream reports is billed at that price, in the usage record and the ledger, streamed or
// not; searches beyond the bound are neither made nor billed; the reservation covers the bound,
// so an account that cannot pay for five searches is refused the tool request up front.
func TestHostedToolsMetered(t *testing.T) {
	cfg := contractConfig(t)
	for i := range cfg.Providers {
		if cfg.Providers[i].Name == "sim-openai-chat" {
			cfg.Providers[i].HostedTools = map[string]config.HostedTool{"web_search": {PricePerCallMicros: searchPrice, MaxCalls: 1}}
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: cfg, Sim: s})
	c := g.Client(t)
	messages := func(searches int, stream bool) string {
		return fmt.Sprintf(`{"model":"service-sonnet","max_tokens":64,"stream":%t,"messages":[{"role":"user","content":"news? [[sim web_search=%d]]"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":50}]}`, stream, searches)
	}
	responses := func(searches int, stream bool) string {
		return fmt.Sprintf(`{"model":"test-responses","max_output_tokens":64,"stream":%t,"input":"news? [[sim web_search=%d]]","tools":[{"type":"web_search","external_web_access":false}]}`, stream, searches)
	}
	cases := []struct {
		name      string
		route     string
		body      string
		calls     int64
		sentCap   string // the upstream's own cap, as sent
		sentValue float64
	}{
		{"messages", "/v1/messages", messages(3, false), 3, "max_uses", 5},
		{"messages streamed", "/v1/messages", messages(3, true), 3, "max_uses", 5},
		{"messages beyond the bound", "/v1/messages", messages(7, true), 5, "max_uses", 5},
		{"responses", "/v1/responses", responses(2, false), 2, "max_tool_calls", 5},
		{"responses streamed", "/v1/responses", responses(2, true), 2, "max_tool_calls", 5},
		{"responses beyond the bound", "/v1/responses", responses(9, false), 5, "max_tool_calls", 5},
		{"chat web_search_options", "/v1/chat/completions", `{"model":"service-flint-base","max_tokens":64,"messages":[{"role":"user","content":"news?"}],"web_search_options":{}}`, 1, "", 0},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const granted = 5_000_000
			tenant := g.NewTenant(t, fmt.Sprintf("acme-%d", i), 0, granted)
			status, h, body := do(t, c, g.URL, request{"POST", tc.route, tc.body}, map[string]string{"Authorization": "Bearer " + tenant.Key})
			if status != 200 || h.Get("x-tollgate-dropped-fields") != "" {
				t.Fatalf("%d dropped %q: %s", status, h.Get("x-tollgate-dropped-fields"), body)
			}
			if tc.sentCap != "" {
				var sent map[string]any
				_ = json.Unmarshal(s.LastRequest().Body, &sent)
				got := sent[tc.sentCap]
				if tc.sentCap == "max_uses" {
					got = sent["tools"].([]any)[0].(map[string]any)["max_uses"]
				}
				if got != tc.sentValue {
					t.Errorf("the upstream was sent %s %v, want %v", tc.sentCap, got, tc.sentValue)
				}
			}
			rec := latestUsage(t, g, tenant.Account, 1)
			checkReproducible(t, rec) // the per-call price is on the row (trial h12 D7)
			if rec.HostedCalls["web_search"] != tc.calls || rec.HostedMicros != tc.calls*searchPrice {
				t.Errorf("usage record: %d searches for %d micro-units, want %d for %d", rec.HostedCalls["web_search"], rec.HostedMicros, tc.calls, tc.calls*searchPrice)
			}
			if rec.CostMicros <= rec.HostedMicros {
				t.Errorf("cost %d does not add the tokens to the searches' %d", rec.CostMicros, rec.HostedMicros)
			}
			balance, usage := checkBooks(t, g, tenant.Account, granted)
			if usage != rec.CostMicros || balance != granted-rec.CostMicros {
				t.Errorf("balance %d, usage %d, record cost %d", balance, usage, rec.CostMicros)
			}
		})
	}

	// An upstream that fails after its searches and before any text (the client has the
	// searches' results, as Responses items or Messages blocks, then the in-band error) is
	// billed its searches: the provider ran them and bills them (trial h1: they were settled as
	// undelivered, at no cost).
	for _, tc := range []struct{ name, route, body string }{
		{"messages", "/v1/messages", strings.Replace(messages(3, true), "[[sim web_search=3]]", "[[sim web_search=3 words=3 fault=midstream after=0]]", 1)},
		{"responses", "/v1/responses", strings.Replace(responses(3, true), "[[sim web_search=3]]", "[[sim web_search=3 words=3 fault=midstream after=0]]", 1)},
	} {
		tenant := g.NewTenant(t, "failing-"+tc.name, 0, 5_000_000)
		status, _, body := do(t, c, g.URL, request{"POST", tc.route, tc.body}, map[string]string{"Authorization": "Bearer " + tenant.Key})
		if status != 200 || !strings.Contains(string(body), "error") {
			t.Fatalf("%s: %d %s", tc.name, status, body)
		}
		rec := latestUsage(t, g, tenant.Account, 1)
		if rec.HostedCalls["web_search"] != 3 || rec.HostedMicros != 3*searchPrice || rec.CostMicros < rec.HostedMicros {
			t.Errorf("%s failed after its searches: record %d searches, %d micro-units of them, cost %d, status %s",
				tc.name, rec.HostedCalls["web_search"], rec.HostedMicros, rec.CostMicros, rec.Status)
		}
	}

	// A request without the tool is billed no search; one with the tool but no search made,
	// none either.
	tenant := g.NewTenant(t, "plain", 0, 5_000_000)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	if status, _, body := do(t, c, g.URL, request{"POST", "/v1/messages", strings.Replace(messages(0, false), "[[sim web_search=0]]", "", 1)}, bearer); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if rec := latestUsage(t, g, tenant.Account, 1); rec.HostedMicros != 0 || len(rec.HostedCalls) != 0 {
		t.Errorf("no search made, record %+v", rec)
	}

	// The reservation covers five searches: an account that can pay for the tokens but not
	// for them gets 402 for the tool request, and is served without the tool.
	poor := g.NewTenant(t, "poor", 0, 40_000)
	bearer = map[string]string{"Authorization": "Bearer " + poor.Key}
	status, _, body := do(t, c, g.URL, request{"POST", "/v1/messages", messages(1, false)}, bearer)
	if status != 402 {
		t.Errorf("five searches the account cannot cover: %d %s", status, body)
	}
	if status, _, body := do(t, c, g.URL, request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`}, bearer); status != 200 {
		t.Errorf("without the tool: %d %s", status, body)
	}
}

// TestSearchResultsAreReserved: a web search's results come back as input tokens, which the
// provider bills at the model's rates on top of the search's price (Anthropic, "Web search
// tool": $10 per 1,000 searches "plus standard token costs for search-generated content"), so
// the reservation covers each search's allowance of input (input_tokens_per_call, 20,000 by
// default) and a search turn is billed in full, JSON and stream alike. Money trial D1: a turn
// of three searches whose results were 60,000 input tokens on Claude Sonnet 4.5 was billed
// 65,510 of the 217,500 micro-units due, the rest waived, because the reservation covered the
// prompt and the searches' prices only.
func TestSearchResultsAreReserved(t *testing.T) {
	usage := func([]byte) string {
		return `{"input_tokens":60000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":500,"server_tool_use":{"web_search_requests":3}}`
	}
	cfg := standInConfig(t, usage)
	for i := range cfg.Providers {
		if cfg.Providers[i].Kind == config.KindAnthropicMessages && strings.HasPrefix(cfg.Providers[i].Name, "standin-") {
			cfg.Providers[i].HostedTools = map[string]config.HostedTool{"web_search": {PricePerCallMicros: searchPrice, MaxCalls: 5}}
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	model := "cached-" + config.KindAnthropicMessages + "-messages"
	for i, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":%q,"max_tokens":1000,"stream":%t,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}],"messages":[{"role":"user","content":"What's the weather in Paris today?"}]}`, model, stream)
		status, answer := post(t, g, tenant.Key, "/v1/messages", body)
		if status != 200 {
			t.Fatalf("stream %v: %d %.300s", stream, status, answer)
		}
		rec := latestUsage(t, g, tenant.Account, int64(i+1))
		checkReproducible(t, rec)
		// 60,000 input tokens at $3 and 500 output tokens at $15 a million, and three searches
		// at $10 a thousand.
		if rec.CostMicros != 180_000+7_500+3*searchPrice || rec.WaivedMicros != 0 || rec.HostedCalls["web_search"] != 3 {
			t.Errorf("stream %v: billed %d micro-units (waived %d, %d searches), want 217,500 and nothing waived", stream, rec.CostMicros, rec.WaivedMicros, rec.HostedCalls["web_search"])
		}
	}
	checkBooks(t, g, tenant.Account, 100_000_000)
}
