package convert

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// TestSharedStateFields: fields naming provider-kept state are refused, naming the field;
// null ones and nested ones are not; store: true is reported as dropped.
func TestSharedStateFields(t *testing.T) {
	cases := []struct {
		f       llm.Format
		body    string
		param   string   // refused field, "" for none
		dropped []string // when not refused
	}{
		{llm.FormatResponses, `{"model":"m","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id", nil},
		{llm.FormatResponses, `{"model":"m","input":"hi","conversation":{"id":"conv_1"}}`, "conversation", nil},
		{llm.FormatResponses, `{"model":"m","input":"hi","previous_response_id":null}`, "", nil},
		{llm.FormatResponses, `{"model":"m","input":[{"role":"user","content":"hi","previous_response_id":"x"}]}`, "", nil},
		{llm.FormatResponses, `{"model":"m","input":"hi","store":true}`, "", []string{"store"}},
		{llm.FormatResponses, `{"model":"m","input":"hi","store":false}`, "", nil},
		{llm.FormatResponses, `{"model":"m","input":"hi"}`, "", nil},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"container":"container_1"}`, "container", nil},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[]}`, "", nil},
		{llm.FormatChat, `{"model":"m","messages":[],"store":true}`, "", nil},
	}
	for _, c := range cases {
		dropped, err := SharedStateFields(c.f, []byte(c.body))
		var e *apierror.Error
		switch {
		case c.param != "" && (!errors.As(err, &e) || e.Param != c.param || e.Kind != apierror.KindInvalidRequest):
			t.Errorf("%s: err %v, want a 400 naming %s", c.body, err, c.param)
		case c.param == "" && (err != nil || !slices.Equal(dropped, c.dropped)):
			t.Errorf("%s: dropped %v, err %v; want %v", c.body, dropped, err, c.dropped)
		}
	}
}

// TestForUpstreamNoStore: store becomes false, whether absent, true or already false, with
// the other rewrites in the same pass.
func TestForUpstreamNoStore(t *testing.T) {
	cases := map[string]string{
		`{"model":"a","input":"hi"}`:              `{"store":false,"model":"up","input":"hi"}`,
		`{"model":"a","store":true,"input":"hi"}`: `{"model":"up","store":false,"input":"hi"}`,
		`{"store":false}`:                         `{"model":"up","store":false}`,
		`{}`:                                      `{"model":"up","store":false}`,
	}
	for in, want := range cases {
		got, err := ForUpstream(nil, []byte(in), "up", UpstreamEdits{NoStore: true})
		if err != nil || string(got) != want {
			t.Errorf("%s: %s, %v; want %s", in, got, err, want)
		}
	}
	got, err := ForUpstream(nil, []byte(`{"input":"hi"}`), "up", UpstreamEdits{NoStore: true, IncludeUsage: true})
	if want := `{"model":"up","stream_options":{"include_usage":true},"store":false,"input":"hi"}`; err != nil || string(got) != want {
		t.Errorf("all three added: %s, %v; want %s", got, err, want)
	}
}

// TestPerUseBilledToolsRefused: a tool the provider runs and bills per use is a 400 naming
// where it is, with a message that says why, when the request would go as it is to an
// upstream of its own format.
func TestPerUseBilledToolsRefused(t *testing.T) {
	chat := func(extra string) string {
		return `{"model":"m","messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	resp := func(extra string) string { return `{"model":"m","input":"hi"` + extra + `}` }
	msgs := func(extra string) string {
		return `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	cases := []struct {
		f     llm.Format
		body  string
		param string
	}{
		{llm.FormatChat, chat(`,"web_search_options":{}`), "web_search_options"},
		{llm.FormatChat, chat(`,"web_search_options":{"search_context_size":"high"}`), "web_search_options"},
		{llm.FormatResponses, resp(`,"tools":[{"type":"web_search"}]`), "tools[0].type"},
		{llm.FormatResponses, resp(`,"tools":[{"type":"web_search_preview"}]`), "tools[0].type"},
		{llm.FormatResponses, resp(`,"tools":[{"type":"web_search_preview_2025_03_11"}]`), "tools[0].type"},
		{llm.FormatResponses, resp(`,"tools":[{"type":"web_search_2025_08_26"}]`), "tools[0].type"},
		{llm.FormatResponses, resp(`,"tools":[{"type":"function","name":"f","parameters":{}},{"type":"file_search","vector_store_ids":["vs_1"]}]`), "tools[1].type"},
		{llm.FormatResponses, resp(`,"tools":[{"type":"code_interpreter","container":{"type":"auto"}}]`), "tools[0].type"},
		{llm.FormatResponses, resp(`,"tools":[{"type":"image_generation"}]`), "tools[0].type"},
		{llm.FormatResponses, resp(`,"tools":[{"type":"web\u005fsearch"}]`), "tools[0].type"},
		{llm.FormatResponses, resp(`,"tool_choice":{"type":"web_search_preview"}`), "tool_choice.type"},
		{llm.FormatMessages, msgs(`,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":50}]`), "tools[0].type"},
		{llm.FormatMessages, msgs(`,"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}]`), "tools[1].type"},
		{llm.FormatMessages, msgs(`,"tools":[{"type":"code_execution_20250522","name":"code_execution"}]`), "tools[0].type"},
		{llm.FormatMessages, msgs(`,"tools":[{"type":"code_execution_20250825","name":"code_execution"}]`), "tools[0].type"},
	}
	for _, c := range cases {
		_, err := SharedStateFields(c.f, []byte(c.body))
		var e *apierror.Error
		if !errors.As(err, &e) || e.Kind != apierror.KindInvalidRequest || e.Param != c.param {
			t.Errorf("%s: err %v, want a 400 naming %s", c.body, err, c.param)
			continue
		}
		if !strings.Contains(e.Message, "bills it per use, which tollgate does not meter") || !strings.Contains(e.Message, "not available through the gateway") {
			t.Errorf("%s: message %q does not say why", c.body, e.Message)
		}
		if where, _, _ := strings.Cut(c.param, "."); c.param != "web_search_options" && !strings.Contains(e.Message, "("+where+")") {
			t.Errorf("%s: message %q does not say where (the Messages envelope has no param)", c.body, e.Message)
		}
	}
}

// TestClientToolsPass: tools the client runs cost only tokens and go through untouched, as do
// an unset web_search_options and a "type" that is not a tool's own.
func TestClientToolsPass(t *testing.T) {
	cases := []struct {
		f    llm.Format
		body string
	}{
		{llm.FormatChat, `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object"}}},{"type":"custom","custom":{"name":"g"}}]}`},
		{llm.FormatChat, `{"model":"m","messages":[],"web_search_options":null}`},
		{llm.FormatResponses, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"type":{"type":"string","enum":["web_search"]}}}},{"type":"custom","name":"g"},{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"browser"},{"type":"local_shell"}],"tool_choice":"auto"}`},
		{llm.FormatResponses, `{"model":"m","input":"hi","tool_choice":{"type":"function","name":"f"},"tools":null}`},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"custom","name":"g","input_schema":{"type":"object"}},{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768},{"type":"web_fetch_20250910","name":"web_fetch"}]}`},
		// Chat has no server tools: a tool type of another format means nothing there.
		{llm.FormatChat, `{"model":"m","messages":[],"tools":[{"type":"web_search"}]}`},
	}
	for _, c := range cases {
		if dropped, err := SharedStateFields(c.f, []byte(c.body)); err != nil || dropped != nil {
			t.Errorf("%s: dropped %v, err %v; want it to pass", c.body, dropped, err)
		}
	}
}

