package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"

	"github.com/tollgate/tollgate/impl/config"
)

// TestResponsesUpstreamPartsByItemID: a Responses upstream whose text deltas leave out
// output_index (the message is at output_index 1, after a reasoning item) while its done
// events set it, and whose deltas stop short of the text its done events carry (the full
// text, wire-protocols.md §2.3), streams to a chat client (openai-go's accumulator) and to a
// Messages client (anthropic-sdk-go's) the text once and whole. On the code before, the
// deltas were taken for another part than the done events, and the text came twice, the
// second time whole.
func TestResponsesUpstreamPartsByItemID(t *testing.T) {
	const full = "The answer, in full: forty-two."
	var stream strings.Builder
	seq := 0
	event := func(name, data string) {
		fmt.Fprintf(&stream, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", name, name, seq, data)
		seq++
	}
	item := fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":%q,"annotations":[]}]}`, full)
	event("response.created", `"response":{"id":"resp_1","object":"response","created_at":1764777600,"model":"gpt-5","status":"in_progress","output":[]}`)
	event("response.output_item.added", `"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}`)
	event("response.output_item.done", `"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}`)
	event("response.output_item.added", `"output_index":1,"item":{"id":"msg_1","type":"message","role":"assistant","status":"in_progress","content":[]}`)
	event("response.content_part.added", `"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}`)
	for _, d := range []string{"The answer", ", in full"} { // the rest only in the done events
		event("response.output_text.delta", fmt.Sprintf(`"item_id":"msg_1","content_index":0,"delta":%q`, d))
	}
	event("response.output_text.done", fmt.Sprintf(`"item_id":"msg_1","output_index":1,"content_index":0,"text":%q`, full))
	event("response.content_part.done", fmt.Sprintf(`"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","text":%q,"annotations":[]}`, full))
	event("response.output_item.done", `"output_index":1,"item":`+item)
	event("response.completed", `"response":{"id":"resp_1","object":"response","created_at":1764777600,"model":"gpt-5","status":"completed","output":[{"id":"rs_1","type":"reasoning","summary":[]},`+item+`],"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":8,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":13}}`)

	g, tenant := standInGateway(t, "parts", config.KindOpenAIResponses, cannedUpstream(t, "text/event-stream", stream.String()))
	ctx := context.Background()

	oc, ac := openAIClient(g, t, tenant.Key), anthropicClient(g, t, tenant.Key)
	chat := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "parts-" + config.FamilyChat, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("the answer?")}})
	var acc openai.ChatCompletionAccumulator
	for chat.Next() {
		acc.AddChunk(chat.Current())
	}
	if err := chat.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != full {
		t.Errorf("chat client: %q, want %q", got, full)
	}

	messages := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: anthropic.Model("parts-" + config.FamilyMessages), MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("the answer?"))}})
	var msg anthropic.Message
	for messages.Next() {
		if err := msg.Accumulate(messages.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := messages.Err(); err != nil {
		t.Fatal(err)
	}
	var text string
	for _, b := range msg.Content {
		text += b.Text
	}
	if text != full {
		t.Errorf("Messages client: %q, want %q", text, full)
	}
}
