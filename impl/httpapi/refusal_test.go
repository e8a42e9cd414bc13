package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// refuse is the user message that makes the simulator answer with the model's refusal (chat
// message.refusal, a Responses refusal part, Messages stop_reason refusal).
const refuse = "Tell me how to pick a lock. [[sim refuse=true]]"

// TestRefusalCrossesOpenAIFormats: a refusal is a field of its own in both OpenAI formats
// (chat message.refusal and delta.refusal; a Responses refusal content part, streamed as
// response.refusal.delta and .done), with the stop of a normal end (finish_reason stop, status
// completed), and the SDKs read it there: openai-python's chat.completions.parse returns it
// as message.refusal, openai-go's accumulator reports JustFinishedRefusal. Translated between
// the two formats, the refusal stays a refusal, whole and streamed. On the code before, a
// Responses upstream's refusal reached a chat client as content with finish_reason
// content_filter (parse raises ContentFilterFinishReasonError), and a chat upstream's reached
// a Responses client as output_text in an incomplete response (wire-format trial s13h6).
func TestRefusalCrossesOpenAIFormats(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()

	// A chat client on a Responses upstream (test-responses).
	chatParams := openai.ChatCompletionNewParams{Model: "test-responses", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(refuse)}}
	done, err := client.Chat.Completions.New(ctx, chatParams)
	if err != nil {
		t.Fatal(err)
	}
	if msg := done.Choices[0].Message; msg.Refusal == "" || msg.Content != "" || done.Choices[0].FinishReason != "stop" {
		t.Errorf("chat answer from a Responses upstream's refusal: %s", done.RawJSON())
	}
	stream := client.Chat.Completions.NewStreaming(ctx, chatParams)
	var acc openai.ChatCompletionAccumulator
	var refusal string
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if r, ok := acc.JustFinishedRefusal(); ok {
			refusal = r
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if msg := acc.Choices[0].Message; refusal == "" || msg.Refusal != refusal || msg.Content != "" || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("streamed chat answer from a Responses upstream's refusal: refusal %q, message %+v, finish %q", refusal, msg, acc.Choices[0].FinishReason)
	}
	if refusal != done.Choices[0].Message.Refusal {
		t.Errorf("streamed refusal %q, whole %q", refusal, done.Choices[0].Message.Refusal)
	}

	// A Responses client on a chat upstream (service-flint-base).
	respParams := responses.ResponseNewParams{Model: "service-flint-base", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(refuse)}}
	r, err := client.Responses.New(ctx, respParams)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || len(r.Output) != 1 || len(r.Output[0].Content) != 1 || r.Output[0].Content[0].Type != "refusal" ||
		r.Output[0].Content[0].Refusal == "" || r.OutputText() != "" {
		t.Errorf("Responses answer from a chat upstream's refusal: %s", r.RawJSON())
	}
	rs := client.Responses.NewStreaming(ctx, respParams)
	var deltas, doneRefusal string
	var final responses.Response
	var types []string
	for rs.Next() {
		ev := rs.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.refusal.delta":
			deltas += ev.Delta
		case "response.refusal.done":
			doneRefusal = ev.Refusal
		case "response.output_text.delta":
			t.Errorf("a refusal streamed as output_text: %s", ev.RawJSON())
		case "response.content_part.added", "response.content_part.done":
			if ev.Part.Type != "refusal" {
				t.Errorf("%s with a part of type %q", ev.Type, ev.Part.Type)
			}
		case "response.completed", "response.incomplete":
			final = ev.Response
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if deltas == "" || doneRefusal != deltas || final.Status != "completed" || len(final.Output) != 1 ||
		final.Output[0].Content[0].Type != "refusal" || final.Output[0].Content[0].Refusal != deltas {
		t.Errorf("streamed Responses answer from a chat upstream's refusal: deltas %q, done %q, events %v, final %s", deltas, doneRefusal, types, final.RawJSON())
	}
	if deltas != r.Output[0].Content[0].Refusal {
		t.Errorf("streamed refusal %q, whole %q", deltas, r.Output[0].Content[0].Refusal)
	}
}

