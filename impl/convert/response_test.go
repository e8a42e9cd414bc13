package convert

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// metaFor is the client-facing id, time and model used in the response goldens.
func metaFor(f llm.Format) Meta {
	id := map[llm.Format]string{
		llm.FormatChat:      "chatcmpl-gw0001",
		llm.FormatResponses: "resp_gw0001",
		llm.FormatMessages:  "msg_gw0001",
	}[f]
	return Meta{ID: id, Created: 1761600000, Model: "service-flint"}
}

// wantResponses are the neutral answers the upstream fixtures decode to.
var wantResponses = map[string]llm.Response{
	"chat-text": {ID: "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", Model: "gpt-4.1-mini-2025-04-14",
		Text: "Hello! How can I help you today?", Stop: llm.StopEnd, Usage: llm.Usage{InputTokens: 19, OutputTokens: 10, ServiceTier: "default"}},
	"chat-tool": {ID: "chatcmpl-CA1x2y3z", Model: "gpt-4.1-mini-2025-04-14", Stop: llm.StopToolCalls,
		ToolCalls: []llm.ToolCall{{ID: "call_Xy12AbC", Name: "get_weather", Arguments: `{"city":"Paris","unit":"c"}`}},
		Usage:     llm.Usage{InputTokens: 82, OutputTokens: 18, ServiceTier: "default"}},
	"chat-length": {ID: "chatcmpl-CB9q", Model: "gpt-5-mini-2025-08-07", Text: "Once upon a time, in a land far", Stop: llm.StopLength,
		Usage: llm.Usage{InputTokens: 1200, OutputTokens: 64, CachedInputTokens: 1024, ReasoningTokens: 48, ServiceTier: "default"}},
	"responses-text": {ID: "resp_68ff1a2b3c", Model: "gpt-4.1-mini-2025-04-14",
		Text: "Hello! How can I help you today?", Stop: llm.StopEnd, Usage: llm.Usage{InputTokens: 19, OutputTokens: 10}},
	"responses-tool": {ID: "resp_68ff2000", Model: "gpt-5-mini-2025-08-07", Stop: llm.StopToolCalls,
		ToolCalls: []llm.ToolCall{{ID: "call_Xy12AbC", Name: "get_weather", Arguments: `{"city":"Paris","unit":"c"}`}},
		Usage:     llm.Usage{InputTokens: 82, OutputTokens: 18},
		Dropped:   []string{"output[].reasoning"}},
	"responses-length": {ID: "resp_68ff3000", Model: "gpt-5-mini-2025-08-07", Text: "Once upon a time, in a land far", Stop: llm.StopLength,
		Usage:   llm.Usage{InputTokens: 1200, OutputTokens: 64, CachedInputTokens: 1024, ReasoningTokens: 48},
		Dropped: []string{"output[].reasoning"}},
	"messages-text": {ID: "msg_01XFDUDYJgAACzvnptvVoYEL", Model: "claude-sonnet-4-5-20250929",
		Text: "Hello! How can I help you today?", Stop: llm.StopEnd, Usage: llm.Usage{InputTokens: 19, OutputTokens: 10, ServiceTier: "standard"}},
	"messages-tool": {ID: "msg_01Aq9w938a90dw8q", Model: "claude-sonnet-4-5-20250929", Text: "Let me check the weather.", Stop: llm.StopToolCalls,
		ToolCalls: []llm.ToolCall{{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: `{"city":"Paris","unit":"c"}`}},
		Usage:     llm.Usage{InputTokens: 82, OutputTokens: 18}},
	"messages-length": {ID: "msg_01Bz7Lq", Model: "claude-sonnet-4-5-20250929", Text: "Once upon a time, in a land far", Stop: llm.StopLength,
		// 156 uncached + 20 written to the cache (no breakdown: five-minute writes) + 1024 read.
		Usage:   llm.Usage{InputTokens: 1200, OutputTokens: 64, CachedInputTokens: 1024, CacheWrite5mTokens: 20},
		Dropped: []string{"content[].thinking"}},
}

