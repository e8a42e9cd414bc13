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

// messagesBody is the part of a Messages request the tool-history tests read.
type messagesBody struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

// historyBlock is a content block as the tool-history tests read it.
type historyBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// anthropicToolRules is what the Messages API says of body's tool history, "" when it takes
// it: tools must be defined when the messages hold tool_use or tool_result blocks, tool_use ids
// must be unique in the request, each tool_use must have its tool_result in the next message,
// and each tool_result its tool_use in the message before.
func anthropicToolRules(t *testing.T, body []byte) string {
	t.Helper()
	var req messagesBody
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	blocks := make([][]historyBlock, len(req.Messages))
	any := false
	for i, m := range req.Messages {
		if len(m.Content) > 0 && m.Content[0] == '[' {
			if err := json.Unmarshal(m.Content, &blocks[i]); err != nil {
				t.Fatal(err)
			}
		}
		for _, b := range blocks[i] {
			any = any || b.Type == "tool_use" || b.Type == "tool_result"
		}
	}
	if any && len(req.Tools) == 0 {
		return "no tools"
	}
	ids := map[string]bool{}
	for i := range req.Messages {
		for j, b := range blocks[i] {
			if b.Type == "tool_use" {
				if ids[b.ID] {
					return fmt.Sprintf("messages.%d.content.%d: `tool_use` ids must be unique", i, j)
				}
				ids[b.ID] = true
			}
		}
	}
	for i, m := range req.Messages {
		for _, b := range blocks[i] {
			if b.Type == "tool_use" {
				found := false
				if i+1 < len(blocks) && req.Messages[i+1].Role == "user" {
					for _, r := range blocks[i+1] {
						found = found || (r.Type == "tool_result" && r.ToolUseID == b.ID)
					}
				}
				if !found {
					return fmt.Sprintf("messages.%d: %s without a result", i, b.ID)
				}
			}
			if b.Type == "tool_result" {
				found := false
				if i > 0 && req.Messages[i-1].Role == "assistant" {
					for _, u := range blocks[i-1] {
						found = found || (u.Type == "tool_use" && u.ID == b.ToolUseID)
					}
				}
				if !found || m.Role != "user" {
					return fmt.Sprintf("messages.%d: result %s without its call", i, b.ToolUseID)
				}
			}
		}
	}
	return ""
}

// toMessages translates body, of format src, for a Messages upstream.
func toMessages(t *testing.T, src llm.Format, body string) (out []byte, req messagesBody, dropped []string) {
	t.Helper()
	r := mustDecode(t, src, []byte(body))
	r.MaxTokens = 100
	out, dropped, err := EncodeRequest(llm.FormatMessages, r, "claude")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &req); err != nil {
		t.Fatal(err)
	}
	return out, req, dropped
}

