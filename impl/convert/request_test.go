package convert

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// goldenRequest is what a request golden file holds: the upstream body and dropped list, and,
// when the full request is refused, the refusal (the body is then that of the request without
// the refused top-level field, so that every pair of formats shows a translation).
type goldenRequest struct {
	Refused *struct {
		Param   string `json:"param"`
		Message string `json:"message"`
	} `json:"refused,omitempty"`
	Dropped []string        `json:"dropped"`
	Body    json.RawMessage `json:"body"`
}

// portable encodes body of format src for dst, removing each refused top-level field in turn.
// It returns the first refusal (if any), the body it finally encoded, and the result.
func portable(t *testing.T, src, dst llm.Format, body []byte) (refused *apierror.Error, encoded, out []byte, dropped []string) {
	t.Helper()
	for range 5 {
		req := mustDecode(t, src, body)
		var err error
		out, dropped, err = EncodeRequest(dst, req, "upstream-model")
		if err == nil {
			return refused, body, out, dropped
		}
		ae, ok := err.(*apierror.Error)
		if !ok || ae.Kind != apierror.KindInvalidRequest {
			t.Fatalf("EncodeRequest(%s -> %s): %v", src, dst, err)
		}
		if refused == nil {
			refused = ae
		}
		body = withoutKey(t, body, topKey(ae.Param))
	}
	t.Fatalf("EncodeRequest(%s -> %s) kept refusing", src, dst)
	return nil, nil, nil, nil
}

// TestEncodeRequestGolden translates the rich request of every format to every format.
func TestEncodeRequestGolden(t *testing.T) {
	for _, src := range formats {
		body := fixture(t, "requests", src.name+".json")
		for _, dst := range formats {
			name := src.name + "-to-" + dst.name
			t.Run(name, func(t *testing.T) {
				refused, _, out, dropped := portable(t, src.f, dst.f, body)
				g := goldenRequest{Dropped: dropped, Body: out}
				if g.Dropped == nil {
					g.Dropped = []string{}
				}
				if refused != nil {
					g.Refused = &struct {
						Param   string `json:"param"`
						Message string `json:"message"`
					}{refused.Param, refused.Message}
				}
				golden(t, "request/"+name+".json", pretty(t, g))
			})
		}
	}
}

// TestExpectedRefusals pins which field of each rich request each target refuses.
func TestExpectedRefusals(t *testing.T) {
	want := map[string]string{
		"chat-to-responses":     "stop",
		"messages-to-responses": "stop_sequences",
	}
	for _, src := range formats {
		for _, dst := range formats {
			name := src.name + "-to-" + dst.name
			refused, _, _, _ := portable(t, src.f, dst.f, fixture(t, "requests", src.name+".json"))
			got := ""
			if refused != nil {
				got = refused.Param
			}
			if got != want[name] {
				t.Errorf("%s: refused %q, want %q", name, got, want[name])
			}
		}
	}
}

// TestSameFormatRoundTrip checks that decoding then encoding for the same format keeps every
// top-level value byte for byte (but the model, and chat's stream_options, which always asks
// for usage when streaming).
func TestSameFormatRoundTrip(t *testing.T) {
	extra := map[llm.Format][]string{
		llm.FormatChat: {
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"developer","content":"late rule"},{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAA","format":"wav"}}]}],"max_tokens":5,"stop":"x","logprobs":true,"n":2}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false,"stream_options":{"include_usage":false}}`,
		},
		llm.FormatResponses: {
			`{"model":"m","input":"hi","previous_response_id":"resp_1","tools":[{"type":"web_search"}],"text":{"verbosity":"high"}}`,
			`{"model":"m","input":[{"type":"item_reference","id":"msg_1"},{"role":"user","content":[{"type":"input_file","file_id":"f1"}]}]}`,
		},
		llm.FormatMessages: {
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}]}],"tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"auto"}}`,
		},
	}
	for _, fm := range formats {
		bodies := [][]byte{fixture(t, "requests", fm.name+".json")}
		for _, b := range extra[fm.f] {
			bodies = append(bodies, []byte(b))
		}
		for i, body := range bodies {
			req := mustDecode(t, fm.f, body)
			out, dropped, err := EncodeRequest(fm.f, req, "upstream-model")
			if err != nil {
				t.Fatalf("%s #%d: %v", fm.name, i, err)
			}
			if dropped != nil {
				t.Errorf("%s #%d: same format dropped %v", fm.name, i, dropped)
			}
			in, got := topLevel(t, body), topLevel(t, out)
			if string(got["model"]) != `"upstream-model"` {
				t.Errorf("%s #%d: model %s", fm.name, i, got["model"])
			}
			if len(got) != len(in) {
				t.Errorf("%s #%d: %d members, want %d:\n%s", fm.name, i, len(got), len(in), out)
			}
			for k, v := range in {
				if k == "model" {
					continue
				}
				if fm.f == llm.FormatChat && k == "stream_options" && req.Stream {
					if !sameJSON(t, got[k], []byte(`{"include_usage":true}`)) {
						t.Errorf("%s #%d: stream_options %s", fm.name, i, got[k])
					}
					continue
				}
				if !bytes.Equal(got[k], v) {
					t.Errorf("%s #%d: %s = %s, want the bytes %s", fm.name, i, k, got[k], v)
				}
			}
		}
	}
}

