package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// contractConfig has, for every route, a model on a same-format upstream and one on an upstream
// of another format.
func contractConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := passthroughConfig(t)
	add := func(id, family, provider string) {
		cfg.Models = append(cfg.Models, config.Model{ID: id, Family: family, OwnedBy: "test",
			Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, MaxOutputTokens: 4096,
			Backend: &config.Upstream{Provider: provider, Model: "sim-" + id}})
		cfg.Plans[0].Models = append(cfg.Plans[0].Models, id)
	}
	add("chat-via-messages", config.FamilyChat, "sim-anthropic")
	add("messages-via-chat", config.FamilyMessages, "sim-openai-chat")
	add("messages-via-responses", config.FamilyMessages, "sim-openai-responses")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func openAIClient(g *apitest.Gateway, t *testing.T, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey(key),
		option.WithMaxRetries(0), option.WithHTTPClient(g.Client(t)))
}

// anthropicClient authenticates with Authorization: Bearer (an auth token) and the base URL
// without /v1, as the spec says.
func anthropicClient(g *apitest.Gateway, t *testing.T, key string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(g.URL), aoption.WithAuthToken(key), aoption.WithAPIKey(""),
		aoption.WithMaxRetries(0), aoption.WithHTTPClient(g.Client(t)))
}

func TestOpenAIChatSDK(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()
	for _, model := range []string{"service-flint-base", "chat-via-messages", "service-flint"} {
		t.Run(model, func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{
				openai.SystemMessage("Be brief."), openai.UserMessage("Say hello."),
			}}
			var raw *http.Response
			done, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&raw))
			if err != nil {
				t.Fatal(err)
			}
			text := done.Choices[0].Message.Content
			if text == "" || done.Model != model || done.Choices[0].FinishReason != "stop" || done.Usage.CompletionTokens == 0 || done.Usage.PromptTokens == 0 {
				t.Errorf("completion %s", done.RawJSON())
			}
			if raw.Header.Get("x-tollgate-expert") == "" {
				t.Error("no expert header")
			}

			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := client.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				if !acc.AddChunk(stream.Current()) {
					t.Fatalf("accumulator rejected %s", stream.Current().RawJSON())
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if acc.Choices[0].Message.Content != text || acc.Usage.CompletionTokens != done.Usage.CompletionTokens || acc.Choices[0].FinishReason != "stop" {
				t.Errorf("streamed %q usage %+v, want %q", acc.Choices[0].Message.Content, acc.Usage, text)
			}

			tools := openai.ChatCompletionNewParams{Model: model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris? call get_weather")},
				Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
					Name: "get_weather", Description: openai.String("Weather by city"),
					Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}})},
			}
			tc, err := client.Chat.Completions.New(ctx, tools)
			if err != nil {
				t.Fatal(err)
			}
			calls := tc.Choices[0].Message.ToolCalls
			if len(calls) != 1 || calls[0].Function.Name != "get_weather" || !json.Valid([]byte(calls[0].Function.Arguments)) || tc.Choices[0].FinishReason != "tool_calls" {
				t.Fatalf("tool call %s", tc.RawJSON())
			}
			stream = client.Chat.Completions.NewStreaming(ctx, tools)
			acc = openai.ChatCompletionAccumulator{}
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if sc := acc.Choices[0].Message.ToolCalls; len(sc) != 1 || sc[0].Function.Name != "get_weather" || sc[0].Function.Arguments != calls[0].Function.Arguments {
				t.Errorf("streamed tool calls %+v", sc)
			}
			// The tool result goes back and the model answers in text.
			next := tools
			next.Messages = append(next.Messages, tc.Choices[0].Message.ToParam(), openai.ToolMessage(`{"temp":21}`, calls[0].ID))
			final, err := client.Chat.Completions.New(ctx, next)
			if err != nil || final.Choices[0].Message.Content == "" || final.Choices[0].FinishReason != "stop" {
				t.Errorf("after the tool result: %v %s", err, final.RawJSON())
			}
		})
	}
}

