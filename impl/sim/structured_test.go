package sim

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// customerSchema is the schema of the structured-output tests: nested objects, arrays, enums,
// $ref, anyOf, formats, a pattern, bounds and required properties.
const customerSchema = `{
  "type": "object",
  "$defs": {
    "address": {"type": "object", "properties": {
      "street": {"type": "string"},
      "city": {"type": "string", "minLength": 2},
      "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
      "required": ["street", "city", "zip"], "additionalProperties": false},
    "tag": {"type": "string", "enum": ["new", "vip", "churned"]}
  },
  "properties": {
    "id": {"type": "string", "format": "uuid"},
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer", "minimum": 18, "maximum": 99},
    "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "minItems": 1, "maxItems": 3, "uniqueItems": true},
    "address": {"$ref": "#/$defs/address"},
    "contact": {"anyOf": [
      {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}, "required": ["email"], "additionalProperties": false},
      {"type": "object", "properties": {"phone": {"type": "string", "pattern": "^\\+[0-9]{8,12}$"}}, "required": ["phone"], "additionalProperties": false}]},
    "joined": {"type": "string", "format": "date"},
    "nickname": {"type": ["string", "null"]},
    "orders": {"type": "array", "items": {"type": "object", "properties": {
      "sku": {"type": "string"},
      "qty": {"type": "integer", "minimum": 1},
      "status": {"enum": ["open", "shipped"]}},
      "required": ["sku", "qty", "status"], "additionalProperties": false}}
  },
  "required": ["id", "name", "age", "score", "tags", "address", "contact", "joined", "nickname", "orders"],
  "additionalProperties": false
}`

// customer returns customerSchema as a fresh decoded value, for request bodies.
func customer() map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(customerSchema), &m); err != nil {
		panic(err)
	}
	return m
}

// anyObjectSchema is what a json_object answer must be.
const anyObjectSchema = `{"type":"object","minProperties":1}`

// structuredPrompt is the prompt of the structured-output tests.
const structuredPrompt = "Extract the customer record."

// chatDeltas returns the content deltas and the tool-call argument fragments of a chat stream.
func chatDeltas(t *testing.T, evs []event) (content, args []string) {
	t.Helper()
	for _, ev := range evs[:len(evs)-1] {
		for _, c := range ev.JSON(t)["choices"].([]any) {
			delta := c.(map[string]any)["delta"].(map[string]any)
			if s, _ := delta["content"].(string); s != "" {
				content = append(content, s)
			}
			if calls, ok := delta["tool_calls"].([]any); ok {
				if a, _ := path(t, calls[0], "function.arguments").(string); a != "" {
					args = append(args, a)
				}
			}
		}
	}
	return content, args
}

func TestStructuredChat(t *testing.T) {
	_, srv := newServer(t, Options{})
	for _, c := range []struct {
		name   string
		format map[string]any
		schema string
	}{
		{"json_schema", map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "customer", "strict": true, "schema": customer()}}, customerSchema},
		{"json_object", map[string]any{"type": "json_object"}, anyObjectSchema},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := compileSchema(t, c.schema)
			m := decode(t, readAll(t, post(t, srv, chatPath, chatBody(structuredPrompt, map[string]any{"response_format": c.format}))))
			content := path(t, m, "choices.0.message.content").(string)
			validateJSON(t, s, content)
			if path(t, m, "choices.0.finish_reason") != "stop" {
				t.Errorf("finish %v", path(t, m, "choices.0.finish_reason"))
			}
			tokens := num(t, path(t, m, "usage.completion_tokens"))

			_, evs := stream(t, srv, chatPath, chatBody(structuredPrompt, map[string]any{"response_format": c.format,
				"stream": true, "stream_options": map[string]any{"include_usage": true}}))
			text, finish, usage := chatChunks(t, evs, true)
			deltas, _ := chatDeltas(t, evs)
			if text != content || finish != "stop" || num(t, usage["completion_tokens"]) != tokens || len(deltas) != tokens {
				t.Errorf("stream: %d deltas, usage %v, finish %s, text %s; non-stream %d tokens, %s", len(deltas), usage, finish, text, tokens, content)
			}
		})
	}

	// A forced function answers with arguments generated from its parameters.
	s := compileSchema(t, customerSchema)
	tool := map[string]any{"type": "function", "function": map[string]any{"name": "save_customer", "parameters": customer(), "strict": true}}
	forced := map[string]any{"tools": []any{weatherTool, tool}, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "save_customer"}}}
	m := decode(t, readAll(t, post(t, srv, chatPath, chatBody(structuredPrompt, forced))))
	args := path(t, m, "choices.0.message.tool_calls.0.function.arguments").(string)
	validateJSON(t, s, args)
	forced["stream"] = true
	forced["stream_options"] = map[string]any{"include_usage": true}
	_, evs := stream(t, srv, chatPath, chatBody(structuredPrompt, forced))
	_, finish, usage := chatChunks(t, evs, true)
	_, frags := chatDeltas(t, evs)
	if strings.Join(frags, "") != args || finish != "tool_calls" || num(t, usage["completion_tokens"]) != len(frags) ||
		num(t, path(t, m, "usage.completion_tokens")) != len(frags) {
		t.Errorf("streamed arguments %q (usage %v), non-stream %s", frags, usage, args)
	}

	// A tool named in the text still wins over the format; a max_completion_tokens bound cuts
	// the JSON short.
	format := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "customer", "schema": customer()}}
	m = decode(t, readAll(t, post(t, srv, chatPath, chatBody("Weather? call get_weather", map[string]any{"tools": []any{weatherTool}, "response_format": format}))))
	if path(t, m, "choices.0.finish_reason") != "tool_calls" {
		t.Errorf("tool turn with a format: %v", m)
	}
	full := path(t, decode(t, readAll(t, post(t, srv, chatPath, chatBody(structuredPrompt, map[string]any{"response_format": format})))), "choices.0.message.content").(string)
	m = decode(t, readAll(t, post(t, srv, chatPath, chatBody(structuredPrompt, map[string]any{"response_format": format, "max_completion_tokens": 5}))))
	cut := path(t, m, "choices.0.message.content").(string)
	if path(t, m, "choices.0.finish_reason") != "length" || num(t, path(t, m, "usage.completion_tokens")) != 5 || !strings.HasPrefix(full, cut) || json.Valid([]byte(cut)) {
		t.Errorf("cut answer %q (%v) of %q", cut, path(t, m, "choices.0.finish_reason"), full)
	}
}

