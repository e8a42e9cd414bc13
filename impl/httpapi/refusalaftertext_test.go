package httpapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// refuseAfterText makes the simulator answer with text and then the model's refusal, in each
// upstream format's own shape ([[sim refuse=after_text]], impl/sim/doc.go).
const refuseAfterText = "Tell me how to pick a lock. [[sim refuse=after_text]]"

// refusalAnswer is what a client made of an answer of text and then a refusal.
type refusalAnswer struct {
	text, refusal, stop string
}

// TestRefusalAfterTextEveryRouteAndUpstream: an answer of text and then a refusal, from a chat,
// a Responses and a Messages upstream, reaches a client of every route, whole and streamed
// (the official SDKs reading it), as docs/inference.md says: from an OpenAI upstream a chat
// client gets content and message.refusal with finish_reason stop, a Responses client one
// message of an output_text part and a refusal part, completed, a Messages client both as text
// with stop_reason refusal; from a Messages upstream (its text, then the classifiers' stop) a
// chat client gets the text with finish_reason content_filter, a Responses client the text in
// an answer incomplete for content_filter, a Messages client the text with stop_reason
// refusal. The stream says what the whole answer says.
func TestRefusalAfterTextEveryRouteAndUpstream(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	oc, ac := openAIClient(g, t, tenant.Key), anthropicClient(g, t, tenant.Key)
	ctx := context.Background()

	chat := func(model string, stream bool) refusalAnswer {
		params := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(refuseAfterText)}}
		if !stream {
			c, err := oc.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatalf("chat %s: %v", model, err)
			}
			return refusalAnswer{c.Choices[0].Message.Content, c.Choices[0].Message.Refusal, string(c.Choices[0].FinishReason)}
		}
		s := oc.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatalf("chat %s streamed: %v", model, err)
		}
		return refusalAnswer{acc.Choices[0].Message.Content, acc.Choices[0].Message.Refusal, string(acc.Choices[0].FinishReason)}
	}
	fromResponse := func(r *responses.Response) refusalAnswer {
		a := refusalAnswer{stop: string(r.Status)}
		if r.Status == "incomplete" {
			a.stop += ":" + r.IncompleteDetails.Reason
		}
		for _, it := range r.Output {
			for _, p := range it.Content {
				a.text += p.Text
				a.refusal += p.Refusal
			}
		}
		return a
	}
	resp := func(model string, stream bool) refusalAnswer {
		params := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(refuseAfterText)}}
		if !stream {
			r, err := oc.Responses.New(ctx, params)
			if err != nil {
				t.Fatalf("Responses %s: %v", model, err)
			}
			return fromResponse(r)
		}
		s := oc.Responses.NewStreaming(ctx, params)
		var deltas refusalAnswer
		var final refusalAnswer
		for s.Next() {
			switch ev := s.Current(); ev.Type {
			case "response.output_text.delta":
				deltas.text += ev.Delta
			case "response.refusal.delta":
				deltas.refusal += ev.Delta
			case "response.completed", "response.incomplete":
				final = fromResponse(&ev.Response)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("Responses %s streamed: %v", model, err)
		}
		if deltas.text != final.text || deltas.refusal != final.refusal {
			t.Errorf("Responses %s streamed: deltas %+v, final response %+v", model, deltas, final)
		}
		return final
	}
	messages := func(model string, stream bool) refusalAnswer {
		params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(refuseAfterText))}}
		var m anthropic.Message
		if !stream {
			got, err := ac.Messages.New(ctx, params)
			if err != nil {
				t.Fatalf("Messages %s: %v", model, err)
			}
			m = *got
		} else {
			s := ac.Messages.NewStreaming(ctx, params)
			for s.Next() {
				if err := m.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("Messages %s streamed: %v", model, err)
			}
		}
		var text strings.Builder
		for _, b := range m.Content {
			text.WriteString(b.Text)
		}
		return refusalAnswer{text: text.String(), stop: string(m.StopReason)}
	}

	// The simulator writes twelve words, the first six the text and the rest the refusal; a
	// Messages upstream writes the text alone.
	cases := []struct {
		route, model          string
		call                  func(string, bool) refusalAnswer
		textWords, refusWords int
		stop                  string
	}{
		{"chat", "service-flint-base", chat, 6, 6, "stop"},
		{"chat", "test-responses", chat, 6, 6, "stop"},
		{"chat", "chat-via-messages", chat, 6, 0, "content_filter"},
		{"responses", "service-flint-base", resp, 6, 6, "completed"},
		{"responses", "test-responses", resp, 6, 6, "completed"},
		{"responses", "chat-via-messages", resp, 6, 0, "incomplete:content_filter"},
		{"messages", "messages-via-chat", messages, 12, 0, "refusal"},
		{"messages", "messages-via-responses", messages, 12, 0, "refusal"},
		{"messages", "service-sonnet", messages, 6, 0, "refusal"},
	}
	for _, c := range cases {
		whole := c.call(c.model, false)
		if streamed := c.call(c.model, true); streamed != whole {
			t.Errorf("%s on %s: streamed %+v, whole %+v", c.route, c.model, streamed, whole)
		}
		if len(strings.Fields(whole.text)) != c.textWords || len(strings.Fields(whole.refusal)) != c.refusWords || whole.stop != c.stop {
			t.Errorf("%s on %s: %+v; want %d words of text, %d of refusal, stop %s", c.route, c.model, whole, c.textWords, c.refusWords, c.stop)
		}
	}
}
