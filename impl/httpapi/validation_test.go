package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestValidationAcceptsWhatRealClientsSend: unknown body fields, unknown query parameters, roles,
// content-part and tool types beyond the documented lists all pass the gateway's validation and
// reach a same-format upstream untouched (the simulator, like the real APIs, may still refuse
// what it does not know; that refusal is the upstream's, passed through).
func TestValidationAcceptsWhatRealClientsSend(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: passthroughConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 1_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key, "anthropic-version": "2023-06-01", "anthropic-beta": "tools-2024-04-04,prompt-caching-2024-07-31", "X-Stainless-Retry-Count": "0"}
	cases := []request{
		{"POST", "/v1/chat/completions?beta=true&foo=bar", `{"model":"service-flint-base","messages":[
			{"role":"developer","content":"be brief"},
			{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"future_part","x":1}]},
			{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"42"},
			{"role":"some_new_role","content":"?"}],
			"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}},{"type":"custom","custom":{"name":"g"}}],
			"tool_choice":{"type":"function","function":{"name":"f"}},"stream":false,"stream_options":null,
			"seed":1,"logprobs":false,"metadata":{"a":"b"},"service_tier":"auto","reasoning_effort":"low","prediction":{"type":"content","content":"x"},
			"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},"stop":["\n"],"n":1,"max_completion_tokens":64}`},
		{"POST", "/v1/responses", `{"model":"test-responses","input":[{"role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"https://x/y.png"}]},{"type":"function_call_output","call_id":"c","output":"1"}],
			"instructions":"be brief","tools":[{"type":"function","name":"f","parameters":{}},{"type":"local_shell"}],"text":{"format":{"type":"text"}},"reasoning":{"effort":"low"},"store":false,"include":["reasoning.encrypted_content"]}`},
		{"POST", "/v1/messages?beta=true", `{"model":"service-sonnet","max_tokens":64,"system":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}],
			"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"document","source":{"type":"text","data":"d"}}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"42"}]}],
			"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"bash_20250124","name":"bash"}],"tool_choice":{"type":"auto"},
			"thinking":{"type":"enabled","budget_tokens":1024},"metadata":{"user_id":"u"},"future_field":{"x":1},"context_management":{}}`},
	}
	for _, r := range cases {
		status, _, body := do(t, c, g.URL, r, bearer)
		if status != http.StatusOK && !strings.Contains(string(body), "the upstream refused the request") {
			t.Errorf("%s %s: status %d, want it to pass the gateway's validation: %s", r.method, r.path, status, body)
		}
	}
	// The unknown fields reached the upstream byte for byte (container and item_reference, which
	// name state the provider keeps for every tenant alike, are refused: TestProviderStateIsNotShared,
	// TestProviderStateReferencesAreRefused; so are
	// tools the provider bills per use: TestPerUseBilledToolsAreRefused; and audio, which the
	// gateway does not meter: TestAudioRefused).
	if last := string(g.Sim.LastRequest().Body); !strings.Contains(last, `"context_management":{}`) || !strings.Contains(last, `"future_field":{"x":1}`) {
		t.Errorf("unknown Messages fields did not pass through: %s", last)
	}
}

