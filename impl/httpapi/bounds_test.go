package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/apitest"
	"github.com/tollgate/tollgate/impl/config"
)

// TestResponsesBoundBelowTheUpstreamMinimum: the gateway accepts a max_output_tokens under 16,
// which the Responses API refuses; a same-format Responses upstream is sent 16, and the client
// is billed for at most what it asked.
func TestResponsesBoundBelowTheUpstreamMinimum(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: passthroughConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	status, _, answer := do(t, c, g.URL, request{"POST", "/v1/responses",
		`{"model":"test-responses","max_output_tokens":3,"input":"hi [[sim words=40]]"}`}, bearer)
	if status != 200 {
		t.Fatalf("%d %s", status, answer)
	}
	var sent struct {
		MaxOutputTokens int `json:"max_output_tokens"`
	}
	if err := json.Unmarshal(g.Sim.LastRequest().Body, &sent); err != nil || sent.MaxOutputTokens != 16 {
		t.Errorf("the upstream was sent max_output_tokens %d (%v), want 16", sent.MaxOutputTokens, err)
	}
	waitSettled(t, g, tenant.Account, 1)
	recs, err := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].OutputTokens > 3 {
		t.Errorf("billed %d output tokens for a request that asked for 3", recs[0].OutputTokens)
	}
}

// TestExpertOutputLimit: an expert whose own output limit is below the client's bound is passed
// over for one that can produce it; when none can, the client gets a 400 naming the bound.
func TestExpertOutputLimit(t *testing.T) {
	cfg := config.Default()
	cfg.Models = append(cfg.Models,
		config.Model{ID: "two-limits", Family: config.FamilyChat, OwnedBy: "test",
			Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, MaxOutputTokens: 4096,
			Experts: []config.Upstream{
				{Provider: "sim-openai-chat", Model: "sim-short", MaxOutputTokens: 8},
				{Provider: "sim-anthropic", Model: "sim-long"},
			}},
		config.Model{ID: "short-only", Family: config.FamilyChat, OwnedBy: "test",
			Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, MaxOutputTokens: 4096,
			Backend: &config.Upstream{Provider: "sim-openai-chat", Model: "sim-short", MaxOutputTokens: 8}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "two-limits", "short-only")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	for range 3 { // whatever the router ranks first
		status, hdr, answer := do(t, c, g.URL, request{"POST", "/v1/chat/completions", chatBody("two-limits", "hi", false, 100)}, bearer)
		if status != 200 || hdr.Get("X-Tollgate-Expert") != "sim-anthropic/sim-long" {
			t.Fatalf("%d expert %q: %s", status, hdr.Get("X-Tollgate-Expert"), answer)
		}
	}
	if status, _, answer := do(t, c, g.URL, request{"POST", "/v1/chat/completions", chatBody("two-limits", "hi", false, 8)}, bearer); status != 200 {
		t.Fatalf("a bound both experts can produce: %d %s", status, answer)
	}
	status, _, answer := do(t, c, g.URL, request{"POST", "/v1/chat/completions", chatBody("short-only", "hi", false, 100)}, bearer)
	if status != 400 || !strings.Contains(string(answer), `"param":"max_tokens"`) || !strings.Contains(string(answer), "at most 8") {
		t.Errorf("a bound no expert can produce: %d %s", status, answer)
	}
}

// TestOversizedBodyIs413: a body beyond 32 MiB is a 413 in the route's envelope
// (request_too_large), as the providers answer it.
func TestOversizedBodyIs413(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	big := `{"model":"service-flint-base","messages":[{"role":"user","content":"` + strings.Repeat("x", 32<<20) + `"}]}`
	status, _, answer := do(t, c, g.URL, request{"POST", "/v1/chat/completions", big}, bearer)
	if status != 413 || !strings.Contains(string(answer), `"code":"request_too_large"`) {
		t.Errorf("chat: %d %.300s", status, answer)
	}
	status, _, answer = do(t, c, g.URL, request{"POST", "/v1/messages", big}, bearer)
	if status != 413 || !strings.Contains(string(answer), `"type":"request_too_large"`) {
		t.Errorf("messages: %d %.300s", status, answer)
	}
}
