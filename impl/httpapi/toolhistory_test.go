package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/sim"
)

// TestToolHistoryToMessagesIsMadeValid: the Messages API refuses, with a 400, a request whose
// messages hold tool calls or results but that defines no tools, and one where a tool call is
// not answered in the next turn or a result's call is not in the turn before; the simulator
// plays both rules, in Anthropic's words. Chat and Responses clients (openai-go here) send such
// histories to a model served by Messages: opencode's compaction turn sends the whole history
// without tools to have it summarised, and a call the user cancelled has no result. The
// translation declares the history's tools with tool_choice none, gives a call without a
// result an error result, puts a result sent after a user message first in its turn, and turns
// a result without a call into text, naming each change in x-tollgate-dropped-fields; every
// answer is validated against the OpenAPI document. On the code before, each of these came back
// the provider's 400.
func TestToolHistoryToMessagesIsMadeValid(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()
	const model = "chat-via-messages"

	upstream := func(t *testing.T) (tools []string, choice string) {
		t.Helper()
		rec := g.Sim.LastRequest()
		if rec.Route != sim.RouteMessages {
			t.Fatalf("last upstream request on %s", rec.Route)
		}
		var body struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			ToolChoice json.RawMessage `json:"tool_choice"`
		}
		if err := json.Unmarshal(rec.Body, &body); err != nil {
			t.Fatal(err)
		}
		for _, tool := range body.Tools {
			tools = append(tools, tool.Name)
		}
		return tools, string(body.ToolChoice)
	}
	call := func(id, name string) openai.ChatCompletionMessageToolCallUnionParam {
		return openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: name, Arguments: `{"path":"main.go"}`}}}
	}
	calls := func(cs ...openai.ChatCompletionMessageToolCallUnionParam) openai.ChatCompletionMessageParamUnion {
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: cs}}
	}

	t.Run("chat compaction turn without tools", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Fix the bug in main.go."),
			calls(call("call_1", "read"), call("call_2", "grep")),
			openai.ToolMessage("package main", "call_1"), openai.ToolMessage("main.go:3", "call_2"),
			openai.AssistantMessage("Fixed."),
			openai.UserMessage("Provide a detailed summary of our conversation above."),
		}}
		var raw *http.Response
		done, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&raw))
		if err != nil {
			t.Fatalf("compaction turn: %v", err)
		}
		if done.Choices[0].Message.Content == "" || len(done.Choices[0].Message.ToolCalls) != 0 {
			t.Errorf("answer %s", done.RawJSON())
		}
		if tools, choice := upstream(t); len(tools) != 2 || tools[0] != "read" || tools[1] != "grep" || choice != `{"type":"none"}` {
			t.Errorf("upstream tools %v, tool_choice %s", tools, choice)
		}
		if d := raw.Header.Get("x-tollgate-dropped-fields"); d != "" {
			t.Errorf("dropped %q", d)
		}
		// Streamed, the same.
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var text string
		for stream.Next() {
			if c := stream.Current(); len(c.Choices) > 0 {
				text += c.Choices[0].Delta.Content
			}
		}
		if err := stream.Err(); err != nil || text == "" {
			t.Errorf("streamed compaction turn: %q, %v", text, err)
		}
	})

	t.Run("chat cancelled call", func(t *testing.T) {
		var raw *http.Response
		done, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
			Tools: []openai.ChatCompletionToolUnionParam{weatherChatTool()},
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage("Weather in Paris and Rome?"),
				calls(call("call_1", "get_weather"), call("call_2", "get_weather")),
				openai.ToolMessage(`{"temp":21}`, "call_2"),
				openai.UserMessage("Stop, never mind Paris."),
			}}, option.WithResponseInto(&raw))
		if err != nil {
			t.Fatalf("cancelled call: %v", err)
		}
		if done.Choices[0].FinishReason == "" {
			t.Errorf("answer %s", done.RawJSON())
		}
		if tools, choice := upstream(t); len(tools) != 1 || choice != "" {
			t.Errorf("upstream tools %v, tool_choice %s", tools, choice)
		}
		if d := raw.Header.Get("x-tollgate-dropped-fields"); d != "messages[].tool_calls[] (no tool result: an error result added)" {
			t.Errorf("dropped %q", d)
		}
	})

	output := func(id, out string) responses.ResponseInputItemUnionParam {
		return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String(id),
			Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(out)}}}
	}
	user := func(text string) responses.ResponseInputItemUnionParam {
		return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser)
	}

	t.Run("responses compaction turn without tools", func(t *testing.T) {
		items := responses.ResponseInputParam{
			user("Fix the bug in main.go."),
			responses.ResponseInputItemParamOfFunctionCall(`{"path":"main.go"}`, "call_1", "read"),
			output("call_1", "package main"),
			user("Provide a detailed summary of our conversation above."),
		}
		var raw *http.Response
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}}, option.WithResponseInto(&raw))
		if err != nil {
			t.Fatalf("compaction turn: %v", err)
		}
		if r.Status != "completed" || r.OutputText() == "" {
			t.Errorf("response %s", r.RawJSON())
		}
		if tools, choice := upstream(t); len(tools) != 1 || tools[0] != "read" || choice != `{"type":"none"}` {
			t.Errorf("upstream tools %v, tool_choice %s", tools, choice)
		}
		if d := raw.Header.Get("x-tollgate-dropped-fields"); d != "" {
			t.Errorf("dropped %q", d)
		}
	})

	t.Run("responses cancelled, late and stray results", func(t *testing.T) {
		items := responses.ResponseInputParam{
			user("Read main.go and util.go."),
			responses.ResponseInputItemParamOfFunctionCall(`{"path":"main.go"}`, "call_1", "read"),
			responses.ResponseInputItemParamOfFunctionCall(`{"path":"util.go"}`, "call_2", "read"),
			user("Skip main.go."),
			output("call_2", "package util"),
			output("call_9", "an old result"),
		}
		var raw *http.Response
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items},
			Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "read", Parameters: map[string]any{"type": "object"}, Strict: openai.Bool(false)}}}},
			option.WithResponseInto(&raw))
		completed := false
		for stream.Next() {
			completed = completed || stream.Current().Type == "response.completed"
		}
		if err := stream.Err(); err != nil || !completed {
			t.Fatalf("streamed: completed %v, %v", completed, err)
		}
		if d := raw.Header.Get("x-tollgate-dropped-fields"); d != "input[] (no matching tool call: sent as text), input[] (no tool result: an error result added)" {
			t.Errorf("dropped %q", d)
		}
	})
}
