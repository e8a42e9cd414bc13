package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The hosted web search of [[sim web_search=N]]: its wire shapes, its cap and when it is
// ignored. sdk_websearch_test.go reads the same answers with the official SDKs.

const searchPrompt = "What is new in Go? [[sim web_search=2]]"

var (
	responsesSearchTool = map[string]any{"type": "web_search"}
	anthropicSearchTool = map[string]any{"type": "web_search_20250305", "name": "web_search"}
)

// checkQuery checks that a search query is searchWords vocabulary words.
func checkQuery(t *testing.T, q any) string {
	t.Helper()
	s, ok := q.(string)
	if !ok || words(s) != searchWords {
		t.Errorf("query %v", q)
	}
	return s
}

// responsesSearches checks the output of a final response: n web_search_call items, then the
// reply item. It returns the queries.
func responsesSearches(t *testing.T, m map[string]any, n int, last string) []string {
	t.Helper()
	out := path(t, m, "output").([]any)
	if len(out) != n+1 {
		t.Fatalf("%d output items, want %d searches and a %s: %v", len(out), n, last, out)
	}
	var qs []string
	for i, item := range out[:n] {
		keys(t, "web_search_call", item, "id", "type", "status", "action")
		keys(t, "action", path(t, item, "action"), "type", "query", "queries")
		if !strings.HasPrefix(path(t, item, "id").(string), "ws_") || path(t, item, "type") != "web_search_call" ||
			path(t, item, "status") != "completed" || path(t, item, "action.type") != "search" {
			t.Errorf("item %d: %v", i, item)
		}
		q := checkQuery(t, path(t, item, "action.query"))
		if qs := path(t, item, "action.queries").([]any); len(qs) != 1 || qs[0] != q {
			t.Errorf("item %d: queries %v, query %q", i, qs, q)
		}
		qs = append(qs, q)
	}
	if path(t, out[n], "type") != last {
		t.Errorf("last item %v, want a %s", out[n], last)
	}
	return qs
}

func TestWebSearchResponses(t *testing.T) {
	_, srv := newServer(t, Options{})
	tools := map[string]any{"tools": []any{responsesSearchTool}}
	m := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody(searchPrompt, tools))))
	qs := responsesSearches(t, m, 2, "message")
	if qs[0] == qs[1] {
		t.Errorf("the two searches have the same query %q", qs[0])
	}
	text := path(t, m, "output.2.content.0.text").(string)
	// Searches cost no output tokens: the usage counts the text's words.
	if words(text) != DefaultWords || num(t, path(t, m, "usage.output_tokens")) != DefaultWords {
		t.Errorf("text %q, usage %v", text, m["usage"])
	}

	// Every web search tool type counts; the cap is max_tool_calls.
	for _, c := range []struct {
		tool  string
		extra map[string]any
		n     int
	}{
		{"web_search_preview", nil, 2},
		{"web_search_2025_08_26", nil, 2},
		{"web_search", map[string]any{"max_tool_calls": 1}, 1},
		{"web_search", map[string]any{"max_tool_calls": 5}, 2},
		{"web_search", map[string]any{"max_tool_calls": 0}, 0},
		{"web_search", map[string]any{"tool_choice": "none"}, 0},
		{"file_search", nil, 0},
	} {
		body := responsesBody(searchPrompt, map[string]any{"tools": []any{map[string]any{"type": c.tool}}})
		for k, v := range c.extra {
			body[k] = v
		}
		got := decode(t, readAll(t, post(t, srv, responsesPath, body)))
		if n := len(path(t, got, "output").([]any)) - 1; n != c.n {
			t.Errorf("%s %v: %d searches, want %d", c.tool, c.extra, n, c.n)
		}
	}
	// Without a hosted search tool the directive is ignored.
	for _, extra := range []map[string]any{nil, {"tools": []any{responsesWeatherTool}}} {
		got := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody(searchPrompt, extra))))
		if out := path(t, got, "output").([]any); len(out) != 1 || path(t, out[0], "type") != "message" {
			t.Errorf("no search tool: output %v", out)
		}
	}
	// A function call after the searches is the item after them.
	both := map[string]any{"tools": []any{responsesSearchTool, responsesWeatherTool}}
	got := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody("Weather? call get_weather [[sim web_search=3]]", both))))
	responsesSearches(t, got, 3, "function_call")
	// The same request gets the same queries.
	again := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody(searchPrompt, tools))))
	if q := responsesSearches(t, again, 2, "message"); q[0] != qs[0] || q[1] != qs[1] {
		t.Errorf("queries %v, then %v", qs, q)
	}
}

