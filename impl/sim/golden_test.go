package sim

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// goldenCase is one recorded exchange; testdata/README.md lists them for reuse.
type goldenCase struct {
	file string
	path string
	body map[string]any
}

func goldenCases() []goldenCase {
	const text, tool = "Say hello to the gateway.", "What is the weather in Paris? call get_weather"
	chatTools := map[string]any{"tools": []any{weatherTool}}
	respTools := map[string]any{"tools": []any{responsesWeatherTool}}
	anthTools := map[string]any{"tools": []any{anthropicWeatherTool}}
	with := func(m map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	usage := map[string]any{"include_usage": true}
	const record = "Extract the customer record."
	chatFormat := map[string]any{"response_format": map[string]any{"type": "json_schema",
		"json_schema": map[string]any{"name": "customer", "strict": true, "schema": customer()}}}
	respFormat := map[string]any{"text": map[string]any{"format": map[string]any{"type": "json_schema",
		"name": "customer", "strict": true, "schema": customer()}}}
	anthFormat := map[string]any{"output_config": map[string]any{"format": map[string]any{"type": "json_schema", "schema": customer()}}}
	anthForced := map[string]any{"tools": []any{anthropicWeatherTool, map[string]any{"name": "save_customer", "input_schema": customer()}},
		"tool_choice": map[string]any{"type": "tool", "name": "save_customer"}}
	const search = "What is new in Go? [[sim web_search=2]]"
	respSearch := map[string]any{"tools": []any{map[string]any{"type": "web_search"}}, "max_tool_calls": 3}
	anthSearch := map[string]any{"tools": []any{map[string]any{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}}}
	const mcpCall = "Which datasets have I got? call mcp__tollgate__query_data"
	respNamespace := map[string]any{"tools": codexTools()}
	return []goldenCase{
		{"chat_text.sse", chatPath, chatBody(text, map[string]any{"stream": true, "stream_options": usage})},
		{"chat_tool.sse", chatPath, chatBody(tool, with(chatTools, "stream", true, "stream_options", usage))},
		{"chat_length.sse", chatPath, chatBody(text, map[string]any{"stream": true, "stream_options": usage, "max_completion_tokens": 5})},
		{"chat_midstream.sse", chatPath, chatBody(text+" [[sim fault=midstream after=3]]", map[string]any{"stream": true, "stream_options": usage})},
		{"chat_text.json", chatPath, chatBody(text, nil)},
		{"chat_tool.json", chatPath, chatBody(tool, chatTools)},
		{"chat_json_schema.sse", chatPath, chatBody(record, with(chatFormat, "stream", true, "stream_options", usage))},
		{"chat_json_schema.json", chatPath, chatBody(record, chatFormat)},
		{"chat_json_object.json", chatPath, chatBody(record, map[string]any{"response_format": map[string]any{"type": "json_object"}})},

		{"responses_text.sse", responsesPath, responsesBody(text, map[string]any{"stream": true})},
		{"responses_tool.sse", responsesPath, responsesBody(tool, with(respTools, "stream", true))},
		{"responses_incomplete.sse", responsesPath, responsesBody(text+" [[sim words=40]]", map[string]any{"stream": true, "max_output_tokens": 16})},
		{"responses_midstream.sse", responsesPath, responsesBody(text+" [[sim fault=midstream after=3]]", map[string]any{"stream": true})},
		{"responses_text.json", responsesPath, responsesBody(text, nil)},
		{"responses_tool.json", responsesPath, responsesBody(tool, respTools)},
		{"responses_json_schema.sse", responsesPath, responsesBody(record, with(respFormat, "stream", true))},
		{"responses_json_schema.json", responsesPath, responsesBody(record, respFormat)},

		{"messages_text.sse", messagesPath, messagesBody(text, map[string]any{"stream": true})},
		{"messages_tool.sse", messagesPath, messagesBody(tool, with(anthTools, "stream", true))},
		{"messages_max_tokens.sse", messagesPath, messagesBody(text, map[string]any{"stream": true, "max_tokens": 5})},
		{"messages_midstream.sse", messagesPath, messagesBody(text+" [[sim fault=midstream after=3]]", map[string]any{"stream": true})},
		{"messages_text.json", messagesPath, messagesBody(text, nil)},
		{"messages_tool.json", messagesPath, messagesBody(tool, anthTools)},
		{"messages_json_schema.sse", messagesPath, messagesBody(record, with(anthFormat, "stream", true))},
		{"messages_json_schema.json", messagesPath, messagesBody(record, anthFormat)},
		{"messages_tool_forced.sse", messagesPath, messagesBody(record, with(anthForced, "stream", true))},
		{"messages_tool_forced.json", messagesPath, messagesBody(record, anthForced)},

		{"namespace/responses_namespace_tool.sse", responsesPath, responsesBody(mcpCall, with(respNamespace, "stream", true))},
		{"namespace/responses_namespace_tool.json", responsesPath, responsesBody(mcpCall, respNamespace)},

		{"websearch/responses_web_search.sse", responsesPath, responsesBody(search, with(respSearch, "stream", true))},
		{"websearch/responses_web_search.json", responsesPath, responsesBody(search, respSearch)},
		{"websearch/messages_web_search.sse", messagesPath, messagesBody(search, with(anthSearch, "stream", true))},
		{"websearch/messages_web_search.json", messagesPath, messagesBody(search, anthSearch)},
	}
}

// TestGolden records every golden exchange and compares it, ids and timestamps normalised,
// with testdata/ (rewritten by go test -update). Streams are parsed strictly first.
func TestGolden(t *testing.T) {
	_, srv := newServer(t, Options{})
	for _, c := range goldenCases() {
		t.Run(c.file, func(t *testing.T) {
			resp := post(t, srv, c.path, c.body)
			body := readAll(t, resp)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if strings.HasSuffix(c.file, ".sse") {
				if _, err := parseSSE(t, bytes.NewReader(body)); err != nil {
					t.Fatalf("stream: %v", err)
				}
			}
			golden(t, c.file, body)
		})
	}
}

// TestDeterminism checks that the same request gives the same bytes apart from ids and
// timestamps, on separate simulators, and that another prompt or model gives another text.
func TestDeterminism(t *testing.T) {
	_, a := newServer(t, Options{})
	_, b := newServer(t, Options{})
	for _, c := range goldenCases() {
		if strings.Contains(c.file, "midstream") {
			continue
		}
		ra, rb := post(t, a, c.path, c.body), post(t, b, c.path, c.body)
		ba, bb := readAll(t, ra), readAll(t, rb)
		if !bytes.Equal(normalise(ba), normalise(bb)) {
			t.Errorf("%s: two runs differ:\n%s\n%s", c.file, ba, bb)
		}
		if bytes.Equal(ba, bb) {
			t.Errorf("%s: ids did not change between runs", c.file)
		}
	}
	text := func(model, prompt string) string {
		m := decode(t, readAll(t, post(t, a, chatPath, map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": prompt}}})))
		return path(t, m, "choices.0.message.content").(string)
	}
	if x, y, z := text("m1", "one"), text("m1", "two"), text("m2", "one"); x == y || x == z {
		t.Errorf("replies do not depend on the request: %q %q %q", x, y, z)
	}
}

func TestParseDirectives(t *testing.T) {
	for _, c := range []struct {
		text string
		ok   bool
		want directive
	}{
		{"no directive", false, directive{}},
		{"[[simulate words=3]]", false, directive{}},
		{"x [[sim words=40]] y", true, directive{raw: "[[sim words=40]]", words: 40}},
		{"[[sim words=0]]", true, directive{raw: "[[sim words=0]]", words: -1}},
		{"[[sim fault=429 retry_after=2 times=2]]", true, directive{raw: "[[sim fault=429 retry_after=2 times=2]]",
			fault: Fault{Kind: FaultStatus, Status: 429, RetryAfter: 2 * time.Second}, times: 2}},
		{"[[sim fault=midstream after=3 status=529]]", true, directive{raw: "[[sim fault=midstream after=3 status=529]]",
			fault: Fault{Kind: FaultMidstream, After: 3, Status: 529}}},
		{"[[sim fault=stall ms=3000]]", true, directive{raw: "[[sim fault=stall ms=3000]]", fault: Fault{Kind: FaultStall, Delay: 3 * time.Second}}},
		{"[[sim fault=stall_before ms=10]]", true, directive{raw: "[[sim fault=stall_before ms=10]]", fault: Fault{Kind: FaultStallBefore, Delay: 10 * time.Millisecond}}},
		{"[[sim fault=drop after=2]]", true, directive{raw: "[[sim fault=drop after=2]]", fault: Fault{Kind: FaultDrop, After: 2}}},
		{"[[sim fault=drop_before]]", true, directive{raw: "[[sim fault=drop_before]]", fault: Fault{Kind: FaultDropBefore}}},
		{"[[sim fault=999 words=x should_retry=false tps=5 first_ms=20]]", true, directive{raw: "[[sim fault=999 words=x should_retry=false tps=5 first_ms=20]]",
			fault: Fault{ShouldRetry: "false"}, tps: 5, tpsOK: true, first: 20 * time.Millisecond, fOK: true}},
		{"[[sim web_search=3]]", true, directive{raw: "[[sim web_search=3]]", webSearch: 3}},
		{"[[sim cache_min=256]]", true, directive{raw: "[[sim cache_min=256]]", cacheMin: 256}},
		{"[[sim cache_min=0]] [[sim cache_min=-3]]", true, directive{raw: "[[sim cache_min=0]]\n[[sim cache_min=-3]]", cacheMin: 1}},
		{"[[sim web_search=0 words=2]] [[sim web_search=x]]", true, directive{raw: "[[sim web_search=0 words=2]]\n[[sim web_search=x]]", words: 2}},
		{"[[sim words=5]] and [[sim fault=502]]", true, directive{raw: "[[sim words=5]]\n[[sim fault=502]]", words: 5, fault: Fault{Kind: FaultStatus, Status: 502}}},
	} {
		got, ok := parseDirectives(c.text)
		if ok != c.ok || got != c.want {
			t.Errorf("%q: got %+v %v, want %+v %v", c.text, got, ok, c.want, c.ok)
		}
	}
}

func TestAppendString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":           `"plain"`,
		"q\"b\\n\n\t\x01": `"q\"b\\n\n\t\u0001"`,
		"é<>&":            `"é<>&"`,
		"bad\xffutf8":     `"bad\ufffdutf8"`,
		"ls\u2028":        `"ls\u2028"`,
	} {
		if got := string(appendString(nil, in)); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

func BenchmarkChatStream(b *testing.B) {
	s := New(Options{})
	body := `{"model":"sim-general","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello to the gateway."}]}`
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, chatPath, strings.NewReader(body)))
	}
}

func BenchmarkMessagesNonStreaming(b *testing.B) {
	s := New(Options{})
	body := `{"model":"sim-sonnet","max_tokens":256,"messages":[{"role":"user","content":"Say hello to the gateway."}]}`
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, messagesPath, strings.NewReader(body)))
	}
}
