package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestRepeatedCompactionIsReserved: with server tools, Anthropic checks the compaction trigger
// at the start of each sampling iteration, so "compaction might occur multiple times within a
// single request" (https://platform.claude.com/docs/en/build-with-claude/compaction,
// "Combining with other features", Server tools). A Messages request that asks for compaction
// and may search up to three times (the web search's max_calls, its max_uses upstream) takes a
// sampling step before its first search and one after each: it is reserved four summaries,
// 4 × 32,000 tokens × ($15 + $6) = 2,688,000 micro-units beside the same request without
// compaction; a model whose searches are bounded at 20 is reserved ten, the most steps
// Anthropic's server-side loop takes before it pauses the turn (pause_turn). A turn that
// compacts twice between its searches is billed whole, nothing waived. On the code before, the
// request was reserved one summary (672,000 micro-units), and the turn that compacted twice was
// billed 1,085,454 micro-units of its 1,620,360, 534,906 waived: the operator paid the
// provider for a summary its tenant was never charged.
func TestRepeatedCompactionIsReserved(t *testing.T) {
	const summary = 32_000 // the model's output bound
	// The turn: a step that searches, a step that searches again, a compaction, a step that
	// searches, a compaction, the answer's step (the top level sums the steps that are not
	// compactions).
	const usage = `"usage":{"input_tokens":95000,"output_tokens":1024,"server_tool_use":{"web_search_requests":3},"iterations":[` +
		`{"type":"message","input_tokens":1500,"output_tokens":200},{"type":"message","input_tokens":27000,"output_tokens":200},` +
		`{"type":"compaction","input_tokens":52000,"output_tokens":32000},{"type":"message","input_tokens":33000,"output_tokens":200},` +
		`{"type":"compaction","input_tokens":58000,"output_tokens":32000},{"type":"message","input_tokens":33500,"output_tokens":424}]}`
	const want = (95_000+52_000+58_000)*3 + (1_024+2*summary)*15 + 3*10_000 // micro-units: $3 and $15 a million, $10 a thousand searches
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[`+
			`{"type":"compaction","content":"Summary of the conversation and the searches."},{"type":"text","text":"Here is what the searches found."}],`+
			`"stop_reason":"end_turn","stop_sequence":null,`+usage+`}`)
	}))
	t.Cleanup(up.Close)
	cfg := config.Default()
	for _, c := range []struct {
		name     string
		maxCalls int
	}{{"searching", 3}, {"searching-long", 20}} {
		cfg.Providers = append(cfg.Providers, config.Provider{Name: c.name, Kind: config.KindAnthropicMessages, BaseURL: up.URL,
			HostedTools: map[string]config.HostedTool{"web_search": {PricePerCallMicros: 10_000, MaxCalls: c.maxCalls}}})
		cfg.Models = append(cfg.Models, config.Model{ID: c.name + "-messages", Family: config.FamilyMessages, OwnedBy: "test",
			Price: config.Price{InputPerMTok: 3_000_000, OutputPerMTok: 15_000_000}, MaxOutputTokens: summary, ContextTokens: 1_000_000,
			Backend: &config.Upstream{Provider: c.name, Model: "claude-sonnet-4-6"}})
		cfg.Plans[0].Models = append(cfg.Plans[0].Models, c.name+"-messages")
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	body := func(model, field string) string {
		head := `{"model":"` + model + `","max_tokens":1024,` + field + `"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"`
		tail := `"}]}`
		return head + strings.Repeat("x", 4_000-len(head)-len(tail)) + tail
	}
	const compacting = `"context_management":{"edits":[{"type":"compact_20260112"}]},`
	const plain = `"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]},` // the same length, no compaction
	broke := g.NewTenant(t, "broke", 0, 0)
	for _, c := range []struct {
		model     string
		summaries int64
	}{{"searching-messages", 4}, {"searching-long-messages", 10}} {
		got := neededFor(t, g, broke, "/v1/messages", c.model+" with compaction", body(c.model, compacting)) -
			neededFor(t, g, broke, "/v1/messages", c.model+" without", body(c.model, plain))
		if want := c.summaries * summary * (15 + 6); got != want {
			t.Errorf("%s: compaction is reserved %d micro-units beside the answer; want %d (%d summaries of %d tokens at $15 and at $6)",
				c.model, got, want, c.summaries, summary)
		}
	}

	const granted = 100_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	status, answer := post(t, g, tenant.Key, "/v1/messages", body("searching-messages", compacting))
	if status != http.StatusOK {
		t.Fatalf("%d %.300s", status, answer)
	}
	rec := latestUsage(t, g, tenant.Account, 1)
	checkReproducible(t, rec)
	if rec.OutputTokens != 1_024+2*summary || rec.CostMicros != want || rec.WaivedMicros != 0 {
		t.Errorf("a turn that compacted twice: billed %d (waived %d) for %d output tokens; want %d for %d, nothing waived",
			rec.CostMicros, rec.WaivedMicros, rec.OutputTokens, want, 1_024+2*summary)
	}
	checkBooks(t, g, tenant.Account, granted)
}