// TestSameFormatChangedGroup checks that a field group the caller changes is re-encoded while
// the others stay byte for byte.
func TestSameFormatChangedGroup(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi","name":"x"}],"temperature": 1.50,"metadata":{"a" : 1}}`)
	req := mustDecode(t, llm.FormatChat, body)
	req.MaxTokens = 100
	req.Stream = true
	out, _, err := EncodeRequest(llm.FormatChat, req, "up")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"up","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi","name":"x"}],"max_completion_tokens":100,"temperature":1.50,"stream":true,"stream_options":{"include_usage":true},"metadata":{"a" : 1}}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}

	// Changing the conversation re-encodes it from the neutral form.
	req.Messages[0].Parts[0].Text = "hello"
	out, _, err = EncodeRequest(llm.FormatChat, req, "up")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(topLevel(t, out)["messages"]); got != `[{"role":"system","content":"s"},{"role":"user","content":"hello"}]` {
		t.Errorf("messages = %s", got)
	}

	// A Messages request keeps its max_tokens name and raw system blocks.
	mbody := []byte(`{"model":"c","max_tokens":5,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`)
	mreq := mustDecode(t, llm.FormatMessages, mbody)
	mreq.MaxTokens = 7
	out, _, err = EncodeRequest(llm.FormatMessages, mreq, "c2")
	if err != nil {
		t.Fatal(err)
	}
	want = `{"model":"c2","max_tokens":7,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

// core is what every format can carry of a request, for comparisons across formats.
func core(r *llm.Request) llm.Request {
	c := llm.Request{
		System: r.System, MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP,
		Stop: r.Stop, ToolChoice: r.ToolChoice, ParallelToolCalls: r.ParallelToolCalls,
		ResponseFormat: r.ResponseFormat, Stream: r.Stream,
	}
	for _, m := range r.Messages {
		m.Path, m.IsError = "", false
		var parts []llm.Part
		for _, p := range m.Parts {
			p.Path, p.Detail = "", ""
			parts = append(parts, p)
		}
		m.Parts = parts
		var calls []llm.ToolCall
		for _, c := range m.ToolCalls {
			c.Path = ""
			calls = append(calls, c)
		}
		m.ToolCalls = calls
		c.Messages = append(c.Messages, m)
	}
	for _, t := range r.Tools {
		t.Strict = nil
		c.Tools = append(c.Tools, t)
	}
	return c
}

// schemaOnly is the type and schema of a response format.
func schemaOnly(rf *llm.ResponseFormat) *llm.ResponseFormat {
	if rf == nil {
		return nil
	}
	return &llm.ResponseFormat{Type: rf.Type, Schema: rf.Schema}
}

// TestCrossFormatPreservesCommonFields translates each rich request (without what the target
// refuses) and decodes the result: the common fields must come back unchanged.
func TestCrossFormatPreservesCommonFields(t *testing.T) {
	for _, src := range formats {
		for _, dst := range formats {
			_, body, out, _ := portable(t, src.f, dst.f, fixture(t, "requests", src.name+".json"))
			want := core(mustDecode(t, src.f, body))
			got := core(mustDecode(t, dst.f, out))
			if dst.f == llm.FormatMessages && src.f != dst.f && want.Temperature != nil && want.TopP != nil && *want.TopP == 1 {
				want.TopP = nil // beside a temperature, a top_p of 1 is dropped for Messages: it changes nothing
			}
			if src.f != dst.f && (src.f == llm.FormatMessages || dst.f == llm.FormatMessages) {
				// Anthropic's structured output is a schema alone: no name, no description,
				// always strict.
				want.ResponseFormat, got.ResponseFormat = schemaOnly(want.ResponseFormat), schemaOnly(got.ResponseFormat)
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.MarshalIndent(got, "", " ")
				w, _ := json.MarshalIndent(want, "", " ")
				t.Errorf("%s -> %s changed the common fields:\n--- got\n%s\n--- want\n%s", src.name, dst.name, g, w)
			}
		}
	}
}

// TestRefusals checks that what a target cannot honour is a 400 naming the client's field.
func TestRefusals(t *testing.T) {
	chat := func(extra string) string {
		return `{"model":"m","messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	resp := func(extra string) string { return `{"model":"m","input":"hi"` + extra + `}` }
	msgs := func(extra string) string {
		return `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	cases := []struct {
		name  string
		src   llm.Format
		body  string
		dst   llm.Format
		param string
	}{
		{"n to messages", llm.FormatChat, chat(`,"n":2`), llm.FormatMessages, "n"},
		{"n to responses", llm.FormatChat, chat(`,"n":3`), llm.FormatResponses, "n"},
		{"json_object to messages", llm.FormatChat, chat(`,"response_format":{"type":"json_object"}`), llm.FormatMessages, "response_format"},
		{"text.format json_object to messages", llm.FormatResponses, resp(`,"text":{"format":{"type":"json_object"}}`), llm.FormatMessages, "text.format"},
		{"json_schema without a schema to messages", llm.FormatChat, chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"a"}}`), llm.FormatMessages, "response_format"},
		{"temperature above 1", llm.FormatChat, chat(`,"temperature":1.5`), llm.FormatMessages, "temperature"},
		{"responses temperature above 1", llm.FormatResponses, resp(`,"temperature":2`), llm.FormatMessages, "temperature"},
		{"stop to responses", llm.FormatChat, chat(`,"stop":"END"`), llm.FormatResponses, "stop"},
		{"stop_sequences to responses", llm.FormatMessages, msgs(`,"stop_sequences":["a"]`), llm.FormatResponses, "stop_sequences"},
		{"too many stop sequences", llm.FormatMessages, msgs(`,"stop_sequences":["a","b","c","d","e"]`), llm.FormatChat, "stop_sequences"},
		{"logprobs", llm.FormatChat, chat(`,"logprobs":true`), llm.FormatMessages, "logprobs"},
		{"top_logprobs", llm.FormatChat, chat(`,"top_logprobs":2`), llm.FormatResponses, "top_logprobs"},
		{"audio output", llm.FormatChat, chat(`,"modalities":["text","audio"]`), llm.FormatMessages, "modalities"},
		{"audio", llm.FormatChat, chat(`,"audio":{"voice":"alloy","format":"mp3"}`), llm.FormatResponses, "audio"},
		{"logit_bias", llm.FormatChat, chat(`,"logit_bias":{"50256":-100}`), llm.FormatMessages, "logit_bias"},
		{"legacy functions", llm.FormatChat, chat(`,"functions":[{"name":"f"}]`), llm.FormatResponses, "functions"},
		{"audio input part", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"input_audio","input_audio":{"data":"AA","format":"wav"}}]}]}`, llm.FormatMessages, "messages[0].content[1]"},
		{"file part", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f"}}]}]}`, llm.FormatResponses, "messages[0].content[0]"},
		{"allowed_tools choice", llm.FormatChat, chat(`,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}`), llm.FormatMessages, "tool_choice"},
		{"legacy function role", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"function","name":"f","content":"x"}]}`, llm.FormatMessages, "messages[1]"},
		{"svg image", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/svg+xml;base64,PHN2Zz4="}}]}]}`, llm.FormatMessages, "messages[0].content[0]"},
		{"non-object arguments", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}]}`, llm.FormatMessages, "messages[1].tool_calls[0].function.arguments"},
		{"non-object arguments from responses", llm.FormatResponses, `{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"oops"}]}`, llm.FormatMessages, "input[0].arguments"},
		{"item_reference", llm.FormatResponses, `{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, llm.FormatChat, "input[0]"},
		{"input_file", llm.FormatResponses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"x"},{"type":"input_file","file_id":"f"}]}]}`, llm.FormatMessages, "input[0].content[1]"},
		{"file_id image", llm.FormatResponses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"f","detail":"auto"}]}]}`, llm.FormatChat, "input[0].content[0]"},
		{"tool_choice built-in", llm.FormatResponses, resp(`,"tool_choice":{"type":"web_search_preview"}`), llm.FormatChat, "tool_choice"},
		{"document block", llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`, llm.FormatChat, "messages[0].content[0]"},
		{"output_config format of another type", llm.FormatMessages, msgs(`,"output_config":{"format":{"type":"grammar","grammar":"x"}}`), llm.FormatChat, "output_config.format"},
		{"mcp_servers", llm.FormatMessages, msgs(`,"mcp_servers":[{"type":"url","url":"https://x","name":"x"}]`), llm.FormatChat, "mcp_servers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := mustDecode(t, c.src, []byte(c.body))
			if req.MaxTokens == 0 {
				req.MaxTokens = 1000 // as the gateway does for a Messages upstream
			}
			_, _, err := EncodeRequest(c.dst, req, "up")
			ae := invalid(t, err, c.param)
			if !strings.Contains(ae.Message, "cannot be honoured") && !strings.Contains(ae.Message, "must be a JSON object") {
				t.Errorf("message %q", ae.Message)
			}
			// The same request to an upstream of its own format passes.
			if _, _, err := EncodeRequest(c.src, req, "up"); err != nil {
				t.Errorf("same format: %v", err)
			}
		})
	}
}

// TestDropped checks the exact drop lists.
func TestDropped(t *testing.T) {
	cases := []struct {
		name string
		src  llm.Format
		body string
		dst  llm.Format
		want []string
	}{
		{"chat advisory fields", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"hi","name":"ada"}],"user":"u","metadata":{"a":"b"},"seed":1,"service_tier":"flex","store":true,"reasoning_effort":"low","presence_penalty":0.5,"frequency_penalty":0.1,"prompt_cache_key":"k","safety_identifier":"s","verbosity":"low","prediction":{"type":"content","content":"x"},"logprobs":false,"modalities":["text"],"unknown_field":1,"stream_options":{"include_usage":true},"stream":true}`,
			llm.FormatMessages, []string{"frequency_penalty", "logprobs", "messages[].name", "metadata", "modalities", "prediction", "presence_penalty", "prompt_cache_key", "reasoning_effort", "safety_identifier", "seed", "service_tier", "store", "unknown_field", "user", "verbosity"}},
		{"chat image detail and strict to messages", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png","detail":"low"}},{"type":"image_url","image_url":{"url":"https://x/b.png","detail":"auto"}}]}],"tools":[{"type":"function","function":{"name":"f","strict":true}},{"type":"function","function":{"name":"g","strict":false}}]}`,
			llm.FormatMessages, []string{"messages[].content[].image_url.detail", "tools[].function.strict"}},
		{"chat detail and strict kept by responses", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png","detail":"low"}}]}],"tools":[{"type":"function","function":{"name":"f","strict":true}}]}`,
			llm.FormatResponses, nil},
		{"responses advisory fields", llm.FormatResponses, `{"model":"m","input":[{"type":"reasoning","id":"rs","summary":[]},{"role":"user","content":"hi"},{"type":"message","role":"assistant","id":"msg_1","status":"completed","phase":"final_answer","content":[{"type":"output_text","text":"x","annotations":[]},{"type":"refusal","refusal":"no"}]}],"store":true,"metadata":{},"reasoning":{"effort":"high"},"include":["reasoning.encrypted_content"],"truncation":"auto","service_tier":"auto","user":"u","safety_identifier":"s","prompt_cache_key":"k","text":{"verbosity":"low"},"stream_options":{"include_obfuscation":false},"max_tool_calls":null}`,
			llm.FormatChat, []string{"include", "input[].phase", "input[].reasoning", "metadata", "safety_identifier", "store", "truncation", "user"}},
		{"responses reasoning summary", llm.FormatResponses, `{"model":"m","input":"hi","reasoning":{"effort":"low","summary":"auto"}}`,
			llm.FormatChat, []string{"reasoning.summary"}},
		{"chat effort and verbosity to messages", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high","verbosity":"low"}`,
			llm.FormatMessages, []string{"reasoning_effort", "verbosity"}},
		{"responses effort and verbosity to messages", llm.FormatResponses, `{"model":"m","input":"hi","reasoning":{"effort":"high"},"text":{"verbosity":"low"}}`,
			llm.FormatMessages, []string{"reasoning.effort", "text.verbosity"}},
		{"responses default strict to messages", llm.FormatResponses, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"function","name":"g","parameters":{"type":"object"},"strict":false}]}`,
			llm.FormatMessages, []string{"tools[].strict"}},
		{"messages advisory fields", llm.FormatMessages, `{"model":"m","max_tokens":9,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"},{"type":"text","text":"x","citations":[{"type":"char_location"}]},{"type":"tool_use","id":"t1","name":"f","input":{},"cache_control":{"type":"ephemeral"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"bad","is_error":true}]}],"tools":[{"name":"f","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],"metadata":{"user_id":"u"},"thinking":{"type":"enabled","budget_tokens":100},"top_k":5,"service_tier":"auto","context_management":{"edits":[]},"output_config":{"effort":"low"}}`,
			llm.FormatChat, []string{"context_management", "messages[].content[].cache_control", "messages[].content[].citations", "messages[].content[].is_error", "messages[].content[].redacted_thinking", "messages[].content[].thinking", "metadata", "output_config.effort", "service_tier", "system[].cache_control", "thinking", "tools[].cache_control", "top_k"}},
		{"nothing to drop", llm.FormatMessages, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"temperature":0.2}`, llm.FormatResponses, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := mustDecode(t, c.src, []byte(c.body))
			if req.MaxTokens == 0 {
				req.MaxTokens = 1000
			}
			_, dropped, err := EncodeRequest(c.dst, req, "up")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dropped, c.want) {
				t.Errorf("dropped %q\nwant    %q", dropped, c.want)
			}
		})
	}
}