// TestPerUseBilledToolsTranslated: a request with a per-use-billed tool routed to an upstream
// of another format decodes (the tool is noted, not lost) and is refused by the translation
// with a 400 naming the tool, never sent without it.
func TestPerUseBilledToolsTranslated(t *testing.T) {
	cases := []struct {
		name     string
		src, dst llm.Format
		body     string
		param    string
	}{
		{"messages web search to chat", llm.FormatMessages, llm.FormatChat, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":50}]}`, "tools[0]"},
		{"messages code execution to responses", llm.FormatMessages, llm.FormatResponses, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"code_execution_20250825","name":"code_execution"}]}`, "tools[1]"},
		{"responses web search to chat", llm.FormatResponses, llm.FormatChat, `{"model":"m","input":"hi","tools":[{"type":"web_search_preview"}]}`, "tools[0]"},
		{"responses web search to messages", llm.FormatResponses, llm.FormatMessages, `{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, "tools[0]"},
		{"responses image generation to messages", llm.FormatResponses, llm.FormatMessages, `{"model":"m","input":"hi","tools":[{"type":"image_generation"}]}`, "tools[0]"},
		{"chat web_search_options to messages", llm.FormatChat, llm.FormatMessages, `{"model":"m","messages":[{"role":"user","content":"hi"}],"web_search_options":{}}`, "web_search_options"},
		{"chat web_search_options to responses", llm.FormatChat, llm.FormatResponses, `{"model":"m","messages":[{"role":"user","content":"hi"}],"web_search_options":{}}`, "web_search_options"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := mustDecode(t, c.src, []byte(c.body))
			req.MaxTokens = 1000 // as the gateway does for a Messages upstream
			_, _, err := EncodeRequest(c.dst, req, "up")
			invalid(t, err, c.param)
		})
	}
}
