package sim

import (
	"net/http"
	"strings"
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

// TestToolNamesAndRepeatedIDsRefused: each route refuses, with its API's 400 and words, a tool
// name outside its format's pattern (OpenAI ^[a-zA-Z0-9_-]{1,64}$ of tools and, on chat, of
// the calls of the history; Anthropic ^[a-zA-Z0-9_-]{1,128}$), the Messages route a tool_use id
// that an earlier tool_use of the request has, in its turn or another, and the chat route a
// tool result whose tool_call_id an earlier one has; names and ids the APIs take are served.
func TestToolNamesAndRepeatedIDsRefused(t *testing.T) {
	_, srv := newServer(t, Options{})
	long := func(n int) string { return strings.Repeat("a", n) }
	anthropicTool := func(name string) map[string]any {
		return map[string]any{"name": name, "input_schema": map[string]any{"type": "object"}}
	}
	user := func(content any) map[string]any { return map[string]any{"role": "user", "content": content} }
	use := func(id string) map[string]any {
		return map[string]any{"type": "tool_use", "id": id, "name": "get_weather", "input": map[string]any{}}
	}
	result := func(id string) map[string]any {
		return map[string]any{"type": "tool_result", "tool_use_id": id, "content": "sunny"}
	}
	assistant := func(blocks ...any) map[string]any { return map[string]any{"role": "assistant", "content": blocks} }
	for _, c := range []struct {
		name     string
		messages []any
		tools    []any
		want     string
	}{
		{"dotted name", nil, []any{anthropicWeatherTool, anthropicTool("files.read")},
			"tools.1.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'"},
		{"129 characters", nil, []any{anthropicTool(long(129))},
			"tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'"},
		{"128 characters", nil, []any{anthropicTool(long(128))}, ""},
		{"one turn's ids repeated", []any{user("weather?"), assistant(use("t1"), use("t1")), user([]any{result("t1"), result("t1")})}, []any{anthropicWeatherTool},
			"messages.1.content.1: `tool_use` ids must be unique"},
		{"an id of an earlier turn", []any{user("weather?"), assistant(use("t1")), user([]any{result("t1")}), assistant(use("t1")), user([]any{result("t1")})}, []any{anthropicWeatherTool},
			"messages.3.content.0: `tool_use` ids must be unique"},
		{"ids of their own", []any{user("weather?"), assistant(use("t1")), user([]any{result("t1")}), assistant(use("t2")), user([]any{result("t2")})}, []any{anthropicWeatherTool}, ""},
	} {
		extra := map[string]any{"tools": c.tools}
		if c.messages != nil {
			extra["messages"] = c.messages
		}
		resp := post(t, srv, messagesPath, messagesBody("hi", extra), "anthropic-version", "2023-06-01")
		body := readAll(t, resp)
		if c.want == "" {
			if resp.StatusCode != http.StatusOK {
				t.Errorf("messages %s: %d %s", c.name, resp.StatusCode, body)
			}
			continue
		}
		m := decode(t, body)
		if resp.StatusCode != http.StatusBadRequest || path(t, m, "error.type") != "invalid_request_error" || path(t, m, "error.message") != c.want {
			t.Errorf("messages %s: %d %s", c.name, resp.StatusCode, body)
		}
	}

	chatTool := func(name string) map[string]any {
		return map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": map[string]any{"type": "object"}}}
	}
	call := func(name string, ids ...string) map[string]any {
		var calls []any
		for _, id := range ids {
			calls = append(calls, map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": "{}"}})
		}
		return map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
	}
	toolMsg := func(id string) map[string]any {
		return map[string]any{"role": "tool", "tool_call_id": id, "content": "sunny"}
	}
	chatUser := map[string]any{"role": "user", "content": "weather?"}
	pattern := "string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
	for _, c := range []struct {
		name, route string
		body        map[string]any
		msg, param  string
		code        any
	}{
		{"chat dotted name", chatPath, map[string]any{"tools": []any{chatTool("get_weather"), chatTool("files.read")}},
			"Invalid 'tools[1].function.name': " + pattern, "tools[1].function.name", "invalid_value"},
		{"chat 65 characters", chatPath, map[string]any{"tools": []any{chatTool(long(65))}},
			"Invalid 'tools[0].function.name': string too long. Expected a string with maximum length 64, but got a string with length 65 instead.", "tools[0].function.name", "string_above_max_length"},
		{"chat 64 characters", chatPath, map[string]any{"tools": []any{chatTool(long(64))}}, "", "", nil},
		{"chat history call", chatPath, map[string]any{"messages": []any{chatUser, call("read file", "c1"), toolMsg("c1")}},
			"Invalid 'messages[1].tool_calls[0].function.name': " + pattern, "messages[1].tool_calls[0].function.name", "invalid_value"},
		{"chat repeated result", chatPath, map[string]any{"messages": []any{chatUser, call("get_weather", "c1", "c1"), toolMsg("c1"), toolMsg("c1")}},
			"Invalid parameter: Duplicate value for 'tool_call_id' of 'c1' in messages[2] and messages[3].", "messages.[3].tool_call_id", nil},
		{"chat results of their own", chatPath, map[string]any{"messages": []any{chatUser, call("get_weather", "c1", "c2"), toolMsg("c1"), toolMsg("c2")}}, "", "", nil},
		{"responses dotted name", responsesPath, map[string]any{"tools": []any{map[string]any{"type": "function", "name": "files.read"}}},
			"Invalid 'tools[0].name': " + pattern, "tools[0].name", "invalid_value"},
		{"responses 65 characters", responsesPath, map[string]any{"tools": []any{map[string]any{"type": "function", "name": long(65)}}},
			"Invalid 'tools[0].name': string too long. Expected a string with maximum length 64, but got a string with length 65 instead.", "tools[0].name", "string_above_max_length"},
	} {
		body := map[string]any{"model": "sim-general", "messages": []any{chatUser}}
		if c.route == responsesPath {
			body = map[string]any{"model": "sim-general", "input": "weather?"}
		}
		for k, v := range c.body {
			body[k] = v
		}
		resp := post(t, srv, c.route, body, "Authorization", "Bearer sk-test")
		raw := readAll(t, resp)
		if c.msg == "" {
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: %d %s", c.name, resp.StatusCode, raw)
			}
			continue
		}
		m := decode(t, raw)
		if resp.StatusCode != http.StatusBadRequest || path(t, m, "error.type") != "invalid_request_error" || path(t, m, "error.message") != c.msg ||
			path(t, m, "error.param") != c.param || path(t, m, "error.code") != c.code {
			t.Errorf("%s: %d %s", c.name, resp.StatusCode, raw)
		}
	}
}