// TestDecodeErrors checks that malformed requests are 400s naming the field.
func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name  string
		f     llm.Format
		body  string
		param string
	}{
		{"not JSON", llm.FormatChat, `{"model":`, ""},
		{"not an object", llm.FormatResponses, `[1]`, ""},
		{"no model", llm.FormatChat, `{"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{"model not a string", llm.FormatMessages, `{"model":1,"max_tokens":1,"messages":[]}`, "model"},
		{"no messages", llm.FormatChat, `{"model":"m"}`, "messages"},
		{"empty messages", llm.FormatChat, `{"model":"m","messages":[]}`, "messages"},
		{"bad role", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"robot","content":"b"}]}`, "messages[1].role"},
		{"missing role", llm.FormatChat, `{"model":"m","messages":[{"content":"b"}]}`, "messages[0].role"},
		{"bad content", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content"},
		{"part without type", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":[{"text":"x"}]}]}`, "messages[0].content[0].type"},
		{"tool without id", llm.FormatChat, `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{"temperature string", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"a"}],"temperature":"hot"}`, "temperature"},
		{"negative max tokens", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":-1}`, "max_tokens"},
		{"fractional n", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"a"}],"n":1.5}`, "n"},
		{"stream not bool", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"a"}],"stream":"yes"}`, "stream"},
		{"bad tool_choice", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"a"}],"tool_choice":"sometimes"}`, "tool_choice"},
		{"tool without name", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name"},
		{"stop not strings", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"a"}],"stop":[1]}`, "stop[0]"},
		{"item without type", llm.FormatResponses, `{"model":"m","input":[{"content":"x"}]}`, "input[0].type"},
		{"responses bad role", llm.FormatResponses, `{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input[0].role"},
		{"function_call without call_id", llm.FormatResponses, `{"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input[0].call_id"},
		{"instructions not a string", llm.FormatResponses, `{"model":"m","input":"x","instructions":["a"]}`, "instructions"},
		{"messages without max_tokens", llm.FormatMessages, `{"model":"m","messages":[{"role":"user","content":"a"}]}`, "max_tokens"},
		{"messages tool role", llm.FormatMessages, `{"model":"m","max_tokens":1,"messages":[{"role":"tool","content":"a"}]}`, "messages[0].role"},
		{"messages tool_use input", llm.FormatMessages, `{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":"x"}]}]}`, "messages[0].content[0].input"},
		{"messages system block", llm.FormatMessages, `{"model":"m","max_tokens":1,"system":[{"type":"image"}],"messages":[{"role":"user","content":"a"}]}`, "system[0].type"},
		{"messages tool_choice", llm.FormatMessages, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"}],"tool_choice":{"type":"required"}}`, "tool_choice.type"},
		{"image without url", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, "messages[0].content[0].image_url.url"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeRequest(c.f, []byte(c.body))
			invalid(t, err, c.param)
		})
	}
}