// TestResponsesGolden decodes each upstream answer and encodes it for each client format,
// checking the bytes against golden files and the meaning through the official SDK types.
func TestResponsesGolden(t *testing.T) {
	for _, up := range formats {
		for _, kase := range []string{"text", "tool", "length"} {
			name := up.name + "-" + kase
			resp, err := DecodeResponse(up.f, fixture(t, "responses", name+".json"))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if want := wantResponses[name]; !reflect.DeepEqual(*resp, want) {
				t.Errorf("%s decoded to\n%+v\nwant\n%+v", name, *resp, want)
			}
			for _, client := range formats {
				t.Run(name+"-to-"+client.name, func(t *testing.T) {
					out, err := EncodeResponse(client.f, resp, metaFor(client.f))
					if err != nil {
						t.Fatal(err)
					}
					if !json.Valid(out) {
						t.Fatalf("invalid JSON: %s", out)
					}
					golden(t, "response/"+name+"-to-"+client.name+".json", pretty(t, json.RawMessage(out)))
					checkWithSDK(t, client.f, out, resp)
				})
			}
		}
	}
}

// checkWithSDK unmarshals out into the official SDK type of format f and checks its key fields
// against resp.
func checkWithSDK(t *testing.T, f llm.Format, out []byte, resp *llm.Response) {
	t.Helper()
	u := resp.Usage
	switch f {
	case llm.FormatChat:
		var cc openai.ChatCompletion
		if err := json.Unmarshal(out, &cc); err != nil {
			t.Fatal(err)
		}
		if cc.ID != "chatcmpl-gw0001" || cc.Created != 1761600000 || cc.Model != "service-flint" || cc.Object != "chat.completion" {
			t.Errorf("envelope: %s %d %s %s", cc.ID, cc.Created, cc.Model, cc.Object)
		}
		if len(cc.Choices) != 1 {
			t.Fatalf("choices: %d", len(cc.Choices))
		}
		c := cc.Choices[0]
		if c.Message.Content != resp.Text || c.Message.Role != "assistant" {
			t.Errorf("content %q", c.Message.Content)
		}
		if want := StopReasonFor(llm.FormatChat, resp.Stop); c.FinishReason != want {
			t.Errorf("finish_reason %q, want %q", c.FinishReason, want)
		}
		if len(c.Message.ToolCalls) != len(resp.ToolCalls) {
			t.Fatalf("tool calls: %d", len(c.Message.ToolCalls))
		}
		for i, tc := range c.Message.ToolCalls {
			fn := tc.AsFunction()
			if fn.ID != resp.ToolCalls[i].ID || fn.Function.Name != resp.ToolCalls[i].Name || fn.Function.Arguments != resp.ToolCalls[i].Arguments {
				t.Errorf("tool call %d: %+v", i, fn)
			}
		}
		if cc.Usage.PromptTokens != u.InputTokens || cc.Usage.CompletionTokens != u.OutputTokens ||
			cc.Usage.TotalTokens != u.InputTokens+u.OutputTokens ||
			cc.Usage.PromptTokensDetails.CachedTokens != u.CachedInputTokens ||
			cc.Usage.CompletionTokensDetails.ReasoningTokens != u.ReasoningTokens {
			t.Errorf("usage %+v", cc.Usage)
		}
		if !cc.Usage.JSON.PromptTokensDetails.Valid() || !cc.Usage.JSON.CompletionTokensDetails.Valid() {
			t.Error("usage details missing")
		}
		if want := OpenAIServiceTier(u.ServiceTier); string(cc.ServiceTier) != want {
			t.Errorf("service_tier %q, want %q", cc.ServiceTier, want)
		}
	case llm.FormatResponses:
		var r responses.Response
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		if r.ID != "resp_gw0001" || r.CreatedAt != 1761600000 || r.Model != "service-flint" || r.Object != "response" {
			t.Errorf("envelope: %s %v %s %s", r.ID, r.CreatedAt, r.Model, r.Object)
		}
		if r.OutputText() != resp.Text {
			t.Errorf("output text %q", r.OutputText())
		}
		wantStatus := StopReasonFor(llm.FormatResponses, resp.Stop)
		if string(r.Status) != wantStatus {
			t.Errorf("status %q, want %q", r.Status, wantStatus)
		}
		if reason := ResponsesIncompleteReason(resp.Stop); string(r.IncompleteDetails.Reason) != reason {
			t.Errorf("incomplete reason %q, want %q", r.IncompleteDetails.Reason, reason)
		}
		var calls []responses.ResponseFunctionToolCall
		for _, item := range r.Output {
			switch item.Type {
			case "function_call":
				calls = append(calls, item.AsFunctionCall())
			case "message":
				m := item.AsMessage()
				// The message of an incomplete answer is incomplete, as the answer is.
				if m.Role != "assistant" || string(m.Status) != string(r.Status) || len(m.Content) != 1 || m.Content[0].Type != "output_text" {
					t.Errorf("message item %+v", m)
				}
			default:
				t.Errorf("output item of type %q", item.Type)
			}
		}
		if len(calls) != len(resp.ToolCalls) {
			t.Fatalf("function calls: %d", len(calls))
		}
		for i, c := range calls {
			want := resp.ToolCalls[i]
			if c.CallID != want.ID || c.Name != want.Name || c.Arguments != want.Arguments || c.Status != "completed" || c.ID == "" {
				t.Errorf("function call %d: %+v", i, c)
			}
		}
		if r.Usage.InputTokens != u.InputTokens || r.Usage.OutputTokens != u.OutputTokens ||
			r.Usage.TotalTokens != u.InputTokens+u.OutputTokens ||
			r.Usage.InputTokensDetails.CachedTokens != u.CachedInputTokens ||
			r.Usage.OutputTokensDetails.ReasoningTokens != u.ReasoningTokens {
			t.Errorf("usage %+v", r.Usage)
		}
		if want := OpenAIServiceTier(u.ServiceTier); string(r.ServiceTier) != want {
			t.Errorf("service_tier %q, want %q", r.ServiceTier, want)
		}
		for name, field := range map[string]bool{
			"error": r.JSON.Error.Raw() == "null", "instructions": r.JSON.Instructions.Raw() != "",
			"metadata": r.JSON.Metadata.Valid(), "parallel_tool_calls": r.JSON.ParallelToolCalls.Valid(),
			"temperature": r.JSON.Temperature.Valid(), "top_p": r.JSON.TopP.Valid(), "tools": r.JSON.Tools.Valid(),
			"tool_choice": r.JSON.ToolChoice.Valid(), "text": r.JSON.Text.Valid(), "truncation": r.JSON.Truncation.Valid(),
			"input_tokens_details":  r.Usage.JSON.InputTokensDetails.Valid(),
			"output_tokens_details": r.Usage.JSON.OutputTokensDetails.Valid(),
		} {
			if !field {
				t.Errorf("field %s missing", name)
			}
		}
	case llm.FormatMessages:
		var m anthropic.Message
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		if m.ID != "msg_gw0001" || m.Model != "service-flint" || m.Type != "message" || m.Role != "assistant" {
			t.Errorf("envelope: %s %s %s %s", m.ID, m.Model, m.Type, m.Role)
		}
		var text string
		var calls []anthropic.ToolUseBlock
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				text += b.AsText().Text
			case "tool_use":
				calls = append(calls, b.AsToolUse())
			default:
				t.Errorf("block of type %q", b.Type)
			}
		}
		if text != resp.Text {
			t.Errorf("text %q", text)
		}
		if want := StopReasonFor(llm.FormatMessages, resp.Stop); string(m.StopReason) != want {
			t.Errorf("stop_reason %q, want %q", m.StopReason, want)
		}
		if len(calls) != len(resp.ToolCalls) {
			t.Fatalf("tool_use blocks: %d", len(calls))
		}
		for i, c := range calls {
			want := resp.ToolCalls[i]
			if c.ID != want.ID || c.Name != want.Name || !sameJSON(t, c.Input, []byte(want.Arguments)) {
				t.Errorf("tool_use %d: %+v", i, c)
			}
		}
		mu := m.Usage
		if mu.InputTokens+mu.CacheReadInputTokens+mu.CacheCreationInputTokens != u.InputTokens || mu.OutputTokens != u.OutputTokens ||
			mu.CacheReadInputTokens != u.CachedInputTokens || mu.CacheCreationInputTokens != u.CacheWriteTokens() ||
			mu.CacheCreation.Ephemeral5mInputTokens != u.CacheWrite5mTokens || mu.CacheCreation.Ephemeral1hInputTokens != u.CacheWrite1hTokens ||
			mu.OutputTokensDetails.ThinkingTokens != u.ReasoningTokens || !mu.JSON.CacheCreation.Valid() {
			t.Errorf("usage %+v", mu)
		}
		if want := ServiceTierFor(llm.FormatMessages, u.ServiceTier); string(mu.ServiceTier) != want {
			t.Errorf("service_tier %q, want %q", mu.ServiceTier, want)
		}
		if !m.JSON.StopSequence.Valid() && m.JSON.StopSequence.Raw() != "null" {
			t.Error("stop_sequence missing")
		}
	}
}

