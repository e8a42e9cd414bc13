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

// TestSDKRefusalAfterText: [[sim refuse=after_text]] answers with text and then the refusal on
// every route: on Responses one message whose parts are output_text (the first half of the
// words) and refusal (the rest), whole and streamed (each part added, its deltas at its
// content_index, its done events; openai-go's event union reads them), the stream's parts the
// same as the answer's; on Messages the first half as text with stop_reason refusal, whole
// and streamed (the SDK's accumulator), the refusal's words being nowhere to put. On the code
// before, both routes answered as refuse=true: the whole reply a refusal part, the whole reply
// as Messages text.
func TestSDKRefusalAfterText(t *testing.T) {
	_, client := openAIClient(t, 0)
	ctx := context.Background()
	const prompt = "Pick a lock. [[sim refuse=after_text]]"
	params := responses.ResponseNewParams{Model: "sim-general", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}}
	r, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || len(r.Output) != 1 || len(r.Output[0].Content) != 2 ||
		r.Output[0].Content[0].Type != "output_text" || words(r.Output[0].Content[0].Text) != DefaultWords/2 ||
		r.Output[0].Content[1].Type != "refusal" || words(r.Output[0].Content[1].Refusal) != DefaultWords-DefaultWords/2 {
		t.Fatalf("Responses text and refusal %s", r.RawJSON())
	}
	rs := client.Responses.NewStreaming(ctx, params)
	var text, refusal, doneText, doneRefusal string
	var order []string
	for rs.Next() {
		ev := rs.Current()
		switch ev.Type {
		case "response.output_text.delta":
			if ev.ContentIndex != 0 {
				t.Errorf("text delta at content_index %d", ev.ContentIndex)
			}
			text += ev.Delta
		case "response.refusal.delta":
			if ev.ContentIndex != 1 {
				t.Errorf("refusal delta at content_index %d", ev.ContentIndex)
			}
			refusal += ev.Delta
		case "response.output_text.done":
			doneText = ev.Text
		case "response.refusal.done":
			doneRefusal = ev.Refusal
		case "response.content_part.added", "response.content_part.done":
			order = append(order, ev.Type+":"+ev.Part.Type)
		case "response.completed":
			if got := ev.Response.Output[0].Content; len(got) != 2 || got[0].Text != text || got[1].Refusal != refusal {
				t.Errorf("response.completed's parts %+v, streamed %q and %q", got, text, refusal)
			}
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	wantOrder := "response.content_part.added:output_text response.content_part.done:output_text response.content_part.added:refusal response.content_part.done:refusal"
	if text != r.Output[0].Content[0].Text || refusal != r.Output[0].Content[1].Refusal || doneText != text || doneRefusal != refusal ||
		strings.Join(order, " ") != wantOrder {
		t.Errorf("streamed Responses text %q (done %q), refusal %q (done %q), parts %v; want %q and %q, parts %s",
			text, doneText, refusal, doneRefusal, order, r.Output[0].Content[0].Text, r.Output[0].Content[1].Refusal, wantOrder)
	}

	_, ac := anthropicClient(t, 0)
	mp := anthropic.MessageNewParams{Model: "sim-sonnet", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}}
	m, err := ac.Messages.New(ctx, mp)
	if err != nil {
		t.Fatal(err)
	}
	if m.StopReason != "refusal" || len(m.Content) != 1 || words(m.Content[0].Text) != DefaultWords/2 || m.Usage.OutputTokens != DefaultWords/2 {
		t.Errorf("Messages text before a refusal %s", m.RawJSON())
	}
	ms := ac.Messages.NewStreaming(ctx, mp)
	var acc anthropic.Message
	for ms.Next() {
		if err := acc.Accumulate(ms.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := ms.Err(); err != nil || acc.StopReason != "refusal" || len(acc.Content) != 1 || acc.Content[0].Text != m.Content[0].Text {
		t.Errorf("streamed Messages text before a refusal: stop %q, content %+v, %v", acc.StopReason, acc.Content, err)
	}
}