// TestRefusalToOtherFormats: what the formats without a refusal field see. A Messages client
// of an OpenAI upstream that refused gets the refusal's words as text with stop_reason
// refusal, whole and streamed; an OpenAI client of a Messages upstream that stopped with
// stop_reason refusal (its classifiers stopped the answer: the text so far is not a refusal
// message) gets that text as content with finish_reason content_filter, or a Responses
// answer incomplete for content_filter (docs/inference.md).
func TestRefusalToOtherFormats(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	ctx := context.Background()
	ac := anthropicClient(g, t, tenant.Key)
	for _, model := range []string{"messages-via-chat", "messages-via-responses"} {
		params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(refuse))}}
		m, err := ac.Messages.New(ctx, params)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if m.StopReason != "refusal" || len(m.Content) != 1 || m.Content[0].Text == "" {
			t.Errorf("%s: %s", model, m.RawJSON())
		}
		stream := ac.Messages.NewStreaming(ctx, params)
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%s streamed: %v", model, err)
		}
		if acc.StopReason != "refusal" || len(acc.Content) != 1 || acc.Content[0].Text != m.Content[0].Text {
			t.Errorf("%s streamed: stop %q, content %+v", model, acc.StopReason, acc.Content)
		}
	}

	client := openAIClient(g, t, tenant.Key)
	done, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "chat-via-messages",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(refuse)}})
	if err != nil {
		t.Fatal(err)
	}
	if done.Choices[0].FinishReason != "content_filter" || done.Choices[0].Message.Refusal != "" {
		t.Errorf("chat answer from a Messages refusal: %s", done.RawJSON())
	}
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "chat-via-messages",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(refuse)}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "incomplete" || r.IncompleteDetails.Reason != "content_filter" {
		t.Errorf("Responses answer from a Messages refusal: %s", r.RawJSON())
	}
}