// TestHistoryWithoutToolsGetsThemDeclared: a chat or Responses history with tool calls and
// results but no tools (opencode's compaction turn) reaches a Messages upstream with the tools
// its calls name declared, a permissive schema and a description saying they are there for
// the history only, and tool_choice none; a request that offers some of them gets the others
// added the same way, with the tool_choice it asked for.
func TestHistoryWithoutToolsGetsThemDeclared(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"user","content":"fix it"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"p\":\"a\"}"}},{"id":"call_2","type":"function","function":{"name":"bash","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"text"},{"role":"tool","tool_call_id":"call_2","content":"ok"},
		{"role":"assistant","content":"done"},{"role":"user","content":"Summarize the conversation."}]%s}`
	responses := `{"model":"m","input":[{"role":"user","content":"fix it"},
		{"type":"function_call","call_id":"call_1","name":"read","arguments":"{\"p\":\"a\"}"},{"type":"function_call","call_id":"call_2","name":"bash","arguments":"{}"},
		{"type":"function_call_output","call_id":"call_1","output":"text"},{"type":"function_call_output","call_id":"call_2","output":"ok"},
		{"role":"assistant","content":"done"},{"role":"user","content":"Summarize the conversation."}]%s}`
	for _, c := range []struct {
		src              llm.Format
		body, tools      string
		wantTools        []string
		wantChoice       string
		wantDescriptions int
	}{
		{llm.FormatChat, chat, "", []string{"read", "bash"}, `{"type":"none"}`, 2},
		{llm.FormatResponses, responses, "", []string{"read", "bash"}, `{"type":"none"}`, 2},
		{llm.FormatChat, chat, `,"tools":[{"type":"function","function":{"name":"read","parameters":{"type":"object"}}}],"tool_choice":"auto"`, []string{"read", "bash"}, `{"type":"auto"}`, 1},
		{llm.FormatResponses, responses, `,"tools":[{"type":"function","name":"bash","parameters":{"type":"object"}}]`, []string{"bash", "read"}, ``, 1},
	} {
		out, req, _ := toMessages(t, c.src, fmt.Sprintf(c.body, c.tools))
		if v := anthropicToolRules(t, out); v != "" {
			t.Errorf("%s%s: the Messages API would refuse it: %s\n%s", c.src, c.tools, v, out)
		}
		var names []string
		described := 0
		for _, tool := range req.Tools {
			names = append(names, tool.Name)
			if tool.Description == historyToolDescription {
				described++
				if string(tool.InputSchema) != string(historyToolSchema) {
					t.Errorf("%s: schema %s", c.src, tool.InputSchema)
				}
			}
		}
		if !reflect.DeepEqual(names, c.wantTools) || described != c.wantDescriptions {
			t.Errorf("%s%s: tools %v (%d for the history), want %v (%d)", c.src, c.tools, names, described, c.wantTools, c.wantDescriptions)
		}
		if string(req.ToolChoice) != c.wantChoice {
			t.Errorf("%s%s: tool_choice %s, want %q", c.src, c.tools, req.ToolChoice, c.wantChoice)
		}
	}
}

// TestToolHistoryMadeValidForMessages: a call without its result (one the user cancelled) is
// given an error result saying the client sent none; results sent after other messages are
// put first in the turn after their calls, or moved there from a later turn when that is
// unambiguous; a result whose call is not there becomes text; each change is named.
func TestToolHistoryMadeValidForMessages(t *testing.T) {
	cases := []struct {
		name     string
		src      llm.Format
		body     string
		messages string
		dropped  []string
	}{{
		name: "chat call cancelled",
		src:  llm.FormatChat,
		body: `{"model":"m","messages":[{"role":"user","content":"go"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{}"}},{"id":"call_2","type":"function","function":{"name":"bash","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_2","content":"ok"},{"role":"user","content":"stop, do something else"}],
			"tools":[{"type":"function","function":{"name":"bash"}}]}`,
		messages: `[{"role":"user","content":"go"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"bash","input":{}},{"type":"tool_use","id":"call_2","name":"bash","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"` + missingResultText + `","is_error":true},{"type":"tool_result","tool_use_id":"call_2","content":"ok"},{"type":"text","text":"stop, do something else"}]}]`,
		dropped: []string{"messages[].tool_calls[] (no tool result: an error result added)"},
	}, {
		name: "chat call last",
		src:  llm.FormatChat,
		body: `{"model":"m","messages":[{"role":"user","content":"go"},
			{"role":"assistant","content":"running","tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{}"}}]}]}`,
		messages: `[{"role":"user","content":"go"},` +
			`{"role":"assistant","content":[{"type":"text","text":"running"},{"type":"tool_use","id":"call_1","name":"bash","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"` + missingResultText + `","is_error":true}]}]`,
		dropped: []string{"messages[].tool_calls[] (no tool result: an error result added)"},
	}, {
		name: "responses result after a user message",
		src:  llm.FormatResponses,
		body: `{"model":"m","input":[{"role":"user","content":"go"},
			{"type":"function_call","call_id":"c1","name":"bash","arguments":"{}"},
			{"role":"user","content":"also this"},
			{"type":"function_call_output","call_id":"c1","output":"ok"}]}`,
		messages: `[{"role":"user","content":"go"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"bash","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"ok"},{"type":"text","text":"also this"}]}]`,
	}, {
		name: "responses result in a later turn",
		src:  llm.FormatResponses,
		body: `{"model":"m","input":[{"role":"user","content":"go"},
			{"type":"function_call","call_id":"c1","name":"bash","arguments":"{}"},
			{"role":"user","content":"hurry"},{"role":"assistant","content":"waiting"},
			{"type":"function_call_output","call_id":"c1","output":"ok"},
			{"role":"assistant","content":"done"},{"role":"user","content":"thanks"}]}`,
		messages: `[{"role":"user","content":"go"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"bash","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"ok"},{"type":"text","text":"hurry"}]},` +
			`{"role":"assistant","content":[{"type":"text","text":"waiting"},{"type":"text","text":"done"}]},` +
			`{"role":"user","content":"thanks"}]`,
		dropped: []string{"input[] (moved after its tool call)"},
	}, {
		name: "responses result in the last turn, late",
		src:  llm.FormatResponses,
		body: `{"model":"m","input":[{"role":"user","content":"go"},
			{"type":"function_call","call_id":"c1","name":"bash","arguments":"{}"},
			{"role":"user","content":"hurry"},{"role":"assistant","content":"waiting"},
			{"type":"function_call_output","call_id":"c1","output":"ok"}]}`,
		messages: `[{"role":"user","content":"go"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"bash","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"` + missingResultText + `","is_error":true},{"type":"text","text":"hurry"}]},` +
			`{"role":"assistant","content":"waiting"},` +
			`{"role":"user","content":"Result of tool call c1:\nok"}]`,
		dropped: []string{"input[] (no matching tool call: sent as text)", "input[] (no tool result: an error result added)"},
	}, {
		name: "chat result without a call",
		src:  llm.FormatChat,
		body: `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":"sure"},
			{"role":"tool","tool_call_id":"call_9","content":"stale"},{"role":"user","content":"next"}]}`,
		messages: `[{"role":"user","content":"go"},{"role":"assistant","content":"sure"},` +
			`{"role":"user","content":[{"type":"text","text":"Result of tool call call_9:\nstale"},{"type":"text","text":"next"}]}]`,
		dropped: []string{"messages[] (no matching tool call: sent as text)"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, _, dropped := toMessages(t, c.src, c.body)
			if v := anthropicToolRules(t, out); v != "" {
				t.Errorf("the Messages API would refuse it: %s\n%s", v, out)
			}
			if got := string(topLevel(t, out)["messages"]); got != c.messages {
				t.Errorf("messages\n got %s\nwant %s", got, c.messages)
			}
			if !reflect.DeepEqual(dropped, c.dropped) {
				t.Errorf("dropped %q, want %q", dropped, c.dropped)
			}
		})
	}
}

// TestMessagesClientToolHistoryGoesAsSent: a Messages client's own request, however its tool
// history stands, goes to a Messages upstream as sent (Anthropic's answer reaches it as is).
func TestMessagesClientToolHistoryGoesAsSent(t *testing.T) {
	body := `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"bash","input":{}}]},{"role":"user","content":"never mind"}]}`
	req := mustDecode(t, llm.FormatMessages, []byte(body))
	out, dropped, err := EncodeRequest(llm.FormatMessages, req, "m")
	if err != nil || dropped != nil {
		t.Fatal(err, dropped)
	}
	if string(out) != body {
		t.Errorf("got %s", out)
	}
	v, err := jsonview.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if n := AnthropicToolTokens(llm.FormatMessages, v); n != 0 {
		t.Errorf("a Messages request without tools is counted %d tool tokens", n)
	}
}

// TestHistoryToolTokensAreReserved: what the translation adds to a tool history for a
// Messages upstream (the declared tools and their tool-use system prompt, the error results
// of calls left without one) is counted in AnthropicToolTokens, which the reservation adds; a
// history whose calls are all offered and answered adds nothing but the prompt of its tools.
func TestHistoryToolTokensAreReserved(t *testing.T) {
	count := func(f llm.Format, body string) int {
		t.Helper()
		v, err := jsonview.Parse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return AnthropicToolTokens(f, v)
	}
	paired := `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]%s}`
	if n := count(llm.FormatChat, fmt.Sprintf(paired, `,"tools":[{"type":"function","function":{"name":"bash"}}]`)); n != AnthropicToolPromptTokens {
		t.Errorf("offered and answered: %d, want %d", n, AnthropicToolPromptTokens)
	}
	declared := AnthropicToolPromptTokens + ToolOverheadTokens + (len("bash")+len(historyToolDescription)+len(historyToolSchema)+BytesPerToken-1)/BytesPerToken
	if n := count(llm.FormatChat, fmt.Sprintf(paired, "")); n != declared {
		t.Errorf("no tools: %d, want %d", n, declared)
	}
	cancelled := `{"model":"m","input":[{"role":"user","content":"go"},{"type":"function_call","call_id":"c1","name":"bash","arguments":"{}"},{"role":"user","content":"stop"}],"tools":[{"type":"function","name":"bash"}]}`
	if n := count(llm.FormatResponses, cancelled); n <= AnthropicToolPromptTokens+ToolOverheadTokens+len(missingResultText)/4 {
		t.Errorf("a cancelled call: %d, want its error result counted", n)
	}
	// What is counted covers what is sent: the request's bytes grow by at most as many
	// tokens as counted, at BytesPerToken.
	for _, c := range []struct {
		f    llm.Format
		body string
	}{{llm.FormatChat, fmt.Sprintf(paired, "")}, {llm.FormatResponses, cancelled}} {
		r := mustDecode(t, c.f, []byte(c.body))
		r.MaxTokens = 10
		out, _, err := EncodeRequest(llm.FormatMessages, r, "m")
		if err != nil {
			t.Fatal(err)
		}
		base := len(c.body)
		if extra := (len(out) - base) / BytesPerToken; extra > count(c.f, c.body) {
			t.Errorf("%s: %d bytes more sent (%d tokens), %d counted", c.f, len(out)-base, extra, count(c.f, c.body))
		}
		if strings.Contains(string(out), `"tool_choice"`) != (c.f == llm.FormatChat) {
			t.Errorf("%s: tool_choice in %s", c.f, out)
		}
	}
}
