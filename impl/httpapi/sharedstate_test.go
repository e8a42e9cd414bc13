package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
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
		// A background response is kept by the provider to be polled (GET /v1/responses/{id},
		// which the gateway does not serve): passed through, the client got a response it could
		// never fetch, and the upstream went on generating with nothing billed for it.
		{request{"POST", "/v1/responses", `{"model":"test-responses","input":"hi","background":true}`}, "background", "invalid_request_error"},
		{request{"POST", "/v1/responses", `{"model":"service-flint","input":"hi","background":true,"stream":true}`}, "background", "invalid_request_error"},
		// A model served only by translation refuses them for the same reason, not as fields
		// its upstream's format lacks (which said a Responses-served model takes them as sent).
		{request{"POST", "/v1/responses", `{"model":"service-flint-base","input":"hi","previous_response_id":"resp_abc"}`}, "previous_response_id", "invalid_request_error"},
		{request{"POST", "/v1/responses", `{"model":"service-flint-base","input":"hi","background":true}`}, "background", "invalid_request_error"},
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
		`{"model":"test-responses","input":"hi","background":false}`,
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

// TestProviderStateReferencesAreRefused: inside the messages too, a reference to what the
// provider keeps for the gateway's one account (a file by its id, a stored item, a stored
// prompt, a file put into a container) is refused in the route's envelope, naming where it
// is, before any upstream call; however its key is spelt (a \u escape). The same content sent
// as itself (file data, a base64 document, an image URL) and text that merely mentions such
// words pass.
func TestProviderStateReferencesAreRefused(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	msgs := func(content string) string {
		return `{"model":"service-sonnet","max_tokens":16,"messages":[{"role":"user","content":` + content + `}]}`
	}
	refused := []struct {
		r     request
		param string
	}{
		{request{"POST", "/v1/responses", `{"model":"test-responses","input":[{"type":"item_reference","id":"msg_other"}]}`}, "input[0].id"},
		{request{"POST", "/v1/responses", `{"model":"test-responses","input":[{"role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_file","file_id":"file-other"}]}]}`}, "input[0].content[1].file_id"},
		{request{"POST", "/v1/responses", `{"model":"test-responses","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-img","detail":"auto"}]}]}`}, "input[0].content[0].file_id"},
		{request{"POST", "/v1/responses", `{"model":"test-responses","input":[{"role":"user","content":[{"type":"input_file","file\u005fid":"file-other"}]}]}`}, "input[0].content[0].file_id"},
		{request{"POST", "/v1/responses", `{"model":"test-responses","input":"hi","prompt":{"id":"pmpt_operator"}}`}, "prompt"},
		{request{"POST", "/v1/messages", msgs(`[{"type":"document","source":{"type":"file","file_id":"file_011CNha8"}},{"type":"text","text":"hi"}]`)}, "messages[0].content[0].source.file_id"},
		{request{"POST", "/v1/messages", msgs(`[{"type":"image","source":{"type":"file","file_id":"file_011CNha8"}}]`)}, "messages[0].content[0].source.file_id"},
		{request{"POST", "/v1/messages", msgs(`[{"type":"container_upload","file_id":"file_011CNha8"}]`)}, "messages[0].content[0].file_id"},
		{request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":16,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"image","source":{"type":"file","file_id":"file_x"}}]}]}]}`}, "messages[2].content[0].content[0].source.file_id"},
		{request{"POST", "/v1/chat/completions", `{"model":"service-flint-base","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"file","file":{"file_id":"file-other"}}]}]}`}, "messages[0].content[1].file.file_id"},
	}
	for _, tc := range refused {
		s.Reset()
		status, _, body := do(t, c, g.URL, tc.r, bearer)
		env := errorEnvelopeOf(body)
		if status != 400 || env.Error.Type != "invalid_request_error" || !strings.Contains(env.Error.Message, "no provider-side state") {
			t.Errorf("%s: %d %s", tc.r.body, status, body)
		}
		if !strings.HasPrefix(tc.r.path, "/v1/messages") && (env.Error.Param == nil || *env.Error.Param != tc.param) {
			t.Errorf("%s: param %v, want %s", tc.r.body, env.Error.Param, tc.param)
		}
		if !strings.Contains(env.Error.Message, tc.param) {
			t.Errorf("%s: the message does not name %s: %s", tc.r.body, tc.param, body)
		}
		if n := s.TotalRequests(); n != 0 {
			t.Errorf("%s: the upstream saw %d requests", tc.r.body, n)
		}
	}
	for _, r := range []request{
		{"POST", "/v1/responses", `{"model":"test-responses","input":[{"role":"user","content":[{"type":"input_text","text":"what is \"file_id\" or item_reference?"},{"type":"input_file","filename":"a.txt","file_data":"data:text/plain;base64,aGk="}]}]}`},
		{"POST", "/v1/responses", `{"model":"test-responses","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}]}`},
		{"POST", "/v1/messages", msgs(`[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"a \"file\" of text"}},{"type":"text","text":"the file"}]`)},
		{"POST", "/v1/chat/completions", `{"model":"service-flint-base","messages":[{"role":"user","content":"a \"file_id\" in text"}]}`},
	} {
		s.Reset()
		if status, _, body := do(t, c, g.URL, r, bearer); status != 200 || s.TotalRequests() != 1 {
			t.Errorf("%s: %d %s", r.body, status, body)
		}
	}
}

// unpricedConfig is contractConfig with no hosted tool priced: every one is dropped.
func unpricedConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := contractConfig(t)
	for i := range cfg.Providers {
		cfg.Providers[i].HostedTools = nil
	}
	return cfg
}