// TestResponseEdgeCases covers stop sequences, refusals, echo fields and bad arguments.
func TestResponseEdgeCases(t *testing.T) {
	// A stop sequence from a Messages upstream.
	resp, err := DecodeResponse(llm.FormatMessages, []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"a"}],"stop_reason":"stop_sequence","stop_sequence":"END","usage":{"input_tokens":1,"output_tokens":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Stop != llm.StopSequence || resp.StopSequence != "END" {
		t.Fatalf("%+v", resp)
	}
	out, _ := EncodeResponse(llm.FormatMessages, resp, metaFor(llm.FormatMessages))
	var m anthropic.Message
	_ = json.Unmarshal(out, &m)
	if m.StopReason != "stop_sequence" || m.StopSequence != "END" {
		t.Errorf("messages: %s", out)
	}
	out, _ = EncodeResponse(llm.FormatChat, resp, metaFor(llm.FormatChat))
	var cc openai.ChatCompletion
	_ = json.Unmarshal(out, &cc)
	if cc.Choices[0].FinishReason != "stop" {
		t.Errorf("chat: %s", out)
	}

	// Tool calls with a plain stop are a call for tools.
	resp, err = DecodeResponse(llm.FormatChat, []byte(`{"id":"c","object":"chat.completion","model":"g","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}]}`))
	if err != nil || resp.Stop != llm.StopToolCalls {
		t.Errorf("%+v %v", resp, err)
	}

	// A chat refusal is a refusal, kept apart from the text: a Messages client reads its words
	// as text with stop_reason refusal.
	resp, err = DecodeResponse(llm.FormatChat, []byte(`{"id":"c","object":"chat.completion","model":"g","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Stop != llm.StopRefusal || resp.Text != "" || resp.Refusal != "I can't help with that." {
		t.Errorf("%+v", resp)
	}
	out, _ = EncodeResponse(llm.FormatMessages, resp, metaFor(llm.FormatMessages))
	_ = json.Unmarshal(out, &m)
	if m.StopReason != "refusal" || len(m.Content) != 1 || m.Content[0].Text != "I can't help with that." {
		t.Errorf("messages: %s", out)
	}

	// Arguments that are not an object: left out when cut by the length limit, else a 502.
	bad := &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c", Name: "f", Arguments: `{"a":`}}, Stop: llm.StopLength}
	out, err = EncodeResponse(llm.FormatMessages, bad, metaFor(llm.FormatMessages))
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(out, &m)
	if len(m.Content) != 0 || m.StopReason != "max_tokens" {
		t.Errorf("%s", out)
	}
	bad.Stop = llm.StopToolCalls
	if _, err := EncodeResponse(llm.FormatMessages, bad, metaFor(llm.FormatMessages)); apierror.As(err).Kind != apierror.KindUpstream {
		t.Errorf("want a 502, got %v", err)
	}

	// The Responses echo fields follow the request.
	req := mustDecode(t, llm.FormatResponses, fixture(t, "requests", "responses.json"))
	meta := metaFor(llm.FormatResponses)
	meta.Request = req
	out, err = EncodeResponse(llm.FormatResponses, &llm.Response{Text: "{}", Stop: llm.StopEnd}, meta)
	if err != nil {
		t.Fatal(err)
	}
	var r responses.Response
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if r.Instructions.OfString != req.System || len(r.Tools) != 1 || r.Tools[0].Name != "get_weather" ||
		r.ToolChoice.Name != "get_weather" || r.Temperature != 0.7 || r.TopP != 1 || r.ParallelToolCalls ||
		r.Text.Format.Type != "json_schema" || r.Text.Format.Name != "answer" || r.MaxOutputTokens != 512 {
		t.Errorf("echo: %s", out)
	}

	// The in-progress object of a Responses stream.
	var ip responses.Response
	if err := json.Unmarshal(ResponsesInProgress(meta), &ip); err != nil {
		t.Fatal(err)
	}
	if ip.Status != "in_progress" || len(ip.Output) != 0 || ip.JSON.Usage.Valid() || ip.ID != "resp_gw0001" {
		t.Errorf("in progress: %s", ResponsesInProgress(meta))
	}
}

// TestDecodeResponseErrors checks that unusable upstream answers are 502s.
func TestDecodeResponseErrors(t *testing.T) {
	cases := []struct {
		f    llm.Format
		body string
	}{
		{llm.FormatChat, `not json`},
		{llm.FormatChat, `{"id":"x","choices":[]}`},
		{llm.FormatResponses, `{"id":"r"}`},
		{llm.FormatResponses, `{"id":"r","status":"failed","error":{"code":"server_error","message":"boom"}}`},
		{llm.FormatMessages, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
	}
	for _, c := range cases {
		_, err := DecodeResponse(c.f, []byte(c.body))
		if apierror.As(err).Kind != apierror.KindUpstream {
			t.Errorf("%s %s: %v", c.f, c.body, err)
		}
	}
}

// TestStopReasons checks the mappings both ways.
func TestStopReasons(t *testing.T) {
	all := []llm.StopReason{llm.StopEnd, llm.StopLength, llm.StopToolCalls, llm.StopSequence, llm.StopContentFilter}
	want := map[llm.Format][]string{
		llm.FormatChat:      {"stop", "length", "tool_calls", "stop", "content_filter"},
		llm.FormatResponses: {"completed", "incomplete", "completed", "completed", "incomplete"},
		llm.FormatMessages:  {"end_turn", "max_tokens", "tool_use", "stop_sequence", "refusal"},
	}
	for f, values := range want {
		for i, r := range all {
			if got := StopReasonFor(f, r); got != values[i] {
				t.Errorf("StopReasonFor(%s, %s) = %q, want %q", f, r, got, values[i])
			}
		}
	}
	// Every Messages value and every chat value but stop_sequence come back.
	for _, r := range all {
		if back := StopReasonFrom(llm.FormatMessages, StopReasonFor(llm.FormatMessages, r)); back != r {
			t.Errorf("messages %s came back as %s", r, back)
		}
		if r != llm.StopSequence {
			if back := StopReasonFrom(llm.FormatChat, StopReasonFor(llm.FormatChat, r)); back != r {
				t.Errorf("chat %s came back as %s", r, back)
			}
		}
		status, reason := StopReasonFor(llm.FormatResponses, r), ResponsesIncompleteReason(r)
		back := ResponsesStopReason(status, reason, r == llm.StopToolCalls)
		if r == llm.StopSequence {
			r = llm.StopEnd
		}
		if back != r {
			t.Errorf("responses %s came back as %s", r, back)
		}
	}
	for in, out := range map[string]llm.StopReason{"pause_turn": llm.StopEnd, "model_context_window_exceeded": llm.StopLength, "": llm.StopEnd} {
		if got := StopReasonFrom(llm.FormatMessages, in); got != out {
			t.Errorf("messages %q -> %s", in, got)
		}
	}
	if StopReasonFrom(llm.FormatChat, "function_call") != llm.StopToolCalls {
		t.Error("function_call")
	}
}
