package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/sim"
)

// TestToolNamesTheUpstreamRefuses: a tool name the upstream's format refuses (OpenAI's
// ^[a-zA-Z0-9_-]{1,64}$, Anthropic's ^[a-zA-Z0-9_-]{1,128}$; the simulator refuses others in
// each API's words) is refused by the gateway before any upstream is called, with a 400 in the
// client's envelope that names the tool and the pattern, read here by the official SDKs: a
// Messages client's dotted MCP name and a 100-character name on a model served through chat,
// streamed or not; a chat client's name with a space, and a call of its history named
// files.read, on a model served through Messages; a Responses client's history call likewise.
// A name the upstream takes passes: 100 characters from a chat client to Messages, and from a
// Messages client to a Messages upstream. On the code before, each refused request reached the
// upstream and came back its 400.
func TestToolNamesTheUpstreamRefuses(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	oc := openAIClient(g, t, tenant.Key)
	ac := anthropicClient(g, t, tenant.Key)
	ctx := context.Background()
	long := strings.Repeat("a", 100)

	// messagesRefusal checks err is the Messages envelope's 400 saying each of words, and that
	// the upstream model was not called.
	messagesRefusal := func(t *testing.T, err error, upstream string, before int, words ...string) {
		t.Helper()
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest {
			t.Fatalf("want a 400, got %v", err)
		}
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(ae.RawJSON()), &body); err != nil || body.Type != "error" || body.Error.Type != "invalid_request_error" {
			t.Fatalf("envelope %s (%v)", ae.RawJSON(), err)
		}
		for _, w := range words {
			if !strings.Contains(body.Error.Message, w) {
				t.Errorf("message %q does not say %q", body.Error.Message, w)
			}
		}
		if n := g.Sim.Requests(upstream); n != before {
			t.Errorf("the upstream was called %d times", n-before)
		}
	}
	// chatRefusal is messagesRefusal for the OpenAI envelope, with its param.
	chatRefusal := func(t *testing.T, err error, param, upstream string, before int, words ...string) {
		t.Helper()
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != http.StatusBadRequest || oe.Type != "invalid_request_error" || oe.Param != param {
			t.Fatalf("want a 400 naming %s, got %v", param, err)
		}
		for _, w := range words {
			if !strings.Contains(oe.Message, w) {
				t.Errorf("message %q does not say %q", oe.Message, w)
			}
		}
		if n := g.Sim.Requests(upstream); n != before {
			t.Errorf("the upstream was called %d times", n-before)
		}
	}
	anthropicTool := func(name string) anthropic.ToolUnionParam {
		return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: name, InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}
	}
	messagesParams := func(model string, tools ...anthropic.ToolUnionParam) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64, Tools: tools,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Read main.go."))}}
	}

	t.Run("messages client on a chat upstream", func(t *testing.T) {
		const up = "sim-messages-via-chat"
		for _, c := range []struct {
			name string
			want []string
		}{
			{"mcp__files__files.read", []string{`"mcp__files__files.read"`, "^[a-zA-Z0-9_-]{1,64}$", "tools[1].name"}},
			{long, []string{`"` + long + `"`, "^[a-zA-Z0-9_-]{1,64}$", "tools[1].name", "the Anthropic Messages API, which takes it"}},
		} {
			params := messagesParams("messages-via-chat", anthropicTool("get_weather"), anthropicTool(c.name))
			before := g.Sim.Requests(up)
			_, err := ac.Messages.New(ctx, params)
			messagesRefusal(t, err, up, before, c.want...)
			// Streamed, the same 400 before the stream.
			stream := ac.Messages.NewStreaming(ctx, params)
			for stream.Next() {
				t.Errorf("event %s", stream.Current().Type)
			}
			messagesRefusal(t, stream.Err(), up, before, c.want...)
		}
	})

	t.Run("messages client on a messages upstream", func(t *testing.T) {
		done, err := ac.Messages.New(ctx, messagesParams("service-sonnet", anthropicTool(long)))
		if err != nil || done.StopReason == "" {
			t.Fatalf("a name Anthropic takes: %v", err)
		}
		if rec := g.Sim.LastRequest(); rec.Route != sim.RouteMessages || !strings.Contains(string(rec.Body), `"name":"`+long+`"`) {
			t.Errorf("upstream request on %s: %s", rec.Route, rec.Body)
		}
	})

	const up = "sim-chat-via-messages"
	chatTool := func(name string) openai.ChatCompletionToolUnionParam {
		return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name, Parameters: shared.FunctionParameters{"type": "object"}})
	}
	t.Run("chat client on a messages upstream", func(t *testing.T) {
		before := g.Sim.Requests(up)
		_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "chat-via-messages",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Read main.go.")},
			Tools:    []openai.ChatCompletionToolUnionParam{chatTool("read file")}})
		chatRefusal(t, err, "tools[0].function.name", up, before, `"read file"`, "^[a-zA-Z0-9_-]{1,128}$", "the Anthropic Messages API")

		history := []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Read main.go."),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "files.read", Arguments: `{"path":"main.go"}`}}}}}},
			openai.ToolMessage("package main", "call_1"),
			openai.UserMessage("Summarize the conversation."),
		}
		stream := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "chat-via-messages", Messages: history})
		for stream.Next() {
			t.Errorf("chunk %s", stream.Current().RawJSON())
		}
		chatRefusal(t, stream.Err(), "messages[1].tool_calls[0].function.name", up, before, `"files.read"`, "^[a-zA-Z0-9_-]{1,128}$")

		// A name Anthropic takes and OpenAI would not reaches the Messages upstream.
		done, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "chat-via-messages",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Read main.go.")},
			Tools:    []openai.ChatCompletionToolUnionParam{chatTool(long)}})
		if err != nil || len(done.Choices) != 1 {
			t.Fatalf("a name Anthropic takes: %v", err)
		}
		if rec := g.Sim.LastRequest(); rec.Route != sim.RouteMessages || !strings.Contains(string(rec.Body), `"name":"`+long+`"`) {
			t.Errorf("upstream request on %s: %s", rec.Route, rec.Body)
		}
	})

	t.Run("responses client on a messages upstream", func(t *testing.T) {
		before := g.Sim.Requests(up)
		_, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "chat-via-messages", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Read main.go.", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(`{"path":"main.go"}`, "call_1", "files.read"),
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String("call_1"),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("package main")}}},
		}}})
		chatRefusal(t, err, "input[1].name", up, before, `"files.read"`, "^[a-zA-Z0-9_-]{1,128}$")
	})
}

