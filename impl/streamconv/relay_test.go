package streamconv

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	assestream "github.com/anthropics/anthropic-sdk-go/packages/ssestream"
	"github.com/openai/openai-go/v3"
	oassestream "github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// relayAll runs a recorded same-format upstream stream as the gateway does: every event is
// decoded, its neutral events fed to an encoder (whose output is dropped, but for errors), and
// the event itself relayed. It returns what the client got, as a transcript, and the encoder.
func relayAll(t *testing.T, f llm.Format, raw []byte, includeUsage bool) ([]byte, Encoder) {
	t.Helper()
	dec := NewDecoder(f)
	enc := NewEncoder(f, Meta{ID: "resp_gateway", Model: "pub", IncludeUsage: includeUsage, Relayed: true})
	rl := NewRelay(f, "pub", includeUsage, enc)
	var transcript []byte
	for _, ev := range readEvents(t, raw) {
		neutral, done, err := dec.Decode(ev, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range neutral {
			out := enc.Encode(n, nil)
			if n.Kind == llm.EventError {
				for _, o := range out {
					transcript = sse.AppendEvent(transcript, o)
				}
			}
		}
		for _, o := range rl.Event(ev, nil) {
			transcript = sse.AppendEvent(transcript, o)
		}
		if done {
			break
		}
	}
	return transcript, enc
}

func relayFixture(t *testing.T, name string) []byte {
	return readFile(t, filepath.Join("testdata", "relay", name))
}

// TestRelayKeepsWhatTheNeutralFormDoesNotModel: thinking blocks with their signatures and a
// redacted thinking block reach a Messages client untouched, in place, with only the model of
// message_start rewritten; anthropic-sdk-go accumulates them.
func TestRelayKeepsWhatTheNeutralFormDoesNotModel(t *testing.T) {
	raw := relayFixture(t, "messages_thinking.sse")
	got, _ := relayAll(t, llm.FormatMessages, raw, false)
	want := strings.Replace(string(raw), `"model":"claude-sonnet-4-5-20250929"`, `"model":"pub"`, 1)
	if string(got) != want {
		t.Fatalf("relayed:\n%s\nwant:\n%s", got, want)
	}
	stream := assestream.NewStream[anthropic.MessageStreamEventUnion](assestream.NewDecoder(sseResponse(got)), nil)
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 4 || msg.Content[0].Type != "thinking" || msg.Content[0].Signature == "" ||
		msg.Content[1].Type != "redacted_thinking" || msg.Content[3].Type != "tool_use" || msg.Model != "pub" {
		t.Errorf("accumulated %+v", msg)
	}
}

// TestRelayChat: every choice, logprobs and refusal deltas reach a chat client; the model of
// every chunk is rewritten; the usage chunk, which the gateway asks the upstream for, is shown
// only to a client that asked for it.
func TestRelayChat(t *testing.T) {
	raw := relayFixture(t, "chat_choices.sse")
	for _, include := range []bool{false, true} {
		got, enc := relayAll(t, llm.FormatChat, raw, include)
		if strings.Contains(string(got), "gpt-4.1") || strings.Count(string(got), `"model":"pub"`) != 4+btoi(include) {
			t.Errorf("include %v: models not rewritten:\n%s", include, got)
		}
		if usage := bytes.Contains(got, []byte(`"choices":[]`)); usage != include {
			t.Errorf("include %v: usage chunk shown %v", include, usage)
		}
		if !bytes.HasSuffix(got, []byte("data: [DONE]\n\n")) {
			t.Errorf("include %v: no [DONE]:\n%s", include, got)
		}
		if u := enc.Usage(); u.OutputTokens != 8 {
			t.Errorf("include %v: the usage followed is %+v", include, u)
		}
		stream := oassestream.NewStream[openai.ChatCompletionChunk](oassestream.NewDecoder(sseResponse(got)), nil)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 2 || acc.Choices[0].Message.Content != "Hi" || acc.Choices[1].Message.Refusal != "I can't help with that." ||
			len(acc.Choices[0].Logprobs.Content) != 1 {
			t.Errorf("include %v: accumulated %+v", include, acc.Choices)
		}
	}
}

// TestRelayResponsesFailureContinuesTheNumbering: reasoning items reach a Responses client
// untouched; when the upstream is cut off, the error and response.failed the gateway adds are
// numbered after the last event relayed.
func TestRelayResponsesFailureContinuesTheNumbering(t *testing.T) {
	raw := relayFixture(t, "responses_reasoning.sse")
	got, enc := relayAll(t, llm.FormatResponses, raw, false)
	if !bytes.Contains(got, []byte("response.reasoning_summary_text.delta")) || bytes.Contains(got, []byte("o4-mini")) {
		t.Fatalf("relayed:\n%s", got)
	}
	for _, ev := range enc.Fail("api_error", "the upstream stream ended unexpectedly", nil) {
		got = sse.AppendEvent(got, ev)
	}
	last := int64(-1)
	var types []string
	for _, ev := range readEvents(t, got) {
		var e struct {
			Type string `json:"type"`
			Seq  int64  `json:"sequence_number"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			t.Fatal(err)
		}
		if e.Seq <= last {
			t.Errorf("%s numbered %d after %d", e.Type, e.Seq, last)
		}
		last = e.Seq
		types = append(types, e.Type)
	}
	if n := len(types); n < 2 || types[n-2] != "error" || types[n-1] != "response.failed" || last != 12 {
		t.Errorf("ends %v at %d", types, last)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRelayOddChatEvents: an event with no data is dropped, as the decoder skips it; a terminal
// the decoder accepts goes out as the canonical [DONE]; a data line that is no chunk (an error
// object of a compatible server, whose words may name the operator's account) is not relayed.
func TestRelayOddChatEvents(t *testing.T) {
	chunk := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`
	rl := NewRelay(llm.FormatChat, "pub", false, NewEncoder(llm.FormatChat, Meta{Model: "pub", Relayed: true}))
	var got []byte
	for _, ev := range []sse.Event{
		{Data: []byte(chunk)}, {Data: nil}, {Data: []byte(" ")},
		{Data: []byte(`{"object":"error","message":"quota of org-secret exceeded","code":500}`)},
		{Data: []byte(chunk)}, {Data: []byte(" [DONE] ")},
	} {
		for _, o := range rl.Event(ev, nil) {
			got = sse.AppendEvent(got, o)
		}
	}
	want := "data: " + strings.Replace(chunk, `"up"`, `"pub"`, 1) + "\n\n"
	if string(got) != want+want+"data: [DONE]\n\n" {
		t.Errorf("relayed:\n%s", got)
	}
}

// TestRelayCountsWhatTheDecoderDoesNot: the thinking a relayed stream carried counts as output
// when no usage arrives, since the client has it.
func TestRelayCountsWhatTheDecoderDoesNot(t *testing.T) {
	raw := relayFixture(t, "messages_thinking.sse")
	rl := NewRelay(llm.FormatMessages, "pub", false, NewEncoder(llm.FormatMessages, Meta{Relayed: true}))
	for _, ev := range readEvents(t, raw) {
		rl.Event(ev, nil)
	}
	if n, want := rl.Unmodelled(), len("The user wants the weather; I should call the tool."); n != want {
		t.Errorf("unmodelled %d characters, want %d", n, want)
	}
	raw = relayFixture(t, "responses_reasoning.sse")
	rl = NewRelay(llm.FormatResponses, "pub", false, NewEncoder(llm.FormatResponses, Meta{Relayed: true}))
	for _, ev := range readEvents(t, raw) {
		rl.Event(ev, nil)
	}
	if n, want := rl.Unmodelled(), len("Thinking about greetings."); n != want {
		t.Errorf("responses: unmodelled %d characters, want %d", n, want)
	}
}

// TestChatReasoningIsUnmodelledOutput: the reasoning that chat-compatible servers stream beside
// the content, which the neutral events do not carry, counts as output (the provider bills it)
// relayed and translated alike: DeepSeek's delta.reasoning_content (api-docs.deepseek.com,
// "Reasoning Model (deepseek-reasoner)"), vLLM's and OpenRouter's delta.reasoning (docs.vllm.ai,
// "Reasoning Outputs"; OpenRouter's "Reasoning Tokens"), OpenRouter's delta.reasoning_details
// (its reasoning.text and reasoning.summary entries), once when a delta has several names;
// neither content, a usage chunk's reasoning_tokens, another choice's reasoning nor an
// encrypted reasoning_details entry count. On the code before, a chat upstream's reasoning
// counted nothing (a stream cut during it was billed no output), and reasoning_details
// nothing until task h2.
func TestChatReasoningIsUnmodelledOutput(t *testing.T) {
	chunk := func(delta string) sse.Event {
		return sse.Event{Data: []byte(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`)}
	}
	for _, c := range []struct {
		name string
		ev   sse.Event
		want int
	}{
		{"deepseek", chunk(`{"role":"assistant","content":"","reasoning_content":"Let me think"}`), len("Let me think")},
		{"vllm", chunk(`{"reasoning":"Weighing \"both\" options"}`), len(`Weighing \"both\" options`)},
		{"both names", chunk(`{"reasoning":"Same text","reasoning_content":"Same text"}`), len("Same text")},
		{"openrouter encrypted", chunk(`{"content":"","reasoning":null,"reasoning_details":[{"type":"reasoning.encrypted","data":"gAAAAB"}]}`), 0},
		{"openrouter details", chunk(`{"content":null,"reasoning_details":[{"type":"reasoning.text","text":"Step \"one\"","index":0},{"type":"reasoning.summary","summary":"In short","index":1},{"type":"reasoning.encrypted","data":"gAAAAB"}]}`), len(`Step \"one\"`) + len("In short")},
		{"openrouter both", chunk(`{"reasoning":"Same text","reasoning_details":[{"type":"reasoning.text","text":"Same text"}]}`), len("Same text")},
		{"content", chunk(`{"content":"the \"reasoning\" is sound"}`), 0},
		{"other choice", sse.Event{Data: []byte(`{"choices":[{"index":1,"delta":{"reasoning":"not followed"}},{"index":0,"delta":{"reasoning":"followed"}}]}`)}, len("followed")},
		{"usage", sse.Event{Data: []byte(`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":7}}}`)}, 0},
		{"done", sse.Event{Data: []byte("[DONE]")}, 0},
	} {
		if n := UnmodelledOutput(llm.FormatChat, c.ev); n != c.want {
			t.Errorf("%s: translated, %d characters of unmodelled output, want %d", c.name, n, c.want)
		}
		rl := NewRelay(llm.FormatChat, "pub", true, NewEncoder(llm.FormatChat, Meta{Model: "pub", IncludeUsage: true, Relayed: true}))
		rl.Event(c.ev, nil)
		if n := rl.Unmodelled(); n != c.want {
			t.Errorf("%s: relayed, %d characters of unmodelled output, want %d", c.name, n, c.want)
		}
	}
}

// TestRelayCountsARefusalOnce: a Responses refusal delta is text to the decoder, which the
// caller counts from the neutral event: the relay does not count it again as unmodelled output
// (it did, billing a cut refusal twice over).
func TestRelayCountsARefusalOnce(t *testing.T) {
	ev := sse.Event{Name: "response.refusal.delta", Data: []byte(`{"type":"response.refusal.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"I can't help with that."}`)}
	dec := NewDecoder(llm.FormatResponses)
	created := sse.Event{Name: "response.created", Data: []byte(`{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","model":"m","output":[]}}`)}
	if _, _, err := dec.Decode(created, nil); err != nil {
		t.Fatal(err)
	}
	evs, _, err := dec.Decode(ev, nil)
	if err != nil || len(evs) != 1 || evs[0].Kind != llm.EventTextDelta {
		t.Fatalf("decoded %+v, %v; want the refusal as a text delta", evs, err)
	}
	rl := NewRelay(llm.FormatResponses, "pub", false, NewEncoder(llm.FormatResponses, Meta{Relayed: true}))
	rl.Event(ev, nil)
	if n := rl.Unmodelled(); n != 0 {
		t.Errorf("the relay counted %d characters of the refusal besides the decoder's text", n)
	}
}

// TestRelayedResponsesFailure: the response.failed of a relayed stream carries the upstream's
// id and lists the items the client has, as the Responses API's own does: the reasoning item
// the upstream finished, as it came, and the message it was writing, incomplete, with the text
// its deltas carried (trial D9: it listed none, although the client had text); openai-go reads
// them. Before the upstream said anything, the gateway's id stands in.
func TestRelayedResponsesFailure(t *testing.T) {
	_, enc := relayAll(t, llm.FormatResponses, relayFixture(t, "responses_reasoning.sse"), false)
	evs := enc.Fail("api_error", "cut", nil)
	last := evs[len(evs)-1]
	if last.Name != "response.failed" || !bytes.Contains(last.Data, []byte(`"id":"resp_R1"`)) {
		t.Fatalf("failed: %s", last.Data)
	}
	var failed responses.Response
	var wrapper struct {
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(last.Data, &wrapper); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(wrapper.Response, &failed); err != nil {
		t.Fatal(err)
	}
	if n := len(failed.Output); n != 2 || failed.Output[0].ID != "rs_1" || failed.Output[0].Type != "reasoning" ||
		len(failed.Output[0].Summary) != 1 || failed.Output[1].ID != "msg_1" || failed.Output[1].Status != "incomplete" {
		t.Fatalf("failed response's output: %s", wrapper.Response)
	}
	if text := failed.OutputText(); text != "Hello!" {
		t.Errorf("failed response's text %q, want the client's %q", text, "Hello!")
	}
	early := NewEncoder(llm.FormatResponses, Meta{ID: "resp_gateway", Model: "pub", Relayed: true})
	for _, ev := range early.Fail("rate_limit_error", "slow down", nil) {
		if !bytes.Contains(ev.Data, []byte(`"id":"resp_gateway"`)) && ev.Name != "error" {
			t.Errorf("%s: %s", ev.Name, ev.Data)
		}
	}
}

// TestRelayedUsageChunkWithoutChoices: a chat upstream whose usage chunk has choices null or no
// choices at all (vLLM and other compatible servers) still gives a client that asked for usage
// its usage chunk, with choices [] and the gateway's model (§1.5); a client that did not ask
// gets none (trial h1: the chunk was dropped, though the bill was right).
func TestRelayedUsageChunkWithoutChoices(t *testing.T) {
	for _, choices := range []string{`"choices":null,`, ``} {
		var raw []byte
		for _, data := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"up",` + choices + `"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`,
			`[DONE]`,
		} {
			raw = sse.AppendEvent(raw, sse.Event{Data: []byte(data)})
		}
		got, _ := relayAll(t, llm.FormatChat, raw, true)
		if !bytes.Contains(got, []byte(`"choices":[]`)) || !bytes.Contains(got, []byte(`"usage":{"prompt_tokens":5`)) || bytes.Contains(got, []byte(`"model":"up"`)) {
			t.Errorf("choices %q, usage asked for: %s", choices, got)
		}
		if got, _ := relayAll(t, llm.FormatChat, raw, false); bytes.Contains(got, []byte(`"usage":{`)) {
			t.Errorf("choices %q, usage not asked for: %s", choices, got)
		}
	}
}

// TestServerToolInputIsUnmodelledOutput: a Messages stream's input_json_delta to a
// server_tool_use block (a web search's query) counts as output, as sent, and so does an input
// a block's start carries whole; a delta to a client tool's block (which the neutral events
// carry) and the events of a stream without server tools count nothing.
func TestServerToolInputIsUnmodelledOutput(t *testing.T) {
	c := NewUnmodelledCounter(llm.FormatMessages)
	n := 0
	for _, ev := range []sse.Event{
		{Name: "content_block_start", Data: []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`)},
		{Name: "content_block_delta", Data: []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}`)},
		{Name: "content_block_start", Data: []byte(`{"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}`)},
		{Name: "content_block_delta", Data: []byte(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\":"}}`)},
		{Data: []byte(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"go\"}"}}`)},
		{Name: "content_block_start", Data: []byte(`{"type":"content_block_start","index":2,"content_block":{"type":"server_tool_use","id":"srvtoolu_2","name":"code_execution","input":{"code":"1+1"}}}`)},
		{Name: "content_block_delta", Data: []byte(`{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"server_tool_use"}}`)},
	} {
		n += c.Count(ev)
	}
	if want := len(`{\"query\":`) + len(`\"go\"}`) + len(`{"code":"1+1"}`); n != want {
		t.Errorf("%d characters of server tool input, want %d", n, want)
	}
}
