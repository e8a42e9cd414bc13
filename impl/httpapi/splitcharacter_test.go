package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate/tollgate/impl/config"
)

// TestSplitCharacterReachesOtherFormatsWhole: an upstream of each format that splits an
// emoji's UTF-16 halves (\ud83d, then \ude00) between two deltas of its text, and another
// emoji's between two fragments of a tool call's arguments, one of the two events in a shape
// the gateway's fast reader leaves to encoding/json (a key in capitals, which an upstream may
// add), reaches a client of another format (openai-go's chat accumulator and Responses stream,
// anthropic-sdk-go's Messages accumulator) with the text and the arguments whole. On the code
// before, a chat or Messages upstream's halves came as U+FFFD when encoding/json read either
// event, and the arguments of every upstream format were read without joining halves at all.
func TestSplitCharacterReachesOtherFormatsWhole(t *testing.T) {
	const (
		text    = "Hi \U0001F600 there"
		args    = `{"q":"` + "\U0001F601" + `"}`
		slowKey = `,"Obfuscation":"x"` // foldable: the fast reader leaves the event to encoding/json
	)
	var chat strings.Builder
	head := `"id":"chatcmpl-sp","object":"chat.completion.chunk","created":1764777600,"model":"gpt-4.1-mini"`
	chunk := func(delta, extra string) {
		fmt.Fprintf(&chat, "data: {%s,\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]%s}\n\n", head, delta, extra)
	}
	chunk(`{"role":"assistant","content":""}`, "")
	chunk(`{"content":"Hi \ud83d"}`, "")
	chunk(`{"content":"\ude00 there"}`, slowKey)
	chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"search","arguments":""}}]}`, "")
	chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":\"\ud83d"}}]}`, slowKey)
	chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\ude01\"}"}}]}`, "")
	fmt.Fprintf(&chat, "data: {%s,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n", head)
	fmt.Fprintf(&chat, "data: {%s,\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":12,\"total_tokens\":22}}\n\n", head)
	chat.WriteString("data: [DONE]\n\n")

	var msgs strings.Builder
	event := func(name, data string) { fmt.Fprintf(&msgs, "event: %s\ndata: %s\n\n", name, data) }
	delta := func(index int, d, extra string) {
		event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s%s}`, index, d, extra))
	}
	event("message_start", `{"type":"message_start","message":{"id":"msg_sp","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)
	event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
	delta(0, `{"type":"thinking_delta","thinking":"a smile \ud83d"}`, "")
	delta(0, `{"type":"thinking_delta","thinking":"\ude00"}`, slowKey)
	delta(0, `{"type":"signature_delta","signature":"c2ln"}`, "")
	event("content_block_stop", `{"type":"content_block_stop","index":0}`)
	event("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`)
	delta(1, `{"type":"text_delta","text":"Hi \ud83d"}`, "")
	delta(1, `{"type":"text_delta","text":"\ude00 there"}`, slowKey)
	event("content_block_stop", `{"type":"content_block_stop","index":1}`)
	event("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"search","input":{}}}`)
	delta(2, `{"type":"input_json_delta","partial_json":"{\"q\":\"\ud83d"}`, slowKey)
	delta(2, `{"type":"input_json_delta","partial_json":"\ude01\"}"}`, "")
	event("content_block_stop", `{"type":"content_block_stop","index":2}`)
	event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":12}}`)
	event("message_stop", `{"type":"message_stop"}`)

	var resp strings.Builder
	seq := 0
	revent := func(name, data, extra string) {
		fmt.Fprintf(&resp, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s%s}\n\n", name, name, seq, data, extra)
		seq++
	}
	item := `{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hi \ud83d\ude00 there","annotations":[]}]}`
	revent("response.created", `"response":{"id":"resp_sp","object":"response","created_at":1764777600,"model":"gpt-5","status":"in_progress","output":[]}`, "")
	revent("response.output_item.added", `"output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","status":"in_progress","content":[]}`, "")
	revent("response.content_part.added", `"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}`, "")
	revent("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi \ud83d"`, "")
	revent("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"\ude00 there"`, slowKey)
	revent("response.output_text.done", `"item_id":"msg_1","output_index":0,"content_index":0,"text":"Hi \ud83d\ude00 there"`, "")
	revent("response.output_item.done", `"output_index":0,"item":`+item, "")
	call := `{"id":"fc_1","type":"function_call","call_id":"call_1","name":"search","status":"%s","arguments":"%s"}`
	whole := `{\"q\":\"\ud83d\ude01\"}`
	revent("response.output_item.added", `"output_index":1,"item":`+fmt.Sprintf(call, "in_progress", ""), "")
	revent("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":1,"delta":"{\"q\":\"\ud83d"`, slowKey)
	revent("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":1,"delta":"\ude01\"}"`, "")
	revent("response.function_call_arguments.done", `"item_id":"fc_1","output_index":1,"arguments":"`+whole+`"`, "")
	revent("response.output_item.done", `"output_index":1,"item":`+fmt.Sprintf(call, "completed", whole), "")
	revent("response.completed", `"response":{"id":"resp_sp","object":"response","created_at":1764777600,"model":"gpt-5","status":"completed","output":[`+item+`,`+fmt.Sprintf(call, "completed", whole)+`],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":12,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":22}}`, "")

	ctx := context.Background()
	params := map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}
	// Each client reads the text and the arguments of the one call (none: "").
	readChat := func(t *testing.T, oc openai.Client, model string) (string, string) {
		cs := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("smile and search")},
			Tools:    []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "search", Parameters: params})}})
		var acc openai.ChatCompletionAccumulator
		for cs.Next() {
			acc.AddChunk(cs.Current())
		}
		if err := cs.Err(); err != nil {
			t.Fatal(err)
		}
		m := acc.Choices[0].Message
		var a string
		for _, c := range m.ToolCalls {
			a += c.Function.Arguments
		}
		return m.Content, a
	}
	readResponses := func(t *testing.T, oc openai.Client, model string) (string, string) {
		rs := oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: model,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("smile and search")},
			Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("search", params, false)}})
		var deltas, a string
		for rs.Next() {
			switch ev := rs.Current(); ev.Type {
			case "response.output_text.delta":
				deltas += ev.Delta
			case "response.function_call_arguments.delta":
				a += ev.Delta
			case "response.completed":
				if got := ev.Response.OutputText(); got != deltas {
					t.Errorf("Responses client: the completed response's text %q, the deltas' %q", got, deltas)
				}
			}
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		return deltas, a
	}
	readMessages := func(t *testing.T, ac anthropic.Client, model string) (string, string) {
		ms := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 300,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("smile and search"))},
			Tools:    []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{Properties: params["properties"]}, "search")}})
		var msg anthropic.Message
		for ms.Next() {
			if err := msg.Accumulate(ms.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := ms.Err(); err != nil {
			t.Fatal(err)
		}
		var txt, a string
		for _, b := range msg.Content {
			switch b.Type {
			case "text":
				txt += b.Text
			case "tool_use":
				// The accumulated input, compacted as the chat and Responses arguments are.
				var v map[string]string
				if err := json.Unmarshal(b.Input, &v); err != nil {
					t.Errorf("Messages client: tool input %s: %v", b.Input, err)
				}
				out, _ := json.Marshal(v)
				a += string(out)
			}
		}
		return txt, a
	}

	for _, up := range []struct {
		kind, body string
		// wantArgs is the call's arguments ("": the upstream calls no tool).
		wantArgs string
		clients  []string
	}{
		{config.KindOpenAIChat, chat.String(), args, []string{"responses", "messages"}},
		{config.KindAnthropicMessages, msgs.String(), args, []string{"chat", "responses"}},
		{config.KindOpenAIResponses, resp.String(), args, []string{"chat", "messages"}},
	} {
		t.Run(up.kind, func(t *testing.T) {
			name := "split" + strings.ReplaceAll(strings.TrimPrefix(up.kind, "openai-"), "-", "")
			g, tenant := standInGateway(t, name, up.kind, cannedUpstream(t, "text/event-stream", up.body))
			oc, ac := openAIClient(g, t, tenant.Key), anthropicClient(g, t, tenant.Key)
			for _, client := range up.clients {
				var gotText, gotArgs string
				switch client {
				case "chat":
					gotText, gotArgs = readChat(t, oc, name+"-"+config.FamilyChat)
				case "responses":
					gotText, gotArgs = readResponses(t, oc, name+"-"+config.FamilyChat)
				case "messages":
					gotText, gotArgs = readMessages(t, ac, name+"-"+config.FamilyMessages)
				}
				if gotText != text || gotArgs != up.wantArgs {
					t.Errorf("%s client: text %q, arguments %q; want %q, %q", client, gotText, gotArgs, text, up.wantArgs)
				}
			}
		})
	}
}
