package streamconv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// formats lists the three formats with the short names used in test data file names.
var formats = []struct {
	f     llm.Format
	short string
}{
	{llm.FormatChat, "chat"},
	{llm.FormatResponses, "responses"},
	{llm.FormatMessages, "messages"},
}

var scenarios = []string{"text", "tools", "length", "error"}

// metaFor is the client-visible metadata the golden transcripts are made with.
func metaFor(client llm.Format) Meta {
	m := Meta{Created: 1767225600, Model: "tg-model", IncludeUsage: true, InputTokensEstimate: 42}
	switch client {
	case llm.FormatChat:
		m.ID = "chatcmpl-tg7Qx2"
	case llm.FormatResponses:
		m.ID = "resp_tg7Qx2"
	case llm.FormatMessages:
		m.ID = "msg_tg7Qx2"
	}
	return m
}

// toolCall is one tool call as a client sees it in the end.
type toolCall struct {
	ID, Name, Args string
}

// result is what a stream amounts to, in neutral terms: what a client accumulates.
type result struct {
	Text     string
	Refusal  string
	Tools    []toolCall
	Stop     llm.StopReason
	Usage    llm.Usage
	ErrType  string
	ErrMsg   string
	HasError bool
}

const (
	wantText      = "Hello! \"Quotes\", <tags> & a\\backslash.\nNew line, tab\tand ünïcödé 🎉 \u2028."
	serverErrMsg  = "The server had an error while processing your request. Sorry about that!"
	weatherArgs   = `{"location":"Paris"}`
	timeArgs      = `{"tz":"Europe/Paris"}`
	lengthCutText = "Once upon a time there"
)

// expected is what each recorded upstream stream amounts to, written by hand from the files.
var expected = map[string]result{
	"chat_text": {Text: wantText, Stop: llm.StopEnd,
		Usage: llm.Usage{InputTokens: 19, OutputTokens: 14, CachedInputTokens: 3, ServiceTier: "default"}},
	"chat_tools": {Stop: llm.StopToolCalls,
		Tools: []toolCall{{"call_Wx1", "get_weather", weatherArgs}, {"call_Tm2", "get_time", timeArgs}},
		Usage: llm.Usage{InputTokens: 88, OutputTokens: 41, ServiceTier: "default"}},
	"chat_length": {Text: lengthCutText, Stop: llm.StopLength, Usage: llm.Usage{InputTokens: 12, OutputTokens: 5}},
	"chat_error":  {Text: "Partial answer", HasError: true, ErrType: "server_error", ErrMsg: serverErrMsg},
	"responses_text": {Text: wantText, Stop: llm.StopEnd,
		Usage: llm.Usage{InputTokens: 19, OutputTokens: 14, CachedInputTokens: 3, ServiceTier: "auto"}},
	"responses_tools": {Stop: llm.StopToolCalls,
		Tools: []toolCall{{"call_Wx1", "get_weather", weatherArgs}, {"call_Tm2", "get_time", timeArgs}},
		Usage: llm.Usage{InputTokens: 88, OutputTokens: 41, ReasoningTokens: 16, ServiceTier: "auto"}},
	"responses_length": {Text: lengthCutText, Stop: llm.StopLength, Usage: llm.Usage{InputTokens: 12, OutputTokens: 5, ServiceTier: "auto"}},
	"responses_error":  {Text: "Partial answer", HasError: true, ErrType: "server_error", ErrMsg: serverErrMsg},
	"messages_text": {Text: wantText, Stop: llm.StopEnd,
		Usage: llm.Usage{InputTokens: 19, OutputTokens: 14, CachedInputTokens: 3, ServiceTier: "standard"}},
	"messages_tools": {Text: "I'll check both.", Stop: llm.StopToolCalls,
		Tools: []toolCall{{"toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", weatherArgs}, {"toolu_01AbCdEfGhIjKlMnOpQrStUv", "get_time", timeArgs}},
		// 80 uncached and 8 written to the cache for five minutes.
		Usage: llm.Usage{InputTokens: 88, OutputTokens: 41, CacheWrite5mTokens: 8, ReasoningTokens: 16, ServiceTier: "standard"}},
	"messages_length": {Text: lengthCutText, Stop: llm.StopLength, Usage: llm.Usage{InputTokens: 12, OutputTokens: 5, ServiceTier: "standard"}},
	"messages_error":  {Text: "Partial answer", HasError: true, ErrType: "overloaded_error", ErrMsg: "Overloaded"},
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readEvents parses an SSE transcript with the package sse reader, copying each event.
func readEvents(t testing.TB, raw []byte) []sse.Event {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(raw))
	var evs []sse.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		evs = append(evs, sse.Event{Name: ev.Name, Data: bytes.Clone(ev.Data)})
	}
}