// TestRepeatedToolCallIDsReachTheUpstreamFresh: a history whose calls repeat an id (two calls
// of one turn, and a later turn's call, as upstreams whose ids restart every turn give them) is
// sent to an upstream of another format with the later calls and their results given fresh
// ids, paired as they were, and the repair named in x-tollgate-dropped-fields; the simulator
// refuses repeated ids as Anthropic ("`tool_use` ids must be unique") and OpenAI chat
// ("Duplicate value for 'tool_call_id'") do. An agent replaying its history is answered every
// turn, streamed or not, through openai-go on a model served by Messages and anthropic-sdk-go
// on a model served by chat. On the code before, each came back the provider's 400.
func TestRepeatedToolCallIDsReachTheUpstreamFresh(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	oc := openAIClient(g, t, tenant.Key)
	ac := anthropicClient(g, t, tenant.Key)
	ctx := context.Background()

	// upstreamIDs are the ids of the calls and of the results the upstream was sent, in order.
	upstreamIDs := func(t *testing.T, route sim.Route) (calls, results []string) {
		t.Helper()
		rec := g.Sim.LastRequest()
		if rec.Route != route {
			t.Fatalf("last upstream request on %s", rec.Route)
		}
		var body struct {
			Messages []struct {
				Role       string          `json:"role"`
				Content    json.RawMessage `json:"content"`
				ToolCallID string          `json:"tool_call_id"`
				ToolCalls  []struct {
					ID string `json:"id"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(rec.Body, &body); err != nil {
			t.Fatal(err)
		}
		for _, m := range body.Messages {
			for _, c := range m.ToolCalls {
				calls = append(calls, c.ID)
			}
			if m.ToolCallID != "" {
				results = append(results, m.ToolCallID)
			}
			var blocks []struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
			}
			if len(m.Content) > 0 && m.Content[0] == '[' {
				if err := json.Unmarshal(m.Content, &blocks); err != nil {
					t.Fatal(err)
				}
			}
			for _, b := range blocks {
				switch b.Type {
				case "tool_use":
					calls = append(calls, b.ID)
				case "tool_result":
					results = append(results, b.ToolUseID)
				}
			}
		}
		return calls, results
	}

	t.Run("chat client on a messages upstream", func(t *testing.T) {
		call := func(id, path string) openai.ChatCompletionMessageToolCallUnionParam {
			return openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"q":"` + path + `"}`}}}
		}
		turn := func(calls ...openai.ChatCompletionMessageToolCallUnionParam) openai.ChatCompletionMessageParamUnion {
			return openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: calls}}
		}
		params := openai.ChatCompletionNewParams{Model: "chat-via-messages", Tools: []openai.ChatCompletionToolUnionParam{weatherChatTool()},
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage("Weather in Paris and Rome?"),
				turn(call("call_0", "Paris"), call("call_0", "Rome")),
				openai.ToolMessage("sunny", "call_0"), openai.ToolMessage("rainy", "call_0"),
				openai.UserMessage("And Oslo?"),
				turn(call("call_0", "Oslo")),
				openai.ToolMessage("snowy", "call_0"),
				openai.UserMessage("Thanks."),
			}}
		var raw *http.Response
		done, err := oc.Chat.Completions.New(ctx, params, option.WithResponseInto(&raw))
		if err != nil {
			t.Fatalf("replayed history: %v", err)
		}
		if done.Choices[0].Message.Content == "" {
			t.Errorf("answer %s", done.RawJSON())
		}
		calls, results := upstreamIDs(t, sim.RouteMessages)
		if len(calls) != 3 || calls[0] == calls[1] || calls[1] == calls[2] || calls[0] == calls[2] ||
			!strings.HasPrefix(calls[1], "call_0_2") || !strings.HasPrefix(calls[2], "call_0_3") || strings.Join(results, ",") != strings.Join(calls, ",") {
			t.Errorf("upstream calls %q, results %q", calls, results)
		}
		if d := raw.Header.Get("x-tollgate-dropped-fields"); d != "messages[].tool_calls[] (repeated tool call id: a fresh one given)" {
			t.Errorf("dropped %q", d)
		}
		stream := oc.Chat.Completions.NewStreaming(ctx, params)
		var text string
		for stream.Next() {
			if c := stream.Current(); len(c.Choices) > 0 {
				text += c.Choices[0].Delta.Content
			}
		}
		if err := stream.Err(); err != nil || text == "" {
			t.Errorf("streamed: %q, %v", text, err)
		}
	})

	t.Run("messages client on a chat upstream", func(t *testing.T) {
		input := func(q string) map[string]any { return map[string]any{"q": q} }
		params := anthropic.MessageNewParams{Model: "messages-via-chat", MaxTokens: 64,
			Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
				InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"q": map[string]any{"type": "string"}}}}}},
			Messages: []anthropic.MessageParam{
				anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris and Rome?")),
				anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", input("Paris"), "get_weather"), anthropic.NewToolUseBlock("toolu_1", input("Rome"), "get_weather")),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "sunny", false), anthropic.NewToolResultBlock("toolu_1", "rainy", false)),
			}}
		var raw *http.Response
		done, err := ac.Messages.New(ctx, params, aoption.WithResponseInto(&raw))
		if err != nil {
			t.Fatalf("history: %v", err)
		}
		if done.StopReason == "" {
			t.Errorf("answer %s", done.RawJSON())
		}
		calls, results := upstreamIDs(t, sim.RouteChat)
		if strings.Join(calls, ",") != "toolu_1,toolu_1_2" || strings.Join(results, ",") != "toolu_1,toolu_1_2" {
			t.Errorf("upstream calls %q, results %q", calls, results)
		}
		if d := raw.Header.Get("x-tollgate-dropped-fields"); d != "messages[].content[] (repeated tool call id: a fresh one given)" {
			t.Errorf("dropped %q", d)
		}
		stream := ac.Messages.NewStreaming(ctx, params)
		msg := anthropic.Message{}
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil || msg.StopReason == "" {
			t.Errorf("streamed: %s, %v", msg.RawJSON(), err)
		}
	})
}
