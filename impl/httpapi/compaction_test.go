package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestCompactionOutputIsBilledWhole: server-side compaction (context_management's
// compact_20260112 edit, beta compact-2026-01-12) summarizes the conversation in a sampling step
// of its own, which Anthropic bills beside the answer's and reports in usage.iterations
// (https://platform.claude.com/docs/en/build-with-claude/compaction, whose example the
// stand-in answers with: 23,000 input and 1,000 output tokens at the top level, 180,000 and
// 3,500 in the compaction iteration). Its summary is not bounded by the request's max_tokens,
// but the gateway clamped the whole output to it: with max_tokens 1,024 the turn was billed
// 1,024 of its 4,500 output tokens, the rest neither billed nor recorded as waived. At $3 and
// $15 a million the turn costs 203,000 × $3 + 4,500 × $15 = 676,500 micro-units, JSON and
// stream alike, relayed or translated.
func TestCompactionOutputIsBilledWhole(t *testing.T) {
	g := compactingGateway(t)
	const granted = 100_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	// A conversation long enough that the reservation covers the compaction's input.
	history := longPrompt(270_000)
	n := int64(0)
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"compacting-messages","max_tokens":1024,"stream":%t,"context_management":{"edits":[{"type":"compact_20260112"}]},"messages":[{"role":"user","content":%q}]}`, stream, history)
		status, answer := post(t, g, tenant.Key, "/v1/messages", body)
		if status != http.StatusOK {
			t.Fatalf("stream %v: %d %.300s", stream, status, answer)
		}
		n++
		rec := latestUsage(t, g, tenant.Account, n)
		checkReproducible(t, rec)
		if rec.OutputTokens != 4_500 || rec.InputTokens != 203_000 || rec.CostMicros != 676_500 || rec.WaivedMicros != 0 {
			t.Errorf("stream %v: billed %d (waived %d) for %d input and %d output tokens; want 676,500 for 203,000 and 4,500",
				stream, rec.CostMicros, rec.WaivedMicros, rec.InputTokens, rec.OutputTokens)
		}
	}
	// Translated for a chat client, the same turn is billed the same.
	status, answer := post(t, g, tenant.Key, "/v1/chat/completions", inferenceBody("/v1/chat/completions", "compacting-chat", history, false))
	if status != http.StatusOK {
		t.Fatalf("chat: %d %.300s", status, answer)
	}
	if rec := latestUsage(t, g, tenant.Account, n+1); rec.OutputTokens != 4_500 || rec.CostMicros != 676_500 {
		t.Errorf("chat: billed %d for %d output tokens; want 676,500 for 4,500", rec.CostMicros, rec.OutputTokens)
	}
	if !strings.Contains(string(answer), `"completion_tokens":4500`) {
		t.Errorf("chat: the answer does not show the 4,500 output tokens billed: %.400s", answer)
	}
	checkBooks(t, g, tenant.Account, granted)
}

// TestCompactionOutputIsReserved: a Messages request that asks for server-side compaction (a
// compact edit in context_management) is reserved, beside its answer, for the summary that
// compaction may write: billed as output whatever max_tokens says (TestCompactionOutputIsBilledWhole)
// and read back as input by the answer's step. Anthropic bounds the summary by no parameter,
// so it is reserved at the model's output bound: 8,000 tokens × $15 + 8,000 × $6 (a one-hour
// cache write, the dearest input) = 168,000 micro-units more than the same request without it;
// an edit that only clears tool results asks for nothing more. A balance that covers the answer
// alone is refused with 402. On the code before, the request was reserved for its max_tokens
// only (the difference was 0, and that balance was served), so a summary beyond the slack of
// the input's estimate was waived.
func TestCompactionOutputIsReserved(t *testing.T) {
	g := compactingGateway(t)
	// Three requests of the same length (the reservation counts the body's bytes), padded in the
	// conversation's text, that differ only in their context_management.
	const size = 4_000
	body := func(field string) string {
		head := `{"model":"compacting-messages","max_tokens":1024,` + field + `"messages":[{"role":"user","content":"`
		tail := `"}]}`
		return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
	}
	compacting := body(`"context_management":{"edits":[{"type":"compact_20260112"}]},`)
	clearing := body(`"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]},`)
	plain := body("")
	broke := g.NewTenant(t, "broke", 0, 0)
	needs := func(tenant apitest.Tenant, what, body string) int64 {
		return neededFor(t, g, tenant, "/v1/messages", what, body)
	}
	answerOnly := needs(broke, "without compaction", plain)
	if got := needs(broke, "with compaction", compacting) - answerOnly; got != 168_000 {
		t.Errorf("compaction is reserved %d micro-units beside the answer; want 168,000 (8,000 tokens at $15 and at $6)", got)
	}
	if got := needs(broke, "clearing tool results", clearing) - answerOnly; got != 0 {
		t.Errorf("an edit that clears tool results is reserved %d micro-units more; want 0", got)
	}
	short := g.NewTenant(t, "short", 0, answerOnly)
	needs(short, "with compaction, on a balance that covers the answer alone", compacting)
	checkBooks(t, g, short.Account, answerOnly)
}

// compactingGateway is a gateway whose models compacting-messages and compacting-chat (at $3 and
// $15 a million, 8,000 output tokens at most) are served by a stand-in Anthropic upstream that
// answers every request, JSON or stream, with the usage of Anthropic's compaction example
// (https://platform.claude.com/docs/en/build-with-claude/compaction, "Understanding usage").
func compactingGateway(t *testing.T) *apitest.Gateway {
	const iterations = `"iterations":[{"type":"compaction","input_tokens":180000,"output_tokens":3500},{"type":"message","input_tokens":23000,"output_tokens":1000}]`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		_, _ = io.Copy(io.Discard, r.Body)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"compaction","content":"Summary of the conversation."},{"type":"text","text":"Based on our conversation, here it is."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":23000,"output_tokens":1000,`+iterations+`}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-6\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":23000,\"output_tokens\":1}}}\n\n")
		fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Based on our conversation, here it is.\"}}\n\n")
		fmt.Fprint(w, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":23000,\"output_tokens\":1000,"+iterations+"}}\n\n")
		fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	t.Cleanup(up.Close)
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "compacting", Kind: config.KindAnthropicMessages, BaseURL: up.URL})
	for _, family := range []string{config.FamilyMessages, config.FamilyChat} {
		cfg.Models = append(cfg.Models, config.Model{ID: "compacting-" + family, Family: family, OwnedBy: "test",
			Price: config.Price{InputPerMTok: 3_000_000, OutputPerMTok: 15_000_000}, MaxOutputTokens: 8000, ContextTokens: 1_000_000,
			Backend: &config.Upstream{Provider: "compacting", Model: "claude-sonnet-4-6"}})
		cfg.Plans[0].Models = append(cfg.Plans[0].Models, "compacting-"+family)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return apitest.Start(t, apitest.Options{Config: cfg})
}