// decodeAll runs a recorded upstream stream through a Decoder.
func decodeAll(t testing.TB, up llm.Format, raw []byte) (evs []llm.Event, done bool) {
	t.Helper()
	dec := NewDecoder(up)
	for _, ev := range readEvents(t, raw) {
		if done {
			t.Fatalf("event %q after the terminal event", ev.Data)
		}
		var err error
		evs, done, err = dec.Decode(ev, evs)
		if err != nil {
			t.Fatalf("decode %q: %v", ev.Data, err)
		}
	}
	return evs, done
}

// accumulate is what a sequence of neutral events amounts to.
func accumulate(evs []llm.Event) result {
	var r result
	for _, e := range evs {
		switch e.Kind {
		case llm.EventTextDelta:
			if e.Refusal {
				r.Refusal += e.Text
			} else {
				r.Text += e.Text
			}
		case llm.EventToolCallStart:
			r.Tools = append(r.Tools, toolCall{ID: e.ToolCallID, Name: e.ToolName})
		case llm.EventToolCallDelta:
			r.Tools[e.ToolIndex].Args += e.Arguments
		case llm.EventStop:
			r.Stop = e.Stop
		case llm.EventUsage:
			r.Usage = e.Usage
		case llm.EventError:
			r.HasError, r.ErrType, r.ErrMsg = true, e.Err.Type, e.Err.Message
		}
	}
	return r
}

// pipe runs a recorded upstream stream through Decoder and Encoder the way the gateway does and
// returns the client's SSE transcript and the metered usage.
func pipe(t testing.TB, up, client llm.Format, meta Meta, raw []byte) ([]byte, llm.Usage) {
	t.Helper()
	dec := NewDecoder(up)
	enc := NewEncoder(client, meta)
	r := sse.NewReader(bytes.NewReader(raw))
	var (
		transcript []byte
		neutral    []llm.Event
		out        []sse.Event
		done       bool
	)
	write := func(out []sse.Event) {
		for _, ev := range out {
			transcript = sse.AppendEvent(transcript, ev)
		}
	}
	for !done {
		ev, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("reading upstream: %v", err)
			}
			break
		}
		neutral, done, err = dec.Decode(ev, neutral[:0])
		if err != nil {
			write(enc.Fail("upstream_error", "the upstream sent a malformed stream", out[:0]))
			return transcript, enc.Usage()
		}
		for _, e := range neutral {
			out = enc.Encode(e, out[:0])
			write(out)
		}
	}
	if done {
		write(enc.Finish(out[:0]))
	} else {
		write(enc.Fail("upstream_error", "the upstream stream ended early", out[:0]))
	}
	return transcript, enc.Usage()
}

