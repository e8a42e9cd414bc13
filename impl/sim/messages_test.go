package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

const messagesPath = "/v1/messages"

func messagesBody(prompt string, extra map[string]any) map[string]any {
	b := map[string]any{
		"model":      "sim-sonnet",
		"max_tokens": 1024,
		"system":     "You are terse.",
		"messages":   []any{map[string]any{"role": "user", "content": prompt}},
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

var anthropicWeatherTool = map[string]any{
	"name":         "get_weather",
	"description":  "Current weather.",
	"input_schema": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}},
}

func TestMessagesNonStreaming(t *testing.T) {
	_, srv := newServer(t, Options{})
	resp := post(t, srv, messagesPath, messagesBody("Say hello to the gateway.", nil), "anthropic-version", "2023-06-01")
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Request-Id"), "req_") {
		t.Fatalf("status %d, request-id %q: %s", resp.StatusCode, resp.Header.Get("Request-Id"), body)
	}
	m := decode(t, body)
	keys(t, "message", m, "id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage")
	if !strings.HasPrefix(m["id"].(string), "msg_") || m["type"] != "message" || m["role"] != "assistant" || m["model"] != "sim-sonnet" ||
		m["stop_reason"] != "end_turn" || m["stop_sequence"] != nil {
		t.Errorf("message %s", body)
	}
	block := path(t, m, "content.0")
	keys(t, "block", block, "type", "text")
	if path(t, block, "type") != "text" || words(path(t, block, "text").(string)) != DefaultWords {
		t.Errorf("block %v", block)
	}
	keys(t, "usage", m["usage"], "input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation", "service_tier")
	keys(t, "usage.cache_creation", path(t, m, "usage.cache_creation"), "ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
	if path(t, m, "usage.service_tier") != "standard" {
		t.Errorf("usage %v", m["usage"])
	}
	// 14 + 25 = 39 characters: 10 tokens.
	if num(t, path(t, m, "usage.input_tokens")) != 10 || num(t, path(t, m, "usage.output_tokens")) != DefaultWords {
		t.Errorf("usage %v", m["usage"])
	}
	// The same model and prompt give the same text in every format.
	chat := decode(t, readAll(t, post(t, srv, chatPath, map[string]any{"model": "sim-sonnet", "messages": []any{map[string]any{"role": "user", "content": "Say hello to the gateway."}}})))
	if path(t, chat, "choices.0.message.content") != path(t, block, "text") {
		t.Errorf("chat %v, messages %v", path(t, chat, "choices.0.message.content"), path(t, block, "text"))
	}
}

// checkMessagesStream checks event names against data.type and the block structure, and
// returns the event names, the text, the accumulated partial JSON and the message_delta.
func checkMessagesStream(t *testing.T, evs []event) (names []string, text, partial string, delta map[string]any) {
	t.Helper()
	for i, ev := range evs {
		d := ev.JSON(t)
		if ev.Name == "" || ev.Name != d["type"] {
			t.Errorf("event %d: event: %q, type %v", i, ev.Name, d["type"])
		}
		names = append(names, ev.Name)
		switch ev.Name {
		case "message_start":
			msg := d["message"].(map[string]any)
			keys(t, "message_start.message", msg, "id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage")
			if len(msg["content"].([]any)) != 0 || msg["stop_reason"] != nil || num(t, path(t, msg, "usage.output_tokens")) != 1 {
				t.Errorf("message_start %s", ev.Data)
			}
		case "content_block_start", "content_block_stop":
			if num(t, d["index"]) != 0 {
				t.Errorf("%s index %v", ev.Name, d["index"])
			}
		case "content_block_delta":
			if num(t, d["index"]) != 0 {
				t.Errorf("delta index %v", d["index"])
			}
			switch path(t, d, "delta.type") {
			case "text_delta":
				text += path(t, d, "delta.text").(string)
			case "input_json_delta":
				partial += path(t, d, "delta.partial_json").(string)
			default:
				t.Errorf("delta %s", ev.Data)
			}
		case "message_delta":
			delta = d
			keys(t, "message_delta", d, "type", "delta", "usage")
			keys(t, "message_delta.delta", d["delta"], "stop_reason", "stop_sequence")
		}
	}
	if len(names) < 6 || names[0] != "message_start" || names[1] != "content_block_start" || names[2] != "ping" ||
		names[len(names)-1] != "message_stop" || names[len(names)-2] != "message_delta" || names[len(names)-3] != "content_block_stop" {
		t.Errorf("event order %v", names)
	}
	return names, text, partial, delta
}

