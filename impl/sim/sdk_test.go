package sim

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// The official SDKs are the strictest readers of the simulator's output: their decoders,
// accumulators and retry logic run here against a real HTTP server.

const sdkKey = "sk-sim-sdk"

func openAIClient(t *testing.T, retries int) (*Simulator, openai.Client) {
	s, srv := newServer(t, Options{APIKey: sdkKey})
	return s, openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(sdkKey),
		option.WithMaxRetries(retries), option.WithHTTPClient(srv.Client()))
}

func anthropicClient(t *testing.T, retries int) (*Simulator, anthropic.Client) {
	s, srv := newServer(t, Options{APIKey: sdkKey})
	return s, anthropic.NewClient(aoption.WithBaseURL(srv.URL), aoption.WithAPIKey(sdkKey),
		aoption.WithMaxRetries(retries), aoption.WithHTTPClient(srv.Client()))
}

func chatParams(prompt string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "sim-general",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
	}
}

func TestSDKOpenAIChat(t *testing.T) {
	_, client := openAIClient(t, 0)
	ctx := context.Background()
	done, err := client.Chat.Completions.New(ctx, chatParams("Say hello."))
	if err != nil {
		t.Fatal(err)
	}
	want := done.Choices[0].Message.Content
	if words(want) != DefaultWords || done.Usage.CompletionTokens != DefaultWords || done.Choices[0].FinishReason != "stop" {
		t.Errorf("completion %s", done.RawJSON())
	}

	p := chatParams("Say hello.")
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("accumulator rejected %s", stream.Current().RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != want || acc.Usage.CompletionTokens != DefaultWords || acc.Usage.PromptTokens != done.Usage.PromptTokens {
		t.Errorf("accumulated %q %+v", acc.Choices[0].Message.Content, acc.Usage)
	}

	p = chatParams("Weather? call get_weather")
	p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object"}})}
	stream = client.Chat.Completions.NewStreaming(ctx, p)
	acc = openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	calls := acc.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Function.Name != "get_weather" || !json.Valid([]byte(calls[0].Function.Arguments)) || acc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("tool calls %+v", calls)
	}

	stream = client.Chat.Completions.NewStreaming(ctx, chatParams("x [[sim fault=midstream after=2]]"))
	n := 0
	for stream.Next() {
		n++
	}
	if err := stream.Err(); err == nil || n != 3 {
		t.Errorf("midstream: %d chunks, err %v", n, err)
	}
}