func TestOpenAIResponsesSDK(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()
	for _, model := range []string{"test-responses", "service-flint-base"} {
		t.Run(model, func(t *testing.T) {
			params := responses.ResponseNewParams{Model: model, Instructions: openai.String("Be brief."),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")}}
			done, err := client.Responses.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			text := done.OutputText()
			if text == "" || done.Status != "completed" || done.Usage.OutputTokens == 0 {
				t.Errorf("response %s", done.RawJSON())
			}
			stream := client.Responses.NewStreaming(ctx, params)
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
			if final == nil || final.OutputText() != text || deltas.String() != text || final.Usage.OutputTokens != done.Usage.OutputTokens {
				t.Errorf("stream: deltas %q final %v, want %q", deltas.String(), final, text)
			}

			tp := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather? call get_weather")},
				Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
					Parameters: map[string]any{"type": "object"}, Strict: openai.Bool(false)}}}}
			tr, err := client.Responses.New(ctx, tp)
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Output) == 0 || tr.Output[0].Type != "function_call" || tr.Output[0].AsFunctionCall().Name != "get_weather" {
				t.Errorf("function call %s", tr.RawJSON())
			}
		})
	}
}

func TestAnthropicMessagesSDK(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := anthropicClient(g, t, tenant.Key)
	ctx := context.Background()
	for _, model := range []string{"service-sonnet", "messages-via-chat", "messages-via-responses"} {
		t.Run(model, func(t *testing.T) {
			params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
				System:   []anthropic.TextBlockParam{{Text: "Be brief."}},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))}}
			done, err := client.Messages.New(ctx, params, aoption.WithHeader("anthropic-beta", "fine-grained-tool-streaming-2025-05-14"))
			if err != nil {
				t.Fatal(err)
			}
			if len(done.Content) == 0 || done.Content[0].Text == "" || done.StopReason != "end_turn" || done.Usage.OutputTokens == 0 {
				t.Fatalf("message %s", done.RawJSON())
			}
			if model == "service-sonnet" {
				if v, b := g.Sim.AnthropicHeaders(); v != "2023-06-01" || b != "fine-grained-tool-streaming-2025-05-14" {
					t.Errorf("anthropic headers not forwarded: %q %q", v, b)
				}
			}
			stream := client.Messages.NewStreaming(ctx, params)
			var msg anthropic.Message
			for stream.Next() {
				if err := msg.Accumulate(stream.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if msg.Content[0].Text != done.Content[0].Text || msg.Usage.OutputTokens != done.Usage.OutputTokens || msg.StopReason != "end_turn" {
				t.Errorf("accumulated %s, want %q", msg.RawJSON(), done.Content[0].Text)
			}
			tp := params
			tp.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather? call get_weather"))}
			tp.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
				InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"q": map[string]any{"type": "string"}}}}}}
			stream = client.Messages.NewStreaming(ctx, tp)
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
		})
	}
}

func responsesParams(model, prompt string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}}
}

