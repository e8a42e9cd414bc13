package streamconv

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	assestream "github.com/anthropics/anthropic-sdk-go/packages/ssestream"
	"github.com/openai/openai-go/v3"
	oassestream "github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
)

// sseResponse wraps a transcript as the body of a 200 event-stream response, as the SDKs get it.
func sseResponse(transcript []byte) *http.Response {
	req, err := http.NewRequest(http.MethodPost, "http://tollgate.test/v1/stream", nil)
	if err != nil {
		panic(err)
	}
	return &http.Response{
		Request:    req,
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": []string{"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(transcript)),
	}
}

// sdkChat reads a chat transcript with openai-go's stream decoder and chunk accumulator.
func sdkChat(t testing.TB, transcript []byte) result {
	t.Helper()
	stream := oassestream.NewStream[openai.ChatCompletionChunk](oassestream.NewDecoder(sseResponse(transcript)), nil)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("openai-go accumulator rejected chunk %s", stream.Current().RawJSON())
		}
	}
	var r result
	if err := stream.Err(); err != nil {
		var se *oassestream.StreamError
		if !errors.As(err, &se) {
			t.Fatalf("openai-go stream error %T: %v", err, err)
		}
		var env struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(se.Event.Data, &env); err != nil {
			t.Fatalf("error event: %v", err)
		}
		r.HasError, r.ErrType, r.ErrMsg = true, env.Error.Type, env.Error.Message
	}
	if len(acc.Choices) == 0 {
		if !r.HasError {
			t.Fatalf("openai-go accumulated no choice")
		}
		return r
	}
	msg := acc.Choices[0].Message
	r.Text = msg.Content
	for _, tc := range msg.ToolCalls {
		r.Tools = append(r.Tools, toolCall{ID: tc.ID, Name: tc.Function.Name, Args: tc.Function.Arguments})
	}
	if fr := acc.Choices[0].FinishReason; fr != "" {
		r.Stop = chatStop(fr)
	}
	r.Usage = llm.Usage{
		InputTokens:       acc.Usage.PromptTokens,
		OutputTokens:      acc.Usage.CompletionTokens,
		CachedInputTokens: acc.Usage.PromptTokensDetails.CachedTokens,
		ReasoningTokens:   acc.Usage.CompletionTokensDetails.ReasoningTokens,
		ServiceTier:       string(acc.ServiceTier),
	}
	if acc.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
		t.Errorf("openai-go total_tokens %d", acc.Usage.TotalTokens)
	}
	return r
}

// sdkResponses reads a Responses transcript with openai-go's stream decoder into its typed
// events, and takes the answer from the terminal response, as the SDK helpers do.
func sdkResponses(t testing.TB, transcript []byte) result {
	t.Helper()
	stream := oassestream.NewStream[responses.ResponseStreamEventUnion](oassestream.NewDecoder(sseResponse(transcript)), nil)
	var (
		r      result
		deltas strings.Builder
		final  *responses.Response
		seq    int64
	)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != seq {
			t.Fatalf("sequence_number %d, want %d", ev.SequenceNumber, seq)
		}
		seq++
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.AsResponseOutputTextDelta().Delta)
		case "error":
			e := ev.AsError()
			r.HasError, r.ErrType, r.ErrMsg = true, e.Code, e.Message
		case "response.completed":
			resp := ev.AsResponseCompleted().Response
			final = &resp
		case "response.incomplete":
			resp := ev.AsResponseIncomplete().Response
			final = &resp
		case "response.failed":
			resp := ev.AsResponseFailed().Response
			if resp.Status != "failed" || resp.Error.Message != r.ErrMsg {
				t.Fatalf("response.failed: %s", resp.RawJSON())
			}
			final = &resp
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("openai-go Responses stream: %v", err)
	}
	if final == nil {
		t.Fatalf("no terminal response")
	}
	if r.HasError {
		r.Text = deltas.String()
		return r
	}
	r.Text = final.OutputText()
	if r.Text != deltas.String() {
		t.Errorf("final output text %q, deltas %q", r.Text, deltas.String())
	}
	for _, it := range final.Output {
		if it.Type == "function_call" {
			fc := it.AsFunctionCall()
			r.Tools = append(r.Tools, toolCall{ID: fc.CallID, Name: fc.Name, Args: fc.Arguments})
		}
	}
	switch {
	case final.Status == "incomplete":
		r.Stop = responsesIncompleteStop(string(final.IncompleteDetails.Reason))
	case len(r.Tools) > 0:
		r.Stop = llm.StopToolCalls
	default:
		r.Stop = llm.StopEnd
	}
	r.Usage = llm.Usage{
		InputTokens:       final.Usage.InputTokens,
		OutputTokens:      final.Usage.OutputTokens,
		CachedInputTokens: final.Usage.InputTokensDetails.CachedTokens,
		ReasoningTokens:   final.Usage.OutputTokensDetails.ReasoningTokens,
		ServiceTier:       string(final.ServiceTier),
	}
	return r
}

