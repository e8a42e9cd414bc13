package sim

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// sdkToolResults are what the tools of the SDK agent loops answer.
var sdkToolResults = map[string]string{"list_datasets": listResult, "query_data": rowsResult}

// schemaMap decodes a JSON schema for an SDK's parameter map.
func schemaMap(t *testing.T, schema string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(schema), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSDKScriptChat: an agent loop on openai-go's streaming chat completions, its accumulator
// and its message params, plays the script to the answer that quotes the query's rows.
func TestSDKScriptChat(t *testing.T) {
	_, client := openAIClient(t, 0)
	ctx := context.Background()
	p := chatParams(scriptPrompt)
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	for _, n := range []string{"list_datasets", "query_data"} {
		schema := listDatasetsSchema
		if n == "query_data" {
			schema = queryDataSchema
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: n, Parameters: shared.FunctionParameters(schemaMap(t, schema))}))
	}
	var calls []string
	for range 5 {
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
		msg := acc.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			if want := ScriptAnswer("query_data", rowsResult); msg.Content != want || acc.Choices[0].FinishReason != "stop" || acc.Usage.CompletionTokens != int64(words(want)) {
				t.Errorf("answer %q (%d tokens), want %q", msg.Content, acc.Usage.CompletionTokens, want)
			}
			break
		}
		call := msg.ToolCalls[0]
		calls = append(calls, call.Function.Name+" "+call.Function.Arguments)
		p.Messages = append(p.Messages, msg.ToParam(), openai.ToolMessage(sdkToolResults[call.Function.Name], call.ID))
	}
	if len(calls) != 2 || calls[0] != "list_datasets {}" || calls[1] != "query_data "+scriptQuery {
		t.Errorf("calls %q", calls)
	}
}

// TestSDKScriptResponses: the same loop on openai-go's Responses API, not streamed.
func TestSDKScriptResponses(t *testing.T) {
	_, client := openAIClient(t, 0)
	ctx := context.Background()
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(scriptPrompt, responses.EasyInputMessageRoleUser)}
	var tools []responses.ToolUnionParam
	for _, n := range []string{"list_datasets", "query_data"} {
		schema := listDatasetsSchema
		if n == "query_data" {
			schema = queryDataSchema
		}
		tools = append(tools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
			Name: n, Parameters: schemaMap(t, schema), Strict: openai.Bool(true)}})
	}
	var calls []string
	for range 5 {
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sim-reasoner", Tools: tools,
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Output[0].Type != "function_call" {
			if want := ScriptAnswer("query_data", rowsResult); r.OutputText() != want || r.Usage.OutputTokens != int64(words(want)) {
				t.Errorf("answer %q, want %q", r.OutputText(), want)
			}
			break
		}
		fc := r.Output[0].AsFunctionCall()
		calls = append(calls, fc.Name+" "+fc.Arguments)
		out := responses.ResponseInputItemParamOfFunctionCallOutput(sdkToolResults[fc.Name])
		out.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
		input = append(input, responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name), out)
	}
	if len(calls) != 2 || calls[0] != "list_datasets {}" || calls[1] != "query_data "+scriptQuery {
		t.Errorf("calls %q", calls)
	}
}

// TestSDKScriptAnthropic: the same loop on anthropic-sdk-go's streaming Messages API, its
// accumulator and Message.ToParam.
func TestSDKScriptAnthropic(t *testing.T) {
	_, client := anthropicClient(t, 0)
	ctx := context.Background()
	p := anthropic.MessageNewParams{
		Model:     "sim-sonnet",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(scriptPrompt))},
	}
	for _, n := range []string{"list_datasets", "query_data"} {
		schema := listDatasetsSchema
		if n == "query_data" {
			schema = queryDataSchema
		}
		m := schemaMap(t, schema)
		in := anthropic.ToolInputSchemaParam{Properties: m["properties"]}
		if req, ok := m["required"].([]any); ok {
			for _, r := range req {
				in.Required = append(in.Required, r.(string))
			}
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: n, InputSchema: in}})
	}
	var calls []string
	for range 5 {
		stream := client.Messages.NewStreaming(ctx, p)
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		b := msg.Content[0]
		if b.Type != "tool_use" {
			if want := ScriptAnswer("query_data", rowsResult); b.Text != want || msg.StopReason != "end_turn" || msg.Usage.OutputTokens != int64(words(want)) {
				t.Errorf("answer %q, want %q", b.Text, want)
			}
			break
		}
		calls = append(calls, b.Name+" "+string(b.Input))
		p.Messages = append(p.Messages, msg.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(b.ID, sdkToolResults[b.Name], false)))
	}
	if len(calls) != 2 || calls[0] != "list_datasets {}" || calls[1] != "query_data "+scriptQuery {
		t.Errorf("calls %q", calls)
	}
}
