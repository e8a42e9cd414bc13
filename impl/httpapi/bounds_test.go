package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
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
	rec := latestUsage(t, g, tenant.Account, 1)
	if rec.OutputTokens > 3 {
		t.Errorf("billed %d output tokens for a request that asked for 3", rec.OutputTokens)
	}
}

// TestExpertOutputLimit: an expert whose own output limit is below the client's bound is passed
// over for one that can produce it; when none can, the bound is clamped to the expert's limit,
// the header names the clamp, and the client is billed for at most that many tokens.
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
	status, hdr, answer := do(t, c, g.URL, request{"POST", "/v1/chat/completions", chatBody("short-only", "hi [[sim words=40]]", false, 100)}, bearer)
	if status != 200 || hdr.Get("x-tollgate-clamped-fields") != "max_tokens=8" {
		t.Fatalf("a bound no expert can produce: %d clamped %q: %s", status, hdr.Get("x-tollgate-clamped-fields"), answer)
	}
	var sent struct {
		MaxTokens           *int `json:"max_tokens"`
		MaxCompletionTokens *int `json:"max_completion_tokens"`
	}
	if err := json.Unmarshal(g.Sim.LastRequest().Body, &sent); err != nil || sent.MaxTokens == nil || *sent.MaxTokens != 8 || sent.MaxCompletionTokens != nil {
		t.Errorf("the upstream was sent %s", g.Sim.LastRequest().Body)
	}
	if rec := latestUsage(t, g, tenant.Account, 5); rec.OutputTokens > 8 {
		t.Errorf("billed %d output tokens for a bound clamped to 8", rec.OutputTokens)
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

// TestOversizedAnnouncedBodyIsRefusedUnread: a request announcing a body beyond 32 MiB with
// `Expect: 100-continue` is answered 413 at once, before the client uploads anything (trial h5:
// it was told 100 Continue, and 32 MiB were read before the 413).
func TestOversizedAnnouncedBodyIsRefusedUnread(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	x := dialRaw(t, g)
	res, body := x.roundTrip("POST", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+tenant.Key+
		"\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 40000000")
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), `"code":"request_too_large"`) {
		t.Errorf("40,000,000 bytes announced with Expect: 100-continue: %d %.300s, want 413 before any upload", res.StatusCode, body)
	}
}

// TestUnboundedRequestGetsTheModelsLimit: a request without an output bound reaches an upstream
// of its own format with the model's limit, so the answer stays within what was reserved and
// what the model's card says.
func TestUnboundedRequestGetsTheModelsLimit(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	for i, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"pricey","stream":%t,"messages":[{"role":"user","content":"hi [[sim words=100]]"}]}`, stream)
		status, _, answer := do(t, c, g.URL, request{"POST", "/v1/chat/completions", body}, bearer)
		if status != 200 {
			t.Fatalf("%d %s", status, answer)
		}
		var sent struct {
			MaxCompletionTokens int `json:"max_completion_tokens"`
		}
		if err := json.Unmarshal(g.Sim.LastRequest().Body, &sent); err != nil || sent.MaxCompletionTokens != 64 {
			t.Errorf("stream %v: the upstream was sent max_completion_tokens %d (%v), want the model's 64", stream, sent.MaxCompletionTokens, err)
		}
		rec := latestUsage(t, g, tenant.Account, int64(i+1))
		if rec.OutputTokens != 64 {
			t.Errorf("stream %v: %d output tokens, want the model's limit of 64", stream, rec.OutputTokens)
		}
	}
	checkBooks(t, g, tenant.Account, 50_000_000)
}

// TestImagesAreNotCountedByTheByte: a request carrying a large image is within the context
// window: the input is estimated from the request (an image at a fixed cost), not from the
// base64 bytes, also when the bytes go untouched to an upstream of the same format.
func TestImagesAreNotCountedByTheByte(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	image := "data:image/png;base64," + strings.Repeat("iVBORw0KGgo", 150_000) // 1.6 MB
	chat := `{"model":"service-flint-base","max_tokens":16,"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"` + image + `"}}]}]}`
	if status, _, answer := do(t, c, g.URL, request{"POST", "/v1/chat/completions", chat}, bearer); status != 200 {
		t.Errorf("chat with an image: %d %.300s", status, answer)
	}
	messages := `{"model":"service-sonnet","max_tokens":16,"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + strings.Repeat("iVBORw0KGgo", 150_000) + `"}}]}]}`
	if status, _, answer := do(t, c, g.URL, request{"POST", "/v1/messages", messages}, bearer); status != 200 {
		t.Errorf("messages with an image: %d %.300s", status, answer)
	}
	// Text of that size is still refused.
	long := chatBody("service-flint-base", strings.Repeat("lorem ipsum ", 150_000), false, 16)
	if status, _, answer := do(t, c, g.URL, request{"POST", "/v1/chat/completions", long}, bearer); status != 400 || !strings.Contains(string(answer), "context_length_exceeded") {
		t.Errorf("1.8 MB of text: %d %.300s", status, answer)
	}
}