// TestInferenceEdges: limits and hints a user runs into.
func TestInferenceEdges(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	// A small bound sent to a Responses upstream (which refuses bounds under 16) still works.
	status, _, body := do(t, c, g.URL, request{"POST", "/v1/chat/completions", chatBody("test-responses", "hi", false, 10)}, bearer)
	if status != 200 {
		t.Errorf("max_tokens 10 through a Responses upstream: %d %s", status, body)
	}
	// An input beyond the context window is a 400, before any upstream is called.
	calls := g.Sim.TotalRequests()
	// Surely over the window: 1.2 MB of text is 200,000 tokens even at six bytes a token (the
	// check's count, convert.ContextBytesPerToken), against service-flint-base's 128,000.
	long := strings.Repeat("lorem ipsum ", 100_000)
	status, _, body = do(t, c, g.URL, request{"POST", "/v1/chat/completions", chatBody("service-flint-base", long, false, 16)}, bearer)
	if status != 400 || !strings.Contains(string(body), "maximum context length is 128000 tokens") || !strings.Contains(string(body), `"code":"context_length_exceeded"`) || g.Sim.TotalRequests() != calls {
		t.Errorf("over the context window: %d %.300s", status, body)
	}
	// Each route words the refusal as its provider does, since clients act on the words:
	// Claude Code compacts on Anthropic's "prompt is too long: N tokens > M maximum" (trial h10
	// D1), OpenAI's Responses clients look for "exceeds the context window".
	longer := strings.Repeat("lorem ipsum ", 120_000) // 240,000 tokens at six bytes a token, beyond service-sonnet's 200,000
	status, _, body = do(t, c, g.URL, request{"POST", "/v1/messages",
		`{"model":"service-sonnet","max_tokens":16,"messages":[{"role":"user","content":"` + longer + `"}]}`}, bearer)
	if status != 400 || !regexp.MustCompile(`"message":"prompt is too long: \d+ tokens > 200000 maximum`).Match(body) || g.Sim.TotalRequests() != calls {
		t.Errorf("over the context window on /v1/messages: %d %.300s", status, body)
	}
	status, _, body = do(t, c, g.URL, request{"POST", "/v1/responses",
		`{"model":"service-flint-base","max_output_tokens":16,"input":"` + long + `"}`}, bearer)
	if status != 400 || !strings.Contains(string(body), `"message":"Your input exceeds the context window of this model`) ||
		!strings.Contains(string(body), `"code":"context_length_exceeded"`) || g.Sim.TotalRequests() != calls {
		t.Errorf("over the context window on /v1/responses: %d %.300s", status, body)
	}
	// Near the window, the provider's count decides: 180,000 repetitions of "word " are 180,000
	// tokens by the providers' tokenizers (five bytes a token), within service-sonnet's
	// 200,000, and 225,000 at four bytes a token, which refused them (a newcomer's trial). They
	// are sent upstream.
	near := strings.Repeat("word ", 180_000)
	status, _, body = do(t, c, g.URL, request{"POST", "/v1/messages",
		`{"model":"service-sonnet","max_tokens":16,"messages":[{"role":"user","content":"` + near + `"}]}`}, bearer)
	if status != 200 || g.Sim.TotalRequests() != calls+1 {
		t.Errorf("text of five bytes a token within the window: %d %.300s (upstream requests %d, want %d)", status, body, g.Sim.TotalRequests(), calls+1)
	}
	// The same characters sent \u-escaped (as Python's json.dumps does) are not counted six
	// times: 100,000 "é" are about 25,000 tokens, within the window, whether escaped or not.
	escaped := `{"model":"service-flint-base","max_tokens":16,"messages":[{"role":"user","content":"` + strings.Repeat(`\u00e9`, 100_000) + `"}]}`
	if status, _, body = do(t, c, g.URL, request{"POST", "/v1/chat/completions", escaped}, bearer); status != 200 {
		t.Errorf("escaped text within the context window: %d %.200s", status, body)
	}
	// max_completion_tokens over the limit is clamped, and the header names that field.
	status, hdr, body := do(t, c, g.URL, request{"POST", "/v1/chat/completions", `{"model":"service-flint-base","max_completion_tokens":1000000,"messages":[{"role":"user","content":"hi"}]}`}, bearer)
	if status != 200 || hdr.Get("x-tollgate-clamped-fields") != "max_completion_tokens=32768" {
		t.Errorf("max_completion_tokens: %d %q %s", status, hdr.Get("x-tollgate-clamped-fields"), body)
	}
	// Messages needs at least one message.
	status, _, body = do(t, c, g.URL, request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":10,"messages":[]}`}, bearer)
	if status != 400 {
		t.Errorf("empty messages: %d %s", status, body)
	}
}

// TestBaseURLHints: a base URL with one /v1 too many, or one too few, or with a route in it,
// gets a hint, in the envelope of the client that made the path: an Anthropic SDK given the
// OpenAI route as its base URL (/v1/chat/completions/v1/messages), or a client that adds
// /messages given the gateway's address alone (/messages), reads the Messages envelope with
// its request-id header; an OpenAI SDK given a route (/v1/chat/completions/chat/completions)
// reads its own. Newcomer trial h1: those three were a bare "Invalid URL" in the OpenAI
// envelope. An MCP client given /mcp, /v1/mcp or /api/mcp/ is told the endpoint's path.
func TestBaseURLHints(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	for path, want := range map[string]struct{ hint, envelope string }{
		"/v1/v1/messages":                       {"should not end with /v1", `"type":"error"`},
		"/v1/v1/chat/completions":               {"ends with a single /v1", `"error":{"message"`},
		"/chat/completions":                     {"should end with /v1", `"error":{"message"`},
		"/v1/chat/completions/v1/messages":      {"the gateway's address alone, without /v1 or a route", `"type":"error"`},
		"/v1/messages/v1/messages/count_tokens": {"the gateway's address alone, without /v1 or a route", `"type":"error"`},
		"/messages":                             {"needs one that ends with /v1", `"type":"error"`},
		"/v1/chat/completions/chat/completions": {"ends with /v1, without a route (they add /chat/completions", `"error":{"message"`},
		"/v1/responses/responses":               {"without a route (they add /responses", `"error":{"message"`},
		"/mcp":                                  {"the MCP endpoint is /api/mcp", `"error":{"message"`},
		"/v1/mcp":                               {"the MCP endpoint is /api/mcp", `"error":{"message"`},
		"/api/mcp/":                             {"the MCP endpoint is /api/mcp", `"error":{"message"`},
		"/v1/messages/chat/completions":         {"without a route (they add /chat/completions", `"error":{"message"`},
	} {
		res, err := http.Post(g.URL+path, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 404 || !strings.Contains(string(b), want.hint) || !strings.Contains(string(b), want.envelope) {
			t.Errorf("%s: %d %s", path, res.StatusCode, b)
		}
		if anthropic := strings.Contains(want.envelope, `"type"`); anthropic && (res.Header.Get("request-id") == "" ||
			!strings.Contains(string(b), `"request_id":"`+res.Header.Get("request-id")+`"`)) {
			t.Errorf("%s: the Messages envelope without its request-id header (%q): %s", path, res.Header.Get("request-id"), b)
		}
	}
	// A path of the gateway's own API that ends as a route does is no base URL mistake.
	res, err := http.Post(g.URL+"/v1/agents/demo/x/messages", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 404 || strings.Contains(string(b), "base URL") {
		t.Errorf("/v1/agents/demo/x/messages: %d %s", res.StatusCode, b)
	}
}

// TestStreamHeartbeatsWhileUpstreamSilent: while the upstream is silent mid-stream, the client
// receives comment heartbeats, and the stream then ends normally.
func TestStreamHeartbeatsWhileUpstreamSilent(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t), Heartbeat: 40 * time.Millisecond})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	out := readMessagesStream(t, g, tenant.Key, `{"model":"service-sonnet","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"hi [[sim fault=stall ms=300 after=2]]"}]}`)
	if n := strings.Count(out, ": keep-alive\n\n"); n < 3 {
		t.Errorf("%d heartbeats during a 300 ms silence with a 40 ms interval:\n%s", n, out)
	}
	if !strings.HasSuffix(out, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Errorf("the stream did not end with message_stop:\n%s", out)
	}
}