// sdkMessages reads a Messages transcript with anthropic-sdk-go's stream decoder and
// Message.Accumulate.
func sdkMessages(t testing.TB, transcript []byte) result {
	t.Helper()
	stream := assestream.NewStream[anthropic.MessageStreamEventUnion](assestream.NewDecoder(sseResponse(transcript)), nil)
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatalf("anthropic-sdk-go Accumulate: %v", err)
		}
	}
	var r result
	if err := stream.Err(); err != nil {
		var ae *anthropic.Error
		if !errors.As(err, &ae) {
			t.Fatalf("anthropic-sdk-go stream error %T: %v", err, err)
		}
		var env struct {
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(ae.RawJSON()), &env); err != nil {
			t.Fatalf("error event: %v", err)
		}
		if string(ae.Type()) != env.Error.Type {
			t.Errorf("SDK error type %q, envelope %q", ae.Type(), env.Error.Type)
		}
		r.HasError, r.ErrType, r.ErrMsg = true, env.Error.Type, env.Error.Message
	}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			r.Text += b.Text
		case "tool_use":
			r.Tools = append(r.Tools, toolCall{ID: b.ID, Name: b.Name, Args: string(b.Input)})
		}
	}
	if msg.StopReason != "" {
		r.Stop = messagesStop(string(msg.StopReason))
	}
	u := msg.Usage
	r.Usage = convert.AnthropicCounts{Input: u.InputTokens, CacheRead: u.CacheReadInputTokens, CacheWrite: u.CacheCreationInputTokens,
		CacheWrite5m: u.CacheCreation.Ephemeral5mInputTokens, CacheWrite1h: u.CacheCreation.Ephemeral1hInputTokens,
		Output: u.OutputTokens, Thinking: u.OutputTokensDetails.ThinkingTokens, ServiceTier: string(u.ServiceTier)}.Usage()
	return r
}

// sdkRead reads a transcript with the official SDK of the client format.
func sdkRead(t testing.TB, client llm.Format, transcript []byte) result {
	t.Helper()
	switch client {
	case llm.FormatChat:
		return sdkChat(t, transcript)
	case llm.FormatResponses:
		return sdkResponses(t, transcript)
	default:
		return sdkMessages(t, transcript)
	}
}

// TestSDKsReadGoldens feeds every golden client transcript to the official SDK stream decoders
// and accumulators and checks that they get what the upstream sent.
func TestSDKsReadGoldens(t *testing.T) {
	for _, up := range formats {
		for _, sc := range scenarios {
			name := up.short + "_" + sc
			for _, client := range formats {
				t.Run(name+".to_"+client.short, func(t *testing.T) {
					meta := metaFor(client.f)
					transcript := readFile(t, goldenPath(up.short, sc, client.short))
					got := sdkRead(t, client.f, transcript)
					compareResult(t, "SDK", client.f, meta, got, expected[name])
				})
			}
		}
	}
}