func TestMessagesStreaming(t *testing.T) {
	_, srv := newServer(t, Options{})
	want := path(t, decode(t, readAll(t, post(t, srv, messagesPath, messagesBody("Say hello to the gateway.", nil)))), "content.0.text")
	_, evs := stream(t, srv, messagesPath, messagesBody("Say hello to the gateway.", map[string]any{"stream": true}))
	names, text, _, delta := checkMessagesStream(t, evs)
	if len(names) != 3+DefaultWords+3 {
		t.Errorf("events %v", names)
	}
	if text != want || path(t, delta, "delta.stop_reason") != "end_turn" || num(t, path(t, delta, "usage.output_tokens")) != DefaultWords {
		t.Errorf("text %q (want %q), message_delta %v", text, want, delta)
	}
	if num(t, path(t, evs[0].JSON(t), "message.usage.input_tokens")) != 10 {
		t.Errorf("message_start usage %s", evs[0].Data)
	}
	if path(t, evs[1].JSON(t), "content_block.type") != "text" || path(t, evs[1].JSON(t), "content_block.text") != "" {
		t.Errorf("content_block_start %s", evs[1].Data)
	}

	// max_tokens cuts the reply.
	_, evs = stream(t, srv, messagesPath, messagesBody("Say hello to the gateway.", map[string]any{"stream": true, "max_tokens": 4}))
	_, text, _, delta = checkMessagesStream(t, evs)
	if words(text) != 4 || path(t, delta, "delta.stop_reason") != "max_tokens" || num(t, path(t, delta, "usage.output_tokens")) != 4 {
		t.Errorf("max_tokens 4: %q %v", text, delta)
	}
}

func TestMessagesStopSequence(t *testing.T) {
	_, srv := newServer(t, Options{})
	m := decode(t, readAll(t, post(t, srv, messagesPath, messagesBody("stop here", nil))))
	full := strings.Fields(path(t, m, "content.0.text").(string))
	stop := full[2]
	cut := strings.Index(" "+strings.Join(full, " ")+" ", " "+stop+" ")
	cutWords := words(strings.Join(full, " ")[:max(cut, 0)])
	m = decode(t, readAll(t, post(t, srv, messagesPath, messagesBody("stop here", map[string]any{"stop_sequences": []string{stop}}))))
	if m["stop_reason"] != "stop_sequence" || m["stop_sequence"] != stop || words(path(t, m, "content.0.text").(string)) != cutWords {
		t.Errorf("stop %q: %v", stop, m)
	}
}