// TestMessagesTarget checks the Messages-specific rules: alternating roles, empty text, tool
// ids, the required max_tokens and the tool choice.
func TestMessagesTarget(t *testing.T) {
	body := `{"model":"m","messages":[
		{"role":"user","content":"a"},{"role":"user","content":"b"},
		{"role":"assistant","content":"","tool_calls":[{"id":"call.1/x","type":"function","function":{"name":"f","arguments":""}},{"id":"call_2","type":"function","function":{"name":"f","arguments":" {\"a\": 1} "}}]},
		{"role":"tool","tool_call_id":"call.1/x","content":"r1"},{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"r2"}]},
		{"role":"user","content":"c"}],
		"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","parallel_tool_calls":false}`
	req := mustDecode(t, llm.FormatChat, []byte(body))
	if _, _, err := EncodeRequest(llm.FormatMessages, req, "c"); err == nil || apierror.As(err).Kind != apierror.KindInternal {
		t.Fatalf("want an internal error without max_tokens, got %v", err)
	}
	req.MaxTokens = 1000
	out, dropped, err := EncodeRequest(llm.FormatMessages, req, "c")
	if err != nil {
		t.Fatal(err)
	}
	if dropped != nil {
		t.Errorf("dropped %v", dropped)
	}
	want := `{"model":"c","max_tokens":1000,"messages":[` +
		`{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"call_1_x_bfb11148358a4d93","name":"f","input":{}},{"type":"tool_use","id":"call_2","name":"f","input":{"a":1}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1_x_bfb11148358a4d93","content":"r1"},{"type":"tool_result","tool_use_id":"call_2","content":"r2"},{"type":"text","text":"c"}]}],` +
		`"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],` +
		`"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

// TestEmptyAssistantTurn checks that an assistant turn left empty by a drop is left out.
func TestEmptyAssistantTurn(t *testing.T) {
	body := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"}]},{"role":"user","content":"b"}]}`
	req := mustDecode(t, llm.FormatMessages, []byte(body))
	want := map[llm.Format]string{
		llm.FormatChat:      `[{"role":"user","content":"a"},{"role":"user","content":"b"}]`,
		llm.FormatResponses: `[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"b"}]}]`,
	}
	for f, w := range want {
		out, dropped, err := EncodeRequest(f, req, "x")
		if err != nil {
			t.Fatal(err)
		}
		key := map[llm.Format]string{llm.FormatChat: "messages", llm.FormatResponses: "input"}[f]
		if got := string(topLevel(t, out)[key]); got != w {
			t.Errorf("%s: %s", f, got)
		}
		if !reflect.DeepEqual(dropped, []string{"messages[].content[].thinking"}) {
			t.Errorf("%s: dropped %v", f, dropped)
		}
	}
}

