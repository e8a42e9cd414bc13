package convert

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// TestToolNamesTheTargetRefuses: a tool name the target's API refuses (OpenAI's
// ^[a-zA-Z0-9_-]{1,64}$, the openai-go SDK's FunctionDefinitionParam.Name and the API's
// "string does not match pattern" 400; Anthropic's ^[a-zA-Z0-9_-]{1,128}$, its API's
// "tools.0.custom.name: String should match pattern" 400, modelcontextprotocol#1345) is refused
// by the translation with a 400 naming the place, the name and the pattern, whether the tool
// is offered, called in the history or forced by the tool choice; the same request to an
// upstream of its own format goes as sent, and a name the target takes is translated.
func TestToolNamesTheTargetRefuses(t *testing.T) {
	long := strings.Repeat("a", 100) // Anthropic takes it, OpenAI does not
	pattern := map[llm.Format]string{
		llm.FormatChat:      "^[a-zA-Z0-9_-]{1,64}$",
		llm.FormatResponses: "^[a-zA-Z0-9_-]{1,64}$",
		llm.FormatMessages:  "^[a-zA-Z0-9_-]{1,128}$",
	}
	messages := func(tools string) string {
		return `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[` + tools + `]}`
	}
	chat := func(tools string) string {
		return `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[` + tools + `]}`
	}
	responses := func(tools string) string { return `{"model":"m","input":"hi","tools":[` + tools + `]}` }
	chatHistory := `{"model":"m","messages":[{"role":"user","content":"read it"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"files.read","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"text"},{"role":"user","content":"Summarize the conversation."}]}`
	responsesHistory := `{"model":"m","input":[{"role":"user","content":"read it"},
		{"type":"function_call","call_id":"c1","name":"files.read","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"text"}]}`
	messagesHistory := `{"model":"m","max_tokens":10,"tools":[{"name":"read","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"read it"},
		{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"` + long + `","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"text"}]}]}`
	for _, c := range []struct {
		name, body string
		src, dst   llm.Format
		param      string // "" when the target takes it
		bad        string
		elsewhere  bool // the message says the client's own format takes the name
	}{
		{"messages dotted name to chat", messages(`{"name":"files.read","input_schema":{"type":"object"}}`), llm.FormatMessages, llm.FormatChat, "tools[0].name", "files.read", false},
		{"messages dotted name to responses", messages(`{"name":"files.read","input_schema":{"type":"object"}}`), llm.FormatMessages, llm.FormatResponses, "tools[0].name", "files.read", false},
		{"messages long name to chat", messages(`{"name":"ok","input_schema":{"type":"object"}},{"name":"` + long + `","input_schema":{"type":"object"}}`), llm.FormatMessages, llm.FormatChat, "tools[1].name", long, true},
		{"messages long name to responses", messages(`{"name":"` + long + `","input_schema":{"type":"object"}}`), llm.FormatMessages, llm.FormatResponses, "tools[0].name", long, true},
		{"messages long name after a client tool", messages(`{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"name":"` + long + `","input_schema":{"type":"object"}}`), llm.FormatMessages, llm.FormatChat, "tools[1].name", long, true},
		{"chat name with a space to messages", chat(`{"type":"function","function":{"name":"read file"}}`), llm.FormatChat, llm.FormatMessages, "tools[0].function.name", "read file", false},
		{"chat dotted name to responses", chat(`{"type":"function","function":{"name":"files.read"}}`), llm.FormatChat, llm.FormatResponses, "tools[0].function.name", "files.read", false},
		{"responses long name to chat", responses(`{"type":"function","name":"` + long + `"}`), llm.FormatResponses, llm.FormatChat, "tools[0].name", long, false},
		{"responses long name to messages", responses(`{"type":"function","name":"` + long + `"}`), llm.FormatResponses, llm.FormatMessages, "", "", false},
		{"chat history call to messages", chatHistory, llm.FormatChat, llm.FormatMessages, "messages[1].tool_calls[0].function.name", "files.read", false},
		{"chat history call to responses", chatHistory, llm.FormatChat, llm.FormatResponses, "messages[1].tool_calls[0].function.name", "files.read", false},
		{"responses history call to messages", responsesHistory, llm.FormatResponses, llm.FormatMessages, "input[1].name", "files.read", false},
		{"messages history call to chat", messagesHistory, llm.FormatMessages, llm.FormatChat, "messages[1].content[0].name", long, true},
		{"messages history call to responses", messagesHistory, llm.FormatMessages, llm.FormatResponses, "messages[1].content[0].name", long, true},
		{"chat tool choice to messages", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"read"}}],"tool_choice":{"type":"function","function":{"name":"a/b"}}}`, llm.FormatChat, llm.FormatMessages, "tool_choice.function.name", "a/b", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := mustDecode(t, c.src, []byte(c.body))
			if req.MaxTokens == 0 {
				req.MaxTokens = 100
			}
			out, _, err := EncodeRequest(c.dst, req, "up")
			if c.param == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !strings.Contains(string(out), `"name":"`+long+`"`) {
					t.Errorf("the name is not sent: %s", out)
				}
				return
			}
			ae := invalid(t, err, c.param)
			for _, want := range []string{"'" + c.param + "'", `"` + c.bad + `"`, pattern[c.dst], formatNames[c.dst]} {
				if !strings.Contains(ae.Message, want) {
					t.Errorf("message %q does not say %q", ae.Message, want)
				}
			}
			if got := strings.Contains(ae.Message, "which takes it"); got != c.elsewhere {
				t.Errorf("message %q: says the client's format takes it: %v, want %v", ae.Message, got, c.elsewhere)
			}
			// An upstream of the client's own format is sent the request as it came.
			same, dropped, err := EncodeRequest(c.src, req, "m")
			if err != nil || !strings.Contains(string(same), `"`+c.bad+`"`) {
				t.Errorf("same format: %v %q %s", err, dropped, same)
			}
		})
	}
}

// TestRepeatedToolCallIDsGetFreshOnes: a history whose calls repeat an id (two calls of a turn
// with the same id, ids that restart every turn as some upstreams give them) reaches an
// upstream of another format with the later calls, and the results that answer them, given
// fresh ids ("_2", "_3", skipping ids the request has), paired as they were, each named; every
// API refuses repeated ids (Anthropic: "messages.N.content.M: `tool_use` ids must be unique";
// OpenAI chat: "Duplicate value for 'tool_call_id'"). An upstream of the client's own format is
// sent the ids as they came.
func TestRepeatedToolCallIDsGetFreshOnes(t *testing.T) {
	chat := `{"model":"m","tools":[{"type":"function","function":{"name":"read"}}],"messages":[{"role":"user","content":"read a and b"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"read:0","type":"function","function":{"name":"read","arguments":"{\"p\":\"a\"}"}},{"id":"read:0","type":"function","function":{"name":"read","arguments":"{\"p\":\"b\"}"}}]},
		{"role":"tool","tool_call_id":"read:0","content":"A"},{"role":"tool","tool_call_id":"read:0","content":"B"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"read:0","type":"function","function":{"name":"read","arguments":"{\"p\":\"c\"}"}},{"id":"read:0_2","type":"function","function":{"name":"read","arguments":"{\"p\":\"d\"}"}}]},
		{"role":"tool","tool_call_id":"read:0","content":"C"},{"role":"tool","tool_call_id":"read:0_2","content":"D"},
		{"role":"user","content":"and now?"}]}`
	messages := `{"model":"m","max_tokens":10,"tools":[{"name":"read","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"read a and b"},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"read","input":{"p":"a"}},{"type":"tool_use","id":"toolu_1","name":"read","input":{"p":"b"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"A"},{"type":"tool_result","tool_use_id":"toolu_1","content":"B"}]},
		{"role":"assistant","content":"done"},{"role":"user","content":"and now?"}]}`
	// pairs are the (arguments' p, result) of each call as sent, by id: each call's result is
	// the one the client gave it, in order.
	wantPairs := map[string]map[string]string{
		"chat":     {"a": "A", "b": "B", "c": "C", "d": "D"},
		"messages": {"a": "A", "b": "B"},
	}
	named := map[llm.Format]string{
		llm.FormatChat:     "messages[].tool_calls[] (repeated tool call id: a fresh one given)",
		llm.FormatMessages: "messages[].content[] (repeated tool call id: a fresh one given)",
	}
	for _, c := range []struct {
		name     string
		src, dst llm.Format
		body     string
		ids      []string
	}{
		{"chat", llm.FormatChat, llm.FormatMessages, chat, []string{"read_0_", "read_0_3_", "read_0_4_", "read_0_2_"}},
		{"chat", llm.FormatChat, llm.FormatResponses, chat, []string{"read:0", "read:0_3", "read:0_4", "read:0_2"}},
		{"messages", llm.FormatMessages, llm.FormatChat, messages, []string{"toolu_1", "toolu_1_2"}},
		{"messages", llm.FormatMessages, llm.FormatResponses, messages, []string{"toolu_1", "toolu_1_2"}},
	} {
		t.Run(c.name+" to "+string(c.dst), func(t *testing.T) {
			req := mustDecode(t, c.src, []byte(c.body))
			if req.MaxTokens == 0 {
				req.MaxTokens = 100
			}
			out, dropped, err := EncodeRequest(c.dst, req, "up")
			if err != nil {
				t.Fatal(err)
			}
			if c.dst == llm.FormatMessages {
				if v := anthropicToolRules(t, out); v != "" {
					t.Errorf("the Messages API would refuse it: %s\n%s", v, out)
				}
				// What the reservation counts covers what the translation adds.
				v, err := jsonview.Parse([]byte(c.body))
				if err != nil {
					t.Fatal(err)
				}
				if extra, n := (len(out)-len(c.body))/BytesPerToken, AnthropicToolTokens(c.src, v); extra > n {
					t.Errorf("%d bytes more sent (%d tokens), %d counted", len(out)-len(c.body), extra, n)
				}
			}
			calls, pairs := sentToolHistory(t, c.dst, out)
			if len(calls) != len(c.ids) {
				t.Fatalf("calls %q, want %d", calls, len(c.ids))
			}
			for i, id := range calls {
				// A Messages id is the client's made valid (its ':' replaced, a hash appended).
				if !strings.HasPrefix(id, c.ids[i]) || (c.dst != llm.FormatMessages && id != c.ids[i]) {
					t.Errorf("call %d: id %q, want %q", i, id, c.ids[i])
				}
			}
			if !reflect.DeepEqual(pairs, wantPairs[c.name]) {
				t.Errorf("calls and results %v, want %v\n%s", pairs, wantPairs[c.name], out)
			}
			found := false
			for _, d := range dropped {
				found = found || d == named[c.src]
			}
			if !found {
				t.Errorf("dropped %q, want %q named", dropped, named[c.src])
			}
			// An upstream of the client's own format is sent the ids as they came.
			if same, _, err := EncodeRequest(c.src, req, "m"); err != nil || strings.Contains(string(same), c.ids[1]) {
				t.Errorf("same format: %v %s", err, same)
			}
		})
	}
}

// sentToolHistory reads the tool calls of a request body of format f: their ids in order, and
// for each call the result sent with its id, by the call's argument p.
func sentToolHistory(t *testing.T, f llm.Format, body []byte) (ids []string, pairs map[string]string) {
	t.Helper()
	args := map[string]string{}    // id → p
	results := map[string]string{} // id → result text
	argOf := func(raw string) string {
		var a struct{ P string }
		if err := json.Unmarshal([]byte(raw), &a); err != nil {
			t.Fatalf("arguments %s: %v", raw, err)
		}
		return a.P
	}
	switch f {
	case llm.FormatChat:
		var req struct {
			Messages []struct {
				Role       string `json:"role"`
				Content    any    `json:"content"`
				ToolCallID string `json:"tool_call_id"`
				ToolCalls  []struct {
					ID       string `json:"id"`
					Function struct{ Arguments string }
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		for _, m := range req.Messages {
			for _, c := range m.ToolCalls {
				ids = append(ids, c.ID)
				args[c.ID] = argOf(c.Function.Arguments)
			}
			if m.Role == "tool" {
				if _, dup := results[m.ToolCallID]; dup {
					t.Errorf("Duplicate value for 'tool_call_id' of '%s'", m.ToolCallID)
				}
				results[m.ToolCallID], _ = m.Content.(string)
			}
		}
	case llm.FormatResponses:
		var req struct {
			Input []struct {
				Type      string `json:"type"`
				CallID    string `json:"call_id"`
				Arguments string `json:"arguments"`
				Output    any    `json:"output"`
			} `json:"input"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		for _, it := range req.Input {
			switch it.Type {
			case "function_call":
				ids = append(ids, it.CallID)
				args[it.CallID] = argOf(it.Arguments)
			case "function_call_output":
				results[it.CallID], _ = it.Output.(string)
			}
		}
	case llm.FormatMessages:
		var req messagesBody
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		for _, m := range req.Messages {
			var blocks []struct {
				historyBlock
				Input json.RawMessage `json:"input"`
			}
			if len(m.Content) == 0 || m.Content[0] != '[' {
				continue
			}
			if err := json.Unmarshal(m.Content, &blocks); err != nil {
				t.Fatal(err)
			}
			for _, b := range blocks {
				switch b.Type {
				case "tool_use":
					ids = append(ids, b.ID)
					args[b.ID] = argOf(string(b.Input))
				case "tool_result":
					var s string
					_ = json.Unmarshal(b.Content, &s)
					results[b.ToolUseID] = s
				}
			}
		}
	}
	if len(ids) != len(args) {
		t.Errorf("repeated ids sent: %q", ids)
	}
	pairs = map[string]string{}
	for id, p := range args {
		pairs[p] = results[id]
	}
	return ids, pairs
}

