package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestStopSequenceFromChatUpstream: a Messages answer that a stop sequence ended says so,
// stop_reason "stop_sequence" with the sequence that matched in stop_sequence, and clients
// act on it (one that stops at "</answer>" appends it back, or tells a cut answer from a
// finished one). A chat upstream ends such an answer with finish_reason "stop", as it ends a
// natural one, and says neither whether a sequence matched nor which: translated, the
// Messages client gets end_turn and stop_sequence null while the text stops short of the
// sequence (wire-format trial s13h10; docs/inference.md). The simulator's chat answer here
// stops before the word "willow", the 21st of its 60.
func TestStopSequenceFromChatUpstream(t *testing.T) {
	t.Skip("defect (trial s13h10): a chat upstream's finish_reason stop does not say that a stop sequence matched, so a Messages client gets end_turn and stop_sequence null; telling them apart needs the gateway to match the stop sequences itself (send none upstream, cut the text, streamed too), which is not done")
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	ac := anthropicClient(g, t, tenant.Key)
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: "messages-via-chat", MaxTokens: 200, StopSequences: []string{"willow"},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi [[sim words=60]]"))}}
	m, err := ac.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if m.StopReason != "stop_sequence" || m.StopSequence != "willow" {
		t.Errorf("stop_reason %q, stop_sequence %q: %s", m.StopReason, m.StopSequence, m.RawJSON())
	}
	stream := ac.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.StopReason != "stop_sequence" || acc.StopSequence != "willow" || len(acc.Content) != 1 || acc.Content[0].Text != m.Content[0].Text {
		t.Errorf("streamed: stop_reason %q, stop_sequence %q, content %+v", acc.StopReason, acc.StopSequence, acc.Content)
	}
}

// TestToolResultImageToChatUpstream: Claude Code's tools return images (its Read tool on a
// screenshot or a picture, as a tool_result whose content has an image block), and a chat
// tool message holds text alone (the API refuses an image there: "Image URLs are only allowed
// for messages with role 'user'"). Translated for a chat upstream, the images of a tool
// result go in a user message right after the tool messages of that turn, the tool message
// keeping the text, and the move is named in x-tollgate-dropped-fields. On the code before,
// the request was a 400 ("An image in a tool result ... cannot be honoured"), and since the
// image stays in the conversation, every later turn of the session was refused too
// (wire-format trial s13h10).
func TestToolResultImageToChatUpstream(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	ac := anthropicClient(g, t, tenant.Key)
	ctx := context.Background()
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	read := anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "Read", InputSchema: anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"file_path": map[string]any{"type": "string"}}}}}
	image := anthropic.ToolResultBlockParamContentUnion{OfImage: &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{
		OfBase64: &anthropic.Base64ImageSourceParam{MediaType: "image/png", Data: png}}}}
	params := anthropic.MessageNewParams{Model: "messages-via-chat", MaxTokens: 200, Tools: []anthropic.ToolUnionParam{read},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("What is in shot.png and notes.txt?")),
			anthropic.NewAssistantMessage(anthropic.NewTextBlock("Reading both."),
				anthropic.NewToolUseBlock("toolu_01", map[string]any{"file_path": "shot.png"}, "Read"),
				anthropic.NewToolUseBlock("toolu_02", map[string]any{"file_path": "notes.txt"}, "Read")),
			anthropic.NewUserMessage(
				anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{ToolUseID: "toolu_01",
					Content: []anthropic.ToolResultBlockParamContentUnion{image}}},
				anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{ToolUseID: "toolu_02",
					Content: []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: "buy milk"}}}}},
				anthropic.NewTextBlock("Describe them.")),
		}}
	var raw *http.Response
	m, err := ac.Messages.New(ctx, params, aoption.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("a tool result with an image, through a chat upstream: %v", err)
	}
	if m.StopReason != "end_turn" || len(m.Content) != 1 || m.Content[0].Text == "" {
		t.Errorf("answer %s", m.RawJSON())
	}
	if got, want := raw.Header.Get("x-tollgate-dropped-fields"), "messages[].content[].content[] (moved to a user message)"; got != want {
		t.Errorf("dropped %q, want %q", got, want)
	}
	// What the upstream got: the tool messages with their text, then the image in a user
	// message, then the user's text.
	var sent struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(g.Sim.LastRequest().Body, &sent); err != nil {
		t.Fatal(err)
	}
	var shape []string
	for _, msg := range sent.Messages {
		shape = append(shape, msg.Role+" "+string(msg.Content))
	}
	want := []string{`user "What is in shot.png and notes.txt?"`, `assistant "Reading both."`, `tool ""`, `tool "buy milk"`,
		`user [{"type":"image_url","image_url":{"url":"data:image/png;base64,` + png + `"}}]`, `user "Describe them."`}
	if strings.Join(shape, "\n") != strings.Join(want, "\n") {
		t.Errorf("sent upstream:\n%s\nwant:\n%s", strings.Join(shape, "\n"), strings.Join(want, "\n"))
	}
	stream := ac.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("streamed: %v", err)
	}
	if acc.StopReason != "end_turn" || len(acc.Content) != 1 || acc.Content[0].Text != m.Content[0].Text {
		t.Errorf("streamed: stop %q, content %+v", acc.StopReason, acc.Content)
	}
}