// compareResult checks what a client got against what the upstream sent, as far as the client
// format can tell it.
func compareResult(t testing.TB, who string, client llm.Format, meta Meta, got, want result) {
	t.Helper()
	if got.Text != want.Text {
		t.Errorf("%s: text %q, want %q", who, got.Text, want.Text)
	}
	if !reflect.DeepEqual(got.Tools, want.Tools) && !(len(got.Tools) == 0 && len(want.Tools) == 0) {
		t.Errorf("%s: tools %+v, want %+v", who, got.Tools, want.Tools)
	}
	if got.HasError != want.HasError {
		t.Fatalf("%s: error %v (%s: %s), want %v", who, got.HasError, got.ErrType, got.ErrMsg, want.HasError)
	}
	if want.HasError {
		if got.ErrMsg != want.ErrMsg {
			t.Errorf("%s: error message %q, want %q", who, got.ErrMsg, want.ErrMsg)
		}
		return
	}
	if got.Stop != want.Stop {
		t.Errorf("%s: stop %q, want %q", who, got.Stop, want.Stop)
	}
	wantUsage := clientView(client, want.Usage)
	switch {
	case client == llm.FormatChat && !meta.IncludeUsage:
		// Only the tier, which every chunk names.
		wantUsage = llm.Usage{ServiceTier: wantUsage.ServiceTier}
	case client == llm.FormatMessages && got.Usage.ServiceTier == "":
		// A Messages stream names the tier in message_start: an upstream that says it only at
		// the end (the OpenAI formats) cannot have it there.
		wantUsage.ServiceTier = ""
	}
	if got.Usage != wantUsage {
		t.Errorf("%s: usage %+v, want %+v", who, got.Usage, wantUsage)
	}
}

// clientView is the usage u as a client of format client reads it: an OpenAI client sees the
// cache writes only as input (its usage has no place for them) and the tier in OpenAI's words,
// default when there is none; a Messages client sees the tier in its own words, if any.
// Any other client (""): the neutral usage itself.
func clientView(client llm.Format, u llm.Usage) llm.Usage {
	switch client {
	case llm.FormatMessages:
		u.ServiceTier = convert.ServiceTierFor(client, u.ServiceTier)
	case llm.FormatChat, llm.FormatResponses:
		u.CacheWrite5mTokens, u.CacheWrite1hTokens = 0, 0
		u.ServiceTier = convert.OpenAIServiceTier(u.ServiceTier)
	}
	return u
}

// messagesUsage reads a Messages usage object (decoded into m) into counts, as
// anthropic-sdk-go's Accumulate does: only the counts present replace the ones before.
func messagesUsage(c *convert.AnthropicCounts, m map[string]any) {
	for k, dst := range map[string]*int64{"input_tokens": &c.Input, "cache_read_input_tokens": &c.CacheRead,
		"cache_creation_input_tokens": &c.CacheWrite, "output_tokens": &c.Output} {
		if v, ok := m[k]; ok {
			*dst = num(v)
		}
	}
	if b, ok := m["cache_creation"].(map[string]any); ok {
		c.CacheWrite5m, c.CacheWrite1h = num(b["ephemeral_5m_input_tokens"]), num(b["ephemeral_1h_input_tokens"])
	}
	if d, ok := m["output_tokens_details"].(map[string]any); ok {
		c.Thinking = num(d["thinking_tokens"])
	}
	if tier, ok := m["service_tier"]; ok {
		c.ServiceTier = str(tier)
	}
}

// obj decodes a JSON object, failing the test when it is not one.
func obj(t testing.TB, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("event data %q is not a JSON object: %v", data, err)
	}
	return m
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

