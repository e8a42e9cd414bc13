package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestAudioRefused: the meter has no audio kind, so a request that carries audio or asks for it
// is refused with 400 invalid_request_error naming the field, before any reservation or upstream
// call, on the chat route relayed to an upstream of its own format (where nothing else would
// stop it: gpt-4o-audio-preview bills audio at $40 and $80 per million tokens, and the gateway
// billed it at the text rates, 9,000 micro-units against the provider's 81,500) and on the
// Responses route translated to it. Nothing is billed, the upstream is never called, and a
// text-only request to the same model is served and billed.
func TestAudioRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "prices.json")
	// The shape of LiteLLM's gpt-4o-audio-preview entry (OpenAI's prices: text $2.50/$10,
	// audio $40/$80 per million tokens).
	if err := os.WriteFile(file, []byte(`{"gpt-4o-audio-preview":{"input_cost_per_audio_token":4e-05,"input_cost_per_token":2.5e-06,"litellm_provider":"openai","max_input_tokens":128000,"max_output_tokens":16384,"mode":"chat","output_cost_per_audio_token":8e-05,"output_cost_per_token":1e-05,"supports_audio_input":true,"supports_audio_output":true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-audio-preview","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],"usage":{"prompt_tokens":200,"completion_tokens":100,"total_tokens":300}}`)
	}))
	t.Cleanup(upstream.Close)

	cfg, err := config.Parse([]byte("price_catalog: {litellm_file: " + file + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "audio", Kind: config.KindOpenAIChat, BaseURL: upstream.URL})
	cfg.Models = append(cfg.Models, config.Model{ID: "audio-model", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{Catalog: "gpt-4o-audio-preview"}, MaxOutputTokens: 4000, ContextTokens: 128000,
		Backend: &config.Upstream{Provider: "audio", Model: "gpt-4o-audio-preview"}})
	if len(cfg.Plans) == 0 {
		cfg.Plans = config.Default().Plans
	}
	for i := range cfg.Plans {
		cfg.Plans[i].Models = []string{"audio-model"}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	const granted = 1_000_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)

	wav := strings.Repeat("UklGR", 8000)
	part := `{"type":"input_audio","input_audio":{"data":"` + wav + `","format":"wav"}}`
	output := `"modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"}`
	for _, tc := range []struct{ name, route, body, param string }{
		// The audit's request: audio in and out.
		{"chat, audio in and out", "/v1/chat/completions", `{"model":"audio-model","max_tokens":1000,` + output + `,"messages":[{"role":"user","content":[{"type":"text","text":"What is in this recording?"},` + part + `]}]}`, "modalities"},
		{"chat, audio in", "/v1/chat/completions", `{"model":"audio-model","max_tokens":1000,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"What is in this recording?"},` + part + `]}]}`, "messages[1].content[1]"},
		{"chat, audio in, streamed", "/v1/chat/completions", `{"model":"audio-model","stream":true,"messages":[{"role":"user","content":[` + part + `]}]}`, "messages[0].content[0]"},
		{"chat, audio out", "/v1/chat/completions", `{"model":"audio-model",` + output + `,"messages":[{"role":"user","content":"Say hello."}]}`, "modalities"},
		{"chat, audio object alone", "/v1/chat/completions", `{"model":"audio-model","audio":{"voice":"alloy","format":"wav"},"messages":[{"role":"user","content":"Say hello."}]}`, "audio"},
		{"chat, earlier audio answer", "/v1/chat/completions", `{"model":"audio-model","messages":[{"role":"user","content":"Say hello."},{"role":"assistant","audio":{"id":"audio_abc"}},{"role":"user","content":"Again."}]}`, "messages[1].audio"},
		{"chat, escaped member name", "/v1/chat/completions", `{"model":"audio-model","messages":[{"role":"user","content":[{"type":"input_\u0061udio","input_\u0061udio":{"data":"UklGR","format":"wav"}}]}]}`, "messages[0].content[0]"},
		{"responses, audio in", "/v1/responses", `{"model":"audio-model","input":[{"role":"user","content":[{"type":"input_text","text":"What is in this recording?"},` + part + `]}]}`, "input[0].content[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, g, tenant.Key, tc.route, tc.body)
			if status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %.300s", status, body)
			}
			var envelope struct {
				Error *struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    any     `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &envelope); err != nil || envelope.Error == nil {
				t.Fatalf("not the OpenAI error envelope: %s", body)
			}
			e := envelope.Error
			if e.Type != "invalid_request_error" || e.Param == nil || *e.Param != tc.param {
				t.Errorf("type %q param %v, want invalid_request_error naming %q: %s", e.Type, e.Param, tc.param, body)
			}
			if !strings.Contains(e.Message, "audio is not metered by this gateway") || !strings.Contains(e.Message, "'"+tc.param+"'") {
				t.Errorf("the message does not name %q and say that audio is not metered: %q", tc.param, e.Message)
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the upstream was called %d times for requests that carry audio", n)
	}
	if records, usage, err := g.Store.UsageTotals(context.Background(), tenant.Account.ID); err != nil || records != 0 || usage != 0 {
		t.Errorf("refused requests left %d usage records costing %d (%v)", records, usage, err)
	}

	// The same model without audio is served and billed: 200 × $2.50 + 100 × $10 per million.
	status, body := post(t, g, tenant.Key, "/v1/chat/completions", `{"model":"audio-model","max_tokens":1000,"modalities":["text"],"messages":[{"role":"user","content":[{"type":"text","text":"What is an audio codec?"}]}],"tools":[{"type":"function","function":{"name":"play","parameters":{"type":"object","properties":{"audio":{"type":"string"}}}}}]}`)
	if status != 200 {
		t.Fatalf("a text request: %d %.300s", status, body)
	}
	rec := latestUsage(t, g, tenant.Account, 1)
	if rec.CostMicros != 1_500 || calls.Load() != 1 {
		t.Errorf("a text request: billed %d (want 1,500), %d upstream calls (want 1)", rec.CostMicros, calls.Load())
	}
	checkBooks(t, g, tenant.Account, granted)
}
