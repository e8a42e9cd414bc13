package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestStructuredOutputAcrossMessages: structured output asked in one format is honoured by an
// upstream of the other (the simulator, which writes JSON that fits the schema it is sent):
// openai-go's chat response_format json_schema (strict) and Responses text.format on a model
// served through the Messages API, and anthropic-sdk-go's output_config.format on models
// served through chat and Responses, whole and streamed, each answer JSON with the schema's
// required members and the upstream sent the schema in its own field. On the code before,
// every one was a 400 naming the client's field (wire-format trial s15h3).
func TestStructuredOutputAcrossMessages(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	oc, ac := openAIClient(g, t, tenant.Key), anthropicClient(g, t, tenant.Key)
	ctx := context.Background()
	schema := map[string]any{"type": "object", "additionalProperties": false, "required": []any{"city", "days"},
		"properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}}
	const prompt = "Plan a trip."
	fits := func(who, text string) {
		t.Helper()
		var v map[string]any
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			t.Errorf("%s: the answer is not JSON: %q", who, text)
			return
		}
		if _, ok := v["city"].(string); !ok {
			t.Errorf("%s: %s has no city", who, text)
		}
		if _, ok := v["days"].(float64); !ok {
			t.Errorf("%s: %s has no days", who, text)
		}
	}
	upstreamGot := func(who, field string) {
		t.Helper()
		if body := string(g.Sim.LastRequest().Body); !strings.Contains(body, field) || !strings.Contains(body, `"days"`) {
			t.Errorf("%s: the upstream was sent no %s: %.400s", who, field, body)
		}
	}

	chatParams := openai.ChatCompletionNewParams{Model: "chat-via-messages",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "trip", Strict: openai.Bool(true), Schema: schema}}}}
	c, err := oc.Chat.Completions.New(ctx, chatParams)
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	fits("chat", c.Choices[0].Message.Content)
	upstreamGot("chat", `"output_config":{"format":{"type":"json_schema"`)
	cs := oc.Chat.Completions.NewStreaming(ctx, chatParams)
	var acc openai.ChatCompletionAccumulator
	for cs.Next() {
		acc.AddChunk(cs.Current())
	}
	if err := cs.Err(); err != nil {
		t.Fatalf("chat streamed: %v", err)
	}
	fits("chat streamed", acc.Choices[0].Message.Content)

	rp := responses.ResponseNewParams{Model: "chat-via-messages", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "trip", Strict: openai.Bool(true), Schema: schema}}}}
	r, err := oc.Responses.New(ctx, rp)
	if err != nil {
		t.Fatalf("Responses: %v", err)
	}
	fits("Responses", r.OutputText())
	rs := oc.Responses.NewStreaming(ctx, rp)
	var final responses.Response
	for rs.Next() {
		if ev := rs.Current(); ev.Type == "response.completed" {
			final = ev.Response
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatalf("Responses streamed: %v", err)
	}
	fits("Responses streamed", final.OutputText())

	for model, field := range map[string]string{"messages-via-chat": `"response_format":{"type":"json_schema"`, "messages-via-responses": `"text":{"format":{"type":"json_schema"`} {
		mp := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
			Messages:     []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
			OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: schema}}}
		m, err := ac.Messages.New(ctx, mp)
		if err != nil {
			t.Fatalf("Messages on %s: %v", model, err)
		}
		fits("Messages on "+model, m.Content[0].Text)
		upstreamGot("Messages on "+model, field)
		ms := ac.Messages.NewStreaming(ctx, mp)
		var streamed anthropic.Message
		for ms.Next() {
			if err := streamed.Accumulate(ms.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := ms.Err(); err != nil {
			t.Fatalf("Messages on %s streamed: %v", model, err)
		}
		fits("Messages on "+model+" streamed", streamed.Content[0].Text)
	}
}