// TestToolResultImagesToChat: a chat tool message holds text alone, so the images of a tool
// result (a Messages tool_result's image blocks, a Responses function_call_output's
// input_image parts) go to a chat upstream in a user message after the tool messages of the
// turn, named as moved; a tool result's document is still refused.
func TestToolResultImagesToChat(t *testing.T) {
	cases := []struct{ name, body, messages, dropped string }{
		{"messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"shot","input":{}},{"type":"tool_use","id":"t2","name":"shot","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"here"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}}]},{"type":"tool_result","tool_use_id":"t2","content":[{"type":"image","source":{"type":"url","url":"https://x/b.png"}}]}]}]}`,
			`[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"shot","arguments":"{}"}},{"id":"t2","type":"function","function":{"name":"shot","arguments":"{}"}}]},{"role":"tool","tool_call_id":"t1","content":"here"},{"role":"tool","tool_call_id":"t2","content":""},{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}},{"type":"image_url","image_url":{"url":"https://x/b.png"}}]}]`,
			"messages[].content[].content[] (moved to a user message)"},
		{"responses", `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"shot","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"here"},{"type":"input_image","image_url":"https://x/a.png","detail":"auto"}]},{"role":"user","content":"and?"}]}`,
			`[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"shot","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"here"},{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png","detail":"auto"}}]},{"role":"user","content":"and?"}]`,
			"input[].output[] (moved to a user message)"},
	}
	for _, c := range cases {
		src := llm.FormatMessages
		if c.name == "responses" {
			src = llm.FormatResponses
		}
		out, dropped, err := EncodeRequest(llm.FormatChat, mustDecode(t, src, []byte(c.body)), "x")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := string(topLevel(t, out)["messages"]); got != c.messages {
			t.Errorf("%s: messages\n%s\nwant\n%s", c.name, got, c.messages)
		}
		if !reflect.DeepEqual(dropped, []string{c.dropped}) {
			t.Errorf("%s: dropped %v", c.name, dropped)
		}
	}
}