func TestSDKOpenAIRetries(t *testing.T) {
	s, client := openAIClient(t, 2)
	ctx := context.Background()
	// retry-after-ms (10) is read first, so the retries are quick.
	start := time.Now()
	done, err := client.Chat.Completions.New(ctx, chatParams("x [[sim fault=429 retry_after=0.01 times=2]]"))
	if err != nil || words(done.Choices[0].Message.Content) != DefaultWords {
		t.Fatalf("after retries: %v", err)
	}
	if s.Requests("sim-general") != 3 || time.Since(start) > 3*time.Second {
		t.Errorf("%d requests in %v", s.Requests("sim-general"), time.Since(start))
	}
	if got := s.LastHeaders().Get("X-Stainless-Retry-Count"); got != "2" {
		t.Errorf("retry count header %q", got)
	}

	_, err = client.Chat.Completions.New(ctx, chatParams("x [[sim fault=400]]"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "invalid_request_error" {
		t.Errorf("400: %v", err)
	}
}

func TestSDKOpenAIResponses(t *testing.T) {
	_, client := openAIClient(t, 0)
	ctx := context.Background()
	params := func(prompt string) responses.ResponseNewParams {
		return responses.ResponseNewParams{
			Model: "sim-reasoner",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
		}
	}
	done, err := client.Responses.New(ctx, params("Say hello."))
	if err != nil {
		t.Fatal(err)
	}
	want := done.OutputText()
	if words(want) != DefaultWords || done.Usage.OutputTokens != DefaultWords || done.Status != "completed" {
		t.Errorf("response %s", done.RawJSON())
	}

	stream := client.Responses.NewStreaming(ctx, params("Say hello."))
	var deltas strings.Builder
	var final *responses.Response
	var seq int64
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != seq {
			t.Errorf("sequence_number %d, want %d", ev.SequenceNumber, seq)
		}
		seq++
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.AsResponseOutputTextDelta().Delta)
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			final = &r
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if final == nil || final.OutputText() != want || deltas.String() != want || final.Usage.OutputTokens != DefaultWords {
		t.Errorf("stream: deltas %q, final %v", deltas.String(), final)
	}

	p := params("Weather? call get_weather")
	p.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
		Name: "get_weather", Parameters: map[string]any{"type": "object"}, Strict: openai.Bool(false)}}}
	stream = client.Responses.NewStreaming(ctx, p)
	var args string
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.function_call_arguments.delta":
			args += ev.AsResponseFunctionCallArgumentsDelta().Delta
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			final = &r
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	fc := final.Output[0].AsFunctionCall()
	if fc.Name != "get_weather" || fc.Arguments != args || !json.Valid([]byte(args)) {
		t.Errorf("function call %+v, streamed %q", fc, args)
	}

	stream = client.Responses.NewStreaming(ctx, params("x [[sim fault=midstream after=2]]"))
	var types []string
	for stream.Next() {
		types = append(types, string(stream.Current().Type))
	}
	if err := stream.Err(); err != nil {
		t.Errorf("the flat error event is yielded as an event by openai-go, got %v", err)
	}
	if len(types) < 2 || types[len(types)-2] != "error" || types[len(types)-1] != "response.failed" {
		t.Errorf("midstream events %v", types)
	}
}

func TestSDKAnthropic(t *testing.T) {
	s, client := anthropicClient(t, 1)
	ctx := context.Background()
	params := func(prompt string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{
			Model:     "sim-sonnet",
			MaxTokens: 256,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		}
	}
	done, err := client.Messages.New(ctx, params("Say hello."), aoption.WithHeader("anthropic-beta", "fine-grained-tool-streaming-2025-05-14"))
	if err != nil {
		t.Fatal(err)
	}
	if v, b := s.AnthropicHeaders(); v != "2023-06-01" || b != "fine-grained-tool-streaming-2025-05-14" {
		t.Errorf("anthropic headers %q %q", v, b)
	}
	want := done.Content[0].Text
	if words(want) != DefaultWords || done.Usage.OutputTokens != DefaultWords || done.StopReason != "end_turn" {
		t.Errorf("message %s", done.RawJSON())
	}

	stream := client.Messages.NewStreaming(ctx, params("Say hello."))
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != want || msg.Usage.OutputTokens != DefaultWords || msg.Usage.InputTokens != done.Usage.InputTokens || msg.StopReason != "end_turn" {
		t.Errorf("accumulated %s", msg.RawJSON())
	}

	p := params("Weather? call get_weather")
	p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"q": map[string]any{"type": "string"}}}}}}
	stream = client.Messages.NewStreaming(ctx, p)
	msg = anthropic.Message{}
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if b := msg.Content[0]; b.Type != "tool_use" || b.Name != "get_weather" || !json.Valid(b.Input) || msg.StopReason != "tool_use" {
		t.Errorf("tool use %s", msg.RawJSON())
	}

	stream = client.Messages.NewStreaming(ctx, params("x [[sim fault=midstream after=2]]"))
	for stream.Next() {
	}
	var apiErr *anthropic.Error
	if err := stream.Err(); !errors.As(err, &apiErr) || apiErr.Type() != "overloaded_error" {
		t.Errorf("midstream: %v", err)
	}

	// One retry after a 529 without Retry-After, then success.
	done, err = client.Messages.New(ctx, params("x [[sim fault=529 times=1]]"))
	if err != nil || done.StopReason != "end_turn" {
		t.Errorf("after a retry: %v", err)
	}
	_, err = client.Messages.New(ctx, params("x [[sim fault=529 times=5]]"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 529 {
		t.Errorf("529: %v", err)
	}
}
