package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// sdkCustomer is the Go type of customerSchema, as a client's structured-output code declares
// it.
type sdkCustomer struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Age     int      `json:"age"`
	Score   float64  `json:"score"`
	Tags    []string `json:"tags"`
	Address struct {
		Street string `json:"street"`
		City   string `json:"city"`
		Zip    string `json:"zip"`
	} `json:"address"`
	Contact struct {
		Email string `json:"email,omitempty"`
		Phone string `json:"phone,omitempty"`
	} `json:"contact"`
	Joined   string  `json:"joined"`
	Nickname *string `json:"nickname"`
	Orders   []struct {
		SKU    string `json:"sku"`
		Qty    int    `json:"qty"`
		Status string `json:"status"`
	} `json:"orders"`
}

// parseCustomer decodes text into an sdkCustomer, refusing unknown fields, and checks that the
// required values arrived.
func parseCustomer(t *testing.T, text string) sdkCustomer {
	t.Helper()
	var c sdkCustomer
	d := json.NewDecoder(bytes.NewReader([]byte(text)))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		t.Fatalf("decode %s: %v", text, err)
	}
	if c.ID == "" || c.Age < 18 || len(c.Tags) == 0 || c.Address.Zip == "" || (c.Contact.Email == "") == (c.Contact.Phone == "") || c.Joined == "" {
		t.Errorf("customer %+v from %s", c, text)
	}
	return c
}

func TestSDKOpenAIStructured(t *testing.T) {
	_, client := openAIClient(t, 0)
	ctx := context.Background()
	schema := compileSchema(t, customerSchema)

	p := chatParams(structuredPrompt)
	p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "customer", Schema: customer(), Strict: openai.Bool(true)}}}
	done, err := client.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	content := done.Choices[0].Message.Content
	validateJSON(t, schema, content)
	parseCustomer(t, content)

	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != content || acc.Usage.CompletionTokens != done.Usage.CompletionTokens {
		t.Errorf("accumulated %q %+v", acc.Choices[0].Message.Content, acc.Usage)
	}

	p = chatParams(structuredPrompt)
	p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	if done, err = client.Chat.Completions.New(ctx, p); err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(done.Choices[0].Message.Content), &obj); err != nil || len(obj) == 0 {
		t.Errorf("json_object: %q %v", done.Choices[0].Message.Content, err)
	}

	rp := responses.ResponseNewParams{
		Model: "sim-reasoner",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(structuredPrompt)},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "customer", Schema: customer(), Strict: openai.Bool(true)}}},
	}
	resp, err := client.Responses.New(ctx, rp)
	if err != nil {
		t.Fatal(err)
	}
	validateJSON(t, schema, resp.OutputText())
	parseCustomer(t, resp.OutputText())
	rs := client.Responses.NewStreaming(ctx, rp)
	var streamed string
	for rs.Next() {
		if ev := rs.Current(); ev.Type == "response.output_text.done" {
			streamed = ev.AsResponseOutputTextDone().Text
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if streamed != resp.OutputText() {
		t.Errorf("streamed %q, want %q", streamed, resp.OutputText())
	}
}

func TestSDKAnthropicStructured(t *testing.T) {
	_, client := anthropicClient(t, 0)
	ctx := context.Background()
	schema := compileSchema(t, customerSchema)

	// The beta SDK turns the struct into a schema and parses the answer back into it.
	var got sdkCustomer
	params := anthropic.BetaMessageNewParams{
		Model:        "sim-sonnet",
		MaxTokens:    1024,
		Messages:     []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(structuredPrompt))},
		OutputConfig: anthropic.BetaOutputConfigParam{Format: anthropic.BetaJSONOutputFormatParam{Schema: &got}},
	}
	msg, err := client.Beta.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == "" || got.Address.City == "" || msg.StopReason != "end_turn" {
		t.Errorf("auto-parsed %+v from %s", got, msg.RawJSON())
	}
	stream := client.Beta.Messages.NewStreaming(ctx, params)
	var acc anthropic.BetaMessage
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	var again sdkCustomer
	if err := acc.ParseOutput(&again); err != nil || again.ID != got.ID || acc.Usage.OutputTokens != msg.Usage.OutputTokens {
		t.Errorf("ParseOutput: %v, %+v", err, again)
	}

	// The GA output_config.format with a schema map.
	done, err := client.Messages.New(ctx, anthropic.MessageNewParams{
		Model:        "sim-sonnet",
		MaxTokens:    1024,
		Messages:     []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(structuredPrompt))},
		OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: customer()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	validateJSON(t, schema, done.Content[0].Text)
	parseCustomer(t, done.Content[0].Text)

	// A tool forced by tool_choice {type: "tool"}, streamed.
	c := customer()
	tool := anthropic.ToolParam{Name: "save_customer", InputSchema: anthropic.ToolInputSchemaParam{
		Properties: c["properties"], Required: []string{"id", "name", "age", "score", "tags", "address", "contact", "joined", "nickname", "orders"},
		ExtraFields: map[string]any{"$defs": c["$defs"], "additionalProperties": false}}}
	tp := anthropic.MessageNewParams{
		Model:      "sim-sonnet",
		MaxTokens:  1024,
		Messages:   []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(structuredPrompt))},
		Tools:      []anthropic.ToolUnionParam{{OfTool: &tool}},
		ToolChoice: anthropic.ToolChoiceParamOfTool("save_customer"),
	}
	ms := client.Messages.NewStreaming(ctx, tp)
	var m anthropic.Message
	for ms.Next() {
		if err := m.Accumulate(ms.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := ms.Err(); err != nil {
		t.Fatal(err)
	}
	if b := m.Content[0]; b.Type != "tool_use" || b.Name != "save_customer" || m.StopReason != "tool_use" {
		t.Fatalf("tool use %s", m.RawJSON())
	}
	validateJSON(t, schema, string(m.Content[0].Input))
	parseCustomer(t, string(m.Content[0].Input))
}