// responsesDeltas returns the text deltas and function-call argument deltas of a Responses
// stream.
func responsesDeltas(t *testing.T, evs []event) (text, args []string) {
	t.Helper()
	for _, ev := range evs {
		switch ev.Name {
		case "response.output_text.delta":
			text = append(text, ev.JSON(t)["delta"].(string))
		case "response.function_call_arguments.delta":
			args = append(args, ev.JSON(t)["delta"].(string))
		}
	}
	return text, args
}

func TestStructuredResponses(t *testing.T) {
	_, srv := newServer(t, Options{})
	for _, c := range []struct {
		name   string
		format map[string]any
		schema string
	}{
		{"json_schema", map[string]any{"type": "json_schema", "name": "customer", "strict": true, "schema": customer()}, customerSchema},
		{"json_object", map[string]any{"type": "json_object"}, anyObjectSchema},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := compileSchema(t, c.schema)
			text := map[string]any{"format": c.format}
			m := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody(structuredPrompt, map[string]any{"text": text}))))
			out := path(t, m, "output.0.content.0.text").(string)
			validateJSON(t, s, out)
			tokens := num(t, path(t, m, "usage.output_tokens"))
			if m["status"] != "completed" || path(t, m, "text.format.type") != c.format["type"] {
				t.Errorf("response %v", m)
			}

			_, evs := stream(t, srv, responsesPath, responsesBody(structuredPrompt, map[string]any{"text": text, "stream": true}))
			_, final := checkResponsesStream(t, evs)
			deltas, _ := responsesDeltas(t, evs)
			if strings.Join(deltas, "") != out || len(deltas) != tokens || path(t, final, "output.0.content.0.text") != out ||
				num(t, path(t, final, "usage.output_tokens")) != tokens || final["status"] != "completed" {
				t.Errorf("stream: %q, final %v; non-stream %d tokens, %s", deltas, final, tokens, out)
			}
		})
	}

	s := compileSchema(t, customerSchema)
	tool := map[string]any{"type": "function", "name": "save_customer", "parameters": customer(), "strict": true}
	forced := map[string]any{"tools": []any{responsesWeatherTool, tool}, "tool_choice": map[string]any{"type": "function", "name": "save_customer"}}
	m := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody(structuredPrompt, forced))))
	args := path(t, m, "output.0.arguments").(string)
	validateJSON(t, s, args)
	forced["stream"] = true
	_, evs := stream(t, srv, responsesPath, responsesBody(structuredPrompt, forced))
	_, final := checkResponsesStream(t, evs)
	_, frags := responsesDeltas(t, evs)
	if strings.Join(frags, "") != args || path(t, final, "output.0.arguments") != args || num(t, path(t, final, "usage.output_tokens")) != len(frags) {
		t.Errorf("streamed arguments %q, final %v", frags, final["output"])
	}
}

// messagesDeltas returns the text deltas and the non-empty input_json_delta fragments of a
// Messages stream.
func messagesDeltas(t *testing.T, evs []event) (text, partial []string) {
	t.Helper()
	for _, ev := range evs {
		if ev.Name != "content_block_delta" {
			continue
		}
		d := ev.JSON(t)["delta"].(map[string]any)
		switch d["type"] {
		case "text_delta":
			text = append(text, d["text"].(string))
		case "input_json_delta":
			if s := d["partial_json"].(string); s != "" {
				partial = append(partial, s)
			}
		}
	}
	return text, partial
}