// TestHostedToolsDroppedWhereNotPriced: a tool the provider runs and bills per call (a web
// search, a file search, ...) that the configuration gives no price never fails a request: it
// is removed before the upstream call and named in x-tollgate-dropped-fields, whether the
// upstream speaks the client's format or is translated. Only a tool_choice forcing that very
// tool is a 400. Client tools, namespaces and unknown tool types of the client's format reach
// a same-format upstream untouched.
func TestHostedToolsDroppedWhereNotPriced(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: unpricedConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	codexTools := `[{"type":"function","name":"shell","parameters":{"type":"object","properties":{}}},{"type":"namespace","name":"mcp__tollgate","description":"tools","tools":[{"type":"function","name":"query_data","parameters":{"type":"object"}}]},{"type":"web_search","external_web_access":false}]`
	cases := []struct {
		r       request
		dropped string
		kept    []string // what the upstream must still get
		gone    []string // what it must not
	}{
		{request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search","max_uses":50}]}`},
			"tools[].web_search_20250305", []string{`"name":"f"`}, []string{"web_search"}},
		{request{"POST", "/v1/responses", `{"model":"test-responses","input":"hi","tools":[{"type":"web_search_preview"}]}`},
			"tools[].web_search_preview", nil, []string{"web_search"}},
		{request{"POST", "/v1/responses", `{"model":"test-responses","input":"hi","stream":true,"tools":` + codexTools + `}`},
			"tools[].web_search", []string{`"type":"namespace"`, `"name":"shell"`, `"name":"query_data"`}, []string{"web_search"}},
		{request{"POST", "/v1/chat/completions", `{"model":"service-flint-base","messages":[{"role":"user","content":"hi"}],"web_search_options":{}}`},
			"web_search_options", nil, []string{"web_search_options"}},
		{request{"POST", "/v1/responses", `{"model":"service-flint-base","input":"hi","tools":[{"type":"function","name":"f","parameters":{}},{"type":"file_search","vector_store_ids":["vs_1"]}]}`},
			"tools[].file_search", []string{`"name":"f"`}, []string{"file_search", "vs_1"}},
		{request{"POST", "/v1/messages", `{"model":"messages-via-chat","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`},
			"tools[].web_search_20250305", nil, []string{"web_search"}},
		{request{"POST", "/v1/responses", `{"model":"service-flint-base","input":"hi","tools":` + codexTools + `}`},
			"tools[].namespace, tools[].web_search", []string{`"name":"shell"`}, []string{"web_search", "namespace"}},
	}
	for _, tc := range cases {
		s.Reset()
		status, h, body := do(t, c, g.URL, tc.r, bearer)
		if status != 200 {
			t.Errorf("%s: %d %s", tc.r.body, status, body)
			continue
		}
		dropped := h.Get("x-tollgate-dropped-fields")
		for _, name := range strings.Split(tc.dropped, ", ") {
			if !slices.Contains(strings.Split(dropped, ", "), name) {
				t.Errorf("%s: dropped fields %q, want %s named", tc.r.body, dropped, name)
			}
		}
		sent := string(s.LastRequest().Body)
		for _, want := range tc.kept {
			if !strings.Contains(sent, want) {
				t.Errorf("%s: the upstream was sent %s, without %s", tc.r.body, sent, want)
			}
		}
		for _, unwanted := range tc.gone {
			if strings.Contains(sent, unwanted) {
				t.Errorf("%s: the upstream was sent %s, with %s", tc.r.body, sent, unwanted)
			}
		}
	}

	// A tool_choice forcing a dropped tool cannot be honoured: 400, before any upstream call.
	for _, r := range []request{
		{"POST", "/v1/responses", `{"model":"test-responses","input":"hi","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`},
		{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"tool","name":"web_search"}}`},
	} {
		s.Reset()
		status, _, body := do(t, c, g.URL, r, bearer)
		env := errorEnvelopeOf(body)
		if status != 400 || !strings.Contains(env.Error.Message, "tool_choice") || s.TotalRequests() != 0 {
			t.Errorf("%s: %d %s (upstream saw %d)", r.body, status, body, s.TotalRequests())
		}
	}

	// Tools the client runs cost only tokens and go through untouched.
	for _, r := range []request{
		{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"bash_20250124","name":"bash"}]}`},
		{"POST", "/v1/responses", `{"model":"test-responses","input":"hi","tools":[{"type":"function","name":"f","parameters":{}},{"type":"local_shell"}]}`},
	} {
		if status, h, body := do(t, c, g.URL, r, bearer); status != 200 || h.Get("x-tollgate-dropped-fields") != "" {
			t.Errorf("%s: %d dropped %q %s", r.body, status, h.Get("x-tollgate-dropped-fields"), body)
		}
	}
}

