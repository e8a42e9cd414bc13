package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

const chatPath = "/v1/chat/completions"

func chatBody(prompt string, extra map[string]any) map[string]any {
	b := map[string]any{
		"model": "sim-general",
		"messages": []any{
			map[string]any{"role": "system", "content": "You are terse."},
			map[string]any{"role": "user", "content": prompt},
		},
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

var weatherTool = map[string]any{
	"type": "function",
	"function": map[string]any{
		"name":        "get_weather",
		"description": "Current weather.",
		"parameters":  map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}},
	},
}

func TestChatNonStreaming(t *testing.T) {
	_, srv := newServer(t, Options{})
	resp := post(t, srv, chatPath, chatBody("Say hello to the gateway.", nil))
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if !strings.HasPrefix(resp.Header.Get("X-Request-Id"), "req_") {
		t.Errorf("x-request-id %q", resp.Header.Get("X-Request-Id"))
	}
	m := decode(t, body)
	keys(t, "completion", m, "id", "object", "created", "model", "choices", "usage", "system_fingerprint", "service_tier")
	if !strings.HasPrefix(m["id"].(string), "chatcmpl-") || m["object"] != "chat.completion" || m["model"] != "sim-general" {
		t.Errorf("id/object/model: %v %v %v", m["id"], m["object"], m["model"])
	}
	choice := path(t, m, "choices.0")
	keys(t, "choice", choice, "index", "message", "logprobs", "finish_reason")
	keys(t, "message", path(t, choice, "message"), "role", "content", "refusal", "annotations")
	content := path(t, choice, "message.content").(string)
	if words(content) != DefaultWords || path(t, choice, "finish_reason") != "stop" {
		t.Errorf("content %q, finish %v", content, path(t, choice, "finish_reason"))
	}
	keys(t, "usage", m["usage"], "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details")
	keys(t, "prompt details", path(t, m, "usage.prompt_tokens_details"), "cached_tokens", "audio_tokens")
	keys(t, "completion details", path(t, m, "usage.completion_tokens_details"), "reasoning_tokens", "audio_tokens", "accepted_prediction_tokens", "rejected_prediction_tokens")
	// "You are terse." (14) + "Say hello to the gateway." (25) = 39 characters: ceil(39/4) = 10.
	if p, c, tot := num(t, path(t, m, "usage.prompt_tokens")), num(t, path(t, m, "usage.completion_tokens")), num(t, path(t, m, "usage.total_tokens")); p != 10 || c != DefaultWords || tot != p+c {
		t.Errorf("usage %d + %d = %d", p, c, tot)
	}
}

// chatContent checks the common shape of every chunk of a chat stream and returns the text and
// the finish reason.
func chatChunks(t *testing.T, evs []event, includeUsage bool) (text, finish string, usage map[string]any) {
	t.Helper()
	if len(evs) < 3 {
		t.Fatalf("only %d events", len(evs))
	}
	if last := evs[len(evs)-1]; last.Data != "[DONE]" || last.Raw != "data: [DONE]\n\n" {
		t.Fatalf("last event %q, want data: [DONE]", last.Raw)
	}
	var id string
	var created float64
	chunks := evs[:len(evs)-1]
	for i, ev := range chunks {
		if ev.Name != "" {
			t.Errorf("chunk %d has an event: line %q", i, ev.Name)
		}
		c := ev.JSON(t)
		if has(c, "error") {
			t.Errorf("chunk %d has an error key: %s", i, ev.Data)
		}
		if c["object"] != "chat.completion.chunk" || c["model"] != "sim-general" {
			t.Errorf("chunk %d: %s", i, ev.Data)
		}
		if i == 0 {
			id, created = c["id"].(string), c["created"].(float64)
		} else if c["id"] != id || c["created"] != created {
			t.Errorf("chunk %d: id/created changed", i)
		}
		if has(c, "usage") != includeUsage {
			t.Errorf("chunk %d: usage present = %v, want %v", i, has(c, "usage"), includeUsage)
		}
		choices := c["choices"].([]any)
		if includeUsage && i == len(chunks)-1 {
			if len(choices) != 0 || c["usage"] == nil {
				t.Errorf("usage chunk: %s", ev.Data)
			}
			usage = c["usage"].(map[string]any)
			continue
		}
		if includeUsage && c["usage"] != nil {
			t.Errorf("chunk %d: usage %v before the usage chunk", i, c["usage"])
		}
		if len(choices) != 1 {
			t.Fatalf("chunk %d: %d choices", i, len(choices))
		}
		ch := choices[0].(map[string]any)
		keys(t, "choice", ch, "index", "delta", "logprobs", "finish_reason")
		delta := ch["delta"].(map[string]any)
		switch {
		case i == 0:
			if delta["role"] != "assistant" || ch["finish_reason"] != nil {
				t.Errorf("first chunk: %s", ev.Data)
			}
		case ch["finish_reason"] != nil:
			if len(delta) != 0 {
				t.Errorf("finish chunk has delta %v", delta)
			}
			if finish != "" {
				t.Errorf("two finish chunks")
			}
			finish = ch["finish_reason"].(string)
		default:
			if finish != "" {
				t.Errorf("content after the finish chunk")
			}
			if has(delta, "role") {
				t.Errorf("chunk %d repeats the role", i)
			}
			if s, ok := delta["content"].(string); ok {
				text += s
			}
		}
	}
	if finish == "" {
		t.Errorf("no finish chunk")
	}
	return text, finish, usage
}

