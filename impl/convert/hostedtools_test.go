package convert

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

// priced is a policy under which the listed hosted tools run, each at most max calls.
func priced(max int, tools ...llm.HostedTool) HostedPolicy {
	return func(t llm.HostedTool) (int, bool) { return max, slices.Contains(tools, t) }
}

// TestPlanHostedTools: a hosted tool the upstream does not run for the gateway is removed and
// named, the rest of the body untouched; one it runs stays, with the upstream's own cap set to
// the configured bound; a tool_choice forcing a removed tool is the only 400.
func TestPlanHostedTools(t *testing.T) {
	chat := func(extra string) string {
		return `{"model":"m","messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	resp := func(extra string) string { return `{"model":"m","input":"hi"` + extra + `}` }
	msgs := func(extra string) string {
		return `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	codexTools := `,"tools":[{"type":"function","name":"shell","parameters":{"type":"object"}},{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"f"}]},{"type":"web_search","external_web_access":false}]`
	cases := []struct {
		name    string
		f       llm.Format
		policy  HostedPolicy
		body    string
		want    string // the body sent ("" when it must be unchanged)
		dropped []string
		bounds  llm.HostedCalls
		refused string // the param of a 400
	}{
		{name: "chat web_search_options unpriced", f: llm.FormatChat, policy: priced(0),
			body: chat(`,"web_search_options":{"search_context_size":"high"},"stream":true`), want: chat(`,"stream":true`), dropped: []string{"web_search_options"}},
		{name: "chat web_search_options priced", f: llm.FormatChat, policy: priced(3, llm.HostedWebSearch),
			body: chat(`,"web_search_options":{}`), bounds: llm.HostedCalls{llm.HostedWebSearch: 1}},
		{name: "chat web_search_options alone", f: llm.FormatChat, policy: priced(0),
			body: `{"web_search_options":{}}`, want: `{}`, dropped: []string{"web_search_options"}},
		{name: "codex tools unpriced", f: llm.FormatResponses, policy: priced(0),
			body: resp(codexTools), want: resp(`,"tools":[{"type":"function","name":"shell","parameters":{"type":"object"}},{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"f"}]}]`), dropped: []string{"tools[].web_search"}},
		{name: "codex tools priced", f: llm.FormatResponses, policy: priced(4, llm.HostedWebSearch),
			body: resp(codexTools), want: `{"max_tool_calls":4,` + resp(codexTools)[1:], bounds: llm.HostedCalls{llm.HostedWebSearch: 4}},
		{name: "responses max_tool_calls lower than the bound", f: llm.FormatResponses, policy: priced(4, llm.HostedWebSearch),
			body: resp(`,"max_tool_calls":2,"tools":[{"type":"web_search_preview"}]`), want: resp(`,"max_tool_calls":2,"tools":[{"type":"web_search_preview"}]`), bounds: llm.HostedCalls{llm.HostedWebSearch: 4}},
		{name: "responses max_tool_calls above the bound", f: llm.FormatResponses, policy: priced(4, llm.HostedWebSearch),
			body: resp(`,"max_tool_calls":20,"tools":[{"type":"web_search"}]`), want: resp(`,"max_tool_calls":4,"tools":[{"type":"web_search"}]`), bounds: llm.HostedCalls{llm.HostedWebSearch: 4}},
		{name: "responses several hosted tools, one priced", f: llm.FormatResponses, policy: priced(2, llm.HostedFileSearch),
			body:    resp(`,"tools":[{"type":"file_search","vector_store_ids":["vs_1"]},{"type":"code_interpreter","container":{"type":"auto"}},{"type":"image_generation"}]`),
			want:    `{"max_tool_calls":2,"model":"m","input":"hi","tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]}`,
			dropped: []string{"tools[].code_interpreter", "tools[].image_generation"}, bounds: llm.HostedCalls{llm.HostedFileSearch: 2}},
		{name: "responses tool_choice forces a removed tool", f: llm.FormatResponses, policy: priced(0),
			body: resp(`,"tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}`), refused: "tool_choice"},
		{name: "responses tool_choice forces a passed tool", f: llm.FormatResponses, policy: priced(1, llm.HostedWebSearch),
			body: resp(`,"tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}`), want: `{"max_tool_calls":1,` + resp(`,"tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}`)[1:], bounds: llm.HostedCalls{llm.HostedWebSearch: 1}},
		{name: "messages web search unpriced", f: llm.FormatMessages, policy: priced(0),
			body: msgs(`,"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search","max_uses":50}]`),
			want: msgs(`,"tools":[{"name":"f","input_schema":{"type":"object"}}]`), dropped: []string{"tools[].web_search_20250305"}},
		{name: "messages web search max_uses lowered", f: llm.FormatMessages, policy: priced(5, llm.HostedWebSearch),
			body: msgs(`,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":50}]`),
			want: msgs(`,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]`), bounds: llm.HostedCalls{llm.HostedWebSearch: 5}},
		{name: "messages web search max_uses added", f: llm.FormatMessages, policy: priced(5, llm.HostedWebSearch),
			body: msgs(`,"tools":[{"type":"web_search_20250305","name":"web_search"}]`),
			want: msgs(`,"tools":[{"max_uses":5,"type":"web_search_20250305","name":"web_search"}]`), bounds: llm.HostedCalls{llm.HostedWebSearch: 5}},
		{name: "messages web search max_uses kept below", f: llm.FormatMessages, policy: priced(5, llm.HostedWebSearch),
			body: msgs(`,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":2}]`), bounds: llm.HostedCalls{llm.HostedWebSearch: 5}},
		{name: "messages code execution forced", f: llm.FormatMessages, policy: priced(0),
			body: msgs(`,"tools":[{"type":"code_execution_20250825","name":"code_execution"}],"tool_choice":{"type":"tool","name":"code_execution"}`), refused: "tool_choice"},
		{name: "messages client tool forced, hosted dropped", f: llm.FormatMessages, policy: priced(0),
			body:    msgs(`,"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"tool","name":"f"}`),
			want:    msgs(`,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"}`),
			dropped: []string{"tools[].web_search_20250305"}},
		{name: "client tools only", f: llm.FormatMessages, policy: priced(0),
			body: msgs(`,"tools":[{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"}]`)},
		// Tools that pull content into the prompt, billed as input with no bound a reservation
		// can cover, never pass, priced or not (trial h12 D10).
		{name: "messages web fetch", f: llm.FormatMessages, policy: priced(5, llm.HostedWebSearch),
			body:    msgs(`,"tools":[{"type":"bash_20250124","name":"bash"},{"type":"web_fetch_20250910","name":"web_fetch","max_uses":5}]`),
			want:    msgs(`,"tools":[{"type":"bash_20250124","name":"bash"}]`),
			dropped: []string{"tools[].web_fetch_20250910"}},
		{name: "messages mcp servers", f: llm.FormatMessages, policy: priced(0),
			body:    msgs(`,"mcp_servers":[{"type":"url","url":"https://example.com/mcp","name":"x"}]`),
			want:    msgs(``),
			dropped: []string{"mcp_servers"}},
		{name: "messages web fetch forced", f: llm.FormatMessages, policy: priced(0),
			body: msgs(`,"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}],"tool_choice":{"type":"tool","name":"web_fetch"}`), refused: "tool_choice"},
		// The advisor tool's calls are billed at another model's rates, which no price gives.
		{name: "messages advisor", f: llm.FormatMessages, policy: priced(5, llm.HostedWebSearch),
			body:    msgs(`,"tools":[{"type":"bash_20250124","name":"bash"},{"type":"advisor_20260301","name":"advisor","model":"claude-opus-4-7","max_uses":3}]`),
			want:    msgs(`,"tools":[{"type":"bash_20250124","name":"bash"}]`),
			dropped: []string{"tools[].advisor_20260301"}},
		{name: "messages advisor forced", f: llm.FormatMessages, policy: priced(0),
			body: msgs(`,"tools":[{"type":"advisor_20260301","name":"advisor","model":"claude-opus-4-7"}],"tool_choice":{"type":"tool","name":"advisor"}`), refused: "tool_choice"},
		// A code interpreter call is priced as a container of the default size: a larger
		// memory_limit (billed at up to 64 times the 1g price) is removed and named.
		{name: "responses code interpreter memory limit", f: llm.FormatResponses, policy: priced(3, llm.HostedCodeExecution),
			body:    resp(`,"tools":[{"type":"code_interpreter","container":{"type":"auto","memory_limit":"64g","memory_limit":"16g"}}]`),
			want:    `{"max_tool_calls":3,` + resp(`,"tools":[{"type":"code_interpreter","container":{"type":"auto"}}]`)[1:],
			dropped: []string{"tools[].code_interpreter.container.memory_limit"}, bounds: llm.HostedCalls{llm.HostedCodeExecution: 3}},
		{name: "responses code interpreter default size", f: llm.FormatResponses, policy: priced(3, llm.HostedCodeExecution),
			body:   resp(`,"tools":[{"type":"code_interpreter","container":{"type":"auto","memory_limit":"1g"}}]`),
			want:   `{"max_tool_calls":3,` + resp(`,"tools":[{"type":"code_interpreter","container":{"type":"auto","memory_limit":"1g"}}]`)[1:],
			bounds: llm.HostedCalls{llm.HostedCodeExecution: 3}},
		{name: "responses mcp", f: llm.FormatResponses, policy: priced(0),
			body:    resp(`,"tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"mcp","server_label":"x","server_url":"https://example.com/mcp","require_approval":"never"}]`),
			want:    resp(`,"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]`),
			dropped: []string{"tools[].mcp"}},
		{name: "responses mcp forced", f: llm.FormatResponses, policy: priced(0),
			body: resp(`,"tools":[{"type":"mcp","server_label":"x","server_url":"https://example.com/mcp"}],"tool_choice":{"type":"mcp","server_label":"x"}`), refused: "tool_choice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, out, err := planHostedTools(c.f, []byte(c.body), c.policy)
			if c.refused != "" {
				invalid(t, err, c.refused)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := c.want
			if want == "" {
				want = c.body
			}
			if string(out) != want {
				t.Errorf("body\n got %s\nwant %s", out, want)
			}
			if !json.Valid(out) {
				t.Errorf("not JSON: %s", out)
			}
			if !slices.Equal(plan.Dropped, c.dropped) {
				t.Errorf("dropped %v, want %v", plan.Dropped, c.dropped)
			}
			if plan.Bounds != c.bounds {
				t.Errorf("bounds %v, want %v", plan.Bounds, c.bounds)
			}
		})
	}
}

// TestHostedToolsTranslated: to an upstream of another format, a hosted tool, a namespace or a
// custom tool cannot be expressed: it is dropped and named, never a 400 unless tool_choice
// forces it.
func TestHostedToolsTranslated(t *testing.T) {
	cases := []struct {
		name     string
		src, dst llm.Format
		body     string
		dropped  string
		refused  string
	}{
		{"messages web search to chat", llm.FormatMessages, llm.FormatChat, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":50}]}`, "tools[].web_search_20250305", ""},
		{"messages code execution to responses", llm.FormatMessages, llm.FormatResponses, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"code_execution_20250825","name":"code_execution"}]}`, "tools[].code_execution_20250825", ""},
		{"responses web search to chat", llm.FormatResponses, llm.FormatChat, `{"model":"m","input":"hi","tools":[{"type":"web_search_preview"}]}`, "tools[].web_search_preview", ""},
		{"codex's tools to messages", llm.FormatResponses, llm.FormatMessages, `{"model":"m","input":"hi","max_tool_calls":3,"tools":[{"type":"function","name":"shell","parameters":{"type":"object"}},{"type":"namespace","name":"mcp","tools":[]},{"type":"web_search","external_web_access":false}]}`, "tools[].namespace, tools[].web_search, max_tool_calls", ""},
		{"responses image generation to messages", llm.FormatResponses, llm.FormatMessages, `{"model":"m","input":"hi","tools":[{"type":"image_generation"}]}`, "tools[].image_generation", ""},
		{"chat custom tool to messages", llm.FormatChat, llm.FormatMessages, `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"custom","custom":{"name":"g"}}]}`, "tools[].custom", ""},
		{"chat web_search_options to messages", llm.FormatChat, llm.FormatMessages, `{"model":"m","messages":[{"role":"user","content":"hi"}],"web_search_options":{}}`, "web_search_options", ""},
		{"chat web_search_options to responses", llm.FormatChat, llm.FormatResponses, `{"model":"m","messages":[{"role":"user","content":"hi"}],"web_search_options":{}}`, "web_search_options", ""},
		{"forced built-in tool", llm.FormatResponses, llm.FormatChat, `{"model":"m","input":"hi","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`, "", "tool_choice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := mustDecode(t, c.src, []byte(c.body))
			req.MaxTokens = 1000 // as the gateway does for a Messages upstream
			_, dropped, err := EncodeRequest(c.dst, req, "up")
			if c.refused != "" {
				invalid(t, err, c.refused)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range strings.Split(c.dropped, ", ") {
				if !slices.Contains(dropped, want) {
					t.Errorf("dropped %v, want it to name %s", dropped, want)
				}
			}
		})
	}
}