// TestUntranslatableToolsPreferOwnFormat: a request offering tools that only its own format
// can express (Codex's namespace of MCP tools) goes to a fusion expert of that format, which
// gets them whole, whatever the router would rank first; a request without such tools is
// routed as before.
func TestUntranslatableToolsPreferOwnFormat(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	// "tools" and code in the prompt would rank sim-coder (Messages) first.
	codex := `{"model":"service-flint","input":"fix this func main() {}","tools":[{"type":"function","name":"shell","parameters":{"type":"object"}},{"type":"namespace","name":"mcp__tollgate","description":"d","tools":[{"type":"function","name":"query_data","parameters":{"type":"object"}}]}]}`
	status, h, body := do(t, c, g.URL, request{"POST", "/v1/responses", codex}, bearer)
	if status != 200 || h.Get("x-tollgate-expert") != "sim-openai-responses/sim-reasoner" || h.Get("x-tollgate-dropped-fields") != "" {
		t.Fatalf("%d expert %q dropped %q: %s", status, h.Get("x-tollgate-expert"), h.Get("x-tollgate-dropped-fields"), body)
	}
	if sent := string(s.LastRequest().Body); !strings.Contains(sent, `"type":"namespace"`) || !strings.Contains(sent, `"name":"query_data"`) {
		t.Errorf("the upstream was sent %s", sent)
	}
	plain := `{"model":"service-flint","input":"fix this func main() {}","tools":[{"type":"function","name":"shell","parameters":{"type":"object"}}]}`
	if status, h, body := do(t, c, g.URL, request{"POST", "/v1/responses", plain}, bearer); status != 200 || h.Get("x-tollgate-expert") != "sim-anthropic/sim-coder" {
		t.Errorf("function tools only: %d expert %q: %s", status, h.Get("x-tollgate-expert"), body)
	}
}

// TestUnpricedServiceTierIsDropped: a same-format request for a service tier the price catalog
// has no price for (OpenAI's priority, flex, scale) goes upstream without it, the provider's
// standard tier, and service_tier is named in x-tollgate-dropped-fields; otherwise the answer
// would be billed at the standard price for what the provider bills at another (trial h1:
// priority, about 1.75 times standard, billed at standard). auto and default pass.
func TestUnpricedServiceTierIsDropped(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	for _, tc := range []struct {
		r       request
		dropped bool
	}{
		{request{"POST", "/v1/chat/completions", `{"model":"service-flint-base","service_tier":"priority","messages":[{"role":"user","content":"hi"}]}`}, true},
		{request{"POST", "/v1/chat/completions", `{"model":"service-flint-base","service_tier":"flex","messages":[{"role":"user","content":"hi"}]}`}, true},
		{request{"POST", "/v1/responses", `{"model":"test-responses","service_tier":"priority","input":"hi"}`}, true},
		{request{"POST", "/v1/chat/completions", `{"model":"service-flint-base","service_tier":"auto","messages":[{"role":"user","content":"hi"}]}`}, false},
		{request{"POST", "/v1/responses", `{"model":"test-responses","service_tier":"default","input":"hi"}`}, false},
	} {
		sent, named := sentAndDropped(t, s, c, g.URL, tc.r, bearer, "service_tier")
		if strings.Contains(sent, "service_tier") == tc.dropped || named != tc.dropped {
			t.Errorf("%s: the upstream was sent %s; service_tier named as dropped: %v", tc.r.body, sent, named)
		}
	}
}