// TestToolChoiceMapping checks every tool choice in both directions.
func TestToolChoiceMapping(t *testing.T) {
	tools := `"tools":[{"type":"function","function":{"name":"f"}}]`
	cases := []struct{ chat, messages string }{
		{`"auto"`, `{"type":"auto"}`},
		{`"none"`, `{"type":"none"}`},
		{`"required"`, `{"type":"any"}`},
		{`{"type":"function","function":{"name":"f"}}`, `{"type":"tool","name":"f"}`},
	}
	for _, c := range cases {
		req := mustDecode(t, llm.FormatChat, []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"}],`+tools+`,"tool_choice":`+c.chat+`}`))
		out, _, err := EncodeRequest(llm.FormatMessages, req, "c")
		if err != nil {
			t.Fatal(err)
		}
		if got := string(topLevel(t, out)["tool_choice"]); got != c.messages {
			t.Errorf("chat %s -> messages %s, want %s", c.chat, got, c.messages)
		}
		back := mustDecode(t, llm.FormatMessages, out)
		out, _, err = EncodeRequest(llm.FormatChat, back, "m")
		if err != nil {
			t.Fatal(err)
		}
		if got := string(topLevel(t, out)["tool_choice"]); got != c.chat {
			t.Errorf("messages %s -> chat %s, want %s", c.messages, got, c.chat)
		}
	}
	// Without tools, no tool choice is sent (both APIs reject one).
	req := mustDecode(t, llm.FormatChat, []byte(`{"model":"m","messages":[{"role":"user","content":"a"}],"tool_choice":"none","parallel_tool_calls":true}`))
	for _, f := range []llm.Format{llm.FormatResponses, llm.FormatMessages} {
		req.MaxTokens = 5
		out, _, err := EncodeRequest(f, req, "x")
		if err != nil {
			t.Fatal(err)
		}
		top := topLevel(t, out)
		if top["tool_choice"] != nil || top["parallel_tool_calls"] != nil {
			t.Errorf("%s: %s", f, out)
		}
	}
}

// TestStreamUsage checks that a streaming chat upstream is always asked for usage.
func TestStreamUsage(t *testing.T) {
	for _, src := range formats {
		body := map[llm.Format]string{
			llm.FormatChat:      `{"model":"m","messages":[{"role":"user","content":"a"}],"stream":true,"stream_options":{"include_usage":false,"include_obfuscation":false}}`,
			llm.FormatResponses: `{"model":"m","input":"a","stream":true}`,
			llm.FormatMessages:  `{"model":"m","max_tokens":3,"messages":[{"role":"user","content":"a"}],"stream":true}`,
		}[src.f]
		req := mustDecode(t, src.f, []byte(body))
		out, _, err := EncodeRequest(llm.FormatChat, req, "m")
		if err != nil {
			t.Fatal(err)
		}
		so := topLevel(t, out)["stream_options"]
		var got struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if err := json.Unmarshal(so, &got); err != nil || !got.IncludeUsage {
			t.Errorf("%s: stream_options %s", src.name, so)
		}
	}
	req := mustDecode(t, llm.FormatChat, []byte(`{"model":"m","messages":[{"role":"user","content":"a"}],"stream":true}`))
	if req.IncludeUsage {
		t.Error("IncludeUsage set though the client did not ask")
	}
}

// A count_tokens body is a Messages request without max_tokens; a Messages request still needs
// it.
func TestDecodeCountTokensRequest(t *testing.T) {
	body := []byte(`{"model":"m","system":"be brief","messages":[{"role":"user","content":"hello"}]}`)
	ir, err := decodeCountTokens(body)
	if err != nil || ir.System != "be brief" || len(ir.Messages) != 1 || ir.MaxTokens != 0 {
		t.Fatalf("%+v, %v", ir, err)
	}
	if _, err := DecodeRequest(llm.FormatMessages, body); err == nil {
		t.Error("a Messages request without max_tokens was accepted")
	}
	if ir, err := decodeCountTokens([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`)); err != nil || ir.MaxTokens != 5 {
		t.Errorf("with a bound: %+v, %v", ir, err)
	}
}

// TestMessagesSystemMessage: a system message among the turns (Claude Code sends its
// environment notes as one) is more system text, after the top-level system prompt, and is
// given to another format with the system prompt.
func TestMessagesSystemMessage(t *testing.T) {
	body := `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"top","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"},{"role":"system","content":[{"type":"text","text":"# Environment"}]},{"role":"user","content":"more"}]}`
	req := mustDecode(t, llm.FormatMessages, []byte(body))
	if req.System != "top\n\n# Environment" || len(req.Messages) != 2 {
		t.Fatalf("system %q, %d messages", req.System, len(req.Messages))
	}
	out, _, err := EncodeRequest(llm.FormatChat, req, "up")
	if err != nil || !strings.Contains(string(out), `{"role":"system","content":"top\n\n# Environment"}`) {
		t.Errorf("to chat: %s %v", out, err)
	}
	if _, err := DecodeRequest(llm.FormatMessages, []byte(`{"model":"m","max_tokens":1,"messages":[{"role":"system","content":[{"type":"image","source":{}}]}]}`)); err == nil {
		t.Errorf("an image in a system message was accepted")
	}
}

// TestPromptCacheHints: the prompt-cache hints of
// https://platform.openai.com/docs/guides/prompt-caching (prompt_cache_key,
// prompt_cache_retention) go as they are between chat and Responses, which name them alike, and
// are dropped and named for Messages; Anthropic's cache_control
// (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching), on blocks, system text,
// tools or the whole request, reaches a Messages upstream byte for byte and is dropped and named
// for the OpenAI formats, which cache by themselves.
func TestPromptCacheHints(t *testing.T) {
	hints := `,"prompt_cache_key":"tenant-7/agent","prompt_cache_retention":"24h"`
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"}]` + hints + `}`
	resp := `{"model":"m","input":"hi"` + hints + `}`
	for _, c := range []struct {
		src  llm.Format
		body string
		dst  llm.Format
	}{{llm.FormatChat, chat, llm.FormatResponses}, {llm.FormatResponses, resp, llm.FormatChat}} {
		out, dropped, err := EncodeRequest(c.dst, mustDecode(t, c.src, []byte(c.body)), "up")
		if err != nil {
			t.Fatal(err)
		}
		top := topLevel(t, out)
		if string(top["prompt_cache_key"]) != `"tenant-7/agent"` || string(top["prompt_cache_retention"]) != `"24h"` || len(dropped) != 0 {
			t.Errorf("%s to %s: %s, dropped %q", c.src, c.dst, out, dropped)
		}
	}
	for _, body := range []struct {
		src  llm.Format
		body string
	}{{llm.FormatChat, chat}, {llm.FormatResponses, resp}} {
		req := mustDecode(t, body.src, []byte(body.body))
		req.MaxTokens = 100
		out, dropped, err := EncodeRequest(llm.FormatMessages, req, "up")
		if err != nil {
			t.Fatal(err)
		}
		if top := topLevel(t, out); top["prompt_cache_key"] != nil || top["prompt_cache_retention"] != nil ||
			!reflect.DeepEqual(dropped, []string{"prompt_cache_key", "prompt_cache_retention"}) {
			t.Errorf("%s to Messages: %s, dropped %q", body.src, out, dropped)
		}
	}

	msgs := `{"model":"m","max_tokens":9,"cache_control":{"type":"ephemeral"},` +
		`"system":[{"type":"text","text":"long rules","cache_control":{"type":"ephemeral","ttl":"1h"}}],` +
		`"tools":[{"name":"f","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"doc","cache_control":{"type":"ephemeral","ttl":"5m"}},{"type":"text","text":"question"}]}]}`
	req := mustDecode(t, llm.FormatMessages, []byte(msgs))
	out, dropped, err := EncodeRequest(llm.FormatMessages, req, "m")
	if err != nil || len(dropped) != 0 || !reflect.DeepEqual(topLevel(t, out), topLevel(t, []byte(msgs))) {
		t.Errorf("Messages to Messages: %s, dropped %q, %v; want every member as sent", out, dropped, err)
	}
	for _, dst := range []llm.Format{llm.FormatChat, llm.FormatResponses} {
		out, dropped, err := EncodeRequest(dst, req, "up")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"cache_control", "messages[].content[].cache_control", "system[].cache_control", "tools[].cache_control"}
		if !reflect.DeepEqual(dropped, want) || bytes.Contains(out, []byte("cache_control")) {
			t.Errorf("Messages to %s: %s, dropped %q, want %q", dst, out, dropped, want)
		}
	}
}