func TestMessagesToolUse(t *testing.T) {
	_, srv := newServer(t, Options{})
	body := messagesBody("Weather in Paris? call get_weather", map[string]any{"tools": []any{anthropicWeatherTool}})
	m := decode(t, readAll(t, post(t, srv, messagesPath, body)))
	block := path(t, m, "content.0").(map[string]any)
	keys(t, "tool_use", block, "type", "id", "name", "input")
	if block["type"] != "tool_use" || block["name"] != "get_weather" || !strings.HasPrefix(block["id"].(string), "toolu_") ||
		path(t, block, "input.q") == "" || m["stop_reason"] != "tool_use" {
		t.Errorf("message %v", m)
	}
	input, _ := json.Marshal(block["input"])
	tokens := num(t, path(t, m, "usage.output_tokens"))

	body["stream"] = true
	_, evs := stream(t, srv, messagesPath, body)
	names, text, partial, delta := checkMessagesStream(t, evs)
	if text != "" || partial != string(input) {
		t.Errorf("text %q, partial_json %q", text, partial)
	}
	start := evs[1].JSON(t)
	keys(t, "tool_use start", start["content_block"], "type", "id", "name", "input")
	if path(t, start, "content_block.type") != "tool_use" || len(path(t, start, "content_block.input").(map[string]any)) != 0 {
		t.Errorf("content_block_start %s", evs[1].Data)
	}
	if path(t, evs[3].JSON(t), "delta.partial_json") != "" {
		t.Errorf("first input_json_delta %s", evs[3].Data)
	}
	if path(t, delta, "delta.stop_reason") != "tool_use" || num(t, path(t, delta, "usage.output_tokens")) != tokens || tokens < 1 {
		t.Errorf("message_delta %v", delta)
	}
	if len(names) != 3+1+tokens+3 {
		t.Errorf("events %v", names)
	}

	for _, c := range []struct {
		choice any
		prompt string
		want   string
	}{
		{map[string]any{"type": "tool", "name": "get_weather"}, "hello", "tool_use"},
		{map[string]any{"type": "any"}, "hello", "tool_use"},
		{map[string]any{"type": "none"}, "call get_weather", "end_turn"},
		{map[string]any{"type": "auto"}, "hello", "end_turn"},
	} {
		m := decode(t, readAll(t, post(t, srv, messagesPath, messagesBody(c.prompt, map[string]any{"tools": []any{anthropicWeatherTool}, "tool_choice": c.choice}))))
		if m["stop_reason"] != c.want {
			t.Errorf("tool_choice %v: stop_reason %v", c.choice, m["stop_reason"])
		}
	}

	loop := messagesBody("", map[string]any{"tools": []any{anthropicWeatherTool}, "messages": []any{
		map[string]any{"role": "user", "content": "call get_weather"},
		map[string]any{"role": "assistant", "content": []any{block}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": block["id"], "content": "sunny"}}},
	}})
	if m := decode(t, readAll(t, post(t, srv, messagesPath, loop))); m["stop_reason"] != "end_turn" {
		t.Errorf("after the tool result: %v", m)
	}
}

func TestMessagesValidation(t *testing.T) {
	_, srv := newServer(t, Options{})
	for _, c := range []struct{ name, body, msg string }{
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"max_tokens 0", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"no model", `{"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, "model"},
		{"no messages", `{"model":"m","max_tokens":5}`, "messages"},
		{"tool role", `{"model":"m","max_tokens":5,"messages":[{"role":"tool","content":"x"}]}`, "messages"},
		{"bad json", `{"model"`, "JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := post(t, srv, messagesPath, c.body)
			m := decode(t, readAll(t, resp))
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status %d", resp.StatusCode)
			}
			keys(t, "envelope", m, "type", "error", "request_id")
			keys(t, "error", m["error"], "type", "message")
			if m["type"] != "error" || path(t, m, "error.type") != "invalid_request_error" || !strings.Contains(path(t, m, "error.message").(string), c.msg) {
				t.Errorf("body %v", m)
			}
			if m["request_id"] != resp.Header.Get("Request-Id") {
				t.Errorf("request_id %v, header %q", m["request_id"], resp.Header.Get("Request-Id"))
			}
		})
	}
}

func TestAnthropicHeadersRecorded(t *testing.T) {
	s, srv := newServer(t, Options{})
	readAll(t, post(t, srv, messagesPath+"?beta=true", messagesBody("hi", nil),
		"anthropic-version", "2023-06-01", "anthropic-beta", "tools-2024-04-04,prompt-caching-2024-07-31"))
	v, b := s.AnthropicHeaders()
	if v != "2023-06-01" || b != "tools-2024-04-04,prompt-caching-2024-07-31" {
		t.Errorf("recorded %q %q", v, b)
	}
	if got := s.LastHeaders().Get("Anthropic-Beta"); got != b {
		t.Errorf("LastHeaders anthropic-beta %q", got)
	}
	last := s.LastRequest()
	if last.Route != RouteMessages || last.Model != "sim-sonnet" || !strings.Contains(string(last.Body), `"max_tokens":1024`) {
		t.Errorf("last request %v %v %s", last.Route, last.Model, last.Body)
	}
	readAll(t, post(t, srv, messagesPath, messagesBody("hi", nil)))
	if v, b := s.AnthropicHeaders(); v != "" || b != "" {
		t.Errorf("after a request without them: %q %q", v, b)
	}
}

func TestCountTokens(t *testing.T) {
	_, srv := newServer(t, Options{APIKey: "k"})
	body := map[string]any{"model": "sim-sonnet", "system": "You are terse.", "messages": []any{map[string]any{"role": "user", "content": "Say hello to the gateway."}}}
	resp := post(t, srv, "/v1/messages/count_tokens?beta=true", body, "x-api-key", "k")
	m := decode(t, readAll(t, resp))
	if resp.StatusCode != http.StatusOK || len(m) != 1 || num(t, m["input_tokens"]) != 10 {
		t.Errorf("count_tokens %d %v", resp.StatusCode, m)
	}
	if resp := post(t, srv, "/v1/messages/count_tokens", body); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a key: %d", resp.StatusCode)
	}
}
