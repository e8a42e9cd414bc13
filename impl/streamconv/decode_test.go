package streamconv

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// decodeEvents feeds events (name, data) to a fresh decoder and returns the neutral events and
// whether the last event was terminal.
func decodeEvents(t *testing.T, f llm.Format, evs ...[2]string) ([]llm.Event, bool) {
	t.Helper()
	dec := NewDecoder(f)
	var (
		out  []llm.Event
		done bool
		err  error
	)
	for _, e := range evs {
		out, done, err = dec.Decode(sse.Event{Name: e[0], Data: []byte(e[1])}, out)
		if err != nil {
			t.Fatalf("decode %s: %v", e[1], err)
		}
	}
	return out, done
}

func kinds(evs []llm.Event) []llm.EventKind {
	var k []llm.EventKind
	for _, e := range evs {
		k = append(k, e.Kind)
	}
	return k
}

func TestChatDecoderQuirks(t *testing.T) {
	t.Run("error null in a normal chunk is no error", func(t *testing.T) {
		evs, _ := decodeEvents(t, llm.FormatChat,
			[2]string{"", `{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}],"error":null}`})
		if r := accumulate(evs); r.HasError || r.Text != "hi" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("OpenRouter error inside a normal chunk", func(t *testing.T) {
		evs, _ := decodeEvents(t, llm.FormatChat,
			[2]string{"", `{"id":"c","choices":[{"index":0,"delta":{"content":"a"}}]}`},
			[2]string{"", `{"id":"c","choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}],"error":{"code":502,"message":"Provider returned error"}}`},
			[2]string{"", `{"id":"c","choices":[{"index":0,"delta":{"content":"ignored"}}]}`})
		r := accumulate(evs)
		if !r.HasError || r.ErrMsg != "Provider returned error" || r.ErrType != "502" || r.Text != "a" || r.Stop != "" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("LiteLLM error with None type", func(t *testing.T) {
		evs, _ := decodeEvents(t, llm.FormatChat, [2]string{"", `{"error":{"message":"boom","type":"None","param":"None","code":"429"}}`})
		if r := accumulate(evs); r.ErrType != "429" || errorKind(r.ErrType).Status() != 429 {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("whole tool call in one fragment and extra choices", func(t *testing.T) {
		evs, done := decodeEvents(t, llm.FormatChat,
			[2]string{"", `{"id":"c","choices":[{"index":1,"delta":{"content":"other choice"}},{"index":0,"delta":{"tool_calls":[{"index":3,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}}],"future":{"x":[1,2]}}`},
			[2]string{"", `{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"function_call"}]}`},
			[2]string{"", ` [DONE] `})
		r := accumulate(evs)
		want := []toolCall{{"call_1", "f", `{"a":1}`}}
		if !done || r.Text != "" || !reflect.DeepEqual(r.Tools, want) || r.Stop != llm.StopToolCalls {
			t.Fatalf("%+v done=%v", r, done)
		}
	})
	t.Run("malformed chunk is a Go error", func(t *testing.T) {
		_, _, err := NewDecoder(llm.FormatChat).Decode(sse.Event{Data: []byte(`{"id":`)}, nil)
		if err == nil {
			t.Fatal("no error")
		}
	})
}

func TestResponsesDecoderQuirks(t *testing.T) {
	created := `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","model":"m","status":"in_progress","output":[],"usage":null}}`
	t.Run("nested error event", func(t *testing.T) {
		evs, done := decodeEvents(t, llm.FormatResponses,
			[2]string{"response.created", created},
			[2]string{"error", `{"type":"error","sequence_number":2,"error":{"type":"too_many_requests","code":"too_many_requests","message":"Too Many Requests","param":null}}`},
			[2]string{"response.failed", `{"type":"response.failed","sequence_number":3,"response":{"id":"resp_1","status":"failed","error":{"code":"rate_limit_exceeded","message":"other"}}}`})
		r := accumulate(evs)
		if !done || r.ErrType != "too_many_requests" || r.ErrMsg != "Too Many Requests" || len(evs) != 2 {
			t.Fatalf("%+v %v", evs, done)
		}
		if errorKind(r.ErrType) != errorKind("rate_limit_error") {
			t.Fatalf("too_many_requests is not a rate limit")
		}
	})
	t.Run("response.failed alone carries the error and usage", func(t *testing.T) {
		evs, done := decodeEvents(t, llm.FormatResponses,
			[2]string{"", created},
			[2]string{"", `{"type":"response.failed","sequence_number":1,"response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"bad"},"usage":{"input_tokens":3,"output_tokens":1}}}`})
		if k := kinds(evs); !done || !reflect.DeepEqual(k, []llm.EventKind{llm.EventStart, llm.EventUsage, llm.EventError}) {
			t.Fatalf("%v %v", k, done)
		}
		if r := accumulate(evs); r.ErrType != "server_error" || r.Usage.InputTokens != 3 {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("data-only events, arguments only in done, [DONE], unknown types", func(t *testing.T) {
		evs, done := decodeEvents(t, llm.FormatResponses,
			[2]string{"", created},
			[2]string{"", `{"type":"response.mcp_list_tools.in_progress","sequence_number":1,"output_index":0,"delta":{"not":"a string"}}`},
			[2]string{"", `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"call_9","name":"f","arguments":""}}`},
			[2]string{"", `{"type":"response.function_call_arguments.done","sequence_number":3,"item_id":"fc_1","output_index":0,"arguments":"{}","name":"f"}`},
			[2]string{"", `{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"call_9","name":"f","arguments":"{}"}}`},
			[2]string{"", `{"type":"response.output_item.added","sequence_number":5,"output_index":1,"item":{"id":"msg_1","type":"message","content":[]}}`},
			[2]string{"", `{"type":"response.output_text.done","sequence_number":6,"item_id":"msg_1","output_index":1,"content_index":0,"text":"late text"}`},
			[2]string{"", `{"type":"response.completed","sequence_number":7,"response":{"id":"resp_1","status":"completed","output":[{"type":"function_call"}],"usage":{"input_tokens":5,"output_tokens":2,"output_tokens_details":{"reasoning_tokens":1}}}}`},
		)
		r := accumulate(evs)
		if !done || r.Text != "late text" || !reflect.DeepEqual(r.Tools, []toolCall{{"call_9", "f", "{}"}}) || r.Stop != llm.StopToolCalls ||
			r.Usage != (llm.Usage{InputTokens: 5, OutputTokens: 2, ReasoningTokens: 1}) {
			t.Fatalf("%+v", r)
		}
		// [DONE] alone, in place of the terminal event, ends nothing: the stream was cut.
		_, done = decodeEvents(t, llm.FormatResponses, [2]string{"", created},
			[2]string{"", `{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hel"}`},
			[2]string{"", "[DONE]"})
		if done {
			t.Fatal("[DONE] without a terminal event was taken as the end")
		}
		// After an error, it ends the wait for response.failed.
		_, done = decodeEvents(t, llm.FormatResponses, [2]string{"", created},
			[2]string{"error", `{"type":"error","sequence_number":1,"code":"server_error","message":"bad","param":null}`},
			[2]string{"", "[DONE]"})
		if !done {
			t.Fatal("[DONE] after an error is not the end")
		}
	})
	t.Run("incomplete by content filter", func(t *testing.T) {
		evs, _ := decodeEvents(t, llm.FormatResponses,
			[2]string{"response.incomplete", `{"type":"response.incomplete","sequence_number":0,"response":{"id":"r","status":"incomplete","incomplete_details":{"reason":"content_filter"}}}`})
		if r := accumulate(evs); r.Stop != llm.StopContentFilter {
			t.Fatalf("%+v", r)
		}
	})
}

func TestMessagesDecoderQuirks(t *testing.T) {
	start := `{"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":10,"cache_read_input_tokens":5,"cache_creation_input_tokens":2,"output_tokens":1}}}`
	t.Run("data-only events, tool without arguments, stop sequence, repeated usage", func(t *testing.T) {
		evs, done := decodeEvents(t, llm.FormatMessages,
			[2]string{"", start},
			[2]string{"", `{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"xyz"}}`},
			[2]string{"", `{"type":"content_block_stop","index":0}`},
			[2]string{"", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"now","input":{}}}`},
			[2]string{"", `{"type":"content_block_stop","index":1}`},
			[2]string{"", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"f","input":{"a": [1, 2]}}}`},
			[2]string{"", `{"type":"content_block_stop","index":2}`},
			[2]string{"", `{"type":"content_block_start","index":3,"content_block":{"type":"text","text":"pre"}}`},
			[2]string{"", `{"type":"content_block_delta","index":3,"delta":{"type":"citations_delta","citation":{"type":"x"}}}`},
			[2]string{"", `{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"fix"}}`},
			[2]string{"", `{"type":"brand_new_event","index":9}`},
			[2]string{"", `{"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"usage":{"output_tokens":7}}`},
			[2]string{"", `{"type":"message_delta","delta":{"stop_reason":null},"usage":{"input_tokens":11,"output_tokens":9}}`},
			[2]string{"", `{"type":"message_stop"}`})
		r := accumulate(evs)
		want := []toolCall{{"toolu_1", "now", "{}"}, {"toolu_2", "f", `{"a":[1,2]}`}}
		if !done || r.Text != "prefix" || !reflect.DeepEqual(r.Tools, want) || r.Stop != llm.StopSequence {
			t.Fatalf("%+v done=%v", r, done)
		}
		// 11 uncached (message_delta's), 5 read, 2 written (no breakdown: for five minutes).
		if u := (llm.Usage{InputTokens: 18, CachedInputTokens: 5, CacheWrite5mTokens: 2, OutputTokens: 9}); r.Usage != u {
			t.Fatalf("usage %+v, want %+v", r.Usage, u)
		}
		for _, e := range evs {
			if e.Kind == llm.EventStop && e.StopSequence != "END" {
				t.Fatalf("stop sequence %q", e.StopSequence)
			}
		}
	})
	t.Run("error before anything", func(t *testing.T) {
		evs, _ := decodeEvents(t, llm.FormatMessages, [2]string{"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`})
		if k := kinds(evs); !reflect.DeepEqual(k, []llm.EventKind{llm.EventError}) {
			t.Fatalf("%v", k)
		}
	})
}

// TestEncoderEdges covers streams the recorded ones do not: failure before anything, an
// upstream that ends without its terminal, no include_usage, events after the end, content after
// Stop, a stop sequence, and calls without ids.
func TestEncoderEdges(t *testing.T) {
	for _, client := range formats {
		meta := metaFor(client.f)
		t.Run(client.short+"/fail first", func(t *testing.T) {
			enc := NewEncoder(client.f, meta)
			tr := transcriptOf(enc.Fail("rate_limit_exceeded", "slow down", nil))
			r := checkClient(t, client.f, tr, meta)
			if !r.HasError || r.ErrMsg != "slow down" || errorKind(r.ErrType) != errorKind("rate_limit_error") {
				t.Fatalf("%+v\n%s", r, tr)
			}
			if g := sdkRead(t, client.f, tr); !g.HasError || g.ErrMsg != "slow down" {
				t.Fatalf("SDK: %+v", g)
			}
			if out := enc.Encode(llm.Event{Kind: llm.EventTextDelta, Text: "x"}, nil); len(out) != 0 {
				t.Fatalf("output after the end: %v", out)
			}
			if out := enc.Finish(nil); len(out) != 0 {
				t.Fatalf("Finish after Fail: %v", out)
			}
			enc.Encode(llm.Event{Kind: llm.EventUsage, Usage: llm.Usage{InputTokens: 4, OutputTokens: 2}}, nil)
			if u := enc.Usage(); u.InputTokens != 4 || u.OutputTokens != 2 {
				t.Fatalf("usage after the end not recorded: %+v", u)
			}
		})
		t.Run(client.short+"/finish empty", func(t *testing.T) {
			enc := NewEncoder(client.f, meta)
			tr := transcriptOf(enc.Finish(nil))
			r := checkClient(t, client.f, tr, meta)
			if r.HasError || r.Stop != llm.StopEnd || r.Text != "" {
				t.Fatalf("%+v\n%s", r, tr)
			}
			sdkRead(t, client.f, tr)
		})
		t.Run(client.short+"/upstream ends early", func(t *testing.T) {
			raw := readFile(t, "testdata/upstream/messages_tools.sse")
			raw = raw[:len(raw)/2]
			raw = raw[:strings.LastIndex(string(raw), "\n\n")+2]
			tr, _ := pipe(t, llm.FormatMessages, client.f, meta, raw)
			r := checkClient(t, client.f, tr, meta)
			if !r.HasError || errorKind(r.ErrType) != errorKind("upstream_error") && client.f != llm.FormatMessages {
				t.Fatalf("%+v\n%s", r, tr)
			}
			sdkRead(t, client.f, tr)
		})
		t.Run(client.short+"/edge events", func(t *testing.T) {
			enc := NewEncoder(client.f, meta)
			var tr []byte
			for _, e := range []llm.Event{
				{Kind: llm.EventToolCallDelta, ToolIndex: 0, Arguments: "dropped: no such call"},
				{Kind: llm.EventStart, ID: "upstream-id", Model: "upstream-model"},
				{Kind: llm.EventTextDelta, Text: ""},
				{Kind: llm.EventToolCallStart, ToolIndex: 0, ToolName: "f"},
				{Kind: llm.EventToolCallDelta, ToolIndex: 0, Arguments: `{"k":"\u0001"}`},
				{Kind: llm.EventTextDelta, Text: "after the call"},
				{Kind: llm.EventStop, Stop: llm.StopSequence, StopSequence: "###"},
				{Kind: llm.EventTextDelta, Text: " dropped after stop"},
				{Kind: llm.EventStart, ID: "second start ignored"},
				{Kind: llm.EventUsage, Usage: llm.Usage{InputTokens: 3}},
				{Kind: llm.EventUsage, Usage: llm.Usage{OutputTokens: 2}},
			} {
				tr = appendTranscript(tr, enc.Encode(e, nil))
			}
			tr = appendTranscript(tr, enc.Finish(nil))
			r := checkClient(t, client.f, tr, meta)
			if r.Text != "after the call" || len(r.Tools) != 1 || r.Tools[0].Args != `{"k":"\u0001"}` || r.Tools[0].ID == "" {
				t.Fatalf("%+v\n%s", r, tr)
			}
			if client.f == llm.FormatMessages && !strings.Contains(string(tr), `"stop_reason":"stop_sequence","stop_sequence":"###"`) {
				t.Fatalf("stop sequence lost:\n%s", tr)
			}
			if u := enc.Usage(); u != (llm.Usage{InputTokens: 3, OutputTokens: 2}) {
				t.Fatalf("usage %+v", u)
			}
			sdkRead(t, client.f, tr)
		})
	}
	t.Run("chat without include_usage", func(t *testing.T) {
		meta := metaFor(llm.FormatChat)
		meta.IncludeUsage = false
		for _, up := range formats {
			for _, sc := range scenarios {
				name := up.short + "_" + sc
				tr, usage := pipe(t, up.f, llm.FormatChat, meta, readFile(t, "testdata/upstream/"+name+".sse"))
				if strings.Contains(string(tr), `"usage"`) {
					t.Fatalf("%s: usage without include_usage:\n%s", name, tr)
				}
				compareResult(t, name, llm.FormatChat, meta, checkChat(t, tr, meta), expected[name])
				compareResult(t, name+" SDK", llm.FormatChat, meta, sdkChat(t, tr), expected[name])
				if !expected[name].HasError && usage != expected[name].Usage {
					t.Fatalf("%s: metering must not depend on include_usage: %+v", name, usage)
				}
			}
		}
	})
	t.Run("meta falls back to the upstream id and model", func(t *testing.T) {
		enc := NewEncoder(llm.FormatChat, Meta{})
		out := enc.Encode(llm.Event{Kind: llm.EventStart, ID: "chatcmpl-up", Model: "up-model"}, nil)
		if len(out) != 1 || !strings.Contains(string(out[0].Data), `"id":"chatcmpl-up"`) || !strings.Contains(string(out[0].Data), `"model":"up-model"`) {
			t.Fatalf("%s", out[0].Data)
		}
	})
}

// TestInterleavedToolCalls: a chat upstream that interleaves the fragments of parallel calls
// (fragments of call 0 after call 1 began; OpenAI sends them one after the other, some other
// chat providers do not) gives every client whole arguments, and a streaming client whole
// arguments at every point where it may act on a call: a Responses client's
// function_call_arguments.done and output_item.done (Codex runs the tool on the latter), a
// Messages client's content_block_stop (Claude Code runs it then), whose blocks still do not
// interleave (checkMessages). On the code before, call 0's item and block were closed when
// call 1 began, with empty or partial arguments (wire-format trial s15h3).
func TestInterleavedToolCalls(t *testing.T) {
	h := `"id":"c","object":"chat.completion.chunk","created":1,"model":"m"`
	chunk := func(delta string) string {
		return "data: {" + h + `,"choices":[{"index":0,"delta":` + delta + `}]}` + "\n\n"
	}
	start := func(i int, name, args string) string {
		return fmt.Sprintf(`{"index":%d,"id":"call_%s","type":"function","function":{"name":%q,"arguments":%q}}`, i, name, name, args)
	}
	more := func(i int, args string) string {
		return fmt.Sprintf(`{"index":%d,"function":{"arguments":%q}}`, i, args)
	}
	calls := func(fragments ...string) string {
		return chunk(`{"tool_calls":[` + strings.Join(fragments, ",") + `]}`)
	}
	end := "data: {" + h + `,"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n"
	for _, c := range []struct {
		name string
		raw  string
		want []toolCall
	}{
		{"two calls begun in one chunk", calls(start(0, "a", ""), start(1, "b", `{"b"`)) + calls(more(0, `{"a":1}`)) + calls(more(1, ":2}")) + end,
			[]toolCall{{"call_a", "a", `{"a":1}`}, {"call_b", "b", `{"b":2}`}}},
		{"round robin, then a whole third", calls(start(0, "city", `{"city":`)) + calls(start(1, "query", `{"q":`)) +
			calls(more(0, `"Paris \"}{\" [x]`)) + calls(more(1, `"x}"`)) + calls(more(0, `"}`)) + calls(more(1, `}`)) + calls(start(2, "n", `{"n":1}`)) + end,
			[]toolCall{{"call_city", "city", `{"city":"Paris \"}{\" [x]"}`}, {"call_query", "query", `{"q":"x}"}`}, {"call_n", "n", `{"n":1}`}}},
		{"every call begun first", calls(start(0, "a", "")) + calls(start(1, "b", "")) + calls(start(2, "c", "")) +
			calls(more(2, `{"c":[3,`)) + calls(more(0, `{"a":[1,`)) + calls(more(1, `{"b":`)) + calls(more(1, `2}`)) + calls(more(2, `4]}`)) + calls(more(0, `2]}`)) + end,
			[]toolCall{{"call_a", "a", `{"a":[1,2]}`}, {"call_b", "b", `{"b":2}`}, {"call_c", "c", `{"c":[3,4]}`}}},
		{"a call without arguments", calls(start(0, "a", "")) + calls(start(1, "b", `{"b":`)) + calls(more(1, `2}`)) + end,
			[]toolCall{{"call_a", "a", ""}, {"call_b", "b", `{"b":2}`}}},
	} {
		whole := map[string]string{}
		for _, w := range c.want {
			whole[w.ID] = w.Args
		}
		for _, client := range formats {
			tr, _ := pipe(t, llm.FormatChat, client.f, metaFor(client.f), []byte(c.raw))
			want := c.want
			if client.f == llm.FormatMessages {
				// anthropic-sdk-go reads a tool_use block without input as {}.
				want = append([]toolCall(nil), want...)
				for i := range want {
					if want[i].Args == "" {
						want[i].Args = "{}"
					}
				}
			}
			if r := sdkRead(t, client.f, tr); !reflect.DeepEqual(r.Tools, want) {
				t.Errorf("%s, %s: %+v\n%s", c.name, client.short, r.Tools, tr)
			}
			switch client.f {
			case llm.FormatResponses:
				checkResponsesCallsWhole(t, c.name, tr, whole)
			case llm.FormatMessages:
				checkMessages(t, tr, metaFor(client.f))
				checkMessagesCallsWhole(t, c.name, tr, whole)
			}
		}
	}
}

// checkResponsesCallsWhole checks that every function call of a Responses stream is done
// (function_call_arguments.done, output_item.done) with its whole arguments, those its deltas
// gave, and gets no delta after.
func checkResponsesCallsWhole(t *testing.T, name string, raw []byte, whole map[string]string) {
	t.Helper()
	callOf := map[string]string{} // item id → call id
	deltas := map[string]string{}
	done := map[string]bool{}
	for _, ev := range readEvents(t, raw) {
		m := obj(t, ev.Data)
		id := str(m["item_id"])
		switch ev.Name {
		case "response.output_item.added", "response.output_item.done":
			it, _ := m["item"].(map[string]any)
			if str(it["type"]) != "function_call" {
				continue
			}
			callOf[str(it["id"])] = str(it["call_id"])
			if ev.Name == "response.output_item.done" {
				if args := str(it["arguments"]); args != whole[str(it["call_id"])] || args != deltas[str(it["id"])] {
					t.Errorf("%s: %s done with arguments %q, deltas %q, want %q", name, it["call_id"], args, deltas[str(it["id"])], whole[str(it["call_id"])])
				}
				done[str(it["id"])] = true
			}
		case "response.function_call_arguments.delta":
			if done[id] {
				t.Errorf("%s: a delta of %s after its item was done", name, id)
			}
			deltas[id] += str(m["delta"])
		case "response.function_call_arguments.done":
			if args := str(m["arguments"]); args != whole[callOf[id]] {
				t.Errorf("%s: function_call_arguments.done of %s: %q, want %q", name, callOf[id], args, whole[callOf[id]])
			}
		}
	}
	if len(done) != len(whole) {
		t.Errorf("%s: %d calls done, want %d", name, len(done), len(whole))
	}
}

// checkMessagesCallsWhole checks that every tool_use block of a Messages stream has its whole
// input when it stops.
func checkMessagesCallsWhole(t *testing.T, name string, raw []byte, whole map[string]string) {
	t.Helper()
	ids := map[int]string{}
	inputs := map[int]string{}
	for _, ev := range readEvents(t, raw) {
		m := obj(t, ev.Data)
		idx := int(num(m["index"]))
		switch ev.Name {
		case "content_block_start":
			ids[idx] = str(field(m, "content_block", "id"))
		case "content_block_delta":
			inputs[idx] += str(field(m, "delta", "partial_json"))
		case "content_block_stop":
			if got, want := inputs[idx], whole[ids[idx]]; got != want {
				t.Errorf("%s: block %d (%s) stopped with input %q, want %q", name, idx, ids[idx], got, want)
			}
		}
	}
}

func transcriptOf(evs []sse.Event) []byte { return appendTranscript(nil, evs) }

func appendTranscript(dst []byte, evs []sse.Event) []byte {
	for _, e := range evs {
		dst = sse.AppendEvent(dst, e)
	}
	return dst
}

// TestSurrogatePairSplitBetweenDeltas: a character outside the Basic Multilingual Plane whose
// UTF-16 halves an upstream sent in two text deltas (valid JSON each, as a server cutting text
// by UTF-16 length writes it) reaches the neutral text whole, from every format; a high
// surrogate that no low one follows, and a lone low one, become U+FFFD, as encoding/json makes
// them; an escaped backslash before "ud83d" is text. Trial h14 D7: each half became U+FFFD.
func TestSurrogatePairSplitBetweenDeltas(t *testing.T) {
	chat := func(text string) [2]string {
		return [2]string{"", `{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}`}
	}
	messages := func(text string) [2]string {
		return [2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + text + `"}}`}
	}
	responses := func(text string) [2]string {
		return [2]string{"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"` + text + `"}`}
	}
	starts := map[llm.Format][][2]string{
		llm.FormatChat: nil,
		llm.FormatMessages: {
			{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}`},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		},
		llm.FormatResponses: {
			{"response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}}`},
			{"response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`},
		},
	}
	for f, delta := range map[llm.Format]func(string) [2]string{llm.FormatChat: chat, llm.FormatMessages: messages, llm.FormatResponses: responses} {
		for _, c := range []struct {
			deltas []string
			want   string
		}{
			{[]string{`A\ud83d`, `\ude00B`}, "A\U0001F600B"},
			{[]string{`\ud83d`, `\ude00`}, "\U0001F600"},
			{[]string{`A\uD83D`, `\uDE00`, `C\ud83d`, `\ude01`}, "A\U0001F600C\U0001F601"},
			{[]string{`A\ud83d`, `B`}, "A\uFFFDB"},
			{[]string{`A\ude00`, `B`}, "A\uFFFDB"},
			{[]string{`A\\ud83d`, `\ude00`}, "A\\ud83d\uFFFD"},
		} {
			evs := append([][2]string(nil), starts[f]...)
			for _, d := range c.deltas {
				evs = append(evs, delta(d))
			}
			out, _ := decodeEvents(t, f, evs...)
			if got := accumulate(out).Text; got != c.want {
				t.Errorf("%s %q: text %q, want %q", f, c.deltas, got, c.want)
			}
		}
	}
	// A half held back when the text ends, or that the next chunk's text does not join (a
	// chat chunk that also ends the choice, which encoding/json reads), becomes U+FFFD; it
	// was silently lost (the review of the fix: "A" where the doc promised "A\uFFFD").
	ends := map[llm.Format][][2]string{
		llm.FormatChat: {chat(`A\ud83d`), {"", `{"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`}, {"", `[DONE]`}},
		llm.FormatMessages: append(append([][2]string(nil), starts[llm.FormatMessages]...), messages(`A\ud83d`),
			[2]string{"content_block_stop", `{"type":"content_block_stop","index":0}`}),
		llm.FormatResponses: append(append([][2]string(nil), starts[llm.FormatResponses]...), responses(`A\ud83d`),
			[2]string{"response.output_text.done", `{"type":"response.output_text.done","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"text":"A\ud83d"}`}),
	}
	for f, evs := range ends {
		out, _ := decodeEvents(t, f, evs...)
		if got := accumulate(out).Text; got != "A\uFFFD" {
			t.Errorf("%s: a half at the end of the text: %q, want %q", f, got, "A\uFFFD")
		}
	}
	out, _ := decodeEvents(t, llm.FormatChat, chat(`A\ud83d`),
		[2]string{"", `{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"B"},"finish_reason":"stop"}]}`})
	if got := accumulate(out).Text; got != "A\uFFFDB" {
		t.Errorf("chat: a half before a chunk encoding/json reads: %q, want %q", got, "A\uFFFDB")
	}
}

// TestResponsesSurrogatePairOnBothPaths: a character whose UTF-16 halves a Responses upstream
// split between two output_text.delta events is whole whether the fast path or encoding/json
// (an event the fast path leaves to it, here one with a key in capitals) read each delta, and
// a high surrogate that no low one follows is U+FFFD in its place, before the next delta's
// text. On the code before, encoding/json made each half U+FFFD, and a half the fast path
// held back came out after the text of a delta that encoding/json read.
func TestResponsesSurrogatePairOnBothPaths(t *testing.T) {
	const (
		created = `{"type":"response.created","response":{"id":"r","status":"in_progress","model":"m","output":[]}}`
		added   = `{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"msg_1","content":[]}}`
		final   = `{"type":"response.completed","response":{"id":"r","status":"completed","model":"m","output":[],"usage":{"input_tokens":1,"output_tokens":2}}}`
	)
	delta := func(text string, slow bool) [2]string {
		extra := ""
		if slow {
			extra = `,"Obfuscation":"x"` // foldable: the fast path leaves the event to encoding/json
		}
		return [2]string{"response.output_text.delta", `{"type":"response.output_text.delta","output_index":0,"content_index":0,"item_id":"msg_1","delta":"` + text + `"` + extra + `}`}
	}
	for _, c := range []struct {
		deltas []string
		want   string
	}{
		{[]string{`A\ud83d`, `\ude00B`}, "A\U0001F600B"},
		{[]string{`A\uD83D`, `\uDE00`, `C\ud83d`, `\ude01`}, "A\U0001F600C\U0001F601"},
		{[]string{`A\ud83d`, `B`}, "A\uFFFDB"},
		{[]string{`A\ude00`, `B`}, "A\uFFFDB"},
	} {
		// Each delta read by the fast path or by encoding/json: every combination.
		for mask := 0; mask < 1<<len(c.deltas); mask++ {
			for _, off := range []bool{false, true} {
				evs := [][2]string{{"response.created", created}, {"response.output_item.added", added}}
				var paths []string
				for i, d := range c.deltas {
					slow := off || mask&(1<<i) != 0
					evs = append(evs, delta(d, slow))
					paths = append(paths, map[bool]string{false: "fast", true: "encoding/json"}[slow])
				}
				evs = append(evs, [2]string{"response.completed", final})
				disableFastPath = off
				out, done := decodeEvents(t, llm.FormatResponses, evs...)
				disableFastPath = false
				if got := accumulate(out).Text; !done || got != c.want {
					t.Errorf("%q read by %v: text %q, want %q", c.deltas, paths, got, c.want)
				}
			}
		}
	}
	// A token the pair refuses leaves it as it was, for the reading that follows.
	p := surrogatePair{high: 0xD83D}
	if _, ok := p.text([]byte(`"\ude00\x"`)); ok || p.high != 0xD83D {
		t.Errorf("a refused token changed the pair: %+v", p)
	}
	if s, ok := p.text([]byte(`"\ude00"`)); !ok || s != "\U0001F600" || p.high != 0 {
		t.Errorf("%q, %v, %+v", s, ok, p)
	}
}

// TestResponsesArgumentsSurrogatePairOnBothPaths is TestResponsesSurrogatePairOnBothPaths for
// a function call's arguments (response.function_call_arguments.delta): a character whose
// UTF-16 halves the upstream split between two deltas is whole whether the fast path or
// encoding/json read each delta, with or without the done events after them, and a half that
// nothing joins is U+FFFD in its place, before the answer stops. Each call has its own pair:
// two calls' deltas, named by item_id, may interleave. On the code before, either path read
// each half as U+FFFD ({"q":"A\uFFFD\uFFFDB"}).
func TestResponsesArgumentsSurrogatePairOnBothPaths(t *testing.T) {
	const (
		created    = `{"type":"response.created","response":{"id":"r","status":"in_progress","model":"m","output":[]}}`
		added      = `{"type":"response.output_item.added","output_index":%d,"item":{"type":"function_call","id":"fc_%d","call_id":"call_%d","name":"f","arguments":""}}`
		argsDone   = `{"type":"response.function_call_arguments.done","output_index":%d,"item_id":"fc_%d","arguments":%q}`
		itemDone   = `{"type":"response.output_item.done","output_index":%d,"item":{"type":"function_call","id":"fc_%d","call_id":"call_%d","name":"f","arguments":%q}}`
		final      = `{"type":"response.completed","response":{"id":"r","status":"completed","model":"m","output":[{"type":"function_call"}],"usage":{"input_tokens":1,"output_tokens":2}}}`
		argsPrefix = `{\"q\":\"`
		argsSuffix = `\"}`
	)
	ev := func(format string, args ...any) [2]string {
		data := fmt.Sprintf(format, args...)
		return [2]string{dataType([]byte(data)), data}
	}
	// delta is an arguments delta of call n (a JSON string's inside), read by the fast path or,
	// with a key in capitals it leaves to encoding/json, by encoding/json.
	delta := func(n int, args string, slow bool) [2]string {
		extra := ""
		if slow {
			extra = `,"Obfuscation":"x"`
		}
		return [2]string{"response.function_call_arguments.delta", fmt.Sprintf(
			`{"type":"response.function_call_arguments.delta","output_index":%d,"item_id":"fc_%d","delta":"%s"%s}`, n, n, args, extra)}
	}
	inArgs := func(s string) string { return `{"q":"` + s + `"}` }
	cases := []struct {
		deltas []string
		want   string
	}{
		{[]string{`A\ud83d`, `\ude00B`}, "A\U0001F600B"},
		{[]string{`A\uD83D`, `\uDE00`, `C\ud83d`, `\ude01`}, "A\U0001F600C\U0001F601"},
		{[]string{`A\ud83d`, `B`}, "A\uFFFDB"},
		{[]string{`A\ude00`, `B`}, "A\uFFFDB"},
		{[]string{`B`, `A\ud83d`}, "BA\uFFFD"},
	}
	for _, c := range cases {
		for _, doneEvents := range []bool{false, true} {
			// Each delta read by the fast path or by encoding/json: every combination.
			for mask := 0; mask < 1<<len(c.deltas); mask++ {
				for _, off := range []bool{false, true} {
					evs := [][2]string{ev(created), ev(added, 0, 0, 0), delta(0, argsPrefix, false)}
					var paths []string
					for i, d := range c.deltas {
						slow := off || mask&(1<<i) != 0
						evs = append(evs, delta(0, d, slow))
						paths = append(paths, map[bool]string{false: "fast", true: "encoding/json"}[slow])
					}
					evs = append(evs, delta(0, argsSuffix, false))
					if doneEvents {
						// The done events carry the whole arguments, as the upstream has them.
						evs = append(evs, ev(argsDone, 0, 0, inArgs(c.want)), ev(itemDone, 0, 0, 0, inArgs(c.want)))
					}
					evs = append(evs, ev(final))
					disableFastPath = off
					out, done := decodeEvents(t, llm.FormatResponses, evs...)
					disableFastPath = false
					r := accumulate(out)
					if want := inArgs(c.want); !done || len(r.Tools) != 1 || r.Tools[0].Args != want {
						t.Errorf("%q read by %v (done events %v): %+v, want the arguments %s", c.deltas, paths, doneEvents, r.Tools, want)
					}
					for i, e := range out {
						if e.Kind == llm.EventStop {
							for _, after := range out[i+1:] {
								if after.Kind == llm.EventToolCallDelta {
									t.Errorf("%q read by %v: %+v after the stop", c.deltas, paths, after)
								}
							}
						}
					}
				}
			}
		}
	}
	// Two calls whose deltas interleave, each split inside a character: each call's arguments
	// are joined with their own halves.
	for mask := 0; mask < 1<<4; mask++ {
		slow := func(i int) bool { return mask&(1<<i) != 0 }
		out, _ := decodeEvents(t, llm.FormatResponses, ev(created), ev(added, 0, 0, 0), ev(added, 1, 1, 1),
			delta(0, argsPrefix+`\ud83d`, slow(0)), delta(1, argsPrefix+`\ud83d`, slow(1)),
			delta(0, `\ude00`+argsSuffix, slow(2)), delta(1, `\ude01`+argsSuffix, slow(3)), ev(final))
		r := accumulate(out)
		if len(r.Tools) != 2 || r.Tools[0].Args != inArgs("\U0001F600") || r.Tools[1].Args != inArgs("\U0001F601") {
			t.Errorf("interleaved calls, mask %04b: %+v", mask, r.Tools)
		}
	}
}

// TestChatAndMessagesSurrogatePairOnBothPaths is TestResponsesSurrogatePairOnBothPaths for the
// chat and Messages decoders: a character whose UTF-16 halves an upstream split between two
// deltas (chat delta.content and a tool call's arguments; Messages text_delta and
// input_json_delta.partial_json) is whole whether the fast path or encoding/json (a chunk
// with a key in capitals, which the fast path leaves to it) read each delta, and a half that
// nothing joins is U+FFFD in its place, before the answer stops. What the decoders do not
// carry (chat reasoning_content, Messages thinking_delta) leaves the text's pair alone. Each
// call's arguments have their own pair: two calls' fragments may interleave. On the code
// before, encoding/json made each half U+FFFD, a half the fast path held back became U+FFFD
// when encoding/json read the next chunk, and arguments were read without a pair at all.
func TestChatAndMessagesSurrogatePairOnBothPaths(t *testing.T) {
	const (
		chatFinish  = `{"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"%s"}]}`
		chatStart   = `{"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
		chatCall    = `{"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"call_%d","type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":null}]}`
		msgStart    = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}`
		msgBlock    = `{"type":"content_block_start","index":%d,"content_block":%s}`
		msgStop     = `{"type":"content_block_stop","index":%d}`
		msgDelta    = `{"type":"message_delta","delta":{"stop_reason":"%s","stop_sequence":null},"usage":{"output_tokens":5}}`
		msgEnd      = `{"type":"message_stop"}`
		argsPrefix  = `{\"q\":\"`
		argsSuffix  = `\"}`
		slowMarker  = `,"Obfuscation":"x"` // foldable: the fast path leaves the chunk to encoding/json
		fastMarker  = ``
		thinkingBlk = `{"type":"thinking","thinking":"","signature":""}`
	)
	marker := func(slow bool) string {
		if slow {
			return slowMarker
		}
		return fastMarker
	}
	chatChunk := func(delta string, slow bool) [2]string {
		return [2]string{"", `{"id":"c","model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]` + marker(slow) + `}`}
	}
	chatArgs := func(call int, args string, slow bool) [2]string {
		return chatChunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":"%s"}}]}`, call, args), slow)
	}
	msgChunk := func(index int, delta string, slow bool) [2]string {
		return [2]string{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s%s}`, index, delta, marker(slow))}
	}
	type stream struct {
		format llm.Format
		// events is the stream for these deltas, each read by the fast path or encoding/json.
		events func(deltas []string, slow []bool) [][2]string
		// got is what the client gets of the text or the arguments.
		got func(r result) string
		// wrap is what got should be for the text the deltas carry.
		wrap func(text string) string
	}
	text := func(r result) string { return r.Text }
	args := func(r result) string {
		if len(r.Tools) != 1 {
			return fmt.Sprintf("%d calls", len(r.Tools))
		}
		return r.Tools[0].Args
	}
	same := func(s string) string { return s }
	inArgs := func(s string) string { return `{"q":"` + s + `"}` }
	streams := map[string]stream{
		"chat delta.content": {llm.FormatChat, func(deltas []string, slow []bool) [][2]string {
			evs := [][2]string{{"", chatStart}}
			for i, d := range deltas {
				evs = append(evs, chatChunk(`{"content":"`+d+`"}`, slow[i]))
			}
			return append(evs, [2]string{"", fmt.Sprintf(chatFinish, "stop")}, [2]string{"", "[DONE]"})
		}, text, same},
		"chat tool call arguments": {llm.FormatChat, func(deltas []string, slow []bool) [][2]string {
			evs := [][2]string{{"", chatStart}, {"", fmt.Sprintf(chatCall, 0, 0)}, chatArgs(0, argsPrefix, false)}
			for i, d := range deltas {
				evs = append(evs, chatArgs(0, d, slow[i]))
			}
			evs = append(evs, chatArgs(0, argsSuffix, false))
			return append(evs, [2]string{"", fmt.Sprintf(chatFinish, "tool_calls")}, [2]string{"", "[DONE]"})
		}, args, inArgs},
		"chat reasoning_content, then content": {llm.FormatChat, func(deltas []string, slow []bool) [][2]string {
			evs := [][2]string{{"", chatStart}}
			for i, d := range deltas {
				evs = append(evs, chatChunk(`{"reasoning_content":"`+d+`"}`, slow[i]))
			}
			evs = append(evs, chatChunk(`{"content":"ok"}`, false))
			return append(evs, [2]string{"", fmt.Sprintf(chatFinish, "stop")}, [2]string{"", "[DONE]"})
		}, text, func(string) string { return "ok" }},
		"Messages text_delta": {llm.FormatMessages, func(deltas []string, slow []bool) [][2]string {
			evs := [][2]string{{"message_start", msgStart}, {"content_block_start", fmt.Sprintf(msgBlock, 0, `{"type":"text","text":""}`)}}
			for i, d := range deltas {
				evs = append(evs, msgChunk(0, `{"type":"text_delta","text":"`+d+`"}`, slow[i]))
			}
			return append(evs, [2]string{"content_block_stop", fmt.Sprintf(msgStop, 0)},
				[2]string{"message_delta", fmt.Sprintf(msgDelta, "end_turn")}, [2]string{"message_stop", msgEnd})
		}, text, same},
		"Messages input_json_delta": {llm.FormatMessages, func(deltas []string, slow []bool) [][2]string {
			evs := [][2]string{{"message_start", msgStart},
				{"content_block_start", fmt.Sprintf(msgBlock, 0, `{"type":"tool_use","id":"toolu_1","name":"f","input":{}}`)},
				msgChunk(0, `{"type":"input_json_delta","partial_json":"`+argsPrefix+`"}`, false)}
			for i, d := range deltas {
				evs = append(evs, msgChunk(0, `{"type":"input_json_delta","partial_json":"`+d+`"}`, slow[i]))
			}
			evs = append(evs, msgChunk(0, `{"type":"input_json_delta","partial_json":"`+argsSuffix+`"}`, false))
			return append(evs, [2]string{"content_block_stop", fmt.Sprintf(msgStop, 0)},
				[2]string{"message_delta", fmt.Sprintf(msgDelta, "tool_use")}, [2]string{"message_stop", msgEnd})
		}, args, inArgs},
		"Messages thinking_delta, then text": {llm.FormatMessages, func(deltas []string, slow []bool) [][2]string {
			evs := [][2]string{{"message_start", msgStart}, {"content_block_start", fmt.Sprintf(msgBlock, 0, thinkingBlk)}}
			for i, d := range deltas {
				evs = append(evs, msgChunk(0, `{"type":"thinking_delta","thinking":"`+d+`"}`, slow[i]))
			}
			evs = append(evs, [2]string{"content_block_stop", fmt.Sprintf(msgStop, 0)},
				[2]string{"content_block_start", fmt.Sprintf(msgBlock, 1, `{"type":"text","text":""}`)},
				msgChunk(1, `{"type":"text_delta","text":"ok"}`, false))
			return append(evs, [2]string{"content_block_stop", fmt.Sprintf(msgStop, 1)},
				[2]string{"message_delta", fmt.Sprintf(msgDelta, "end_turn")}, [2]string{"message_stop", msgEnd})
		}, text, func(string) string { return "ok" }},
	}
	cases := []struct {
		deltas []string
		want   string
	}{
		{[]string{`A\ud83d`, `\ude00B`}, "A\U0001F600B"},
		{[]string{`A\uD83D`, `\uDE00`, `C\ud83d`, `\ude01`}, "A\U0001F600C\U0001F601"},
		{[]string{`A\ud83d`, `B`}, "A\uFFFDB"},
		{[]string{`A\ude00`, `B`}, "A\uFFFDB"},
		{[]string{`B`, `A\ud83d`}, "BA\uFFFD"},
	}
	for name, st := range streams {
		for _, c := range cases {
			// Each delta read by the fast path or by encoding/json: every combination.
			for mask := 0; mask < 1<<len(c.deltas); mask++ {
				for _, off := range []bool{false, true} {
					slow := make([]bool, len(c.deltas))
					var paths []string
					for i := range c.deltas {
						slow[i] = off || mask&(1<<i) != 0
						paths = append(paths, map[bool]string{false: "fast", true: "encoding/json"}[slow[i]])
					}
					disableFastPath = off
					out, done := decodeEvents(t, st.format, st.events(c.deltas, slow)...)
					disableFastPath = false
					if want, got := st.wrap(c.want), st.got(accumulate(out)); !done || got != want {
						t.Errorf("%s %q read by %v: %q, want %q", name, c.deltas, paths, got, want)
					}
					// Nothing of the text or the arguments comes after the answer stops.
					for i, e := range out {
						if e.Kind == llm.EventStop {
							for _, after := range out[i+1:] {
								if after.Kind == llm.EventTextDelta || after.Kind == llm.EventToolCallDelta {
									t.Errorf("%s %q read by %v: %+v after the stop", name, c.deltas, paths, after)
								}
							}
						}
					}
				}
			}
		}
	}
	// Two chat calls whose fragments interleave, each split inside a character: each call's
	// arguments are joined with their own halves.
	for mask := 0; mask < 1<<4; mask++ {
		slow := func(i int) bool { return mask&(1<<i) != 0 }
		out, _ := decodeEvents(t, llm.FormatChat, [2]string{"", chatStart},
			[2]string{"", fmt.Sprintf(chatCall, 0, 0)}, [2]string{"", fmt.Sprintf(chatCall, 1, 1)},
			chatArgs(0, argsPrefix+`\ud83d`, slow(0)), chatArgs(1, argsPrefix+`\ud83d`, slow(1)),
			chatArgs(0, `\ude00`+argsSuffix, slow(2)), chatArgs(1, `\ude01`+argsSuffix, slow(3)),
			[2]string{"", fmt.Sprintf(chatFinish, "tool_calls")}, [2]string{"", "[DONE]"})
		r := accumulate(out)
		if len(r.Tools) != 2 || r.Tools[0].Args != `{"q":"`+"\U0001F600"+`"}` || r.Tools[1].Args != `{"q":"`+"\U0001F601"+`"}` {
			t.Errorf("interleaved calls, mask %04b: %+v", mask, r.Tools)
		}
	}
}

// TestRefusalStopsAlikeStreamedOrNot: an answer that is a refusal (chat's refusal field,
// Responses' refusal part; OpenAI's structured-outputs refusals) stops as a refusal, its words
// apart from its text, when decoded from a stream as when decoded whole
// (convert.DecodeResponse), so that a Messages client reads stop_reason "refusal" either way
// (trial h14 D1: "end_turn" streamed, "refusal" whole) and an OpenAI client of the other
// format gets a refusal (wire-format trial s13h6). A chat answer with content besides its
// refusal keeps both apart.
func TestRefusalStopsAlikeStreamedOrNot(t *testing.T) {
	cases := []struct {
		name   string
		f      llm.Format
		whole  string
		stream [][2]string
	}{
		{"chat", llm.FormatChat,
			`{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11}}`,
			[][2]string{
				{"", `{"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""}}]}`},
				{"", `{"id":"c","model":"m","choices":[{"index":0,"delta":{"refusal":"I can't help with that."}}]}`},
				{"", `{"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`},
				{"", `[DONE]`},
			}},
		{"responses", llm.FormatResponses,
			`{"id":"r","object":"response","status":"completed","model":"m","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"refusal","refusal":"I can't help with that."}]}],"usage":{"input_tokens":5,"output_tokens":6,"total_tokens":11}}`,
			[][2]string{
				{"response.created", `{"type":"response.created","response":{"id":"r","status":"in_progress","model":"m","output":[]}}`},
				{"response.refusal.delta", `{"type":"response.refusal.delta","output_index":0,"content_index":0,"item_id":"msg_1","delta":"I can't help with that."}`},
				{"response.completed", `{"type":"response.completed","response":{"id":"r","status":"completed","model":"m","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"refusal","refusal":"I can't help with that."}]}],"usage":{"input_tokens":5,"output_tokens":6,"total_tokens":11}}}`},
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			whole, err := convert.DecodeResponse(c.f, []byte(c.whole))
			if err != nil {
				t.Fatal(err)
			}
			evs, done := decodeEvents(t, c.f, c.stream...)
			r := accumulate(evs)
			if !done || whole.Stop != llm.StopRefusal || r.Stop != whole.Stop || r.Text != whole.Text || r.Text != "" ||
				r.Refusal != whole.Refusal || r.Refusal != "I can't help with that." {
				t.Errorf("streamed: stop %q text %q refusal %q (done %v); whole: stop %q text %q refusal %q", r.Stop, r.Text, r.Refusal, done, whole.Stop, whole.Text, whole.Refusal)
			}
			if got := convert.StopReasonFor(llm.FormatMessages, r.Stop); got != "refusal" {
				t.Errorf("a Messages client reads stop_reason %q, want refusal", got)
			}
		})
	}
	t.Run("chat content besides a refusal", func(t *testing.T) {
		evs, _ := decodeEvents(t, llm.FormatChat,
			[2]string{"", `{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"Here:"}}]}`},
			[2]string{"", `{"id":"c","model":"m","choices":[{"index":0,"delta":{"refusal":"no"},"finish_reason":"stop"}]}`})
		if r := accumulate(evs); r.Stop != llm.StopRefusal || r.Text != "Here:" || r.Refusal != "no" {
			t.Errorf("stop %q text %q refusal %q, want refusal, Here: and no", r.Stop, r.Text, r.Refusal)
		}
	})
}

// TestResponsesTextFromEveryDoneEvent: the text of a message part that came in no delta is
// taken from the first done event that carries it, whichever that is (the part's .done,
// response.content_part.done, response.output_item.done, the terminal response's output),
// exactly once; a part whose deltas came is not repeated from any of them; a message's
// output_text and refusal parts are told apart by their content_index.
func TestResponsesTextFromEveryDoneEvent(t *testing.T) {
	const (
		created   = `{"type":"response.created","response":{"id":"r","status":"in_progress","model":"m","output":[]}}`
		item      = `{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Here:","annotations":[]},{"type":"refusal","refusal":"no"}]}`
		itemDone  = `{"type":"response.output_item.done","output_index":0,"item":` + item + `}`
		completed = `{"type":"response.completed","response":{"id":"r","status":"completed","model":"m","output":[` + item + `],"usage":{"input_tokens":5,"output_tokens":6,"total_tokens":11}}}`
		textDelta = `{"type":"response.output_text.delta","output_index":0,"content_index":0,"item_id":"msg_1","delta":"Here:"}`
		refDelta  = `{"type":"response.refusal.delta","output_index":0,"content_index":1,"item_id":"msg_1","delta":"no"}`
		textDone  = `{"type":"response.output_text.done","output_index":0,"content_index":0,"item_id":"msg_1","text":"Here:"}`
		refDone   = `{"type":"response.refusal.done","output_index":0,"content_index":1,"item_id":"msg_1","refusal":"no"}`
		textPart  = `{"type":"response.content_part.done","output_index":0,"content_index":0,"item_id":"msg_1","part":{"type":"output_text","text":"Here:"}}`
		refPart   = `{"type":"response.content_part.done","output_index":0,"content_index":1,"item_id":"msg_1","part":{"type":"refusal","refusal":"no"}}`
	)
	ev := func(data string) [2]string { return [2]string{dataType([]byte(data)), data} }
	cases := map[string][]string{
		"deltas and every done event":   {created, textDelta, textDone, textPart, refDelta, refDone, refPart, itemDone, completed},
		"the parts' done events":        {created, textDone, textPart, refDone, refPart, itemDone, completed},
		"content_part.done":             {created, textPart, refPart, itemDone, completed},
		"output_item.done":              {created, itemDone, completed},
		"the terminal response":         {created, completed},
		"text deltas, refusal done":     {created, textDelta, refDone, itemDone, completed},
		"refusal delta, text item done": {created, refDelta, itemDone, completed},
	}
	for name, stream := range cases {
		t.Run(name, func(t *testing.T) {
			evs := make([][2]string, len(stream))
			for i, data := range stream {
				evs[i] = ev(data)
			}
			got, done := decodeEvents(t, llm.FormatResponses, evs...)
			if r := accumulate(got); !done || r.Text != "Here:" || r.Refusal != "no" || r.Stop != llm.StopRefusal {
				t.Errorf("text %q refusal %q stop %q (done %v), want Here:, no, refusal", r.Text, r.Refusal, r.Stop, done)
			}
		})
	}
}

// TestResponsesPartsMatchedByItemID: the recorded Responses stream (a reasoning item at
// output_index 0, the message at 1) with its text deltas' output_index left off, as an
// upstream may send them while it sets it on the done events (§2.3 lists output_index on every
// part event; the item_id is what names the item), and with neither output_index nor item_id
// on them, decodes to the text of the stream as recorded, once, with the fast path and
// without. On the code before, the deltas' text was taken for part 0 of item 0 and the done
// events' for an unseen part of item 1, and the text came twice.
func TestResponsesPartsMatchedByItemID(t *testing.T) {
	raw := readFile(t, filepath.Join("testdata", "upstream", "responses_text.sse"))
	want := accumulate(decodeAllBoth(t, raw))
	if want.Text == "" {
		t.Fatal("the recorded stream has no text")
	}
	for name, strip := range map[string][]string{
		"deltas without output_index":         {`"output_index":1,`},
		"deltas without output_index or item": {`"output_index":1,`, `"item_id":"msg_68f1a2b3aa01",`},
	} {
		t.Run(name, func(t *testing.T) {
			var stream bytes.Buffer
			for _, ev := range readEvents(t, raw) {
				data := string(ev.Data)
				if ev.Name == "response.output_text.delta" {
					for _, s := range strip {
						if !strings.Contains(data, s) {
							t.Fatalf("%s is not in %s", s, data)
						}
						data = strings.Replace(data, s, "", 1)
					}
				}
				fmt.Fprintf(&stream, "event: %s\ndata: %s\n\n", ev.Name, data)
			}
			if got := accumulate(decodeAllBoth(t, stream.Bytes())); got.Text != want.Text {
				t.Errorf("text %q, want %q", got.Text, want.Text)
			}
		})
	}
}

// decodeAllBoth is decodeAll with the fast path on, after checking that it yields the same
// with the fast path off.
func decodeAllBoth(t *testing.T, raw []byte) []llm.Event {
	t.Helper()
	disableFastPath = true
	slow, _ := decodeAll(t, llm.FormatResponses, raw)
	disableFastPath = false
	fast, done := decodeAll(t, llm.FormatResponses, raw)
	if !done {
		t.Fatal("no terminal event")
	}
	if !reflect.DeepEqual(accumulate(fast), accumulate(slow)) {
		t.Fatalf("the fast path yields %+v, the encoding/json path %+v", accumulate(fast), accumulate(slow))
	}
	return fast
}

// TestResponsesDoneTextExtendsDeltas: a done event's text is the part's whole text (§2.3:
// output_text.done's text is the full text, as are content_part.done's part, the item of
// output_item.done and the terminal response's output), so when the deltas gave only a
// beginning of it the rest comes from the first done event that has it, once; a done text that
// does not begin with what the deltas gave (or is shorter) changes nothing, since the client
// has the deltas already. The same holds for a function call's arguments and its
// function_call_arguments.done and output_item.done. A character whose high surrogate ended
// the last delta is whole when the done text carries it. On the code before, the text and
// the arguments stopped where the deltas did.
func TestResponsesDoneTextExtendsDeltas(t *testing.T) {
	const (
		created = `{"type":"response.created","response":{"id":"r","status":"in_progress","model":"m","output":[]}}`
		added   = `{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"msg_1","content":[]}}`
		delta   = `{"type":"response.output_text.delta","output_index":0,"content_index":0,"item_id":"msg_1","delta":%q}`
		done    = `{"type":"response.output_text.done","output_index":0,"content_index":0,"item_id":"msg_1","text":%q}`
		part    = `{"type":"response.content_part.done","output_index":0,"content_index":0,"item_id":"msg_1","part":{"type":"output_text","text":%q}}`
		item    = `{"type":"message","id":"msg_1","status":"completed","content":[{"type":"output_text","text":%q}]}`
		itemDn  = `{"type":"response.output_item.done","output_index":0,"item":` + item + `}`
		final   = `{"type":"response.completed","response":{"id":"r","status":"completed","model":"m","output":[` + item + `],"usage":{"input_tokens":1,"output_tokens":2}}}`
	)
	ev := func(format string, args ...any) [2]string {
		data := format
		if len(args) > 0 {
			data = fmt.Sprintf(format, args...)
		}
		return [2]string{dataType([]byte(data)), data}
	}
	full := "Hello, world"
	cases := []struct {
		name string
		evs  [][2]string
		want string
	}{
		{"output_text.done", [][2]string{ev(created), ev(added), ev(delta, "Hello"), ev(done, full), ev(part, full), ev(itemDn, full), ev(final, full)}, full},
		{"content_part.done", [][2]string{ev(created), ev(added), ev(delta, "Hel"), ev(delta, "lo"), ev(part, full), ev(itemDn, full), ev(final, full)}, full},
		{"output_item.done", [][2]string{ev(created), ev(added), ev(delta, "Hello"), ev(itemDn, full), ev(final, full)}, full},
		{"the terminal response", [][2]string{ev(created), ev(added), ev(delta, "Hello"), ev(final, full)}, full},
		{"the done events disagree with the deltas", [][2]string{ev(created), ev(added), ev(delta, "Jello"), ev(done, full), ev(itemDn, full), ev(final, full)}, "Jello"},
		{"the done events are shorter", [][2]string{ev(created), ev(added), ev(delta, "Hello, world!"), ev(done, full), ev(final, full)}, "Hello, world!"},
		{"a surrogate pair split at the end of the deltas", [][2]string{ev(created), ev(added),
			{"response.output_text.delta", `{"type":"response.output_text.delta","output_index":0,"content_index":0,"item_id":"msg_1","delta":"ok \ud83c"}`},
			ev(done, "ok 🎉 done"), ev(final, "ok 🎉 done")}, "ok 🎉 done"},
	}
	for _, c := range cases {
		for _, disable := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, fast path off %v", c.name, disable), func(t *testing.T) {
				disableFastPath = disable
				defer func() { disableFastPath = false }()
				got, finished := decodeEvents(t, llm.FormatResponses, c.evs...)
				if r := accumulate(got); !finished || r.Text != c.want {
					t.Errorf("text %q (done %v), want %q", r.Text, finished, c.want)
				}
			})
		}
	}

	// Arguments whose deltas end with a high surrogate: the done event's arguments that carry
	// the whole character yield it; a done event that does not extend them, or the end of the
	// answer, makes the half U+FFFD, before the stop.
	for _, c := range []struct {
		name string
		done []string
		want string
	}{
		{"function_call_arguments.done", []string{
			`{"type":"response.function_call_arguments.done","output_index":0,"item_id":"fc_1","arguments":"{\"q\":\"ok 🎉\"}"}`},
			`{"q":"ok 🎉"}`},
		{"output_item.done", []string{
			`{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"call_1","name":"f","arguments":"{\"q\":\"ok 🎉\"}"}}`},
			`{"q":"ok 🎉"}`},
		{"a done event that disagrees", []string{
			`{"type":"response.function_call_arguments.done","output_index":0,"item_id":"fc_1","arguments":"{\"q\":\"no\"}"}`},
			`{"q":"ok ` + "\uFFFD"},
		{"no done event", nil, `{"q":"ok ` + "\uFFFD"},
	} {
		for _, disable := range []bool{false, true} {
			t.Run(fmt.Sprintf("arguments, a surrogate pair split at the end of the deltas, %s, fast path off %v", c.name, disable), func(t *testing.T) {
				disableFastPath = disable
				defer func() { disableFastPath = false }()
				evs := [][2]string{ev(created),
					ev(`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"call_1","name":"f","arguments":""}}`),
					{"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","output_index":0,"item_id":"fc_1","delta":"{\"q\":\"ok \ud83c"}`}}
				for _, d := range c.done {
					evs = append(evs, [2]string{dataType([]byte(d)), d})
				}
				evs = append(evs, ev(`{"type":"response.completed","response":{"id":"r","status":"completed","model":"m","output":[{"type":"function_call"}]}}`))
				out, finished := decodeEvents(t, llm.FormatResponses, evs...)
				if r := accumulate(out); !finished || len(r.Tools) != 1 || r.Tools[0].Args != c.want {
					t.Errorf("tools %+v (done %v), want the arguments %s", r.Tools, finished, c.want)
				}
				if n := len(out); n == 0 || out[n-1].Kind != llm.EventStop {
					t.Errorf("the last event is %+v, want the stop", out[n-1])
				}
			})
		}
	}

	t.Run("arguments", func(t *testing.T) {
		args := `{"q":"lyon"}`
		fc := `{"id":"fc_1","type":"function_call","call_id":"call_1","name":"f","arguments":%q}`
		evs, finished := decodeEvents(t, llm.FormatResponses, ev(created),
			ev(`{"type":"response.output_item.added","output_index":0,"item":`+fc+`}`, ""),
			ev(`{"type":"response.function_call_arguments.delta","output_index":0,"item_id":"fc_1","delta":%q}`, `{"q":`),
			ev(`{"type":"response.function_call_arguments.done","output_index":0,"item_id":"fc_1","arguments":%q}`, args),
			ev(`{"type":"response.output_item.done","output_index":0,"item":`+fc+`}`, args),
			ev(`{"type":"response.completed","response":{"id":"r","status":"completed","model":"m","output":[{"type":"function_call"}]}}`))
		if r := accumulate(evs); !finished || len(r.Tools) != 1 || r.Tools[0].Args != args {
			t.Errorf("tools %+v (done %v), want the arguments %s", r.Tools, finished, args)
		}
	})
}
