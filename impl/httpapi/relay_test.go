package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestSameFormatStreamIsRelayed: a stream from an upstream of the client's format reaches the
// official SDK as the upstream sent it, with what the gateway's neutral form does not model
// (thinking blocks and their signatures, which Claude clients must send back on the next turn)
// in place; only the model is the gateway's. The usage the upstream reported is billed.
func TestSameFormatStreamIsRelayed(t *testing.T) {
	recorded, err := os.ReadFile("../streamconv/testdata/relay/messages_thinking.sse")
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(recorded)
	}))
	t.Cleanup(upstream.Close)
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "recorded", Kind: config.KindAnthropicMessages, BaseURL: upstream.URL})
	cfg.Models = append(cfg.Models, config.Model{ID: "thinker", Family: config.FamilyMessages, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, MaxOutputTokens: 4096,
		Backend: &config.Upstream{Provider: "recorded", Model: "claude-sonnet-4-5"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "thinker")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := anthropicClient(g, t, tenant.Key)
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model: "thinker", MaxTokens: 2048,
		Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Paris?"))},
	})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if msg.Model != "thinker" || len(msg.Content) != 4 || msg.Content[0].Type != "thinking" || msg.Content[0].Signature == "" ||
		msg.Content[1].Type != "redacted_thinking" || msg.Content[3].Type != "tool_use" || msg.StopReason != "tool_use" {
		t.Fatalf("accumulated %+v", msg)
	}
	rec := latestUsage(t, g, tenant.Account, 1)
	if rec.InputTokens != 40 || rec.OutputTokens != 61 || rec.Status != "ok" {
		t.Errorf("usage record %+v", rec)
	}
}
