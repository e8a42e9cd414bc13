package httpapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestCountTokens: anthropic-sdk-go's CountTokens (with ?beta=true, as Claude Code sends it)
// gets an estimate that grows with the request, for a Messages model of the account only, at
// no cost.
func TestCountTokens(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 1_000_000)
	client := anthropicClient(g, t, tenant.Key)
	ctx := context.Background()
	count := func(model, text string) (int64, error) {
		res, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model:    anthropic.Model(model),
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
			Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: &anthropic.ToolParam{
				Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}},
		})
		if err != nil {
			return 0, err
		}
		return res.InputTokens, nil
	}
	short, err := count("service-sonnet", "hello")
	if err != nil || short <= 0 {
		t.Fatalf("short: %d, %v", short, err)
	}
	long, err := count("service-sonnet", strings.Repeat("hello world ", 1000))
	if err != nil || long < short+2000 {
		t.Errorf("12,000 bytes more text: %d tokens against %d (%v)", long, short, err)
	}
	// The beta path Claude Code uses.
	c := g.Client(t)
	status, _, body := do(t, c, g.URL, request{"POST", "/v1/messages/count_tokens?beta=true",
		`{"model":"service-sonnet","messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"}}]}]}`},
		map[string]string{"Authorization": "Bearer " + tenant.Key})
	if status != 200 || !strings.Contains(string(body), `"input_tokens":`) {
		t.Errorf("beta: %d %s", status, body)
	}
	// Only Messages models, in the Anthropic envelope.
	if _, err := count("service-flint", "hello"); err == nil || !strings.Contains(err.Error(), "not_found_error") {
		t.Errorf("a chat model: %v", err)
	}
	if g.Sim.TotalRequests() != 0 {
		t.Errorf("counting called the upstream %d times", g.Sim.TotalRequests())
	}
	if bal, err := g.Store.Balance(ctx, tenant.Account.ID); err != nil || bal != 1_000_000 {
		t.Errorf("balance %d (%v) after counting, want it untouched", bal, err)
	}
}
