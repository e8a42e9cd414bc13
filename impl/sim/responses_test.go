package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

const responsesPath = "/v1/responses"

func responsesBody(input any, extra map[string]any) map[string]any {
	b := map[string]any{"model": "sim-reasoner", "input": input}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

var responsesWeatherTool = map[string]any{
	"type":        "function",
	"name":        "get_weather",
	"description": "Current weather.",
	"parameters":  map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}},
	"strict":      false,
}

var responseKeys = []string{"id", "object", "created_at", "status", "background", "error", "incomplete_details",
	"instructions", "max_output_tokens", "model", "output", "parallel_tool_calls", "previous_response_id",
	"reasoning", "service_tier", "store", "temperature", "text", "tool_choice", "tools", "top_p", "truncation",
	"usage", "user", "metadata"}

// checkUsage checks a Responses usage object.
func checkResponsesUsage(t *testing.T, u any, input, output int) {
	t.Helper()
	keys(t, "usage", u, "input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details", "total_tokens")
	keys(t, "input details", path(t, u, "input_tokens_details"), "cached_tokens")
	keys(t, "output details", path(t, u, "output_tokens_details"), "reasoning_tokens")
	if num(t, path(t, u, "input_tokens")) != input || num(t, path(t, u, "output_tokens")) != output || num(t, path(t, u, "total_tokens")) != input+output {
		t.Errorf("usage %v, want %d + %d", u, input, output)
	}
}

func TestResponsesNonStreaming(t *testing.T) {
	_, srv := newServer(t, Options{})
	resp := post(t, srv, responsesPath, responsesBody("Say hello to the gateway.", map[string]any{
		"instructions": "Be brief.", "temperature": 0.5, "metadata": map[string]any{"k": "v"}, "store": false,
	}))
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	m := decode(t, body)
	keys(t, "response", m, responseKeys...)
	if !strings.HasPrefix(m["id"].(string), "resp_") || m["object"] != "response" || m["status"] != "completed" || m["model"] != "sim-reasoner" {
		t.Errorf("response %s", body)
	}
	if m["instructions"] != "Be brief." || m["temperature"] != 0.5 || m["store"] != false || path(t, m, "metadata.k") != "v" || m["error"] != nil || m["incomplete_details"] != nil {
		t.Errorf("echoed fields: %s", body)
	}
	item := path(t, m, "output.0")
	keys(t, "item", item, "id", "type", "status", "content", "role")
	if !strings.HasPrefix(path(t, item, "id").(string), "msg_") || path(t, item, "type") != "message" || path(t, item, "status") != "completed" || path(t, item, "role") != "assistant" {
		t.Errorf("item %v", item)
	}
	part := path(t, item, "content.0")
	keys(t, "part", part, "type", "annotations", "logprobs", "text")
	if words(path(t, part, "text").(string)) != DefaultWords {
		t.Errorf("part %v", part)
	}
	// "Be brief." (9) + "Say hello to the gateway." (25) = 34: ceil(34/4) = 9.
	checkResponsesUsage(t, m["usage"], 9, DefaultWords)

	// Array input: the last user message drives the reply; the same text gives the same words.
	arr := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody([]any{
		map[string]any{"role": "user", "content": "Earlier."},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "Ok."}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Say hello to the gateway."}}},
	}, map[string]any{"instructions": "Be brief."}))))
	if path(t, arr, "output.0.content.0.text") != path(t, part, "text") {
		t.Errorf("array input text %v, string input text %v", path(t, arr, "output.0.content.0.text"), path(t, part, "text"))
	}
}