// TestResponsesCompactionOutputIsBilled: OpenAI's server-side compaction (a Responses request's
// context_management entry of type compaction, with its compact_threshold) runs a compaction
// pass that emits an encrypted compaction item before the answer
// (developers.openai.com/api/docs/guides/compaction). OpenAI's usage has no part of its own for
// that pass, so an answer that compacted may report more output than max_output_tokens: it is
// billed up to the bound the reservation holds for the compaction (the model's output bound,
// 8,000 here) beyond max_output_tokens. At $3 and $15 a million, 23,000 input and 4,500 output
// tokens cost 136,500 micro-units; the same request without compaction is still billed no more
// output than it asked for. On the code before, the output was clamped to max_output_tokens and
// nothing was reserved for the compaction: 16,746 micro-units billed for 1,024 of the 4,500
// output tokens, and 67,614 waived.
func TestResponsesCompactionOutputIsBilled(t *testing.T) {
	g := responsesCompactingGateway(t)
	const granted = 100_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	for i, c := range []struct {
		field          string
		in, out, costs int64
	}{
		{`"context_management":[{"type":"compaction","compact_threshold":20000}],`, 23_000, 4_500, 136_500},
		{``, 100, 1_024, 100*3 + 1_024*15},
	} {
		body := `{"model":"compacting-responses","max_output_tokens":1024,` + c.field + `"input":"` + strings.Repeat("Where were we? ", 80) + `"}`
		status, answer := post(t, g, tenant.Key, "/v1/responses", body)
		if status != http.StatusOK {
			t.Fatalf("%q: %d %.300s", c.field, status, answer)
		}
		rec := latestUsage(t, g, tenant.Account, int64(i+1))
		checkReproducible(t, rec)
		if rec.OutputTokens != c.out || rec.InputTokens != c.in || rec.CostMicros != c.costs || rec.WaivedMicros != 0 {
			t.Errorf("%q: billed %d (waived %d) for %d input and %d output tokens; want %d for %d and %d",
				c.field, rec.CostMicros, rec.WaivedMicros, rec.InputTokens, rec.OutputTokens, c.costs, c.in, c.out)
		}
	}
	checkBooks(t, g, tenant.Account, granted)
}

