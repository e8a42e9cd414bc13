package sim

import (
	"net/http"
	"testing"
)

// TestMessagesToolHistoryRules: the Messages endpoint refuses, with the API's 400 and words,
// tool calls or results in a request without tools, a tool_use whose tool_result is not in the
// next message, and a tool_result whose tool_use is not in the message before; a history that
// keeps the rules is served.
func TestMessagesToolHistoryRules(t *testing.T) {
	_, srv := newServer(t, Options{})
	user := func(content any) map[string]any { return map[string]any{"role": "user", "content": content} }
	call := func(id string) map[string]any {
		return map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "get_weather", "input": map[string]any{}}}}
	}
	result := func(id string) map[string]any {
		return map[string]any{"type": "tool_result", "tool_use_id": id, "content": "sunny"}
	}
	text := map[string]any{"type": "text", "text": "and now?"}
	tools := []any{anthropicWeatherTool}
	for _, c := range []struct {
		name     string
		messages []any
		tools    []any
		want     string
	}{
		{"paired", []any{user("weather?"), call("t1"), user([]any{result("t1"), text})}, tools, ""},
		{"no tools", []any{user("weather?"), call("t1"), user([]any{result("t1")})}, nil,
			"Requests which include `tool_use` or `tool_result` blocks must define tools."},
		{"no result", []any{user("weather?"), call("t1"), user("never mind")}, tools,
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: t1. Each `tool_use` block must have a corresponding `tool_result` block in the next message."},
		{"call last", []any{user("weather?"), call("t1")}, tools,
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: t1. Each `tool_use` block must have a corresponding `tool_result` block in the next message."},
		{"result without call", []any{user("weather?"), map[string]any{"role": "assistant", "content": "sure"}, user([]any{text, result("t9")})}, tools,
			"messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: t9. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."},
	} {
		extra := map[string]any{"messages": c.messages}
		if c.tools != nil {
			extra["tools"] = c.tools
		}
		resp := post(t, srv, messagesPath, messagesBody("", extra), "anthropic-version", "2023-06-01")
		body := readAll(t, resp)
		if c.want == "" {
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: %d %s", c.name, resp.StatusCode, body)
			}
			continue
		}
		m := decode(t, body)
		if resp.StatusCode != http.StatusBadRequest || m["type"] != "error" || path(t, m, "error.type") != "invalid_request_error" || path(t, m, "error.message") != c.want {
			t.Errorf("%s: %d %s", c.name, resp.StatusCode, body)
		}
	}
}
