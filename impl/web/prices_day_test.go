package web_test

import (
	"encoding/json"
	"html"
	"net/http"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
)

// openCodeInputRe finds the input rate of opencode's settings for the chat model, in US
// dollars a million tokens, on the key-created page.
var openCodeInputRe = regexp.MustCompile(`"cost": \{[^}]*"input": ([0-9.]+)`)

// TestConsolePricesAreTheDaysPrices: the prices the console's settings give a client (opencode's
// cost, on the key-created page) are the ones GET /v1/models shows and the meter bills by,
// priced for the gateway's day, on both sides of a dated catalog change while the gateway
// runs. service-flint's own price is made the catalog's o3, which cost $10 and $40 a million
// tokens until 2025-06-09 and $2 and $8 from 2025-06-10 (its dearest expert then is
// claude-sonnet-4-5's $3 and $15): the gateway's clock stands at 23:59:59 of 2025-06-09, then
// passes midnight. Before, the console read the configuration's prices, resolved for the day
// it was validated (today, $3), while the models route said $10.
func TestConsolePricesAreTheDaysPrices(t *testing.T) {
	midnight := time.Date(2025, 6, 10, 0, 0, 0, 0, time.UTC)
	var passed atomic.Pointer[time.Time]
	clock := func() time.Time {
		if at := passed.Load(); at != nil {
			return midnight.Add(time.Since(*at))
		}
		return midnight.Add(-time.Second)
	}
	e := startClocked(t, func(c *config.Config) {
		for i := range c.Models {
			if c.Models[i].ID == "service-flint" {
				c.Models[i].Price = config.Price{Catalog: "o3"}
			}
		}
	}, nil, clock)
	e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	api := e.browser(t)
	b.get("/keys/new")
	p := b.post("/keys", map[string][]string{"name": {"laptop"}})
	m := plainKeyRe.FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no key shown: %d %.500s", p.Status, p.Body)
	}
	plain := m[1]

	// consoleRate reads service-flint's input rate from a new key's settings, and modelsRate
	// from GET /v1/models, in micro-units a million tokens.
	consoleRate := func() int64 {
		t.Helper()
		b.get("/keys/new")
		p := b.post("/keys", map[string][]string{"name": {"settings"}})
		m := openCodeInputRe.FindStringSubmatch(html.UnescapeString(p.Body))
		if p.Status != http.StatusCreated || m == nil {
			t.Fatalf("the key-created page gives opencode no cost: %d %.3000s", p.Status, p.Body)
		}
		usd, _ := json.Number(m[1]).Float64()
		return int64(usd*1e6 + 0.5)
	}
	modelsRate := func() int64 {
		t.Helper()
		r := api.do("GET", "/v1/models/service-flint", nil, map[string]string{"Authorization": "Bearer " + plain})
		var model struct {
			Pricing struct {
				Input int64 `json:"input_micros_per_mtok"`
			} `json:"pricing"`
		}
		if r.Status != http.StatusOK || json.Unmarshal([]byte(r.Body), &model) != nil {
			t.Fatalf("GET /v1/models/service-flint: %d %.500s", r.Status, r.Body)
		}
		return model.Pricing.Input
	}
	if console, models := consoleRate(), modelsRate(); console != 10_000_000 || models != 10_000_000 {
		t.Errorf("on 2025-06-09 the console says %d and GET /v1/models %d micro-units a million input tokens, want 10,000,000 both", console, models)
	}
	now := time.Now()
	passed.Store(&now)
	deadline := time.Now().Add(10 * time.Second)
	for modelsRate() != 3_000_000 {
		if time.Now().After(deadline) {
			t.Fatalf("after midnight of 2025-06-10 GET /v1/models says %d micro-units a million input tokens, want 3,000,000", modelsRate())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if console := consoleRate(); console != 3_000_000 {
		t.Errorf("after midnight of 2025-06-10 the console says %d micro-units a million input tokens, want 3,000,000 as GET /v1/models", console)
	}
}