func TestWebSearchResponsesStreaming(t *testing.T) {
	_, srv := newServer(t, Options{})
	tools := map[string]any{"tools": []any{responsesSearchTool}}
	done := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody(searchPrompt, tools))))
	_, evs := stream(t, srv, responsesPath, responsesBody(searchPrompt, map[string]any{"tools": tools["tools"], "stream": true}))
	types, final := checkResponsesStream(t, evs)
	want := []string{"response.created", "response.in_progress"}
	for range 2 {
		want = append(want, "response.output_item.added", "response.web_search_call.in_progress",
			"response.web_search_call.searching", "response.web_search_call.completed", "response.output_item.done")
	}
	want = append(want, "response.output_item.added", "response.content_part.added")
	for range DefaultWords {
		want = append(want, "response.output_text.delta")
	}
	want = append(want, "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed")
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Fatalf("events:\n%v\nwant:\n%v", types, want)
	}
	ids := map[int]string{}
	for i, ev := range evs[2 : len(evs)-1] {
		d := ev.JSON(t)
		idx := num(t, d["output_index"])
		switch {
		case strings.HasPrefix(ev.Name, "response.web_search_call."):
			keys(t, ev.Name, d, "type", "sequence_number", "output_index", "item_id")
			if d["item_id"] != ids[idx] {
				t.Errorf("event %d: item_id %v, want %s", i, d["item_id"], ids[idx])
			}
		case ev.Name == "response.output_item.added":
			if _, seen := ids[idx]; seen || idx != len(ids) {
				t.Errorf("output_item.added output_index %d after %d items", idx, len(ids))
			}
			ids[idx] = path(t, d, "item.id").(string)
			if idx < 2 {
				keys(t, "added web_search_call", d["item"], "id", "type", "status", "action")
				if path(t, d, "item.status") != "in_progress" || path(t, d, "item.type") != "web_search_call" {
					t.Errorf("added %s", ev.Data)
				}
				keys(t, "added action", path(t, d, "item.action"), "type")
			}
		case ev.Name == "response.output_item.done":
			if path(t, d, "item.id") != ids[idx] {
				t.Errorf("output_item.done %s", ev.Data)
			}
			if idx < 2 && path(t, d, "item.status") != "completed" {
				t.Errorf("done %s", ev.Data)
			}
		default: // the message's events
			if idx != 2 {
				t.Errorf("%s output_index %d, want 2", ev.Name, idx)
			}
		}
	}
	qs := responsesSearches(t, final, 2, "message")
	dq := responsesSearches(t, done, 2, "message")
	if qs[0] != dq[0] || qs[1] != dq[1] || path(t, final, "output.2.content.0.text") != path(t, done, "output.2.content.0.text") ||
		num(t, path(t, final, "usage.output_tokens")) != DefaultWords {
		t.Errorf("streamed %v, not streamed %v", final["output"], done["output"])
	}
	for i := range 2 {
		if path(t, final, fmt.Sprintf("output.%d.id", i)) != ids[i] {
			t.Errorf("final output %d id %v, streamed %s", i, path(t, final, fmt.Sprintf("output.%d.id", i)), ids[i])
		}
	}

	// A midstream fault strikes after the searches: response.failed carries them.
	_, evs = stream(t, srv, responsesPath, responsesBody(searchPrompt+" [[sim fault=midstream after=0]]", map[string]any{"tools": tools["tools"], "stream": true}))
	types, final = checkResponsesStream(t, evs)
	if types[len(types)-1] != "response.failed" || final["status"] != "failed" {
		t.Fatalf("events %v", types)
	}
	responsesSearches(t, final, 2, "message")
}