// TestValidationRejectsWithFieldNamed: violations answer 400 in the route's envelope naming the
// offending field.
func TestValidationRejectsWithFieldNamed(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 1_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	cases := []struct {
		r         request
		wantParam string // "" when the body as a whole is at fault
		wantText  string
	}{
		{request{"POST", "/v1/chat/completions", `{"model":"service-flint"}`}, "messages", "'messages' is required"},
		{request{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`}, "model", "'model' is required"},
		{request{"POST", "/v1/chat/completions", `{"model":"service-flint","messages":"hi"}`}, "messages", "messages"},
		{request{"POST", "/v1/chat/completions", `{"model":"service-flint","messages":[{"content":"hi"}]}`}, "messages[0].role", "'messages[0].role' is required"},
		{request{"POST", "/v1/chat/completions", `{"model":"service-flint","messages":[{"role":"user","content":"hi"}],"temperature":7}`}, "temperature", "temperature"},
		{request{"POST", "/v1/chat/completions", `{"model":"service-flint","messages":[{"role":"user","content":"hi"}],"max_tokens":"many"}`}, "max_tokens", "max_tokens"},
		{request{"POST", "/v1/chat/completions", `{"model":`}, "", "not valid JSON: it ends early"},
		{request{"POST", "/v1/chat/completions", "{\"model\":\"service-flint\",\n\"messages\":[],}"}, "", "not valid JSON: unexpected character '}' (line 2, column 15)"},
		{request{"POST", "/v1/chat/completions", `{"model":"service-flint","messages":[{"role":"user","content":"hi"}],"temperature":1e400}`}, "temperature", "invalid 'temperature': the number is out of range"},
		{request{"POST", "/v1/responses", `{"model":"service-flint","input":null}`}, "input", "invalid 'input': must not be null"},
		{request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":9,"temperature":null,"messages":[{"role":"user","content":"hi"}]}`}, "temperature", "invalid 'temperature': must not be null"},
		{request{"POST", "/v1/chat/completions", ` `}, "", "body is required"},
		{request{"POST", "/v1/responses", `{"model":"service-flint"}`}, "input", "'input' is required"},
		{request{"POST", "/v1/messages", `{"model":"service-sonnet","messages":[{"role":"user","content":"hi"}]}`}, "max_tokens", "'max_tokens' is required"},
		{request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`}, "max_tokens", "max_tokens"},
		{request{"POST", "/v1/agents", `{"prompt":"x"}`}, "slot", "'slot' is required"},
		{request{"POST", "/v1/agents/slot-1/messages", `{}`}, "text", "'text' is required"},
	}
	for _, tc := range cases {
		status, _, body := do(t, c, g.URL, tc.r, bearer)
		if status != http.StatusBadRequest {
			t.Errorf("%s %s: status %d, want 400: %s", tc.r.method, tc.r.body, status, body)
			continue
		}
		env := errorEnvelopeOf(body)
		if env.Error.Type != "invalid_request_error" || !strings.Contains(env.Error.Message, tc.wantText) {
			t.Errorf("%s %s: envelope %s, want invalid_request_error mentioning %q", tc.r.path, tc.r.body, body, tc.wantText)
		}
		if tc.r.path == "/v1/messages" {
			if env.Type != "error" {
				t.Errorf("%s: not the Messages envelope: %s", tc.r.path, body)
			}
			continue
		}
		got := ""
		if env.Error.Param != nil {
			got = *env.Error.Param
		}
		if got != tc.wantParam {
			t.Errorf("%s %s: param %q, want %q (%s)", tc.r.path, tc.r.body, got, tc.wantParam, body)
		}
	}
}

// TestCompressedBodyIsRefused: a body sent with a Content-Encoding (gzip, say) is refused with a
// 400 that says so, in the route's envelope, and reaches no upstream; the same body sent plainly
// is served on the same connection.
func TestCompressedBodyIsRefused(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 1_000_000)
	c := g.Client(t)
	plain := `{"model":"service-flint","messages":[{"role":"user","content":"hi"}]}`
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write([]byte(plain))
	zw.Close()
	before := g.Sim.TotalRequests()
	for _, encoding := range []string{"gzip", "br, gzip"} {
		status, _, body := do(t, c, g.URL, request{"POST", "/v1/chat/completions", zipped.String()},
			map[string]string{"Authorization": "Bearer " + tenant.Key, "Content-Encoding": encoding})
		env := errorEnvelopeOf(body)
		if status != http.StatusBadRequest || env.Error.Type != "invalid_request_error" ||
			env.Error.Message != "the request body is encoded (Content-Encoding: "+encoding+"): send it uncompressed, without Content-Encoding" {
			t.Errorf("Content-Encoding %s: %d %s", encoding, status, body)
		}
	}
	status, _, body := do(t, c, g.URL, request{"POST", "/v1/messages", zipped.String()},
		map[string]string{"Authorization": "Bearer " + tenant.Key, "Content-Encoding": "gzip"})
	if env := errorEnvelopeOf(body); status != http.StatusBadRequest || env.Type != "error" || !strings.Contains(env.Error.Message, "Content-Encoding: gzip") {
		t.Errorf("Messages, gzip: %d %s", status, body)
	}
	if n := g.Sim.TotalRequests(); n != before {
		t.Errorf("%d compressed requests reached the upstream", n-before)
	}
	status, _, body = do(t, c, g.URL, request{"POST", "/v1/chat/completions", plain},
		map[string]string{"Authorization": "Bearer " + tenant.Key, "Content-Encoding": "identity"})
	if status != http.StatusOK {
		t.Errorf("Content-Encoding identity: %d %s", status, body)
	}
}

// passthroughConfig is the default configuration plus a chat-family model served by a
// Responses upstream, so every route has a same-format upstream.
func passthroughConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Models = append(cfg.Models, config.Model{ID: "test-responses", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, MaxOutputTokens: 4096,
		Backend: &config.Upstream{Provider: "sim-openai-responses", Model: "sim-responses"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "test-responses")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}