// TestResponsesCompactionOutputIsReserved: a Responses request that asks for OpenAI's
// server-side compaction is reserved, beside its answer, for what the compaction pass may
// write, at the model's output bound (OpenAI publishes no bound for it), as output and as input
// read back by the answer, as Anthropic's is (TestCompactionOutputIsReserved): 8,000 tokens ×
// $15 + 8,000 × $3 (OpenAI bills no cache writes: the input's dearest kind is its own) =
// 144,000 micro-units more than the same request with an empty context_management. A balance
// that covers the answer alone is refused with 402. On the code before, the difference was 0.
func TestResponsesCompactionOutputIsReserved(t *testing.T) {
	g := responsesCompactingGateway(t)
	const size = 4_000
	body := func(field string) string {
		head := `{"model":"compacting-responses","max_output_tokens":1024,` + field + `"input":"`
		tail := `"}`
		return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
	}
	compacting := body(`"context_management":[{"type":"compaction","compact_threshold":200000}],`)
	plain := body(`"context_management":[],`)
	broke := g.NewTenant(t, "broke", 0, 0)
	needs := func(tenant apitest.Tenant, what, body string) int64 {
		return neededFor(t, g, tenant, "/v1/responses", what, body)
	}
	answerOnly := needs(broke, "without compaction", plain)
	if got := needs(broke, "with compaction", compacting) - answerOnly; got != 144_000 {
		t.Errorf("compaction is reserved %d micro-units beside the answer; want 144,000 (8,000 tokens at $15 and at $3)", got)
	}
	short := g.NewTenant(t, "short", 0, answerOnly)
	needs(short, "with compaction, on a balance that covers the answer alone", compacting)
	checkBooks(t, g, short.Account, answerOnly)
}

// responsesCompactingGateway is a gateway whose model compacting-responses (at $3 and $15 a
// million, 8,000 output tokens at most) is served by a stand-in OpenAI Responses upstream that
// answers a request that asks for compaction with a compaction item and a message, 23,000 input
// and 4,500 output tokens (the pass's output among them, which OpenAI's usage does not tell
// apart), and any other with a message, 100 input tokens and its max_output_tokens.
func responsesCompactingGateway(t *testing.T) *apitest.Gateway {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MaxOutputTokens   int             `json:"max_output_tokens"`
			ContextManagement json.RawMessage `json:"context_management"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		_, _ = io.Copy(io.Discard, r.Body)
		input, output, items := 100, req.MaxOutputTokens, ""
		if strings.Contains(string(req.ContextManagement), `"compaction"`) {
			input, output, items = 23_000, 4_500, `{"id":"cmp_1","type":"compaction","encrypted_content":"gAAAAB-opaque"},`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"resp_1","object":"response","created_at":1764777600,"status":"completed","model":"gpt-5.2","output":[%s`+
			`{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Based on our conversation, here it is.","annotations":[]}]}],`+
			`"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}`,
			items, input, output, input+output)
	}))
	t.Cleanup(up.Close)
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "compacting-openai", Kind: config.KindOpenAIResponses, BaseURL: up.URL})
	cfg.Models = append(cfg.Models, config.Model{ID: "compacting-responses", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 3_000_000, OutputPerMTok: 15_000_000}, MaxOutputTokens: 8000, ContextTokens: 400_000,
		Backend: &config.Upstream{Provider: "compacting-openai", Model: "gpt-5.2"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "compacting-responses")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return apitest.Start(t, apitest.Options{Config: cfg})
}

// neededFor posts body to path as tenant, whose balance cannot pay for it, and returns what the
// 402 says the request needs (micro-units): its reservation.
func neededFor(t *testing.T, g *apitest.Gateway, tenant apitest.Tenant, path, what, body string) int64 {
	t.Helper()
	status, answer := post(t, g, tenant.Key, path, body)
	if status != http.StatusPaymentRequired {
		t.Fatalf("%s: %d, want 402: %.300s", what, status, answer)
	}
	m := neededRe.FindStringSubmatch(string(answer))
	if m == nil {
		t.Fatalf("%s: the 402 does not say what the request needs: %.300s", what, answer)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}