// TestAutomaticCacheForMessages: a request translated from an OpenAI format for a Messages
// upstream that allows it (EncodeOptions.AutomaticCache) asks for Anthropic's automatic
// prompt caching, a top-level cache_control, when a later request will read what it writes: a
// conversation that goes on (an assistant turn, a tool result) or a prompt_cache_key; the
// hints are then honoured, not named as dropped, and prompt_cache_retention "24h" asks for an
// hour. A one-off request asks for nothing (it would pay the write and never read it), and
// neither does any request when the upstream does not allow it (trial h10 D2: OpenAI clients
// routed to Anthropic paid the full input price on every turn of an agent's loop).
func TestAutomaticCacheForMessages(t *testing.T) {
	const (
		oneOff     = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
		goesOn     = `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"more"}]}`
		toolResult = `{"model":"m","input":[{"role":"user","content":"run it"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"done"}]}`
		keyed      = `{"model":"m","messages":[{"role":"user","content":"hi"}],"prompt_cache_key":"agent-7"}`
		keyedDay   = `{"model":"m","input":"hi","prompt_cache_key":"agent-7","prompt_cache_retention":"24h"}`
	)
	for _, c := range []struct {
		name    string
		src     llm.Format
		body    string
		allowed bool
		want    string // the top-level cache_control, "" for none
		dropped []string
	}{
		{"one-off", llm.FormatChat, oneOff, true, "", nil},
		{"a conversation that goes on", llm.FormatChat, goesOn, true, `{"type":"ephemeral"}`, nil},
		{"a tool result", llm.FormatResponses, toolResult, true, `{"type":"ephemeral"}`, nil},
		{"a prompt_cache_key", llm.FormatChat, keyed, true, `{"type":"ephemeral"}`, nil},
		{"a day's retention", llm.FormatResponses, keyedDay, true, `{"type":"ephemeral","ttl":"1h"}`, nil},
		{"not allowed, goes on", llm.FormatChat, goesOn, false, "", nil},
		{"not allowed, keyed", llm.FormatResponses, keyedDay, false, "", []string{"prompt_cache_key", "prompt_cache_retention"}},
	} {
		req := mustDecode(t, c.src, []byte(c.body))
		req.MaxTokens = 100
		out, dropped, err := EncodeRequestWith(llm.FormatMessages, req, "up", EncodeOptions{AutomaticCache: c.allowed})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		top := topLevel(t, out)
		if string(top["cache_control"]) != c.want || !reflect.DeepEqual(dropped, c.dropped) ||
			top["prompt_cache_key"] != nil || top["prompt_cache_retention"] != nil {
			t.Errorf("%s: cache_control %s, dropped %q; want %q, dropped %q\n%s", c.name, top["cache_control"], dropped, c.want, c.dropped, out)
		}
	}
	// Between the OpenAI formats nothing is added: OpenAI caches by itself.
	out, _, err := EncodeRequestWith(llm.FormatResponses, mustDecode(t, llm.FormatChat, []byte(goesOn)), "up", EncodeOptions{AutomaticCache: true})
	if err != nil || bytes.Contains(out, []byte("cache_control")) {
		t.Errorf("chat to Responses: %s, %v", out, err)
	}
}

// TestToolUseIDsStayDistinct: tool call ids made acceptable to the Messages API stay distinct
// when they were (trial h14 D3: "call:1" and "call/1" both became "call_1", so the upstream got
// two tool_use blocks of one id), map the same way each time (a call and its result still
// match), and an acceptable id passes as it is.
func TestToolUseIDsStayDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{"call:1", "call/1", "call_1", "call 1", "", "é", "call.1/x", "toolu_01A09q90qw90lq917835lq9"} {
		got := toolUseID(id)
		if got == "" || strings.IndexFunc(got, func(r rune) bool { return r > 127 || !idChar(byte(r)) }) >= 0 {
			t.Errorf("%q became %q, not ^[a-zA-Z0-9_-]+$", id, got)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q both became %q", other, id, got)
		}
		seen[got] = id
		if toolUseID(id) != got {
			t.Errorf("%q maps two ways", id)
		}
	}
	if toolUseID("call_1") != "call_1" || toolUseID("toolu_01A09q90qw90lq917835lq9") != "toolu_01A09q90qw90lq917835lq9" {
		t.Error("an acceptable id was changed")
	}
}

// TestEmptyLastUserTurnToMessages: a conversation that ends on an empty user message is refused
// for a Messages upstream, naming the message (left out, the request would end on the
// assistant's turn, which Anthropic continues as a prefill: trial h14 D9); an empty user
// message elsewhere is left out and named.
func TestEmptyLastUserTurnToMessages(t *testing.T) {
	var req *llm.Request
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":""}]}`,
		`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":[{"type":"text","text":""}]}]}`,
	} {
		req = mustDecode(t, llm.FormatChat, []byte(body))
		req.MaxTokens = 100
		_, _, err := EncodeRequest(llm.FormatMessages, req, "up")
		ae := apierror.As(err)
		if ae == nil || ae.Param != "messages[2].content" {
			t.Errorf("%s: %v, want a 400 naming messages[2].content", body, err)
		}
	}
	// Followed only by an empty assistant message, the empty user message would still leave
	// the conversation on the assistant's turn (the review of the fix).
	req = mustDecode(t, llm.FormatChat, []byte(`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":""},{"role":"assistant","content":""}]}`))
	req.MaxTokens = 100
	if _, _, err := EncodeRequest(llm.FormatMessages, req, "up"); apierror.As(err) == nil || apierror.As(err).Param != "messages[2].content" {
		t.Errorf("an empty user message before an empty assistant one: %v, want a 400 naming messages[2].content", err)
	}
	req = mustDecode(t, llm.FormatChat, []byte(`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":""},{"role":"assistant","content":"c"},{"role":"user","content":"d"}]}`))
	req.MaxTokens = 100
	body, dropped, err := EncodeRequest(llm.FormatMessages, req, "up")
	if err != nil || !slices.Contains(dropped, "messages[]") {
		t.Errorf("an empty user message in the middle: %v, dropped %q", err, dropped)
	}
	if !strings.Contains(string(body), `"content":"d"}]`) {
		t.Errorf("the conversation does not end on the user's last turn: %s", body)
	}
}

