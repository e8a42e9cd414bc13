package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/apitest"
	"github.com/tollgate/tollgate/impl/sim"
)

// TestProviderStateIsNotShared: every tenant reaches a provider through the gateway's one
// account, so ids of state the provider keeps there (a stored response or conversation, a
// code-execution container) are refused in the route's envelope, and a Responses upstream is
// told not to store the answer, whatever the client asked (a store: true is named as dropped).
func TestProviderStateIsNotShared(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	refused := []struct {
		r            request
		param, etype string
	}{
		{request{"POST", "/v1/responses", `{"model":"test-responses","input":"hi","previous_response_id":"resp_abc"}`}, "previous_response_id", "invalid_request_error"},
		{request{"POST", "/v1/responses", `{"model":"test-responses","input":"hi","conversation":"conv_abc"}`}, "conversation", "invalid_request_error"},
		{request{"POST", "/v1/responses", `{"model":"service-flint","max_output_tokens":5000,"input":"hi","previous_response_id":"resp_abc"}`}, "previous_response_id", "invalid_request_error"},
		// Ranked first here is the chat expert, whose translation lacks the field too: the
		// reason given is still the gateway's own.
		{request{"POST", "/v1/responses", `{"model":"service-flint","input":"hi","previous_response_id":"resp_abc"}`}, "previous_response_id", "invalid_request_error"},
		{request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":16,"container":"container_abc","messages":[{"role":"user","content":"hi"}]}`}, "", "invalid_request_error"},
	}
	for _, tc := range refused {
		s.Reset()
		status, _, body := do(t, c, g.URL, tc.r, bearer)
		env := errorEnvelopeOf(body)
		if status != 400 || env.Error.Type != tc.etype || (tc.param != "" && (env.Error.Param == nil || *env.Error.Param != tc.param)) {
			t.Errorf("%s: %d %s", tc.r.body, status, body)
		}
		if tc.param == "" && !strings.Contains(env.Error.Message, "container") {
			t.Errorf("%s: the message does not name the field: %s", tc.r.body, body)
		}
		if !strings.Contains(env.Error.Message, "no provider-side state") {
			t.Errorf("%s: the message does not say why: %s", tc.r.body, body)
		}
		if n := s.TotalRequests(); n != 0 {
			t.Errorf("%s: the upstream saw %d requests", tc.r.body, n)
		}
	}

	for _, body := range []string{
		`{"model":"test-responses","input":"hi","store":true}`,
		`{"model":"test-responses","input":"hi"}`,
	} {
		status, h, answer := do(t, c, g.URL, request{"POST", "/v1/responses", body}, bearer)
		if status != 200 {
			t.Fatalf("%s: %d %s", body, status, answer)
		}
		var sent struct {
			Store *bool `json:"store"`
		}
		if err := json.Unmarshal(s.LastRequest().Body, &sent); err != nil || sent.Store == nil || *sent.Store {
			t.Errorf("%s: the upstream was sent %s", body, s.LastRequest().Body)
		}
		if dropped := h.Get("x-tollgate-dropped-fields"); strings.Contains(body, `"store":true`) != strings.Contains(dropped, "store") {
			t.Errorf("%s: dropped fields %q", body, dropped)
		}
	}
}

// TestPerUseBilledToolsAreRefused: tools the provider runs and bills per use (a search, a
// container hour, ...) would be paid by the operator and never billed to the tenant, who is
// billed per token, so they are refused before any upstream call: with the reason when the
// upstream speaks the client's format, as a field the translation cannot honour otherwise.
func TestPerUseBilledToolsAreRefused(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	const billed = "bills it per use, which tollgate does not meter"
	cases := []struct {
		r      request
		param  string // "" for the Messages envelope, which has no param
		reason string // what the message must say
	}{
		{request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":50}]}`}, "", "'web_search_20250305' (tools[0])"},
		{request{"POST", "/v1/responses", `{"model":"test-responses","input":"hi","tools":[{"type":"web_search_preview"}]}`}, "tools[0].type", billed},
		{request{"POST", "/v1/chat/completions", `{"model":"service-flint-base","messages":[{"role":"user","content":"hi"}],"web_search_options":{}}`}, "web_search_options", billed},
		// The chat expert, whose translation lacks the tool, may rank first: the reason given
		// is still the gateway's own.
		{request{"POST", "/v1/responses", `{"model":"service-flint","input":"hi","tools":[{"type":"function","name":"f","parameters":{}},{"type":"file_search","vector_store_ids":["vs_1"]}]}`}, "tools[1].type", billed},
		// Translated: the tool is not silently dropped.
		{request{"POST", "/v1/messages", `{"model":"messages-via-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`}, "", "tools[0]"},
	}
	for _, tc := range cases {
		s.Reset()
		status, _, body := do(t, c, g.URL, tc.r, bearer)
		env := errorEnvelopeOf(body)
		if status != 400 || env.Error.Type != "invalid_request_error" || (tc.param != "" && (env.Error.Param == nil || *env.Error.Param != tc.param)) {
			t.Errorf("%s: %d %s", tc.r.body, status, body)
		}
		if !strings.Contains(env.Error.Message, tc.reason) {
			t.Errorf("%s: the message does not say %q: %s", tc.r.body, tc.reason, body)
		}
		if n := s.TotalRequests(); n != 0 {
			t.Errorf("%s: the upstream saw %d requests", tc.r.body, n)
		}
	}

	// Tools the client runs cost only tokens and still go through.
	for _, r := range []request{
		{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"bash_20250124","name":"bash"}]}`},
		{"POST", "/v1/responses", `{"model":"test-responses","input":"hi","tools":[{"type":"function","name":"f","parameters":{}},{"type":"local_shell"}]}`},
	} {
		if status, _, body := do(t, c, g.URL, r, bearer); status != 200 {
			t.Errorf("%s: %d %s", r.body, status, body)
		}
	}
}