// messagesSearches checks the content of a final message: n server_tool_use and
// web_search_tool_result pairs, then the reply block. It returns the queries.
func messagesSearches(t *testing.T, m map[string]any, n int, last string) []string {
	t.Helper()
	content := path(t, m, "content").([]any)
	if len(content) != 2*n+1 {
		t.Fatalf("%d blocks, want %d searches and a %s: %v", len(content), n, last, content)
	}
	var qs []string
	for i := 0; i < n; i++ {
		use, res := content[2*i], content[2*i+1]
		keys(t, "server_tool_use", use, "type", "id", "name", "input")
		keys(t, "input", path(t, use, "input"), "query")
		id := path(t, use, "id").(string)
		if path(t, use, "type") != "server_tool_use" || path(t, use, "name") != "web_search" || !strings.HasPrefix(id, "srvtoolu_01") {
			t.Errorf("block %d: %v", 2*i, use)
		}
		qs = append(qs, checkQuery(t, path(t, use, "input.query")))
		keys(t, "web_search_tool_result", res, "type", "tool_use_id", "content")
		if path(t, res, "type") != "web_search_tool_result" || path(t, res, "tool_use_id") != id {
			t.Errorf("block %d: %v", 2*i+1, res)
		}
		results := path(t, res, "content").([]any)
		if len(results) != searchResults {
			t.Errorf("block %d: %d results", 2*i+1, len(results))
		}
		for _, r := range results {
			keys(t, "web_search_result", r, "type", "url", "title", "encrypted_content", "page_age")
			if path(t, r, "type") != "web_search_result" || !strings.HasPrefix(path(t, r, "url").(string), "https://example.com/") ||
				path(t, r, "title") == "" || path(t, r, "encrypted_content") == "" || path(t, r, "page_age") != nil {
				t.Errorf("result %v", r)
			}
		}
	}
	if path(t, content[2*n], "type") != last {
		t.Errorf("last block %v, want a %s", content[2*n], last)
	}
	if n == 0 {
		if has(m["usage"].(map[string]any), "server_tool_use") {
			t.Errorf("usage %v without searches", m["usage"])
		}
	} else {
		keys(t, "server_tool_use", path(t, m, "usage.server_tool_use"), "web_search_requests")
		if num(t, path(t, m, "usage.server_tool_use.web_search_requests")) != n {
			t.Errorf("usage %v, want %d searches", m["usage"], n)
		}
	}
	return qs
}

func TestWebSearchMessages(t *testing.T) {
	_, srv := newServer(t, Options{})
	tools := map[string]any{"tools": []any{anthropicSearchTool}}
	m := decode(t, readAll(t, post(t, srv, messagesPath, messagesBody(searchPrompt, tools))))
	qs := messagesSearches(t, m, 2, "text")
	if qs[0] == qs[1] {
		t.Errorf("the two searches have the same query %q", qs[0])
	}
	if words(path(t, m, "content.4.text").(string)) != DefaultWords || num(t, path(t, m, "usage.output_tokens")) != DefaultWords || m["stop_reason"] != "end_turn" {
		t.Errorf("message %v", m)
	}

	withUses := func(typ string, uses any) map[string]any {
		tool := map[string]any{"type": typ, "name": "web_search"}
		if uses != nil {
			tool["max_uses"] = uses
		}
		return map[string]any{"tools": []any{anthropicWeatherTool, tool}}
	}
	for _, c := range []struct {
		extra  map[string]any
		prompt string
		n      int
	}{
		{withUses("web_search_20250305", 1), searchPrompt, 1},
		{withUses("web_search_20250305", 3), searchPrompt, 2},
		{withUses("web_search_20260209", nil), "Look it up. [[sim web_search=4]]", 4},
		{withUses("web_search_20250305", 3), "Look it up. [[sim web_search=4]]", 3},
		{withUses("web_fetch_20250910", nil), searchPrompt, 0},
		{withUses("code_execution_20250825", nil), searchPrompt, 0},
		{map[string]any{"tools": []any{anthropicSearchTool}, "tool_choice": map[string]any{"type": "none"}}, searchPrompt, 0},
		{nil, searchPrompt, 0},
	} {
		got := decode(t, readAll(t, post(t, srv, messagesPath, messagesBody(c.prompt, c.extra))))
		messagesSearches(t, got, c.n, "text")
	}
	// A tool_use after the searches is the block after them.
	got := decode(t, readAll(t, post(t, srv, messagesPath, messagesBody("Weather? call get_weather [[sim web_search=1]]", withUses("web_search_20250305", nil)))))
	messagesSearches(t, got, 1, "tool_use")
	if got["stop_reason"] != "tool_use" {
		t.Errorf("message %v", got)
	}
}