// TestHostedCallsInAnswers: the calls a complete answer reports are counted: Responses
// web_search_call (and the other hosted call items), Messages usage.server_tool_use and
// server_tool_use blocks (the larger count wins).
func TestHostedCallsInAnswers(t *testing.T) {
	cases := []struct {
		f    llm.Format
		body string
		want llm.HostedCalls
	}{
		{llm.FormatResponses, `{"id":"r","object":"response","status":"completed","output":[{"type":"web_search_call","id":"ws_1","status":"completed"},{"type":"web_search_call","id":"ws_2","status":"completed"},{"type":"code_interpreter_call","id":"ci"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"web_search_call"}]}],"usage":{"input_tokens":5,"output_tokens":7}}`,
			llm.HostedCalls{llm.HostedWebSearch: 2, llm.HostedCodeExecution: 1}},
		{llm.FormatResponses, `{"id":"r","object":"response","status":"completed","output":[],"usage":{"input_tokens":5,"output_tokens":7}}`, llm.HostedCalls{}},
		{llm.FormatMessages, `{"id":"m","type":"message","role":"assistant","content":[{"type":"server_tool_use","id":"s1","name":"web_search","input":{"query":"q"}},{"type":"web_search_tool_result","tool_use_id":"s1","content":[]},{"type":"text","text":"x"}],"usage":{"input_tokens":5,"output_tokens":7,"server_tool_use":{"web_search_requests":3}}}`,
			llm.HostedCalls{llm.HostedWebSearch: 3}},
		{llm.FormatMessages, `{"id":"m","type":"message","role":"assistant","content":[{"type":"server_tool_use","id":"s1","name":"bash_code_execution","input":{}},{"type":"server_tool_use","id":"s2","name":"web_search","input":{}}],"usage":{"input_tokens":5,"output_tokens":7}}`,
			llm.HostedCalls{llm.HostedWebSearch: 1, llm.HostedCodeExecution: 1}},
	}
	for _, c := range cases {
		u, err := ResponseUsage(c.f, []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if u.HostedCalls != c.want {
			t.Errorf("%s: calls %v, want %v", c.body, u.HostedCalls, c.want)
		}
	}
}
