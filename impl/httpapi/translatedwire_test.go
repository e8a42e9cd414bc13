package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestBlankTextIsNotSentToMessages: the Messages API refuses a text block of whitespace alone
// ("messages: text content blocks must contain non-whitespace text", which the simulator plays),
// and an assistant turn that opens its tool calls with "\n\n" is common: a Messages upstream
// answers so itself, and the gateway hands that text to a chat or Responses client, which
// sends it back with the tool result. Translated for a Messages upstream, such text is left
// out, as empty text is, and the tool loop goes on; a user message of whitespace alone is left
// out and named, as an empty one is. On the code before, the blank text went upstream and the
// client got the provider's 400 on the turn after every such tool call.
func TestBlankTextIsNotSentToMessages(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()
	weather := weatherChatTool()

	// Chat: the assistant's "\n\n" before its call, a tool result, and a user turn of blanks.
	call := openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
		Content: openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String("\n\n")},
		ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"q":"Paris"}`}}}},
	}}
	var raw *http.Response
	done, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "chat-via-messages", Tools: []openai.ChatCompletionToolUnionParam{weather},
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?"), call, openai.ToolMessage(`{"temp":21}`, "call_1"),
			openai.UserMessage(" \n"), openai.UserMessage("And tomorrow?")}}, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("chat history with blank text: %v", err)
	}
	if done.Choices[0].Message.Content == "" || done.Choices[0].FinishReason != "stop" {
		t.Errorf("chat answer %s", done.RawJSON())
	}
	if got := raw.Header.Get("x-tollgate-dropped-fields"); got != "messages[]" {
		t.Errorf("dropped %q, want the blank user message named messages[]", got)
	}

	// Responses: the assistant's output_text "\n\n" before its function call, as a client
	// sends back the output items it was given.
	items := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Weather in Paris?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfOutputMessage([]responses.ResponseOutputMessageContentUnionParam{{OfOutputText: &responses.ResponseOutputTextParam{Text: "\n\n"}}},
			"msg_1", responses.ResponseOutputMessageStatusCompleted),
		responses.ResponseInputItemParamOfFunctionCall(`{"q":"Paris"}`, "call_1", "get_weather"),
		{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String("call_1"),
			Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(`{"temp":21}`)}}},
	}
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "chat-via-messages", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: map[string]any{"type": "object"}, Strict: openai.Bool(false)}}}})
	if err != nil {
		t.Fatalf("Responses input with blank text: %v", err)
	}
	if r.OutputText() == "" || r.Status != "completed" {
		t.Errorf("response %s", r.RawJSON())
	}

	// A last user message of blanks alone is refused by the gateway, naming it, as an empty one.
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "chat-via-messages",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello"), openai.AssistantMessage("Hi."), openai.UserMessage("\n\t ")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "messages[2].content" {
		t.Errorf("a blank last user message: %v", err)
	}
}

// TestBlankStopSequencesAreNotSentToMessages: the Messages API refuses a stop sequence that is
// empty or whitespace alone ("stop_sequences: each stop sequence must contain non-whitespace",
// which the simulator plays), and chat clients send stop: "\n" for one-line answers. Such a
// stop cannot be honoured by a Messages upstream, and left out the answer would run past it:
// translated, it is refused as any field the upstream cannot honour, so a fusion model passes
// the Messages expert over for one that can (the chat expert here, tools making the Messages
// expert the first choice), and a model served by Messages alone answers 400 naming stop. On
// the code before, the stop went upstream: the fusion model answered the provider's 400
// (an upstream's refusal is the caller's doing, not failed over), naming stop_sequences, a
// field the client never sent.
func TestBlankStopSequencesAreNotSentToMessages(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()
	weather := weatherChatTool()
	for name, stop := range map[string]openai.ChatCompletionNewParamsStopUnion{
		`"\n"`:            {OfString: openai.String("\n")},
		`["END", "\n\n"]`: {OfStringArray: []string{"END", "\n\n"}},
	} {
		params := openai.ChatCompletionNewParams{Model: "service-flint", Stop: stop, Tools: []openai.ChatCompletionToolUnionParam{weather},
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Write some code, in one line.")}}
		var raw *http.Response
		done, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&raw))
		if err != nil {
			t.Fatalf("fusion model with stop %s: %v", name, err)
		}
		if expert := raw.Header.Get("x-tollgate-expert"); !strings.HasPrefix(expert, "sim-openai-chat/") || done.Choices[0].Message.Content == "" {
			t.Errorf("stop %s served by %q: %s", name, expert, done.RawJSON())
		}
		params.Model = "chat-via-messages"
		_, err = client.Chat.Completions.New(ctx, params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "stop" || !strings.Contains(apiErr.Message, "whitespace") {
			t.Errorf("stop %s through Messages alone: %v", name, err)
		}
	}
	// A stop with words in it still goes to the Messages expert.
	var raw *http.Response
	if _, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "service-flint", Stop: openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"END", " and\n"}},
		Tools:    []openai.ChatCompletionToolUnionParam{weather},
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Write some code.")}}, option.WithResponseInto(&raw)); err != nil {
		t.Fatal(err)
	} else if expert := raw.Header.Get("x-tollgate-expert"); !strings.HasPrefix(expert, "sim-anthropic/") {
		t.Errorf("a stop with words served by %q", expert)
	}
}

// TestTemperatureWithTopPToMessages: the Messages API takes temperature or top_p, not both
// ("`temperature` and `top_p` cannot both be specified for this model", since the Claude 4.5
// models, which the simulator plays), and OpenAI clients often send both, top_p mostly at its
// default of 1. Translated for a Messages upstream, a top_p of 1 beside a temperature (which
// changes nothing) is dropped and named; any other top_p beside a temperature cannot be
// honoured: a fusion model passes its Messages expert over, and a model served by Messages
// alone answers 400 naming top_p. On the code before, both went upstream and every such
// request was the provider's 400.
func TestTemperatureWithTopPToMessages(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()
	weather := weatherChatTool()
	params := openai.ChatCompletionNewParams{Model: "chat-via-messages", Temperature: openai.Float(0.7), TopP: openai.Float(1),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")}}
	var raw *http.Response
	done, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("temperature with top_p 1: %v", err)
	}
	if done.Choices[0].Message.Content == "" || raw.Header.Get("x-tollgate-dropped-fields") != "top_p" {
		t.Errorf("dropped %q: %s", raw.Header.Get("x-tollgate-dropped-fields"), done.RawJSON())
	}
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "chat-via-messages", Temperature: openai.Float(0.2), TopP: openai.Float(1),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")}}, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("Responses temperature with top_p 1: %v", err)
	}
	if r.OutputText() == "" || raw.Header.Get("x-tollgate-dropped-fields") != "top_p" {
		t.Errorf("Responses dropped %q: %s", raw.Header.Get("x-tollgate-dropped-fields"), r.RawJSON())
	}

	params.TopP = openai.Float(0.9)
	_, err = client.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "top_p" {
		t.Errorf("temperature with top_p 0.9 through Messages alone: %v", err)
	}
	params.Model, params.Tools = "service-flint", []openai.ChatCompletionToolUnionParam{weather}
	params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Write some code.")}
	done, err = client.Chat.Completions.New(ctx, params, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("fusion model, temperature with top_p 0.9: %v", err)
	}
	if expert := raw.Header.Get("x-tollgate-expert"); !strings.HasPrefix(expert, "sim-openai-chat/") || done.Choices[0].Message.Content == "" {
		t.Errorf("temperature with top_p 0.9 served by %q: %s", expert, done.RawJSON())
	}
	// Either alone still goes to the Messages expert.
	params.Temperature = openai.Float(0.5)
	params.TopP = param.Opt[float64]{}
	if _, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&raw)); err != nil {
		t.Fatal(err)
	} else if expert := raw.Header.Get("x-tollgate-expert"); !strings.HasPrefix(expert, "sim-anthropic/") {
		t.Errorf("a temperature alone served by %q", expert)
	}
}

// TestPrefillTrailingWhitespaceToMessages: a conversation that ends on the assistant's turn is
// a prefill, which a Messages upstream continues, and the Messages API refuses one whose text
// ends in whitespace ("final assistant content cannot end with trailing whitespace", which the
// simulator plays); chat and Responses take such turns. Translated for Messages, the trailing
// whitespace of that final text is trimmed and named in x-tollgate-dropped-fields. On the code
// before, it went upstream and the client got the provider's 400.
func TestPrefillTrailingWhitespaceToMessages(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()

	var raw *http.Response
	done, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "chat-via-messages",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Name a colour."), openai.AssistantMessage("The colour is \n")}},
		option.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("chat prefill ending in whitespace: %v", err)
	}
	if done.Choices[0].Message.Content == "" {
		t.Errorf("chat answer %s", done.RawJSON())
	}
	if got := raw.Header.Get("x-tollgate-dropped-fields"); got != "messages[].content (trailing whitespace)" {
		t.Errorf("dropped %q, want the trimmed whitespace named", got)
	}

	items := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Name a colour.", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfOutputMessage([]responses.ResponseOutputMessageContentUnionParam{{OfOutputText: &responses.ResponseOutputTextParam{Text: "The colour is "}}},
			"msg_1", responses.ResponseOutputMessageStatusCompleted),
	}
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "chat-via-messages",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}}, option.WithResponseInto(&raw))
	var final responses.Response
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.completed" {
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("streamed Responses prefill ending in whitespace: %v", err)
	}
	if final.Status != "completed" || final.OutputText() == "" {
		t.Errorf("Responses answer %s", final.RawJSON())
	}
	if got := raw.Header.Get("x-tollgate-dropped-fields"); got != "input[].content[] (trailing whitespace)" {
		t.Errorf("dropped %q, want the trimmed whitespace named", got)
	}

	// A prefill without trailing whitespace goes as it is, and names nothing.
	if _, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "chat-via-messages",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Name a colour."), openai.AssistantMessage("The colour is")}},
		option.WithResponseInto(&raw)); err != nil {
		t.Fatal(err)
	} else if got := raw.Header.Get("x-tollgate-dropped-fields"); got != "" {
		t.Errorf("dropped %q for a prefill without trailing whitespace", got)
	}

	// A Messages client's own prefill is relayed as sent: the API's refusal is its answer.
	ac := anthropicClient(g, t, tenant.Key)
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "service-sonnet", MaxTokens: 64, Messages: []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("Name a colour.")), anthropic.NewAssistantMessage(anthropic.NewTextBlock("The colour is "))}})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Error(), "trailing whitespace") {
		t.Errorf("a Messages client's prefill ending in whitespace: %v", err)
	}
}

// weatherChatTool is the chat tool get_weather(q) these tests' requests offer (on service-flint,
// a request with tools goes to its Messages expert first).
func weatherChatTool() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather",
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}})
}