func TestWebSearchMessagesStreaming(t *testing.T) {
	_, srv := newServer(t, Options{})
	tools := []any{anthropicSearchTool}
	done := decode(t, readAll(t, post(t, srv, messagesPath, messagesBody(searchPrompt, map[string]any{"tools": tools}))))
	_, evs := stream(t, srv, messagesPath, messagesBody(searchPrompt, map[string]any{"tools": tools, "stream": true}))

	// Rebuild the message from the events, checking that blocks open in order, deltas and
	// stops address the open block, and the ping follows the first block's start.
	var names []string
	var blocks []map[string]any
	var partial []string
	var delta map[string]any
	open := -1
	for i, ev := range evs {
		d := ev.JSON(t)
		if ev.Name != d["type"] {
			t.Errorf("event %d: event: %q, type %v", i, ev.Name, d["type"])
		}
		names = append(names, ev.Name)
		switch ev.Name {
		case "content_block_start":
			if open != -1 || num(t, d["index"]) != len(blocks) {
				t.Errorf("event %d: start of block %v while %d is open, %d started", i, d["index"], open, len(blocks))
			}
			open = len(blocks)
			blocks = append(blocks, d["content_block"].(map[string]any))
			partial = append(partial, "")
		case "content_block_delta":
			if num(t, d["index"]) != open {
				t.Errorf("event %d: delta for %v, %d open", i, d["index"], open)
			}
			switch path(t, d, "delta.type") {
			case "input_json_delta":
				partial[open] += path(t, d, "delta.partial_json").(string)
			case "text_delta":
				blocks[open]["text"] = blocks[open]["text"].(string) + path(t, d, "delta.text").(string)
			}
		case "content_block_stop":
			if num(t, d["index"]) != open {
				t.Errorf("event %d: stop of %v, %d open", i, d["index"], open)
			}
			if partial[open] != "" {
				var in any
				if err := json.Unmarshal([]byte(partial[open]), &in); err != nil {
					t.Errorf("block %d: partial JSON %q: %v", open, partial[open], err)
				}
				blocks[open]["input"] = in
			}
			open = -1
		case "message_delta":
			delta = d
		}
	}
	if len(names) < 3 || names[0] != "message_start" || names[1] != "content_block_start" || names[2] != "ping" ||
		strings.Count(strings.Join(names, ","), "ping") != 1 {
		t.Errorf("events %v", names)
	}
	if path(t, blocks[0], "type") != "server_tool_use" || len(path(t, blocks[0], "input").(map[string]any)) == 0 {
		t.Errorf("first block %v", blocks[0])
	}
	keys(t, "message_delta.usage", delta["usage"], "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens", "server_tool_use")
	if num(t, path(t, delta, "usage.output_tokens")) != DefaultWords || num(t, path(t, delta, "usage.server_tool_use.web_search_requests")) != 2 {
		t.Errorf("message_delta %v", delta)
	}
	msg := map[string]any{"content": func() []any {
		out := make([]any, len(blocks))
		for i, b := range blocks {
			out[i] = b
		}
		return out
	}(), "usage": delta["usage"]}
	qs, dq := messagesSearches(t, msg, 2, "text"), messagesSearches(t, done, 2, "text")
	if qs[0] != dq[0] || qs[1] != dq[1] {
		t.Errorf("queries %v, not streamed %v", qs, dq)
	}
	// Apart from the ids, the rebuilt content is the content of the message not streamed.
	a, _ := json.Marshal(msg["content"])
	b, _ := json.Marshal(done["content"])
	if !bytes.Equal(normalise(a), normalise(b)) {
		t.Errorf("streamed content\n%s\nnot streamed\n%s", normalise(a), normalise(b))
	}
}

func TestWebSearchChatIgnored(t *testing.T) {
	_, srv := newServer(t, Options{})
	m := decode(t, readAll(t, post(t, srv, chatPath, chatBody(searchPrompt, map[string]any{
		"web_search_options": map[string]any{}, "tools": []any{map[string]any{"type": "web_search"}}}))))
	msg := path(t, m, "choices.0.message").(map[string]any)
	if words(msg["content"].(string)) != DefaultWords || has(msg, "tool_calls") || num(t, path(t, m, "usage.completion_tokens")) != DefaultWords {
		t.Errorf("chat %v", m)
	}
}