// checkResponsesStream checks sequence numbers, event: lines and the lifecycle, and returns
// the event types in order and the final response.
func checkResponsesStream(t *testing.T, evs []event) (types []string, final map[string]any) {
	t.Helper()
	var id string
	for i, ev := range evs {
		d := ev.JSON(t)
		if ev.Name == "" || ev.Name != d["type"] {
			t.Errorf("event %d: event: %q, type %v", i, ev.Name, d["type"])
		}
		if num(t, d["sequence_number"]) != i {
			t.Errorf("event %d: sequence_number %v", i, d["sequence_number"])
		}
		types = append(types, ev.Name)
		if r, ok := d["response"].(map[string]any); ok {
			keys(t, ev.Name+" response", r, responseKeys...)
			if id == "" {
				id = r["id"].(string)
			} else if r["id"] != id {
				t.Errorf("response id changed")
			}
			final = r
		}
	}
	if len(types) == 0 || types[0] != "response.created" {
		t.Fatalf("first event %v", types)
	}
	created := evs[0].JSON(t)["response"].(map[string]any)
	if created["status"] != "in_progress" || len(created["output"].([]any)) != 0 || created["usage"] != nil {
		t.Errorf("response.created: %s", evs[0].Data)
	}
	return types, final
}

func TestResponsesStreaming(t *testing.T) {
	_, srv := newServer(t, Options{})
	want := path(t, decode(t, readAll(t, post(t, srv, responsesPath, responsesBody("Say hello to the gateway.", nil)))), "output.0.content.0.text")

	_, evs := stream(t, srv, responsesPath, responsesBody("Say hello to the gateway.", map[string]any{"stream": true}))
	types, final := checkResponsesStream(t, evs)
	wantTypes := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	for range DefaultWords {
		wantTypes = append(wantTypes, "response.output_text.delta")
	}
	wantTypes = append(wantTypes, "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed")
	if strings.Join(types, ",") != strings.Join(wantTypes, ",") {
		t.Fatalf("events:\n%v\nwant:\n%v", types, wantTypes)
	}
	added := evs[2].JSON(t)
	keys(t, "output_item.added", added, "type", "sequence_number", "output_index", "item")
	itemID := path(t, added, "item.id")
	if path(t, added, "item.status") != "in_progress" || len(path(t, added, "item.content").([]any)) != 0 {
		t.Errorf("output_item.added %s", evs[2].Data)
	}
	partAdded := evs[3].JSON(t)
	keys(t, "content_part.added", partAdded, "type", "sequence_number", "item_id", "output_index", "content_index", "part")
	if path(t, partAdded, "part.text") != "" {
		t.Errorf("content_part.added %s", evs[3].Data)
	}
	var text string
	for _, ev := range evs[4 : 4+DefaultWords] {
		d := ev.JSON(t)
		keys(t, "delta", d, "type", "sequence_number", "item_id", "output_index", "content_index", "delta", "logprobs", "obfuscation")
		if d["item_id"] != itemID {
			t.Errorf("delta item_id %v", d["item_id"])
		}
		text += d["delta"].(string)
	}
	if text != want {
		t.Errorf("streamed %q, non-stream %q", text, want)
	}
	n := len(evs)
	if path(t, evs[n-4].JSON(t), "text") != want || path(t, evs[n-3].JSON(t), "part.text") != want ||
		path(t, evs[n-2].JSON(t), "item.status") != "completed" || path(t, evs[n-2].JSON(t), "item.content.0.text") != want {
		t.Errorf("done events:\n%s%s%s", evs[n-4].Raw, evs[n-3].Raw, evs[n-2].Raw)
	}
	if final["status"] != "completed" || path(t, final, "output.0.content.0.text") != want {
		t.Errorf("response.completed %s", evs[n-1].Data)
	}
	checkResponsesUsage(t, final["usage"], 7, DefaultWords)
}

