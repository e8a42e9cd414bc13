package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate/tollgate/impl/config"
)

// TestInterleavedParallelToolCalls: a chat upstream that streams two parallel tool calls
// interleaved (a fragment of call 0, then call 1 begins, then the rest of call 0's arguments,
// then of call 1's; OpenAI sends the calls one after the other, some other chat providers do
// not) reaches every client with each call's arguments whole wherever a client acts on a call:
// openai-go's Responses stream at every function_call_arguments.done and output_item.done
// (Codex runs the tool on output_item.done), anthropic-sdk-go's Messages accumulator at every
// content_block_stop (Claude Code runs the tool then), and the chat route as the upstream sent
// it (the same format, relayed). On the code before, call 0's item and block were done when
// call 1 began, its arguments empty (wire-format trial s15h3).
func TestInterleavedParallelToolCalls(t *testing.T) {
	const (
		weather = `{"city":"Paris","unit":"celsius"}`
		search  = `{"query":"opening hours {Louvre}"}`
	)
	head := `"id":"chatcmpl-il","object":"chat.completion.chunk","created":1764777600,"model":"gpt-4.1-mini"`
	var stream strings.Builder
	chunk := func(delta string) {
		fmt.Fprintf(&stream, "data: {%s,\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", head, delta)
	}
	start := func(i int, id, name, args string) {
		chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}]}`, i, id, name, args))
	}
	more := func(i int, args string) {
		chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%q}}]}`, i, args))
	}
	chunk(`{"role":"assistant","content":null}`)
	start(0, "call_weather", "get_weather", "")
	more(0, `{"city":`)
	start(1, "call_search", "search", "")
	more(1, `{"query":`)
	more(0, `"Paris","unit":`)
	more(1, `"opening hours {Louvre}"`)
	more(0, `"celsius"}`)
	more(1, `}`)
	fmt.Fprintf(&stream, "data: {%s,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n", head)
	fmt.Fprintf(&stream, "data: {%s,\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":30,\"total_tokens\":70}}\n\n", head)
	stream.WriteString("data: [DONE]\n\n")
	want := map[string]string{"call_weather": weather, "call_search": search}

	g, tenant := standInGateway(t, "interleave", config.KindOpenAIChat, cannedUpstream(t, "text/event-stream", stream.String()))
	ctx := context.Background()
	oc, ac := openAIClient(g, t, tenant.Key), anthropicClient(g, t, tenant.Key)
	params := map[string]any{"type": "object", "properties": map[string]any{}}
	chatModel := "interleave-" + config.FamilyChat

	t.Run("responses", func(t *testing.T) {
		rs := oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: chatModel,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather and hours?")},
			Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", params, false), responses.ToolParamOfFunction("search", params, false)}})
		callOf := map[string]string{} // item id → call id
		deltas := map[string]string{}
		done := map[string]string{}
		for rs.Next() {
			ev := rs.Current()
			switch ev.Type {
			case "response.output_item.added":
				callOf[ev.Item.ID] = ev.Item.CallID
			case "response.function_call_arguments.delta":
				if _, ok := done[callOf[ev.ItemID]]; ok {
					t.Errorf("an arguments delta for %s after its item was done: %q", callOf[ev.ItemID], ev.Delta)
				}
				deltas[ev.ItemID] += ev.Delta
			case "response.function_call_arguments.done":
				if id := callOf[ev.ItemID]; ev.Arguments != want[id] {
					t.Errorf("function_call_arguments.done of %s: %q, want %q", id, ev.Arguments, want[id])
				}
			case "response.output_item.done":
				if ev.Item.Type != "function_call" {
					t.Errorf("an item of type %q", ev.Item.Type)
					continue
				}
				if ev.Item.Arguments.OfString != want[ev.Item.CallID] || deltas[ev.Item.ID] != want[ev.Item.CallID] {
					t.Errorf("output_item.done of %s: arguments %q, deltas %q, want %q", ev.Item.CallID, ev.Item.Arguments.OfString, deltas[ev.Item.ID], want[ev.Item.CallID])
				}
				done[ev.Item.CallID] = ev.Item.Arguments.OfString
			case "response.completed":
				for _, it := range ev.Response.Output {
					if it.Arguments.OfString != want[it.CallID] {
						t.Errorf("completed: %s with %q", it.CallID, it.Arguments.OfString)
					}
				}
			}
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		if len(done) != len(want) {
			t.Errorf("calls done: %v", done)
		}
	})

	t.Run("messages", func(t *testing.T) {
		schema := anthropic.ToolInputSchemaParam{Properties: map[string]any{}}
		ms := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: anthropic.Model("interleave-" + config.FamilyMessages), MaxTokens: 300,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather and hours?"))},
			Tools:    []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(schema, "get_weather"), anthropic.ToolUnionParamOfTool(schema, "search")}})
		var msg anthropic.Message
		stopped := map[string]string{}
		for ms.Next() {
			ev := ms.Current()
			if err := msg.Accumulate(ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == "content_block_stop" {
				b := msg.Content[ev.Index]
				if string(b.Input) != want[b.ID] {
					t.Errorf("content_block_stop of %s: input %s, want %s", b.ID, b.Input, want[b.ID])
				}
				stopped[b.ID] = string(b.Input)
			}
		}
		if err := ms.Err(); err != nil {
			t.Fatal(err)
		}
		if len(stopped) != len(want) || msg.StopReason != anthropic.StopReasonToolUse {
			t.Errorf("blocks stopped: %v, stop reason %q", stopped, msg.StopReason)
		}
	})

	t.Run("chat", func(t *testing.T) {
		tool := func(name string) openai.ChatCompletionToolUnionParam {
			return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name, Parameters: params})
		}
		cs := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: chatModel,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather and hours?")},
			Tools:    []openai.ChatCompletionToolUnionParam{tool("get_weather"), tool("search")}})
		var acc openai.ChatCompletionAccumulator
		var order []int64
		for cs.Next() {
			c := cs.Current()
			acc.AddChunk(c)
			for _, ch := range c.Choices {
				for _, tc := range ch.Delta.ToolCalls {
					order = append(order, tc.Index)
				}
			}
		}
		if err := cs.Err(); err != nil {
			t.Fatal(err)
		}
		// Relayed as the upstream sent it: the fragments in the upstream's order.
		if fmt.Sprint(order) != "[0 0 1 1 0 1 0 1]" {
			t.Errorf("tool call fragments by index %v, want the upstream's [0 0 1 1 0 1 0 1]", order)
		}
		calls := acc.Choices[0].Message.ToolCalls
		if len(calls) != 2 {
			t.Fatalf("tool calls: %+v", calls)
		}
		for _, c := range calls {
			if c.Function.Arguments != want[c.ID] {
				t.Errorf("chat %s: %q, want %q", c.ID, c.Function.Arguments, want[c.ID])
			}
		}
	})
}