func TestChatStreaming(t *testing.T) {
	_, srv := newServer(t, Options{})
	prompt := "Say hello to the gateway."
	want := path(t, decode(t, readAll(t, post(t, srv, chatPath, chatBody(prompt, nil)))), "choices.0.message.content")

	_, evs := stream(t, srv, chatPath, chatBody(prompt, map[string]any{"stream": true}))
	text, finish, _ := chatChunks(t, evs, false)
	if text != want || finish != "stop" {
		t.Errorf("stream text %q finish %q; non-stream text %q", text, finish, want)
	}
	if len(evs) != 1+DefaultWords+1+1 {
		t.Errorf("%d events, want role + %d deltas + finish + [DONE]", len(evs), DefaultWords)
	}

	_, evs = stream(t, srv, chatPath, chatBody(prompt, map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true}}))
	text, finish, usage := chatChunks(t, evs, true)
	if text != want || finish != "stop" {
		t.Errorf("stream text %q finish %q", text, finish)
	}
	if num(t, usage["completion_tokens"]) != DefaultWords || num(t, usage["prompt_tokens"]) != 10 {
		t.Errorf("usage %v", usage)
	}
	keys(t, "usage", usage, "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details")

	// Obfuscation is on by default and can be turned off.
	if !strings.Contains(evs[1].Data, `"obfuscation":`) {
		t.Errorf("no obfuscation on a delta: %s", evs[1].Data)
	}
	_, evs = stream(t, srv, chatPath, chatBody(prompt, map[string]any{"stream": true, "stream_options": map[string]any{"include_obfuscation": false}}))
	for _, ev := range evs {
		if strings.Contains(ev.Data, "obfuscation") {
			t.Errorf("obfuscation despite include_obfuscation:false: %s", ev.Data)
		}
	}
}

func TestChatMaxTokensAndWords(t *testing.T) {
	_, srv := newServer(t, Options{DefaultWords: 7})
	for _, c := range []struct {
		name   string
		extra  map[string]any
		prompt string
		words  int
		finish string
	}{
		{"default", nil, "hi", 7, "stop"},
		{"max_tokens", map[string]any{"max_tokens": 3}, "hi", 3, "length"},
		{"max_completion_tokens wins", map[string]any{"max_tokens": 3, "max_completion_tokens": 5}, "hi", 5, "length"},
		{"directive", nil, "hi [[sim words=40]]", 40, "stop"},
		{"directive cut", map[string]any{"max_completion_tokens": 30}, "hi [[sim words=40]]", 30, "length"},
		{"bound equal", map[string]any{"max_tokens": 7}, "hi", 7, "stop"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := decode(t, readAll(t, post(t, srv, chatPath, chatBody(c.prompt, c.extra))))
			if got := words(path(t, m, "choices.0.message.content").(string)); got != c.words {
				t.Errorf("%d words, want %d", got, c.words)
			}
			if got := num(t, path(t, m, "usage.completion_tokens")); got != c.words {
				t.Errorf("completion_tokens %d, want %d", got, c.words)
			}
			if got := path(t, m, "choices.0.finish_reason"); got != c.finish {
				t.Errorf("finish_reason %v, want %s", got, c.finish)
			}
			extra := map[string]any{"stream": true}
			for k, v := range c.extra {
				extra[k] = v
			}
			_, evs := stream(t, srv, chatPath, chatBody(c.prompt, extra))
			text, finish, _ := chatChunks(t, evs, false)
			if words(text) != c.words || finish != c.finish {
				t.Errorf("stream: %d words, finish %s", words(text), finish)
			}
		})
	}
}