// TestDroppedAdvisoryFieldsAreNamed: advisory fields a translated upstream cannot use are
// dropped and named in a response header, never silently.
func TestDroppedAdvisoryFieldsAreNamed(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	c := g.Client(t)
	status, h, body := do(t, c, g.URL, request{"POST", "/v1/chat/completions",
		`{"model":"chat-via-messages","max_tokens":16,"metadata":{"a":"b"},"service_tier":"auto","messages":[{"role":"user","content":"hi"}]}`},
		map[string]string{"Authorization": "Bearer " + tenant.Key})
	dropped := h.Get("x-tollgate-dropped-fields")
	if status != 200 || !strings.Contains(dropped, "metadata") || !strings.Contains(dropped, "service_tier") {
		t.Fatalf("status %d, dropped %q: %s", status, dropped, body)
	}
	if strings.Contains(string(g.Sim.LastRequest().Body), "service_tier") {
		t.Error("a dropped field reached the upstream")
	}
	// A field that changes the answer and cannot be honoured is a 400 naming it.
	status, _, body = do(t, c, g.URL, request{"POST", "/v1/chat/completions",
		`{"model":"chat-via-messages","max_tokens":16,"n":2,"messages":[{"role":"user","content":"hi"}]}`},
		map[string]string{"Authorization": "Bearer " + tenant.Key})
	if status != 400 || !strings.Contains(string(body), `"param":"n"`) {
		t.Errorf("n=2 to a Messages upstream: %d %s", status, body)
	}
}

// TestFusionKeepsWhatOnlyTheClientFormatKnows: a request the neutral form cannot hold (here a
// role only its own format might know) still reaches a same-format expert of service-flint,
// untouched, rather than being refused.
func TestFusionKeepsWhatOnlyTheClientFormatKnows(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	c := g.Client(t)
	status, h, body := do(t, c, g.URL, request{"POST", "/v1/chat/completions",
		`{"model":"service-flint","max_tokens":16,"messages":[{"role":"critic","content":"a role of tomorrow"},{"role":"user","content":"hello"}]}`},
		map[string]string{"Authorization": "Bearer " + tenant.Key})
	// The simulator, like OpenAI, refuses the unknown role: the refusal is the upstream's.
	if (status != 200 && !strings.Contains(string(body), "the upstream refused")) || g.Sim.Requests("sim-general") != 1 {
		t.Fatalf("status %d expert %q, sim-general saw %d: %s", status, h.Get("x-tollgate-expert"), g.Sim.Requests("sim-general"), body)
	}
	if !strings.Contains(string(g.Sim.LastRequest().Body), `"critic"`) {
		t.Error("the request was not passed through untouched")
	}
}