// TestContentToolsAreDropped: the tools that make the provider pull content into the prompt by
// itself (Messages web_fetch and mcp_servers, Responses mcp), billed as input with no bound the
// reservation can cover, are removed before the upstream and named in the dropped list; the
// rest of the request is served. Trial h12 D10: they passed, and 99.5 % of such a request's
// cost was waived. So is Messages' advisor tool, billed at another model's rates (trial h3: it
// passed, unbilled).
func TestContentToolsAreDropped(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	for _, tc := range []struct {
		r       request
		dropped string
	}{
		{request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":32,"tools":[{"type":"web_fetch_20250910","name":"web_fetch","max_uses":5}],"messages":[{"role":"user","content":"fetch https://example.com/big"}]}`}, "tools[].web_fetch_20250910"},
		{request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":32,"mcp_servers":[{"type":"url","url":"https://example.com/mcp","name":"x"}],"messages":[{"role":"user","content":"hi"}]}`}, "mcp_servers"},
		// Anthropic's advisor tool: each call a sub-inference of the model it names, billed at
		// that model's rates and reported apart from the top-level usage.
		{request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":32,"tools":[{"type":"advisor_20260301","name":"advisor","model":"claude-opus-4-7","max_uses":3}],"messages":[{"role":"user","content":"plan this"}]}`}, "tools[].advisor_20260301"},
		{request{"POST", "/v1/responses", `{"model":"test-responses","input":"hi","tools":[{"type":"mcp","server_label":"x","server_url":"https://example.com/mcp","require_approval":"never"}]}`}, "tools[].mcp"},
	} {
		sent, named := sentAndDropped(t, s, c, g.URL, tc.r, bearer, tc.dropped)
		if strings.Contains(sent, "web_fetch") || strings.Contains(sent, "mcp_servers") || strings.Contains(sent, `"mcp"`) || strings.Contains(sent, "advisor") || !named {
			t.Errorf("%s: the upstream was sent %s; %s named as dropped: %v", tc.r.body, sent, tc.dropped, named)
		}
	}
}

// sentAndDropped sends r on the gateway at url and returns the body its upstream, s, was sent
// and whether the answer's x-tollgate-dropped-fields names field; a status other than 200
// fails the test.
func sentAndDropped(t *testing.T, s *sim.Simulator, c *http.Client, url string, r request, bearer map[string]string, field string) (sent string, named bool) {
	t.Helper()
	s.Reset()
	status, h, body := do(t, c, url, r, bearer)
	if status != 200 {
		t.Fatalf("%s: %d %s", r.body, status, body)
	}
	return string(s.LastRequest().Body), slices.Contains(strings.Split(h.Get("x-tollgate-dropped-fields"), ", "), field)
}

// TestChatCompletionIsNotStored: a chat request asking the upstream to store its completion
// (store: true, OpenAI's stored completions, kept with its metadata under the operator's
// account, where only the operator's key lists and reads them) is sent store: false, and the
// store is named as dropped; a chat request that did not ask gains no store field. Through the
// official openai-go client, streamed and not, to a chat upstream.
func TestChatCompletionIsNotStored(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := openAIClient(g, t, tenant.Key)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		store  param.Opt[bool]
		stream bool
	}{
		{"store true", openai.Bool(true), false},
		{"store true, streamed", openai.Bool(true), true},
		{"store false", openai.Bool(false), false},
		{"no store", param.Opt[bool]{}, false},
	} {
		s.Reset()
		p := openai.ChatCompletionNewParams{Model: "service-flint-base", Store: tc.store,
			Metadata: shared.Metadata{"ticket": "T-1"},
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")}}
		var res *http.Response
		if tc.stream {
			st := c.Chat.Completions.NewStreaming(ctx, p, option.WithResponseInto(&res))
			for st.Next() {
			}
			if err := st.Err(); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		} else if _, err := c.Chat.Completions.New(ctx, p, option.WithResponseInto(&res)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var sent struct {
			Store *bool `json:"store"`
		}
		if err := json.Unmarshal(s.LastRequest().Body, &sent); err != nil {
			t.Fatal(err)
		}
		asked := tc.store.Valid() && tc.store.Value
		switch {
		case asked && (sent.Store == nil || *sent.Store):
			t.Errorf("%s: the upstream was sent %s, want store false", tc.name, s.LastRequest().Body)
		case !tc.store.Valid() && sent.Store != nil:
			t.Errorf("%s: the upstream was sent a store the client did not send: %s", tc.name, s.LastRequest().Body)
		case tc.store.Valid() && !asked && (sent.Store == nil || *sent.Store):
			t.Errorf("%s: the upstream was sent %s, want the client's store false", tc.name, s.LastRequest().Body)
		}
		if dropped := res.Header.Get("x-tollgate-dropped-fields"); asked != slices.Contains(strings.Split(dropped, ", "), "store") {
			t.Errorf("%s: dropped fields %q", tc.name, dropped)
		}
	}
}