func TestChatToolCall(t *testing.T) {
	_, srv := newServer(t, Options{})
	tools := []any{weatherTool}
	m := decode(t, readAll(t, post(t, srv, chatPath, chatBody("Weather in Paris? call get_weather", map[string]any{"tools": tools}))))
	msg := path(t, m, "choices.0.message").(map[string]any)
	keys(t, "message", msg, "role", "content", "tool_calls", "refusal", "annotations")
	if msg["content"] != nil || path(t, m, "choices.0.finish_reason") != "tool_calls" {
		t.Errorf("message %v finish %v", msg, path(t, m, "choices.0.finish_reason"))
	}
	call := path(t, msg, "tool_calls.0").(map[string]any)
	keys(t, "tool call", call, "id", "type", "function")
	if !strings.HasPrefix(call["id"].(string), "call_") || call["type"] != "function" || path(t, call, "function.name") != "get_weather" {
		t.Errorf("tool call %v", call)
	}
	args := path(t, call, "function.arguments").(string)
	var parsed map[string]string
	if err := json.Unmarshal([]byte(args), &parsed); err != nil || parsed["q"] == "" || len(parsed) != 1 {
		t.Errorf("arguments %q: %v", args, err)
	}
	// get_weather declares its properties, so the arguments come from its schema, one
	// completion token per fragment (TestTextTriggeredArguments has the rules).
	tokens := num(t, path(t, m, "usage.completion_tokens"))
	if tokens < 1 {
		t.Errorf("completion_tokens %v", path(t, m, "usage.completion_tokens"))
	}

	_, evs := stream(t, srv, chatPath, chatBody("Weather in Paris? call get_weather", map[string]any{"tools": tools, "stream": true}))
	var streamed string
	for i, ev := range evs[:len(evs)-1] {
		c := ev.JSON(t)
		delta := path(t, c, "choices.0.delta").(map[string]any)
		fr := path(t, c, "choices.0.finish_reason")
		switch {
		case i == 0:
			if delta["role"] != "assistant" {
				t.Errorf("first chunk %s", ev.Data)
			}
			tc := path(t, delta, "tool_calls.0").(map[string]any)
			keys(t, "first fragment", tc, "index", "id", "type", "function")
			if path(t, tc, "function.name") != "get_weather" || path(t, tc, "function.arguments") != "" || num(t, tc["index"]) != 0 {
				t.Errorf("first fragment %v", tc)
			}
		case fr != nil:
			if fr != "tool_calls" || len(delta) != 0 {
				t.Errorf("finish chunk %s", ev.Data)
			}
		default:
			tc := path(t, delta, "tool_calls.0").(map[string]any)
			keys(t, "fragment", tc, "index", "function")
			keys(t, "fragment function", tc["function"], "arguments")
			streamed += path(t, tc, "function.arguments").(string)
		}
	}
	if streamed != args {
		t.Errorf("streamed arguments %q, non-stream %q", streamed, args)
	}
	if len(evs) != 1+tokens+1+1 {
		t.Errorf("%d events", len(evs))
	}

	// tool_choice forces a tool without any mention; "none" forbids it; "required" picks one.
	for _, c := range []struct {
		choice any
		prompt string
		want   string
	}{
		{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}, "hello", "tool_calls"},
		{"none", "call get_weather", "stop"},
		{"required", "hello", "tool_calls"},
		{"auto", "hello", "stop"},
	} {
		m := decode(t, readAll(t, post(t, srv, chatPath, chatBody(c.prompt, map[string]any{"tools": tools, "tool_choice": c.choice}))))
		if got := path(t, m, "choices.0.finish_reason"); got != c.want {
			t.Errorf("tool_choice %v, prompt %q: finish %v, want %s", c.choice, c.prompt, got, c.want)
		}
	}

	// After the tool result the model answers in text: the trigger is the conversation's last
	// user turn only.
	loop := map[string]any{
		"model": "sim-general",
		"tools": tools,
		"messages": []any{
			map[string]any{"role": "user", "content": "call get_weather"},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": args}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
		},
	}
	m = decode(t, readAll(t, post(t, srv, chatPath, loop)))
	if got := path(t, m, "choices.0.finish_reason"); got != "stop" {
		t.Errorf("after the tool result: finish %v", got)
	}
}