// TestRepeatedCallIDFound: repeatedCallID finds a repeated id wherever it is, in histories
// scanned with the hash set (up to repeatScanLimit calls) and with a map (more), and finds
// none in histories whose ids are all different (their hashes may meet).
func TestRepeatedCallIDFound(t *testing.T) {
	history := func(n int, ids func(i int) string) []llm.Message {
		var msgs []llm.Message
		for i := range n {
			msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: ids(i)}}},
				llm.Message{Role: llm.RoleTool, ToolCallID: ids(i)})
		}
		return msgs
	}
	for _, n := range []int{2, 3, repeatScanLimit, repeatScanLimit + 1, 500} {
		if repeatedCallID(history(n, func(i int) string { return fmt.Sprintf("call_%d", i) })) {
			t.Errorf("%d calls of their own: a repeat found", n)
		}
		for _, at := range []int{1, n / 2, n - 1} {
			if at == 0 {
				continue
			}
			msgs := history(n, func(i int) string { return fmt.Sprintf("call_%d", i) })
			msgs[2*at].ToolCalls[0].ID = "call_0"
			if !repeatedCallID(msgs) {
				t.Errorf("%d calls, call %d repeats call 0: not found", n, at)
			}
		}
	}
	two := []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a"}, {ID: "a"}}}}
	if !repeatedCallID(two) {
		t.Error("two calls of one turn with one id: not found")
	}
}