func TestStructuredMessages(t *testing.T) {
	_, srv := newServer(t, Options{})
	s := compileSchema(t, customerSchema)
	format := map[string]any{"type": "json_schema", "schema": customer()}
	for _, c := range []struct {
		name  string
		extra map[string]any
	}{
		{"output_config.format", map[string]any{"output_config": map[string]any{"effort": "low", "format": format}}},
		{"output_format", map[string]any{"output_format": format}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := decode(t, readAll(t, post(t, srv, messagesPath, messagesBody(structuredPrompt, c.extra))))
			if path(t, m, "content.0.type") != "text" || m["stop_reason"] != "end_turn" {
				t.Fatalf("message %v", m)
			}
			out := path(t, m, "content.0.text").(string)
			validateJSON(t, s, out)
			tokens := num(t, path(t, m, "usage.output_tokens"))

			body := messagesBody(structuredPrompt, c.extra)
			body["stream"] = true
			_, evs := stream(t, srv, messagesPath, body)
			_, text, _, delta := checkMessagesStream(t, evs)
			deltas, _ := messagesDeltas(t, evs)
			if text != out || len(deltas) != tokens || num(t, path(t, delta, "usage.output_tokens")) != tokens || path(t, delta, "delta.stop_reason") != "end_turn" {
				t.Errorf("stream: %q, %v; non-stream %d tokens, %s", deltas, delta, tokens, out)
			}
		})
	}

	t.Run("forced tool", func(t *testing.T) {
		tool := map[string]any{"name": "save_customer", "description": "Save a customer.", "input_schema": customer()}
		extra := map[string]any{"tools": []any{anthropicWeatherTool, tool}, "tool_choice": map[string]any{"type": "tool", "name": "save_customer"}}
		m := decode(t, readAll(t, post(t, srv, messagesPath, messagesBody(structuredPrompt, extra))))
		block := path(t, m, "content.0").(map[string]any)
		if block["type"] != "tool_use" || block["name"] != "save_customer" || m["stop_reason"] != "tool_use" {
			t.Fatalf("message %v", m)
		}
		input, _ := json.Marshal(block["input"])
		validateJSON(t, s, string(input))
		tokens := num(t, path(t, m, "usage.output_tokens"))

		body := messagesBody(structuredPrompt, extra)
		body["stream"] = true
		_, evs := stream(t, srv, messagesPath, body)
		_, text, partial, delta := checkMessagesStream(t, evs)
		_, frags := messagesDeltas(t, evs)
		validateJSON(t, s, partial)
		var a, b any
		_ = json.Unmarshal([]byte(partial), &a)
		_ = json.Unmarshal(input, &b)
		if text != "" || !jsonEqualAny(a, b) || len(frags) != tokens || num(t, path(t, delta, "usage.output_tokens")) != tokens ||
			path(t, evs[3].JSON(t), "delta.partial_json") != "" {
			t.Errorf("stream: text %q, partial %q (%d), %v; non-stream %d tokens %s", text, partial, len(frags), delta, tokens, input)
		}

		// A tool call that tool_choice does not force by name gets arguments from the tool's
		// schema too, since get_weather's declares its properties.
		extra["tool_choice"] = map[string]any{"type": "any"}
		m = decode(t, readAll(t, post(t, srv, messagesPath, messagesBody(structuredPrompt, extra))))
		weather, _ := json.Marshal(anthropicWeatherTool["input_schema"])
		input, _ = json.Marshal(path(t, m, "content.0.input"))
		validateJSON(t, compileSchema(t, string(weather)), string(input))
		if q, ok := path(t, m, "content.0.input.q").(string); !ok || q == "" || path(t, m, "content.0.name") != "get_weather" {
			t.Errorf("get_weather %v", m)
		}
	})
}

// jsonEqualAny compares two values decoded by encoding/json.
func jsonEqualAny(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestStructuredDeterminism checks that the same structured request gives the same answer on
// another simulator and that another prompt gives another answer.
func TestStructuredDeterminism(t *testing.T) {
	a, b := httptest.NewServer(New(Options{})), httptest.NewServer(New(Options{}))
	defer a.Close()
	defer b.Close()
	format := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "customer", "schema": customer()}}
	answer := func(srv *httptest.Server, prompt string) string {
		m := decode(t, readAll(t, post(t, srv, chatPath, chatBody(prompt, map[string]any{"response_format": format}))))
		return path(t, m, "choices.0.message.content").(string)
	}
	x, y, z := answer(a, structuredPrompt), answer(b, structuredPrompt), answer(a, "Another customer.")
	if x != y || x == z {
		t.Errorf("same request: %s / %s; other prompt: %s", x, y, z)
	}
}