func TestChatStopSequence(t *testing.T) {
	_, srv := newServer(t, Options{})
	m := decode(t, readAll(t, post(t, srv, chatPath, chatBody("stop here", nil))))
	full := strings.Fields(path(t, m, "choices.0.message.content").(string))
	stop := full[4]
	cut := 4
	for i, w := range full[:4] {
		if w == stop {
			cut = i
			break
		}
	}
	for _, s := range []any{stop, []any{"zzz", " " + stop}} {
		m = decode(t, readAll(t, post(t, srv, chatPath, chatBody("stop here", map[string]any{"stop": s}))))
		if got := words(path(t, m, "choices.0.message.content").(string)); got != cut || path(t, m, "choices.0.finish_reason") != "stop" {
			t.Errorf("stop %v: %d words (want %d), finish %v", s, got, cut, path(t, m, "choices.0.finish_reason"))
		}
	}
}

func TestChatValidation(t *testing.T) {
	_, srv := newServer(t, Options{})
	for _, c := range []struct {
		name  string
		body  string
		param any
	}{
		{"bad json", `{"model":`, nil},
		{"no model", `{"messages":[{"role":"user","content":"x"}]}`, nil},
		{"no messages", `{"model":"m"}`, "messages"},
		{"empty messages", `{"model":"m","messages":[]}`, "messages"},
		{"stream_options without stream", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}`, "stream_options"},
		{"max_tokens 0", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0}`, "max_tokens"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := post(t, srv, chatPath, c.body)
			m := decode(t, readAll(t, resp))
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status %d", resp.StatusCode)
			}
			keys(t, "envelope", m, "error")
			keys(t, "error", m["error"], "message", "type", "param", "code")
			if path(t, m, "error.type") != "invalid_request_error" || path(t, m, "error.param") != c.param {
				t.Errorf("error %v", m["error"])
			}
		})
	}
	resp := post(t, srv, "/v1/nope", `{}`)
	m := decode(t, readAll(t, resp))
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(path(t, m, "error.message").(string), "Invalid URL") {
		t.Errorf("unknown path: %d %v", resp.StatusCode, m)
	}
}

func TestInputTokenEstimate(t *testing.T) {
	_, srv := newServer(t, Options{})
	// 7 + 5 + (8 + 2) + 2 + 4 ("café", "é" is one code point) = 28 characters: ceil(28/4) = 7.
	body := map[string]any{
		"model": "m",
		"messages": []any{
			map[string]any{"role": "developer", "content": []any{map[string]any{"type": "text", "text": "be nice"}}},
			map[string]any{"role": "user", "content": "hello"},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c", "type": "function", "function": map[string]any{"name": "lookup_x", "arguments": "{}"}}}},
			map[string]any{"role": "tool", "tool_call_id": "c", "content": "ok"},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "café"}, map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:x"}}}},
		},
	}
	m := decode(t, readAll(t, post(t, srv, chatPath, body)))
	if got := num(t, path(t, m, "usage.prompt_tokens")); got != 7 {
		t.Errorf("prompt_tokens %d, want 7", got)
	}
}

// TestChatImageOutsideUserMessageRefused: the chat API takes an image_url part in a user
// message alone, and refuses one in a tool (or assistant, system) message with a 400 naming
// the message; the simulator does too, so a gateway that carried a tool result's image into
// the tool message is caught.
func TestChatImageOutsideUserMessageRefused(t *testing.T) {
	_, srv := newServer(t, Options{})
	image := `[{"type":"text","text":"here"},{"type":"image_url","image_url":{"url":"https://x/a.png"}}]`
	body := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"shot","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":` + image + `}]}`
	resp := post(t, srv, "/v1/chat/completions", body)
	got := decode(t, readAll(t, resp))
	e, _ := got["error"].(map[string]any)
	if resp.StatusCode != 400 || e["param"] != "messages[2]" || !strings.Contains(e["message"].(string), "role 'tool' contains an image URL") {
		t.Errorf("an image in a tool message: %d %v", resp.StatusCode, got)
	}
	// In a user message it is served.
	body = `{"model":"m","messages":[{"role":"user","content":` + image + `}]}`
	if resp := post(t, srv, "/v1/chat/completions", body); resp.StatusCode != 200 {
		t.Errorf("an image in a user message: %d %s", resp.StatusCode, readAll(t, resp))
	}
}