func TestResponsesIncomplete(t *testing.T) {
	_, srv := newServer(t, Options{})
	body := responsesBody("long [[sim words=40]]", map[string]any{"max_output_tokens": 20})
	m := decode(t, readAll(t, post(t, srv, responsesPath, body)))
	if m["status"] != "incomplete" || path(t, m, "incomplete_details.reason") != "max_output_tokens" || path(t, m, "output.0.status") != "incomplete" {
		t.Errorf("response %v", m)
	}
	if words(path(t, m, "output.0.content.0.text").(string)) != 20 || num(t, path(t, m, "max_output_tokens")) != 20 {
		t.Errorf("text %v", path(t, m, "output.0.content.0.text"))
	}
	body["stream"] = true
	_, evs := stream(t, srv, responsesPath, body)
	types, final := checkResponsesStream(t, evs)
	if types[len(types)-1] != "response.incomplete" || final["status"] != "incomplete" || path(t, final, "incomplete_details.reason") != "max_output_tokens" {
		t.Errorf("terminal %v: %v", types[len(types)-1], final)
	}
	checkResponsesUsage(t, final["usage"], 6, 20)

	resp := post(t, srv, responsesPath, responsesBody("x", map[string]any{"max_output_tokens": 5}))
	if e := decode(t, readAll(t, resp)); resp.StatusCode != http.StatusBadRequest || path(t, e, "error.param") != "max_output_tokens" {
		t.Errorf("max_output_tokens 5: %d %v", resp.StatusCode, e)
	}
}

func TestResponsesToolCall(t *testing.T) {
	_, srv := newServer(t, Options{})
	body := responsesBody("Weather in Paris? call get_weather", map[string]any{"tools": []any{responsesWeatherTool}})
	m := decode(t, readAll(t, post(t, srv, responsesPath, body)))
	item := path(t, m, "output.0").(map[string]any)
	keys(t, "function_call", item, "id", "type", "status", "arguments", "call_id", "name")
	if item["type"] != "function_call" || item["name"] != "get_weather" || item["status"] != "completed" ||
		!strings.HasPrefix(item["id"].(string), "fc_") || !strings.HasPrefix(item["call_id"].(string), "call_") {
		t.Errorf("item %v", item)
	}
	args := item["arguments"].(string)
	var parsed map[string]string
	if err := json.Unmarshal([]byte(args), &parsed); err != nil || parsed["q"] == "" {
		t.Errorf("arguments %q", args)
	}
	tokens := num(t, path(t, m, "usage.output_tokens"))
	if m["status"] != "completed" || tokens < 1 {
		t.Errorf("response %v", m)
	}
	if path(t, m, "tools.0.name") != "get_weather" {
		t.Errorf("tools not echoed: %v", m["tools"])
	}

	body["stream"] = true
	_, evs := stream(t, srv, responsesPath, body)
	types, final := checkResponsesStream(t, evs)
	want := "response.created,response.in_progress,response.output_item.added," +
		strings.Repeat("response.function_call_arguments.delta,", tokens) +
		"response.function_call_arguments.done,response.output_item.done,response.completed"
	if strings.Join(types, ",") != want {
		t.Fatalf("events %v", types)
	}
	added := evs[2].JSON(t)
	if path(t, added, "item.type") != "function_call" || path(t, added, "item.arguments") != "" || path(t, added, "item.status") != "in_progress" {
		t.Errorf("output_item.added %s", evs[2].Data)
	}
	var streamed string
	for _, ev := range evs[3 : 3+tokens] {
		d := ev.JSON(t)
		keys(t, "arguments delta", d, "type", "sequence_number", "item_id", "output_index", "delta", "obfuscation")
		streamed += d["delta"].(string)
	}
	done := evs[3+tokens].JSON(t)
	if streamed != args || done["arguments"] != args || done["name"] != "get_weather" {
		t.Errorf("streamed %q, done %v, non-stream %q", streamed, done, args)
	}
	if path(t, final, "output.0.arguments") != args || path(t, final, "output.0.status") != "completed" {
		t.Errorf("final %v", final["output"])
	}

	// A forced tool_choice, and the end of the loop after function_call_output.
	forced := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody("hello", map[string]any{
		"tools": []any{responsesWeatherTool}, "tool_choice": map[string]any{"type": "function", "name": "get_weather"}}))))
	if path(t, forced, "output.0.type") != "function_call" {
		t.Errorf("forced: %v", forced["output"])
	}
	after := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody([]any{
		map[string]any{"role": "user", "content": "call get_weather"},
		map[string]any{"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": args},
		map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
	}, map[string]any{"tools": []any{responsesWeatherTool}}))))
	if path(t, after, "output.0.type") != "message" {
		t.Errorf("after the tool output: %v", after["output"])
	}
}