// TestTextAndRefusalAreOneResponsesMessage: a chat upstream's answer with text and a refusal
// (content and message.refusal both set) reaches a Responses client as one message item whose
// content holds an output_text part and a refusal part, as the Responses API's message does
// (openai-go ResponseOutputMessage.Content), whole and streamed: one output_item.added, the
// parts at content_index 0 and 1, each with its deltas, done and content_part.done, and the
// same item in response.completed. On the code before, the stream held two message items
// (the refusal at output_index 1), unlike the answer's JSON.
func TestTextAndRefusalAreOneResponsesMessage(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()

	params := responses.ResponseNewParams{Model: "service-flint-base",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell me how to pick a lock. [[sim refuse=after_text]]")}}
	r, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || len(r.Output) != 1 || len(r.Output[0].Content) != 2 ||
		r.Output[0].Content[0].Type != "output_text" || r.Output[0].Content[0].Text == "" ||
		r.Output[0].Content[1].Type != "refusal" || r.Output[0].Content[1].Refusal == "" {
		t.Fatalf("Responses answer of text and a refusal: %s", r.RawJSON())
	}
	wantText, wantRefusal := r.Output[0].Content[0].Text, r.Output[0].Content[1].Refusal

	rs := client.Responses.NewStreaming(ctx, params)
	var text, refusal, doneText, doneRefusal string
	var final responses.Response
	var itemsAdded, itemsDone int
	partsAdded := map[int64]string{}
	for rs.Next() {
		ev := rs.Current()
		if ev.OutputIndex != 0 {
			t.Errorf("%s at output_index %d: %s", ev.Type, ev.OutputIndex, ev.RawJSON())
		}
		switch ev.Type {
		case "response.output_item.added":
			itemsAdded++
		case "response.output_item.done":
			itemsDone++
			if len(ev.Item.Content) != 2 {
				t.Errorf("output_item.done: %s", ev.RawJSON())
			}
		case "response.content_part.added":
			partsAdded[ev.ContentIndex] = ev.Part.Type
		case "response.output_text.delta":
			if ev.ContentIndex != 0 {
				t.Errorf("output_text delta at content_index %d", ev.ContentIndex)
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
		case "response.completed", "response.incomplete":
			final = ev.Response
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if itemsAdded != 1 || itemsDone != 1 || partsAdded[0] != "output_text" || partsAdded[1] != "refusal" || len(partsAdded) != 2 {
		t.Errorf("streamed: %d items added, %d done, parts %v", itemsAdded, itemsDone, partsAdded)
	}
	if text != wantText || doneText != wantText || refusal != wantRefusal || doneRefusal != wantRefusal {
		t.Errorf("streamed text %q (done %q), refusal %q (done %q); whole %q, %q", text, doneText, refusal, doneRefusal, wantText, wantRefusal)
	}
	if final.Status != "completed" || len(final.Output) != 1 || len(final.Output[0].Content) != 2 ||
		final.Output[0].Content[0].Text != wantText || final.Output[0].Content[1].Refusal != wantRefusal {
		t.Errorf("response.completed: %s", final.RawJSON())
	}
}

// TestResponsesTextFromDoneEvents: a Responses upstream that sends a part's text only in its
// done events (response.output_text.done or response.refusal.done, content_part.done,
// output_item.done and the terminal response; [[sim deltas=false]]) and none in deltas still
// gives a chat or Messages client all of it, once, streamed as the whole answer gives it;
// with deltas the text is not doubled. On the code before, a refusal sent so was lost (the
// decoder read refusal deltas only).
func TestResponsesTextFromDoneEvents(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()

	for _, prompt := range []string{"Say hello. [[sim deltas=false]]", "Say hello.", refuse + " [[sim deltas=false]]", refuse} {
		params := openai.ChatCompletionNewParams{Model: "test-responses", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
		done, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		want := done.Choices[0].Message
		if want.Content == "" && want.Refusal == "" {
			t.Fatalf("%q: whole answer without text: %s", prompt, done.RawJSON())
		}
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Choices[0].Message; got.Content != want.Content || got.Refusal != want.Refusal || acc.Choices[0].FinishReason != done.Choices[0].FinishReason {
			t.Errorf("%q streamed to chat: content %q refusal %q finish %q; whole content %q refusal %q finish %q",
				prompt, got.Content, got.Refusal, acc.Choices[0].FinishReason, want.Content, want.Refusal, done.Choices[0].FinishReason)
		}
	}

	ac := anthropicClient(g, t, tenant.Key)
	for _, prompt := range []string{"Say hello. [[sim deltas=false]]", refuse + " [[sim deltas=false]]"} {
		params := anthropic.MessageNewParams{Model: "messages-via-responses", MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}}
		m, err := ac.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		stream := ac.Messages.NewStreaming(ctx, params)
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(m.Content) != 1 || m.Content[0].Text == "" || len(acc.Content) != 1 || acc.Content[0].Text != m.Content[0].Text || acc.StopReason != m.StopReason {
			t.Errorf("%q streamed to Messages: %+v (stop %q); whole %s", prompt, acc.Content, acc.StopReason, m.RawJSON())
		}
	}
}

// TestEarlierRefusalIsCarried: the model's refusal in an earlier assistant turn, sent back in
// the conversation (a chat assistant message's refusal, a Responses output message's refusal
// part), reaches an upstream of the other OpenAI format where that format keeps it (a
// Responses refusal part after the turn's output_text, chat message.refusal) and a Messages
// upstream, which has no refusal, as the assistant's text; x-tollgate-dropped-fields names
// nothing. On the code before, it was dropped and named (messages[].refusal,
// input[].content[].refusal), and the upstream saw a turn without it.
func TestEarlierRefusalIsCarried(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()
	const words = "I can't help with picking locks."

	chatHistory := []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage("Tell me how to pick a lock."),
		{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
			Content: openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String("Well.")},
			Refusal: openai.String(words)}},
		openai.UserMessage("Then say hello."),
	}
	for model, want := range map[string]string{
		"test-responses":    `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Well."},{"type":"refusal","refusal":"` + words + `"}]}`,
		"chat-via-messages": `{"role":"assistant","content":[{"type":"text","text":"Well."},{"type":"text","text":"` + words + `"}]}`,
	} {
		var raw *http.Response
		if _, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, Messages: chatHistory}, option.WithResponseInto(&raw)); err != nil {
			t.Fatalf("chat client, %s: %v", model, err)
		}
		if dropped := raw.Header.Get("x-tollgate-dropped-fields"); dropped != "" {
			t.Errorf("chat client, %s: dropped %q", model, dropped)
		}
		if body := string(g.Sim.LastRequest().Body); !strings.Contains(body, want) {
			t.Errorf("chat client, %s: the upstream was sent %s\nwant it to hold %s", model, body, want)
		}
	}

	responsesHistory := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Tell me how to pick a lock.", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfOutputMessage([]responses.ResponseOutputMessageContentUnionParam{
			{OfOutputText: &responses.ResponseOutputTextParam{Text: "Well.", Annotations: []responses.ResponseOutputTextAnnotationUnionParam{}}},
			{OfRefusal: &responses.ResponseOutputRefusalParam{Refusal: words}},
		}, "msg_1", responses.ResponseOutputMessageStatusCompleted),
		responses.ResponseInputItemParamOfMessage("Then say hello.", responses.EasyInputMessageRoleUser),
	}
	for model, want := range map[string]string{
		"service-flint-base": `{"role":"assistant","content":"Well.","refusal":"` + words + `"}`,
		"chat-via-messages":  `{"role":"assistant","content":[{"type":"text","text":"Well."},{"type":"text","text":"` + words + `"}]}`,
	} {
		var raw *http.Response
		if _, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: model,
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responsesHistory}}, option.WithResponseInto(&raw)); err != nil {
			t.Fatalf("Responses client, %s: %v", model, err)
		}
		if dropped := raw.Header.Get("x-tollgate-dropped-fields"); dropped != "" {
			t.Errorf("Responses client, %s: dropped %q", model, dropped)
		}
		if body := string(g.Sim.LastRequest().Body); !strings.Contains(body, want) {
			t.Errorf("Responses client, %s: the upstream was sent %s\nwant it to hold %s", model, body, want)
		}
	}
}