func field(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// checkFraming asserts the transcript's lines: only event: and data: fields, LF line ends, each
// event closed by a blank line.
func checkFraming(t testing.TB, raw []byte, allowEvent bool) {
	t.Helper()
	if !bytes.HasSuffix(raw, []byte("\n\n")) {
		t.Fatalf("transcript does not end with a blank line")
	}
	if bytes.ContainsRune(raw, '\r') {
		t.Fatalf("transcript contains a CR")
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		switch {
		case line == "", strings.HasPrefix(line, "data: "):
		case allowEvent && strings.HasPrefix(line, "event: "):
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
}

// checkChat asserts the chat stream rules and returns what the stream amounts to.
func checkChat(t testing.TB, raw []byte, meta Meta) result {
	t.Helper()
	checkFraming(t, raw, false)
	evs := readEvents(t, raw)
	if n := len(evs); n == 0 || string(evs[n-1].Data) != "[DONE]" {
		t.Fatalf("chat stream does not end with exactly data: [DONE]")
	}
	var r result
	finished, sawUsage, tier := false, false, ""
	toolArgsStarted := map[int64]bool{}
	for i, ev := range evs[:len(evs)-1] {
		if string(ev.Data) == "[DONE]" {
			t.Fatalf("[DONE] before the end")
		}
		if ev.Name != "" {
			t.Fatalf("chat event with a name %q", ev.Name)
		}
		m := obj(t, ev.Data)
		if e, ok := m["error"]; ok {
			if i != len(evs)-2 || len(m) != 1 {
				t.Fatalf("error key outside the final error event: %s", ev.Data)
			}
			em, _ := e.(map[string]any)
			for _, k := range []string{"message", "type", "param", "code"} {
				if _, ok := em[k]; !ok {
					t.Errorf("error event lacks %q: %s", k, ev.Data)
				}
			}
			r.HasError, r.ErrType, r.ErrMsg = true, str(em["type"]), str(em["message"])
			continue
		}
		if str(m["id"]) != meta.ID || str(m["object"]) != "chat.completion.chunk" || num(m["created"]) != meta.Created || str(m["model"]) != meta.Model {
			t.Fatalf("chunk header wrong: %s", ev.Data)
		}
		if fp, ok := m["system_fingerprint"]; !ok || fp != nil || str(m["service_tier"]) == "" {
			t.Fatalf("chunk without system_fingerprint (null) and service_tier: %s", ev.Data)
		}
		tier = str(m["service_tier"]) // the last one counts, as for the SDK accumulators
		u, hasUsage := m["usage"]
		if !meta.IncludeUsage && hasUsage {
			t.Fatalf("usage key without include_usage: %s", ev.Data)
		}
		choices, _ := m["choices"].([]any)
		if u != nil {
			if !finished || len(choices) != 0 || m["choices"] == nil || sawUsage {
				t.Fatalf("usage chunk misplaced or not choices:[]: %s", ev.Data)
			}
			sawUsage = true
			r.Usage = llm.Usage{
				InputTokens:       num(field(m, "usage", "prompt_tokens")),
				OutputTokens:      num(field(m, "usage", "completion_tokens")),
				CachedInputTokens: num(field(m, "usage", "prompt_tokens_details", "cached_tokens")),
				ReasoningTokens:   num(field(m, "usage", "completion_tokens_details", "reasoning_tokens")),
			}
			if num(field(m, "usage", "total_tokens")) != r.Usage.InputTokens+r.Usage.OutputTokens {
				t.Errorf("total_tokens wrong: %s", ev.Data)
			}
			continue
		}
		if meta.IncludeUsage && !hasUsage {
			t.Errorf("chunk without usage:null under include_usage: %s", ev.Data)
		}
		if len(choices) != 1 || finished {
			t.Fatalf("chunk with %d choices (finished %v): %s", len(choices), finished, ev.Data)
		}
		ch := choices[0].(map[string]any)
		if num(ch["index"]) != 0 {
			t.Fatalf("choice index: %s", ev.Data)
		}
		if v, ok := ch["logprobs"]; !ok || v != nil {
			t.Errorf("logprobs not null: %s", ev.Data)
		}
		fr, ok := ch["finish_reason"]
		if !ok {
			t.Fatalf("finish_reason missing: %s", ev.Data)
		}
		delta, _ := ch["delta"].(map[string]any)
		if i == 0 {
			if !reflect.DeepEqual(delta, map[string]any{"role": "assistant", "content": "", "refusal": nil}) {
				t.Fatalf("first chunk delta %v", delta)
			}
			continue
		}
		if fr != nil {
			if len(delta) != 0 {
				t.Errorf("finish chunk with a delta: %s", ev.Data)
			}
			finished = true
			r.Stop = chatStop(str(fr))
			switch str(fr) {
			case "stop", "length", "tool_calls", "content_filter":
			default:
				t.Errorf("finish_reason %q", fr)
			}
			continue
		}
		if c, ok := delta["content"]; ok {
			r.Text += str(c)
		}
		tcs, _ := delta["tool_calls"].([]any)
		for _, x := range tcs {
			tc := x.(map[string]any)
			idx := num(tc["index"])
			fn, _ := tc["function"].(map[string]any)
			if !toolArgsStarted[idx] {
				toolArgsStarted[idx] = true
				if str(tc["type"]) != "function" || str(tc["id"]) == "" || str(fn["name"]) == "" || fn["arguments"] != "" || int(idx) != len(r.Tools) {
					t.Fatalf("first tool fragment: %s", ev.Data)
				}
				r.Tools = append(r.Tools, toolCall{ID: str(tc["id"]), Name: str(fn["name"])})
				continue
			}
			if _, ok := tc["id"]; ok || len(fn) != 1 || len(tc) != 2 {
				t.Errorf("later tool fragment carries more than index and arguments: %s", ev.Data)
			}
			r.Tools[idx].Args += str(fn["arguments"])
		}
	}
	if !r.HasError && !finished {
		t.Fatalf("no finish chunk")
	}
	if !r.HasError && meta.IncludeUsage && !sawUsage {
		t.Fatalf("no usage chunk under include_usage")
	}
	r.Usage.ServiceTier = tier
	return r
}

// checkResponses asserts the Responses stream rules and returns what the stream amounts to.
func checkResponses(t testing.TB, raw []byte, meta Meta) result {
	t.Helper()
	checkFraming(t, raw, true)
	evs := readEvents(t, raw)
	if len(evs) < 3 {
		t.Fatalf("only %d events", len(evs))
	}
	type item struct {
		typ, id     string
		deltas      string
		done        bool
		callID, nam string
	}
	var (
		items    []*item
		r        result
		terminal map[string]any
	)
	for i, ev := range evs {
		m := obj(t, ev.Data)
		typ := str(m["type"])
		if ev.Name != typ {
			t.Fatalf("event name %q, type %q", ev.Name, typ)
		}
		if sn, ok := m["sequence_number"].(float64); !ok || int(sn) != i {
			t.Fatalf("event %d has sequence_number %v", i, m["sequence_number"])
		}
		if terminal != nil {
			t.Fatalf("event after the terminal: %s", ev.Data)
		}
		if i < 2 {
			want := [...]string{"response.created", "response.in_progress"}[i]
			resp, _ := m["response"].(map[string]any)
			if typ != want || str(resp["status"]) != "in_progress" || resp["usage"] != nil ||
				!reflect.DeepEqual(resp["output"], []any{}) || str(resp["id"]) != meta.ID || str(resp["model"]) != meta.Model {
				t.Fatalf("event %d: %s", i, ev.Data)
			}
			continue
		}
		oi := int(num(m["output_index"]))
		cur := func() *item {
			if oi < 0 || oi >= len(items) || items[oi].done {
				t.Fatalf("event for an unknown or finished item: %s", ev.Data)
			}
			if id, ok := m["item_id"]; ok && str(id) != items[oi].id {
				t.Fatalf("item_id mismatch: %s", ev.Data)
			}
			return items[oi]
		}
		switch typ {
		case "response.output_item.added":
			it, _ := m["item"].(map[string]any)
			if oi != len(items) || str(it["status"]) != "in_progress" {
				t.Fatalf("output_item.added: %s", ev.Data)
			}
			for _, prev := range items {
				if !prev.done {
					t.Fatalf("item added while another is open: %s", ev.Data)
				}
			}
			x := &item{typ: str(it["type"]), id: str(it["id"])}
			switch x.typ {
			case "message":
				if !strings.HasPrefix(x.id, "msg_") || !reflect.DeepEqual(it["content"], []any{}) || str(it["role"]) != "assistant" {
					t.Fatalf("message item: %s", ev.Data)
				}
			case "function_call":
				x.callID, x.nam = str(it["call_id"]), str(it["name"])
				if !strings.HasPrefix(x.id, "fc_") || str(it["arguments"]) != "" || x.callID == "" || x.nam == "" {
					t.Fatalf("function_call item: %s", ev.Data)
				}
			default:
				t.Fatalf("item type %q", x.typ)
			}
			items = append(items, x)
		case "response.content_part.added":
			if x := cur(); x.typ != "message" || num(m["content_index"]) != 0 ||
				!reflect.DeepEqual(m["part"], map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}) {
				t.Fatalf("content_part.added: %s", ev.Data)
			}
		case "response.output_text.delta":
			x := cur()
			if x.typ != "message" || num(m["content_index"]) != 0 || !reflect.DeepEqual(m["logprobs"], []any{}) {
				t.Fatalf("output_text.delta: %s", ev.Data)
			}
			x.deltas += str(m["delta"])
		case "response.output_text.done":
			if x := cur(); str(m["text"]) != x.deltas {
				t.Fatalf("output_text.done text %q, deltas %q", m["text"], x.deltas)
			}
		case "response.content_part.done":
			if x := cur(); str(field(m, "part", "text")) != x.deltas {
				t.Fatalf("content_part.done: %s", ev.Data)
			}
		case "response.function_call_arguments.delta":
			x := cur()
			if x.typ != "function_call" {
				t.Fatalf("arguments delta for a %s", x.typ)
			}
			x.deltas += str(m["delta"])
		case "response.function_call_arguments.done":
			if x := cur(); str(m["arguments"]) != x.deltas || str(m["name"]) != x.nam {
				t.Fatalf("function_call_arguments.done: %s", ev.Data)
			}
		case "response.output_item.done":
			x := cur()
			it, _ := m["item"].(map[string]any)
			if st := str(it["status"]); st != "completed" && st != "incomplete" {
				t.Fatalf("output_item.done status: %s", ev.Data)
			}
			if x.typ == "function_call" && str(it["arguments"]) != x.deltas {
				t.Fatalf("output_item.done arguments: %s", ev.Data)
			}
			if x.typ == "message" && str(field(it["content"].([]any)[0].(map[string]any), "text")) != x.deltas {
				t.Fatalf("output_item.done text: %s", ev.Data)
			}
			x.done = true
		case "error":
			if _, ok := m["error"]; ok {
				t.Fatalf("nested error event: %s", ev.Data)
			}
			if v, ok := m["param"]; !ok || v != nil || str(m["code"]) == "" || str(m["message"]) == "" {
				t.Fatalf("error event: %s", ev.Data)
			}
			if i != len(evs)-2 {
				t.Fatalf("error event not followed by the terminal only")
			}
			r.HasError, r.ErrType, r.ErrMsg = true, str(m["code"]), str(m["message"])
		case "response.completed", "response.incomplete", "response.failed":
			terminal = m
		default:
			t.Fatalf("unexpected event %q", typ)
		}
	}
	if terminal == nil {
		t.Fatalf("no terminal event")
	}
	resp, _ := terminal["response"].(map[string]any)
	typ := str(terminal["type"])
	status := strings.TrimPrefix(typ, "response.")
	if str(resp["status"]) != status || str(resp["id"]) != meta.ID || str(resp["object"]) != "response" {
		t.Fatalf("terminal response: %v", resp)
	}
	if (typ == "response.failed") != r.HasError {
		t.Fatalf("%s with error event %v", typ, r.HasError)
	}
	if r.HasError {
		if str(field(resp, "error", "message")) != r.ErrMsg || str(field(resp, "error", "code")) != r.ErrType {
			t.Fatalf("response.failed error: %v", resp["error"])
		}
		for _, x := range items {
			if x.typ == "message" {
				r.Text += x.deltas
			}
		}
		return r
	}
	for _, x := range items {
		if !x.done {
			t.Fatalf("item %s never done", x.id)
		}
	}
	out, _ := resp["output"].([]any)
	if len(out) != len(items) {
		t.Fatalf("final output has %d items, stream had %d", len(out), len(items))
	}
	for i, o := range out {
		it := o.(map[string]any)
		x := items[i]
		if str(it["id"]) != x.id || str(it["type"]) != x.typ {
			t.Fatalf("final output item %d: %v", i, it)
		}
		switch x.typ {
		case "message":
			text := str(field(it["content"].([]any)[0].(map[string]any), "text"))
			if text != x.deltas {
				t.Fatalf("final output text %q, deltas %q", text, x.deltas)
			}
			r.Text += text
		case "function_call":
			if str(it["arguments"]) != x.deltas {
				t.Fatalf("final output arguments %q, deltas %q", it["arguments"], x.deltas)
			}
			r.Tools = append(r.Tools, toolCall{ID: str(it["call_id"]), Name: str(it["name"]), Args: x.deltas})
		}
	}
	u, _ := resp["usage"].(map[string]any)
	for _, k := range []string{"input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details", "total_tokens"} {
		if _, ok := u[k]; !ok {
			t.Fatalf("final usage lacks %s: %v", k, u)
		}
	}
	r.Usage = llm.Usage{
		InputTokens:       num(u["input_tokens"]),
		OutputTokens:      num(u["output_tokens"]),
		CachedInputTokens: num(field(u, "input_tokens_details", "cached_tokens")),
		ReasoningTokens:   num(field(u, "output_tokens_details", "reasoning_tokens")),
		ServiceTier:       str(resp["service_tier"]),
	}
	switch {
	case status == "incomplete":
		reason := str(field(resp, "incomplete_details", "reason"))
		if reason != "max_output_tokens" && reason != "content_filter" {
			t.Fatalf("incomplete_details %v", resp["incomplete_details"])
		}
		r.Stop = responsesIncompleteStop(reason)
	case len(r.Tools) > 0:
		r.Stop = llm.StopToolCalls
	default:
		r.Stop = llm.StopEnd
	}
	return r
}

// checkMessages asserts the Messages stream rules and returns what the stream amounts to.
func checkMessages(t testing.TB, raw []byte, meta Meta) result {
	t.Helper()
	checkFraming(t, raw, true)
	evs := readEvents(t, raw)
	var (
		r       result
		blocks  []string // block types
		stopped []bool
		text    = map[int]bool{}
		tools   = map[int]int{} // block index → index in r.Tools
		sawStop bool
		msgDone bool
		counts  convert.AnthropicCounts
	)
	for i, ev := range evs {
		m := obj(t, ev.Data)
		typ := str(m["type"])
		if ev.Name != typ {
			t.Fatalf("event name %q, type %q", ev.Name, typ)
		}
		if msgDone {
			t.Fatalf("event after message_stop: %s", ev.Data)
		}
		if i == 0 && typ != "message_start" && typ != "error" {
			t.Fatalf("first event is %s", typ)
		}
		idx := int(num(m["index"]))
		switch typ {
		case "message_start":
			msg, _ := m["message"].(map[string]any)
			if i != 0 || str(msg["id"]) != meta.ID || str(msg["model"]) != meta.Model || str(msg["type"]) != "message" ||
				str(msg["role"]) != "assistant" || !reflect.DeepEqual(msg["content"], []any{}) || msg["stop_reason"] != nil {
				t.Fatalf("message_start: %s", ev.Data)
			}
			u, _ := msg["usage"].(map[string]any)
			for _, k := range []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation"} {
				if _, ok := u[k]; !ok {
					t.Fatalf("message_start usage lacks %s", k)
				}
			}
			messagesUsage(&counts, u)
			counts.Output = 0 // a placeholder
			r.Usage = counts.Usage()
		case "content_block_start":
			if idx != len(blocks) || sawStop {
				t.Fatalf("content_block_start index %d, want %d", idx, len(blocks))
			}
			for j, s := range stopped {
				if !s {
					t.Fatalf("block %d still open when %d starts", j, idx)
				}
			}
			cb, _ := m["content_block"].(map[string]any)
			bt := str(cb["type"])
			switch bt {
			case "text":
				if cb["text"] != "" {
					t.Fatalf("text block start: %s", ev.Data)
				}
				text[idx] = true
			case "tool_use":
				if !reflect.DeepEqual(cb["input"], map[string]any{}) || str(cb["id"]) == "" || str(cb["name"]) == "" {
					t.Fatalf("tool_use block start: %s", ev.Data)
				}
				tools[idx] = len(r.Tools)
				r.Tools = append(r.Tools, toolCall{ID: str(cb["id"]), Name: str(cb["name"])})
			default:
				t.Fatalf("block type %q", bt)
			}
			blocks = append(blocks, bt)
			stopped = append(stopped, false)
		case "content_block_delta":
			if idx >= len(blocks) || stopped[idx] {
				t.Fatalf("delta for block %d (have %d)", idx, len(blocks))
			}
			d, _ := m["delta"].(map[string]any)
			switch dt := str(d["type"]); {
			case dt == "text_delta" && text[idx]:
				r.Text += str(d["text"])
			case dt == "input_json_delta" && blocks[idx] == "tool_use":
				r.Tools[tools[idx]].Args += str(d["partial_json"])
			default:
				t.Fatalf("delta %s for a %s block", dt, blocks[idx])
			}
		case "content_block_stop":
			if idx >= len(blocks) || stopped[idx] {
				t.Fatalf("stop for block %d", idx)
			}
			stopped[idx] = true
		case "message_delta":
			if sawStop {
				t.Fatalf("second message_delta")
			}
			for j, s := range stopped {
				if !s {
					t.Fatalf("block %d open at message_delta", j)
				}
			}
			sawStop = true
			if d, _ := m["delta"].(map[string]any); d == nil || !hasKey(d, "stop_sequence") {
				t.Fatalf("message_delta lacks stop_sequence")
			}
			r.Stop = messagesStop(str(field(m, "delta", "stop_reason")))
			u, _ := m["usage"].(map[string]any)
			if _, ok := u["output_tokens"]; !ok {
				t.Fatalf("message_delta usage lacks output_tokens")
			}
			messagesUsage(&counts, u)
			r.Usage = counts.Usage()
		case "message_stop":
			if !sawStop || i != len(evs)-1 {
				t.Fatalf("message_stop misplaced")
			}
			msgDone = true
		case "error":
			if i != len(evs)-1 || len(m) != 2 {
				t.Fatalf("error event misplaced or malformed: %s", ev.Data)
			}
			r.HasError, r.ErrType, r.ErrMsg = true, str(field(m, "error", "type")), str(field(m, "error", "message"))
			if !anthropicErrorTypes[r.ErrType] {
				t.Errorf("error type %q is not a Messages error type", r.ErrType)
			}
		default:
			t.Fatalf("unexpected event %q", typ)
		}
	}
	if !r.HasError && !msgDone {
		t.Fatalf("no message_stop")
	}
	return r
}

// checkClient runs the format checks of the client format.
func checkClient(t testing.TB, client llm.Format, raw []byte, meta Meta) result {
	t.Helper()
	switch client {
	case llm.FormatChat:
		return checkChat(t, raw, meta)
	case llm.FormatResponses:
		return checkResponses(t, raw, meta)
	default:
		return checkMessages(t, raw, meta)
	}
}

func goldenPath(up, scenario, client string) string {
	return filepath.Join("testdata", "golden", fmt.Sprintf("%s_%s.to_%s.sse", up, scenario, client))
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// The wire stop reasons as the tests read them back, written out independently of the
// mappings under test.
func chatStop(s string) llm.StopReason {
	return map[string]llm.StopReason{"stop": llm.StopEnd, "length": llm.StopLength,
		"tool_calls": llm.StopToolCalls, "content_filter": llm.StopContentFilter}[s]
}

func messagesStop(s string) llm.StopReason {
	return map[string]llm.StopReason{"end_turn": llm.StopEnd, "max_tokens": llm.StopLength,
		"tool_use": llm.StopToolCalls, "stop_sequence": llm.StopSequence, "refusal": llm.StopContentFilter}[s]
}

func responsesIncompleteStop(reason string) llm.StopReason {
	return map[string]llm.StopReason{"max_output_tokens": llm.StopLength, "content_filter": llm.StopContentFilter}[reason]
}