// TestReasoningEffortAndVerbosityCarry: the two OpenAI formats spell a reasoning model's effort
// and an answer's verbosity differently (chat reasoning_effort and verbosity, Responses
// reasoning.effort and text.verbosity); a request in one served through the other keeps both
// (trial h14 D6: they were dropped, so a coding agent's "high" effort ran at the model's
// default), and a Responses answer echoes the effort it was asked.
func TestReasoningEffortAndVerbosityCarry(t *testing.T) {
	cases := []struct {
		name     string
		src, dst llm.Format
		body     string
		want     map[string]any
	}{
		{"chat to responses", llm.FormatChat, llm.FormatResponses,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high","verbosity":"low","response_format":{"type":"json_object"}}`,
			map[string]any{"reasoning": map[string]any{"effort": "high"}, "text": map[string]any{"format": map[string]any{"type": "json_object"}, "verbosity": "low"}}},
		{"responses to chat", llm.FormatResponses, llm.FormatChat,
			`{"model":"m","input":"hi","reasoning":{"effort":"minimal","summary":"auto"},"text":{"verbosity":"high"}}`,
			map[string]any{"reasoning_effort": "minimal", "verbosity": "high"}},
		{"responses kept", llm.FormatResponses, llm.FormatResponses,
			`{"model":"m","input":"hi","reasoning":{"effort":"low","summary":"auto"},"text":{"verbosity":"high"}}`,
			map[string]any{"reasoning": map[string]any{"effort": "low", "summary": "auto"}, "text": map[string]any{"verbosity": "high"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := mustDecode(t, c.src, []byte(c.body))
			body, _, err := EncodeRequest(c.dst, req, "up")
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			for k, want := range c.want {
				if !reflect.DeepEqual(got[k], want) {
					t.Errorf("%s = %v, want %v (body %s)", k, got[k], want, body)
				}
			}
		})
	}

	req := mustDecode(t, llm.FormatChat, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high","verbosity":"low"}`))
	var echo map[string]any
	if err := json.Unmarshal(append(append([]byte("{"), ResponsesEchoMembers(req)[1:]...), '}'), &echo); err != nil {
		t.Fatal(err)
	}
	if r := echo["reasoning"].(map[string]any); r["effort"] != "high" {
		t.Errorf("the answer echoes reasoning %v, want effort high", r)
	}
	if tx := echo["text"].(map[string]any); tx["verbosity"] != "low" || tx["format"] == nil {
		t.Errorf("the answer echoes text %v, want its format and verbosity low", tx)
	}
}

// TestNothingToSayIsRefused checks that a translation leaving the upstream no message is a 400
// naming the client's field (found by FuzzTranslateRequest: a Responses input of a reasoning
// item alone reached a chat upstream as an empty messages array, which it refused in its own
// words), and that instructions alone still reach a chat upstream, which answers them.
func TestNothingToSayIsRefused(t *testing.T) {
	reasoningOnly := []byte(`{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[]}]}`)
	for _, dst := range []llm.Format{llm.FormatChat, llm.FormatMessages} {
		_, _, err := EncodeRequest(dst, mustDecode(t, llm.FormatResponses, reasoningOnly), "up")
		ae := invalid(t, err, "input")
		if !strings.Contains(ae.Message, "holds no message") {
			t.Errorf("responses -> %s: %q", dst, ae.Message)
		}
	}
	systemOnly := []byte(`{"model":"m","messages":[{"role":"system","content":"Say hi."}]}`)
	req := mustDecode(t, llm.FormatChat, systemOnly)
	req.MaxTokens = 64
	_, _, err := EncodeRequest(llm.FormatMessages, req, "up")
	invalid(t, err, "messages")
	withInstructions := []byte(`{"model":"m","instructions":"Say hi.","input":[{"type":"reasoning","id":"rs_1","summary":[]}]}`)
	if _, _, err := EncodeRequest(llm.FormatChat, mustDecode(t, llm.FormatResponses, withInstructions), "up"); err != nil {
		t.Errorf("instructions alone to a chat upstream: %v", err)
	}
}

// TestEarlierRefusalIsCarried: the model's refusal in an earlier assistant turn (chat
// message.refusal or a refusal part, a Responses refusal part) goes where the target has a
// place for it (chat message.refusal, a Responses refusal part after the text) and, for
// Messages, which has none, as the assistant's text (docs/inference.md); nothing is dropped.
func TestEarlierRefusalIsCarried(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"Well.","refusal":"I can't help."},{"role":"user","content":"b"}]}`
	chatParts := `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"Well."},{"type":"refusal","refusal":"I can't help."}]},{"role":"user","content":"b"}]}`
	responses := `{"model":"m","input":[{"role":"user","content":"a"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Well.","annotations":[]},{"type":"refusal","refusal":"I can't help."}]},{"role":"user","content":"b"}]}`
	wantChat := `{"role":"assistant","content":"Well.","refusal":"I can't help."}`
	wantResponses := `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Well."},{"type":"refusal","refusal":"I can't help."}]}`
	wantMessages := `{"role":"assistant","content":[{"type":"text","text":"Well."},{"type":"text","text":"I can't help."}]}`
	cases := []struct {
		name string
		src  llm.Format
		body string
		dst  llm.Format
		want string
	}{
		{"chat to responses", llm.FormatChat, chat, llm.FormatResponses, wantResponses},
		{"chat parts to responses", llm.FormatChat, chatParts, llm.FormatResponses, wantResponses},
		{"chat to messages", llm.FormatChat, chat, llm.FormatMessages, wantMessages},
		{"responses to chat", llm.FormatResponses, responses, llm.FormatChat, wantChat},
		{"responses to messages", llm.FormatResponses, responses, llm.FormatMessages, wantMessages},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := mustDecode(t, c.src, []byte(c.body))
			req.MaxTokens = 1000
			body, dropped, err := EncodeRequest(c.dst, req, "up")
			if err != nil {
				t.Fatal(err)
			}
			if len(dropped) > 0 || !strings.Contains(string(body), c.want) {
				t.Errorf("dropped %q, body %s\nwant it to hold %s", dropped, body, c.want)
			}
		})
	}
}
