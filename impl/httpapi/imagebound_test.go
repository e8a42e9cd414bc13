package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestHighResolutionImagesAreReserved: Claude Opus 4.7 and later read an image at up to 2,576
// pixels on its long edge (about 3.75 megapixels) where earlier models scaled it to about 1.15,
// and bill it by its 28-pixel patches, ⌈width / 28⌉ × ⌈height / 28⌉ visual tokens
// (https://platform.claude.com/docs/en/build-with-claude/vision): up to 4,784 tokens an image
// (2,576 × 1,456 pixels: 92 × 52 patches). A model the catalog has no image rule for
// (claude-opus-4-7 at its $5 / $25 a million, typed) reserved 2,000 tokens an image, and ten
// screenshots written to the one-hour cache, as a coding agent caches them (the stand-in
// reports 47,840 one-hour cache writes, 20 uncached input tokens and 300 output, Anthropic's
// usage shape), cost 486,000 micro-units against a reservation of about 207,700: the rest was
// waived. The reservation now covers them, and nothing is waived.
func TestHighResolutionImagesAreReserved(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-opus-4-7","content":[{"type":"text","text":"They differ in the toolbar."}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":20,"cache_creation_input_tokens":47840,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":47840},"output_tokens":300,"service_tier":"standard"}}`)
	}))
	t.Cleanup(up.Close)
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "opus", Kind: config.KindAnthropicMessages, BaseURL: up.URL})
	cfg.Models = append(cfg.Models, config.Model{ID: "opus-4-7", Family: config.FamilyMessages, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 5_000_000, OutputPerMTok: 25_000_000}, MaxOutputTokens: 1000, ContextTokens: 1_000_000,
		Backend: &config.Upstream{Provider: "opus", Model: "claude-opus-4-7"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "opus-4-7")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	const granted = 100_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	var content strings.Builder
	for i := range 10 {
		fmt.Fprintf(&content, `{"type":"image","source":{"type":"url","url":"https://example.com/shot%d.png"}},`, i)
	}
	content.WriteString(`{"type":"text","text":"Compare these ten screenshots."}`)
	status, body := post(t, g, tenant.Key, "/v1/messages", `{"model":"opus-4-7","max_tokens":300,"messages":[{"role":"user","content":[`+content.String()+`]}]}`)
	if status != http.StatusOK {
		t.Fatalf("%d %.300s", status, body)
	}
	// 20 × $5 + 47,840 × $10 (a one-hour write, twice the input price) + 300 × $25 a million.
	if rec := latestUsage(t, g, tenant.Account, 1); rec.CostMicros != 486_000 || rec.WaivedMicros != 0 || rec.Costs.CacheWrite1h != 478_400 {
		t.Errorf("ten high-resolution images: billed %d (%+v), waived %d; want 486,000 and nothing waived", rec.CostMicros, rec.Costs, rec.WaivedMicros)
	}
	checkBooks(t, g, tenant.Account, granted)
}
