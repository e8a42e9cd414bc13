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

// TestAnthropicToolPromptIsReserved: Anthropic writes a tool-use system prompt into a request
// that offers tools (346 tokens on the Claude 4 models), and the definitions of its
// schema-less client tools (the bash tool 245 tokens, the text editor 700, computer use 735
// and up to 499 of system prompt), none of which the request's bytes hold: four tools in 300
// bytes are some 2,500 input tokens. The reservation counted the bytes (131 tokens), and a
// tenant asking for one output token, the tools written to the one-hour cache (the stand-in
// reports 2,520 one-hour cache writes, 12 uncached input tokens and 1 output, Anthropic's usage
// shape, on a model at $3 and $15 a million), was billed 801 micro-units of its 15,171: the
// rest was waived. The reservation now holds them, and nothing is waived. A chat request
// with a function tool, translated for the same upstream, is reserved the tool-use system
// prompt too (billed 177 micro-units of 1,185 before).
func TestAnthropicToolPromptIsReserved(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := io.ReadAll(r.Body)
		// Anthropic's count: the tool-use system prompt and the client tools' definitions.
		usage := `"input_tokens":390,"cache_creation_input_tokens":0`
		if strings.Contains(string(req), `"bash_20250124"`) {
			usage = `"input_tokens":12,"cache_creation_input_tokens":2520,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":2520}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Yes"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{`+usage+`,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}`)
	}))
	t.Cleanup(up.Close)
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "claude", Kind: config.KindAnthropicMessages, BaseURL: up.URL})
	for _, m := range []struct {
		id     string
		family string
	}{{"sonnet", config.FamilyMessages}, {"chat-sonnet", config.FamilyChat}} {
		cfg.Models = append(cfg.Models, config.Model{ID: m.id, Family: m.family, OwnedBy: "test",
			Price: config.Price{InputPerMTok: 3_000_000, OutputPerMTok: 15_000_000}, MaxOutputTokens: 1000, ContextTokens: 200_000,
			Backend: &config.Upstream{Provider: "claude", Model: "claude-sonnet-4-5"}})
		cfg.Plans[0].Models = append(cfg.Plans[0].Models, m.id)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	const granted = 100_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	status, body := post(t, g, tenant.Key, "/v1/messages", `{"model":"sonnet","max_tokens":1,"tools":[`+
		`{"name":"lookup","input_schema":{"type":"object"}},{"type":"bash_20250124","name":"bash"},`+
		`{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},`+
		`{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768}],`+
		`"messages":[{"role":"user","content":"Ready?"}]}`)
	if status != http.StatusOK {
		t.Fatalf("%d %.300s", status, body)
	}
	// 12 × $3 + 2,520 × $6 (a one-hour write, twice the input price) + 1 × $15 a million.
	if rec := latestUsage(t, g, tenant.Account, 1); rec.CostMicros != 15_171 || rec.WaivedMicros != 0 {
		t.Errorf("four tools, one output token: billed %d (%+v), waived %d; want 15,171 and nothing waived", rec.CostMicros, rec.Costs, rec.WaivedMicros)
	}
	// A chat client's function tool, translated: the tool-use system prompt is not in its
	// bytes. 390 uncached input tokens (346 of them the prompt) × $3 + 1 × $15 a million; the
	// bytes were reserved some 27 tokens at $6 and the output token, 177 micro-units.
	status, body = post(t, g, tenant.Key, "/v1/chat/completions", `{"model":"chat-sonnet","max_completion_tokens":1,"tools":[`+
		`{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"Ready?"}]}`)
	if status != http.StatusOK {
		t.Fatalf("%d %.300s", status, body)
	}
	if rec := latestUsage(t, g, tenant.Account, 2); rec.CostMicros != 1_185 || rec.WaivedMicros != 0 {
		t.Errorf("a chat request with a tool: billed %d (%+v), waived %d; want 1,185 and nothing waived", rec.CostMicros, rec.Costs, rec.WaivedMicros)
	}
	checkBooks(t, g, tenant.Account, granted)
}