// TestModelNotFoundOnInferenceRoutes: an unknown id, an id the account may not use, and an id
// sent to the wrong family are 404 model-not-found in the route's envelope; the last names the
// route that serves the model, the others where the ids the key may use are listed (newcomer
// trial h1: a client's default model, gpt-4o, was told only that it does not exist).
func TestModelNotFoundOnInferenceRoutes(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	if err := g.Accounts.RevokeModel(context.Background(), tenant.Account.ID, "service-flint-base"); err != nil {
		t.Fatal(err)
	}
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	cases := []struct {
		r    request
		want string
	}{
		{request{"POST", "/v1/chat/completions", chatBody("no-such-model", "hi", false, 16)}, `"code":"model_not_found"`},
		{request{"POST", "/v1/chat/completions", chatBody("gpt-4o", "hi", false, 16)}, "GET /v1/models lists the models this key may use"},
		{request{"POST", "/v1/responses", `{"model":"gpt-5","input":"hi"}`}, "GET /v1/models lists the models this key may use"},
		{request{"POST", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`}, "GET /v1/models lists the models this key may use"},
		{request{"POST", "/v1/chat/completions", chatBody("service-flint-base", "hi", false, 16)}, `"code":"model_not_found"`},
		{request{"POST", "/v1/chat/completions", chatBody("service-sonnet", "hi", false, 16)}, "send it to POST /v1/messages"},
		{request{"POST", "/v1/responses", `{"model":"service-sonnet","input":"hi"}`}, `"code":"model_not_found"`},
		{request{"POST", "/v1/messages", `{"model":"service-flint","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`}, `"type":"not_found_error"`},
		{request{"POST", "/v1/messages", `{"model":"service-flint","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`}, "send it to POST /v1/chat/completions"},
		// A model the account may not use is not said to be served elsewhere.
		{request{"POST", "/v1/messages", `{"model":"service-flint-base","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`}, "does not exist or you do not have access to it"},
		{request{"POST", "/v1/messages", `{"model":"service-flint-base","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`}, "GET /v1/models lists"},
	}
	for _, tc := range cases {
		status, _, body := do(t, c, g.URL, tc.r, bearer)
		if status != 404 || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s: %d %s", tc.r.path, tc.r.body, status, body)
		}
	}
	if g.Sim.TotalRequests() != 0 {
		t.Error("a request for an unavailable model reached an upstream")
	}
}

// TestSilentUpstreamStreamIsCutOff: an upstream that stops sending for maxSilentHeartbeats
// heartbeat intervals is cut off with the format's in-band error, the stream ends, and what
// was produced is billed once.
func TestSilentUpstreamStreamIsCutOff(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t), Heartbeat: 5 * time.Millisecond})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	out := readMessagesStream(t, g, tenant.Key, `{"model":"service-sonnet","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"hi [[sim fault=stall ms=600000 after=2]]"}]}`)
	if !strings.Contains(out, "event: error\n") || !strings.Contains(out, "the upstream sent nothing for too long") {
		t.Fatalf("no in-band error after the upstream went silent:\n%s", out)
	}
	if n := strings.Count(out, ": keep-alive\n\n"); n != 40 {
		t.Errorf("%d heartbeats before the cut-off, want 40", n)
	}
	waitSettled(t, g, tenant.Account, 1)
	recs, err := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 10)
	if err != nil || len(recs) != 1 || recs[0].Status != "upstream_stalled" || recs[0].OutputTokens <= 0 {
		t.Errorf("usage records %+v (%v), want one upstream_stalled record with the output produced", recs, err)
	}
}

// readMessagesStream posts body to /v1/messages with key and returns the whole answer.
func readMessagesStream(t *testing.T, g *apitest.Gateway, key, body string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", g.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// TestWrongMethodOnAKnownPath: a path the API serves, asked with another method, is a 405 with
// Allow in the route's envelope, not a 404.
func TestWrongMethodOnAKnownPath(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	for _, c := range []struct{ method, path, allow, envelope string }{
		{"GET", "/v1/chat/completions", "POST", `"error":{"message"`},
		{"GET", "/v1/messages", "POST", `"type":"error"`},
		{"POST", "/v1/models", "GET", `"error":{"message"`},
		{"PUT", "/v1/models/service-flint", "GET", `"error":{"message"`},
	} {
		req, _ := http.NewRequest(c.method, g.URL+c.path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 405 || res.Header.Get("Allow") != c.allow || !strings.Contains(string(b), c.envelope) || !strings.Contains(string(b), "invalid_request_error") {
			t.Errorf("%s %s: %d, Allow %q: %s", c.method, c.path, res.StatusCode, res.Header.Get("Allow"), b)
		}
	}
}
