package streamconv

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// primers bring a decoder to the middle of a turn: started, with a text block or item and a
// tool call open, so that a fuzzed event can take any path.
var primers = map[llm.Format][]sse.Event{
	llm.FormatChat: {
		{Data: []byte(`{"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`)},
		{Data: []byte(`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":""}}]}}]}`)},
	},
	llm.FormatResponses: {
		{Name: "response.created", Data: []byte(`{"type":"response.created","response":{"id":"r","model":"m"}}`)},
		{Name: "response.output_item.added", Data: []byte(`{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f"}}`)},
		{Name: "response.output_item.added", Data: []byte(`{"type":"response.output_item.added","output_index":1,"item":{"type":"message","id":"msg_1"}}`)},
	},
	llm.FormatMessages: {
		{Name: "message_start", Data: []byte(`{"type":"message_start","message":{"id":"msg","model":"m","usage":{"input_tokens":1}}}`)},
		{Name: "content_block_start", Data: []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)},
		{Name: "content_block_start", Data: []byte(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`)},
	},
}

// decodeBoth decodes ev after the primer (or as the stream's first event, when primed is
// false) with the fast paths on and off.
func decodeBoth(t *testing.T, f llm.Format, ev sse.Event, primed bool) (fast, slow []llm.Event, fastDone, slowDone bool, fastErr, slowErr error) {
	t.Helper()
	run := func(disable bool) ([]llm.Event, bool, error) {
		disableFastPath = disable
		defer func() { disableFastPath = false }()
		dec := NewDecoder(f)
		if !primed {
			return dec.Decode(ev, nil)
		}
		for _, p := range primers[f] {
			if _, _, err := dec.Decode(p, nil); err != nil {
				t.Fatalf("primer: %v", err)
			}
		}
		return dec.Decode(ev, nil)
	}
	fast, fastDone, fastErr = run(false)
	slow, slowDone, slowErr = run(true)
	return
}

// checkSamePaths asserts that the fast paths yield what the encoding/json path yields for any
// valid JSON event, in the middle of a stream and as its first event (on invalid JSON the fast
// paths may be more lenient).
func checkSamePaths(t *testing.T, f llm.Format, ev sse.Event) {
	t.Helper()
	if !json.Valid(ev.Data) {
		return
	}
	for _, primed := range []bool{true, false} {
		fast, slow, fd, sd, fe, se := decodeBoth(t, f, ev, primed)
		if !reflect.DeepEqual(fast, slow) || fd != sd || (fe == nil) != (se == nil) {
			t.Fatalf("%s %q %s (primed %v):\nfast %+v %v %v\nslow %+v %v %v", f, ev.Name, ev.Data, primed, fast, fd, fe, slow, sd, se)
		}
	}
}

var fastSeeds = []struct {
	f    llm.Format
	name string
	data string
}{
	{llm.FormatChat, "", `{"id":"c","choices":[{"index":0,"delta":{"content":"hi \u00e9\ud83c\udf89"},"logprobs":null,"finish_reason":null}],"usage":null}`},
	{llm.FormatChat, "", `{"choices":[{"index":0,"delta":{"content":null,"refusal":null,"tool_calls":null}}]}`},
	{llm.FormatChat, "", `{"choices":[{"index":0,"Delta":{"content":"x"}}]}`},
	{llm.FormatChat, "", `{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}`},
	{llm.FormatChat, "", `{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`},
	{llm.FormatChat, "", `{"choices":[{"index":1,"delta":{"content":"x"}}]}`},
	{llm.FormatChat, "", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}`},
	{llm.FormatChat, "", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"function":{"arguments":"{}"}}]}}]}`},
	{llm.FormatChat, "", `{"choices":[{"index":0,"delta":{"content":"","tool_calls":[{"index":0,"id":"call_x","function":{"arguments":"{}"}}]}}]}`},
	{llm.FormatChat, "", `{"choices":[{"index":0,"delta":{"content":"t","tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}`},
	{llm.FormatChat, "", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":null}}]}}]}`},
	{llm.FormatChat, "", `{"error":null,"choices":[{"index":0,"delta":{"content":"\xff"}}]}`},
	{llm.FormatChat, "", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`},
	{llm.FormatChat, "", `{"id":"a","id":null,"model":"m\u00e9","model":"n","choices":[{"index":0,"delta":{"content":"x"}}]}`},
	{llm.FormatChat, "", `{"id":7,"choices":[{"index":0,"delta":{"content":"x"}}]}`},
	{llm.FormatChat, "", `{"ID":"upper","choices":[{"index":0,"delta":{"content":"x"}}]}`},
	{llm.FormatChat, "", `{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}`},
	{llm.FormatChat, "", `{"id":"c","service_tier":"priority","choices":[{"index":0,"delta":{"content":"x"}}],"usage":null}`},
	{llm.FormatChat, "", `{"id":"c","SERVICE_TIER":7,"choices":[{"index":0,"delta":{"content":"x"}}]}`},
	{llm.FormatChat, "", `{"id":"c","service_tier":"pri\u006frity","choices":[],"usage":{"prompt_tokens":52000,"prompt_tokens_details":{"cached_tokens":50000}}}`},
	{llm.FormatMessages, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":0,"cache_creation_input_tokens":9,"cache_creation":{"ephemeral_1h_input_tokens":4},"service_tier":"standard","output_tokens":3}}`},
	{llm.FormatResponses, "response.output_text.delta", `{"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"content_index":0,"delta":"hi","logprobs":[]}`},
	{llm.FormatResponses, "response.output_text.delta", `{"type":"response.output_text.delta","output_index":1.5,"delta":"hi"}`},
	{llm.FormatResponses, "response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"a\""}`},
	{llm.FormatResponses, "response.function_call_arguments.delta", `{"item_id":"fc_\u0031","output_index":7,"delta":"x"}`},
	{llm.FormatResponses, "response.function_call_arguments.delta", `{"item_id":null,"output_index":0,"delta":"x"}`},
	{llm.FormatResponses, "response.function_call_arguments.delta", `{"output_index":0,"delta":"x","Delta":"y"}`},
	{llm.FormatMessages, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`},
	{llm.FormatMessages, "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`},
	{llm.FormatMessages, "content_block_delta", `{"index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`},
	{llm.FormatMessages, "content_block_delta", `{"index":0,"delta":{"type":"text_\u0064elta","text":"esc"}}`},
	{llm.FormatMessages, "content_block_delta", `{"index":5,"delta":{"type":"text_delta","text":"no block"}}`},
	{llm.FormatMessages, "content_block_delta", `{"index":0,"delta":{"type":"text_delta","text":null}}`},
}

func TestFastPathsMatchEncodingJSON(t *testing.T) {
	for _, s := range fastSeeds {
		checkSamePaths(t, s.f, sse.Event{Name: s.name, Data: []byte(s.data)})
	}
	// Every event of every recorded stream, in context.
	for _, up := range formats {
		for _, sc := range scenarios {
			raw := readFile(t, "testdata/upstream/"+up.short+"_"+sc+".sse")
			var fast, slow []llm.Event
			for _, disable := range []bool{false, true} {
				disableFastPath = disable
				evs, _ := decodeAll(t, up.f, raw)
				if disable {
					slow = evs
				} else {
					fast = evs
				}
			}
			disableFastPath = false
			if !reflect.DeepEqual(fast, slow) {
				t.Errorf("%s_%s: fast and slow paths differ", up.short, sc)
			}
		}
	}
}

func FuzzFastPaths(f *testing.F) {
	for i, s := range fastSeeds {
		f.Add(uint8(i), s.name, []byte(s.data))
	}
	fs := []llm.Format{llm.FormatChat, llm.FormatResponses, llm.FormatMessages}
	names := []string{"", "response.output_text.delta", "response.function_call_arguments.delta", "content_block_delta"}
	f.Fuzz(func(t *testing.T, which uint8, name string, data []byte) {
		for _, n := range []string{name, names[int(which)%len(names)]} {
			checkSamePaths(t, fs[int(which)%len(fs)], sse.Event{Name: n, Data: data})
		}
	})
}
