package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// TestSDKRefusal: [[sim refuse=true]] answers with the model's refusal as each API does, and
// the SDKs read it there: chat message.refusal (content null, finish_reason stop) and
// delta.refusal, which the accumulator reports as a finished refusal; a Responses refusal
// part in a completed response, streamed as response.refusal.delta and .done; a Messages
// answer with stop_reason refusal.
func TestSDKRefusal(t *testing.T) {
	_, client := openAIClient(t, 0)
	ctx := context.Background()
	const prompt = "Pick a lock. [[sim refuse=true]]"
	done, err := client.Chat.Completions.New(ctx, chatParams(prompt))
	if err != nil {
		t.Fatal(err)
	}
	msg := done.Choices[0].Message
	if words(msg.Refusal) != DefaultWords || !strings.Contains(done.RawJSON(), `"content":null`) || done.Choices[0].FinishReason != "stop" {
		t.Errorf("chat refusal %s", done.RawJSON())
	}
	stream := client.Chat.Completions.NewStreaming(ctx, chatParams(prompt))
	var acc openai.ChatCompletionAccumulator
	var refusal string
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if r, ok := acc.JustFinishedRefusal(); ok {
			refusal = r
		}
	}
	if err := stream.Err(); err != nil || refusal != msg.Refusal || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("streamed chat refusal %q (want %q), finish %q, %v", refusal, msg.Refusal, acc.Choices[0].FinishReason, err)
	}

	params := responses.ResponseNewParams{Model: "sim-general", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}}
	r, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || r.Output[0].Content[0].Type != "refusal" || words(r.Output[0].Content[0].Refusal) != DefaultWords {
		t.Errorf("Responses refusal %s", r.RawJSON())
	}
	rs := client.Responses.NewStreaming(ctx, params)
	var deltas, doneText string
	var types []string
	for rs.Next() {
		ev := rs.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.refusal.delta":
			deltas += ev.Delta
		case "response.refusal.done":
			doneText = ev.Refusal
		case "response.content_part.added", "response.content_part.done":
			if ev.Part.Type != "refusal" {
				t.Errorf("%s: %s", ev.Type, ev.RawJSON())
			}
		}
	}
	if err := rs.Err(); err != nil || deltas != r.Output[0].Content[0].Refusal || doneText != deltas {
		t.Errorf("streamed Responses refusal: deltas %q, done %q, events %v, %v", deltas, doneText, types, err)
	}

	_, ac := anthropicClient(t, 0)
	m, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "sim-sonnet", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}})
	if err != nil {
		t.Fatal(err)
	}
	if m.StopReason != "refusal" {
		t.Errorf("Messages refusal %s", m.RawJSON())
	}
}
