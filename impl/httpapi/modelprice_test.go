package httpapi_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/price"
)

// configWithFreeModel is the built-in configuration with a model served free (price: {free:
// true}) on every plan.
func configWithFreeModel(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Models = append(cfg.Models, config.Model{ID: "service-free", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{Free: true}, MaxOutputTokens: 4096, ContextTokens: 32000,
		Backend: &config.Upstream{Provider: "sim-openai-chat", Model: "sim-general"}})
	for i := range cfg.Plans {
		cfg.Plans[i].Models = append(cfg.Plans[i].Models, "service-free")
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// modelsOf decodes a model list, by id.
func modelsOf(t *testing.T, body []byte) map[string]api.Model {
	t.Helper()
	var list api.ModelList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	out := map[string]api.Model{}
	for _, m := range list.Data {
		out[m.Id] = m
	}
	return out
}

// wantRates are r as the wire gives them: micro-units per million tokens, and dollars per token
// written out by hand from the micro-units (the rate with its decimal point moved 12 places).
func wantRates(r price.Rates) api.ModelRates {
	usd := func(micros int64) string {
		s := fmt.Sprintf("%013d", micros)
		whole, frac := strings.TrimLeft(s[:len(s)-12], "0"), strings.TrimRight(s[len(s)-12:], "0")
		if whole == "" {
			whole = "0"
		}
		if frac == "" {
			return whole
		}
		return whole + "." + frac
	}
	return api.ModelRates{InputMicrosPerMtok: r.Input, CacheReadMicrosPerMtok: r.CacheRead, CacheWrite5mMicrosPerMtok: r.CacheWrite5m,
		CacheWrite1hMicrosPerMtok: r.CacheWrite1h, OutputMicrosPerMtok: r.Output,
		Prompt: usd(r.Input), InputCacheRead: usd(r.CacheRead), InputCacheWrite: usd(r.CacheWrite5m), InputCacheWrite1h: usd(r.CacheWrite1h), Completion: usd(r.Output)}
}

// gotRates are the base rates of a pricing.
func gotRates(p api.ModelPricing) api.ModelRates {
	return api.ModelRates{InputMicrosPerMtok: p.InputMicrosPerMtok, CacheReadMicrosPerMtok: p.CacheReadMicrosPerMtok,
		CacheWrite5mMicrosPerMtok: p.CacheWrite5mMicrosPerMtok, CacheWrite1hMicrosPerMtok: p.CacheWrite1hMicrosPerMtok,
		OutputMicrosPerMtok: p.OutputMicrosPerMtok, Prompt: p.Prompt, InputCacheRead: p.InputCacheRead,
		InputCacheWrite: p.InputCacheWrite, InputCacheWrite1h: p.InputCacheWrite1h, Completion: p.Completion}
}

// TestModelsSayWhatTheyCost: GET /v1/models and GET /v1/models/{model} (validated against the
// OpenAPI document) give each model's context window, output bound and price exactly as the
// configuration gives them: a typed price, a catalog price with its long-context tier, a
// fusion model whose experts are priced differently at the highest rate of any expert kind by
// kind (basis highest_of_experts) with the lowest beside it and its hosted tool's price, and a
// free model as free. A key confined to one model sees that model's price and no other's.
func TestModelsSayWhatTheyCost(t *testing.T) {
	cfg := configWithFreeModel(t)
	g := apitest.Start(t, apitest.Options{Config: cfg})
	c := g.Client(t)
	tenant := g.NewTenant(t, "acme", 0, 5_000_000)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	status, _, body := do(t, c, g.URL, listModels, bearer)
	if status != 200 {
		t.Fatalf("list: %d %s", status, body)
	}
	models := modelsOf(t, body)
	if len(models) != 4 {
		t.Fatalf("list: %s", body)
	}
	configured := func(id string) config.Model {
		m, _ := cfg.Model(id)
		return m
	}

	for id, m := range models {
		cm := configured(id)
		if m.Pricing == nil {
			t.Fatalf("%s says no price: %s", id, body)
		}
		if m.MaxTokens == nil || *m.MaxTokens != cm.MaxOutputTokens ||
			m.ContextLength == nil || *m.ContextLength != cm.ContextTokens || m.MaxInputTokens == nil || *m.MaxInputTokens != cm.ContextTokens {
			t.Errorf("%s: limits %v %v %v, pricing %v; want max_tokens %d and a window of %d", id, m.MaxTokens, m.ContextLength, m.MaxInputTokens, m.Pricing, cm.MaxOutputTokens, cm.ContextTokens)
			continue
		}
		status, _, one := do(t, c, g.URL, request{"GET", "/v1/models/" + id, ""}, bearer)
		var single api.Model
		if err := json.Unmarshal(one, &single); err != nil || status != 200 || !reflect.DeepEqual(single, m) {
			t.Errorf("GET /v1/models/%s: %d %s; the list says %+v", id, status, one, m)
		}
	}

	// A typed price: $0.50 input, $0.125 cached input, $1.50 output, its cache writes at the
	// input price (an OpenAI provider's).
	base := *models["service-flint-base"].Pricing
	want := api.ModelRates{InputMicrosPerMtok: 500_000, CacheReadMicrosPerMtok: 125_000, CacheWrite5mMicrosPerMtok: 500_000,
		CacheWrite1hMicrosPerMtok: 500_000, OutputMicrosPerMtok: 1_500_000,
		Prompt: "0.0000005", InputCacheRead: "0.000000125", InputCacheWrite: "0.0000005", InputCacheWrite1h: "0.0000005", Completion: "0.0000015"}
	if got := gotRates(base); got != want || base.Free || base.Basis != api.ModelPricingBasisModel || base.Lowest != nil ||
		base.LongContext != nil || base.HostedTools != nil {
		t.Errorf("service-flint-base: %+v, want %+v", base, want)
	}

	// A catalog price with a long-context tier (claude-sonnet-4-5), and the provider's hosted
	// web search.
	sonnet := *models["service-sonnet"].Pricing
	sp := configured("service-sonnet").Price.Resolved()
	if got := gotRates(sonnet); got != wantRates(sp.Rates) || got.Prompt != "0.000003" || got.Completion != "0.000015" || sonnet.Basis != api.ModelPricingBasisModel {
		t.Errorf("service-sonnet: %+v, want %+v", got, wantRates(sp.Rates))
	}
	if lc := sonnet.LongContext; sp.LongContext == nil || lc == nil || lc.AboveInputTokens != sp.LongContext.AboveInputTokens ||
		lc.InputMicrosPerMtok != sp.LongContext.Input || lc.OutputMicrosPerMtok != sp.LongContext.Output || lc.Completion != wantRates(sp.LongContext.Rates).Completion {
		t.Errorf("service-sonnet's long context: %+v, want %+v", lc, sp.LongContext)
	}
	if h := sonnet.HostedTools; h == nil || !reflect.DeepEqual(*h, map[string]api.HostedToolPrice{"web_search": {MicrosPerCall: 10_000, UsdPerCall: "0.01", MaxCalls: 5}}) {
		t.Errorf("service-sonnet's hosted tools: %v", h)
	}

	// The fusion model: its three experts are priced differently (gpt-4.1, claude-sonnet-4-5,
	// gpt-5), so each rate is the highest any of them charges, and lowest the lowest.
	flint := *models["service-flint"].Pricing
	var high, low price.Rates
	for i, e := range configured("service-flint").Experts {
		p := configured("service-flint").Price.Resolved()
		if e.Price != nil {
			p = e.Price.Resolved()
		}
		r := p.Rates
		high = price.Rates{Input: max(high.Input, r.Input), CacheRead: max(high.CacheRead, r.CacheRead), CacheWrite5m: max(high.CacheWrite5m, r.CacheWrite5m),
			CacheWrite1h: max(high.CacheWrite1h, r.CacheWrite1h), Output: max(high.Output, r.Output)}
		if i == 0 {
			low = r
		}
		low = price.Rates{Input: min(low.Input, r.Input), CacheRead: min(low.CacheRead, r.CacheRead), CacheWrite5m: min(low.CacheWrite5m, r.CacheWrite5m),
			CacheWrite1h: min(low.CacheWrite1h, r.CacheWrite1h), Output: min(low.Output, r.Output)}
	}
	if flint.Basis != api.ModelPricingBasisHighestOfExperts || gotRates(flint) != wantRates(high) || flint.Lowest == nil || *flint.Lowest != wantRates(low) || flint.Free {
		t.Errorf("service-flint: %+v (lowest %+v), want the highest %+v and the lowest %+v", gotRates(flint), flint.Lowest, wantRates(high), wantRates(low))
	}
	if high.Output != 15_000_000 || low.Output != 8_000_000 {
		t.Errorf("the fusion's experts are not priced as this test assumes: highest %+v, lowest %+v", high, low)
	}
	if flint.ServiceTiers == nil || !slices.Contains(slices.Collect(maps.Keys(*flint.ServiceTiers)), "priority") {
		t.Errorf("service-flint's service tiers: %v", flint.ServiceTiers)
	}

	// The free model: every rate 0, and said free.
	free := *models["service-free"].Pricing
	if !free.Free || gotRates(free) != wantRates(price.Rates{}) || gotRates(free).Prompt != "0" {
		t.Errorf("service-free: %+v", free)
	}

	// A key confined to service-flint-base: that model's price, and nothing of the others'.
	key, _ := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{Name: "base only", Models: []string{"service-flint-base"}})
	_, _, body = do(t, c, g.URL, listModels, map[string]string{"Authorization": "Bearer " + key})
	confined := modelsOf(t, body)
	if len(confined) != 1 || !reflect.DeepEqual(confined["service-flint-base"], models["service-flint-base"]) {
		t.Errorf("the list of a key confined to service-flint-base: %s", body)
	}
	for _, other := range []string{"service-sonnet", "0.000003", "0.000015", "web_search"} {
		if strings.Contains(string(body), other) {
			t.Errorf("the confined key's list says %q: %s", other, body)
		}
	}
}
