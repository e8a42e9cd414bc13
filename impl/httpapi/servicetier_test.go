package httpapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/sim"
)

// Prices of gpt-5 per million tokens, from OpenAI's pricing page
// (https://platform.openai.com/docs/pricing: Standard, Flex and Priority tables) as LiteLLM's
// model_prices_and_context_window.json lists them (input_cost_per_token{,_flex,_priority},
// cache_read_input_token_cost{,_flex,_priority}, output_cost_per_token{,_flex,_priority}):
// standard $1.25 / $0.125 cached / $10, flex $0.625 / $0.0625 / $5, priority $2.50 / $0.25 / $20.
var (
	gpt5Standard = price.Rates{Input: 1_250_000, CacheRead: 125_000, CacheWrite5m: 1_250_000, CacheWrite1h: 1_250_000, Output: 10_000_000}
	gpt5Flex     = price.Rates{Input: 625_000, CacheRead: 62_500, CacheWrite5m: 625_000, CacheWrite1h: 625_000, Output: 5_000_000}
	gpt5Priority = price.Rates{Input: 2_500_000, CacheRead: 250_000, CacheWrite5m: 2_500_000, CacheWrite1h: 2_500_000, Output: 20_000_000}
)

// serviceTierConfig has tiered-chat and tiered-responses, served by the simulator's OpenAI
// chat and Responses upstreams at gpt-5's catalog prices (which give the flex and priority
// tiers), and untiered-chat at gpt-5.1's (which gives priority only).
func serviceTierConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := passthroughConfig(t)
	add := func(id, family, provider, catalog string) {
		cfg.Models = append(cfg.Models, config.Model{ID: id, Family: family, OwnedBy: "test",
			Price: config.Price{Catalog: catalog}, MaxOutputTokens: 4096,
			Backend: &config.Upstream{Provider: provider, Model: "sim-" + id}})
		cfg.Plans[0].Models = append(cfg.Plans[0].Models, id)
	}
	add("tiered-chat", config.FamilyChat, "sim-openai-chat", "gpt-5")
	add("tiered-responses", config.FamilyChat, "sim-openai-responses", "gpt-5")
	add("untiered-chat", config.FamilyChat, "sim-openai-chat", "gpt-5.1")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestServiceTierIsBilledAtItsRates: a request for OpenAI's flex or priority tier, on a model
// whose price gives that tier, goes upstream as asked, and its usage record bills the tier the
// upstream reports at that tier's rates (and says which), reproducible from the row alone; a
// request for the default tier is billed at the standard rates; a tier the price does not give
// (scale; flex on gpt-5.1) is sent without the field, named as dropped, and billed at the
// standard rates. Through the official openai-go SDK, chat and Responses. Before, every
// request naming flex or priority had the field dropped, and an answer an upstream reported on
// either tier was billed at the standard rates.
func TestServiceTierIsBilledAtItsRates(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: serviceTierConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()
	var n int64
	for _, c := range []struct {
		model, tier string
		wantTier    string // the tier the record bills, "" for standard
		wantRates   price.Rates
		wantDropped bool
		responses   bool
	}{
		{"tiered-chat", "priority", "priority", gpt5Priority, false, false},
		{"tiered-chat", "flex", "flex", gpt5Flex, false, false},
		{"tiered-chat", "default", "", gpt5Standard, false, false},
		{"tiered-chat", "scale", "", gpt5Standard, true, false},
		{"tiered-responses", "flex", "flex", gpt5Flex, false, true},
		{"tiered-responses", "priority", "priority", gpt5Priority, false, true},
		{"untiered-chat", "flex", "", price.Rates{Input: 1_250_000, CacheRead: 125_000, CacheWrite5m: 1_250_000, CacheWrite1h: 1_250_000, Output: 10_000_000}, true, false},
		// Translated between the two OpenAI formats (trial h14 D5: dropped, billed at twice
		// the flex price): a chat client on a Responses upstream, a Responses client on a chat
		// upstream, and a tier the chat upstream's price lacks.
		{"tiered-responses", "flex", "flex", gpt5Flex, false, false},
		{"tiered-chat", "priority", "priority", gpt5Priority, false, true},
		{"untiered-chat", "flex", "", price.Rates{Input: 1_250_000, CacheRead: 125_000, CacheWrite5m: 1_250_000, CacheWrite1h: 1_250_000, Output: 10_000_000}, true, true},
	} {
		s.Reset()
		var served string
		if c.responses {
			var res *responses.Response
			res, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: c.model,
				Input:           responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("Say something [[sim words=40]]")},
				ServiceTier:     responses.ResponseNewParamsServiceTier(c.tier),
				MaxOutputTokens: param.NewOpt[int64](200)})
			if err != nil {
				t.Fatalf("%s %s: %v", c.model, c.tier, err)
			}
			served = string(res.ServiceTier)
		} else {
			var res *openai.ChatCompletion
			res, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: c.model,
				Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say something [[sim words=40]]")},
				ServiceTier: openai.ChatCompletionNewParamsServiceTier(c.tier), MaxTokens: param.NewOpt[int64](200)})
			if err != nil {
				t.Fatalf("%s %s: %v", c.model, c.tier, err)
			}
			served = string(res.ServiceTier)
		}
		n++
		sent := string(s.LastRequest().Body)
		if got := strings.Contains(sent, `"service_tier"`); got == c.wantDropped {
			t.Errorf("%s %s: the upstream was sent %s", c.model, c.tier, sent)
		}
		rec := latestUsage(t, g, tenant.Account, n)
		checkReproducible(t, rec)
		if rec.Price.Rates != c.wantRates || rec.Price.ServiceTier != c.wantTier || rec.Price.ServiceTiers != nil {
			t.Errorf("%s %s: the record's price is %+v on tier %q (tiers %v); want %+v on %q",
				c.model, c.tier, rec.Price.Rates, rec.Price.ServiceTier, rec.Price.ServiceTiers, c.wantRates, c.wantTier)
		}
		wantServed := c.wantTier
		if wantServed == "" {
			wantServed = "default"
		}
		if served != wantServed || rec.ServiceTier != wantServed {
			t.Errorf("%s %s: the client saw tier %q and the record says %q; want %q", c.model, c.tier, served, rec.ServiceTier, wantServed)
		}
		if rec.OutputTokens == 0 || rec.Costs.Output != price.Part(rec.OutputTokens, c.wantRates.Output) {
			t.Errorf("%s %s: %d output tokens cost %d", c.model, c.tier, rec.OutputTokens, rec.Costs.Output)
		}
	}
}

// TestServiceTierDroppedIsNamed: the dropped list names a tier the price does not give, and
// only then.
func TestServiceTierDroppedIsNamed(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: serviceTierConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	for _, tc := range []struct {
		body    string
		dropped bool
	}{
		{`{"model":"tiered-chat","service_tier":"priority","messages":[{"role":"user","content":"hi"}]}`, false},
		{`{"model":"tiered-chat","service_tier":"scale","messages":[{"role":"user","content":"hi"}]}`, true},
		{`{"model":"untiered-chat","service_tier":"priority","messages":[{"role":"user","content":"hi"}]}`, false},
		{`{"model":"untiered-chat","service_tier":"flex","messages":[{"role":"user","content":"hi"}]}`, true},
		// Translated to a Responses upstream.
		{`{"model":"tiered-responses","service_tier":"flex","messages":[{"role":"user","content":"hi"}]}`, false},
		{`{"model":"tiered-responses","service_tier":"scale","messages":[{"role":"user","content":"hi"}]}`, true},
	} {
		if _, named := sentAndDropped(t, g.Sim, c, g.URL, request{"POST", "/v1/chat/completions", tc.body}, bearer, "service_tier"); named != tc.dropped {
			t.Errorf("%s: service_tier named as dropped: %v", tc.body, named)
		}
	}
}

// TestDuplicatedServiceTierIsDroppedWhole: a service_tier written twice, the last one a tier
// the price does not give, is dropped whole: the upstream is sent none, and the answer is
// served and billed on the standard tier. Before, only the last member was removed and the
// first went upstream: named as dropped, served on the priority tier and billed at the
// standard rates (flex last, on a price that gives priority: served on priority, reserved at
// the standard rates).
func TestDuplicatedServiceTierIsDroppedWhole(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: serviceTierConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	var n int64
	for _, r := range []request{
		{"POST", "/v1/chat/completions", `{"model":"tiered-chat","service_tier":"priority","service_tier":"scale","messages":[{"role":"user","content":"hi"}]}`},
		{"POST", "/v1/chat/completions", `{"model":"untiered-chat","service_tier":"priority","messages":[{"role":"user","content":"hi"}],"service_tier":"flex"}`},
		{"POST", "/v1/responses", `{"model":"tiered-responses","service_tier":"priority","input":"hi","service_tier":"scale"}`},
	} {
		sent, named := sentAndDropped(t, g.Sim, c, g.URL, r, bearer, "service_tier")
		if strings.Contains(sent, `"service_tier"`) || !named {
			t.Errorf("%s: the upstream was sent %s (named as dropped: %v)", r.body, sent, named)
		}
		n++
		if rec := latestUsage(t, g, tenant.Account, n); rec.ServiceTier != "default" || rec.Price.ServiceTier != "" {
			t.Errorf("%s: the record says tier %q, billed on %q; want default, at the standard rates", r.body, rec.ServiceTier, rec.Price.ServiceTier)
		}
	}
}

// TestFastIsThePriorityTier: "fast", OpenAI's name for its priority tier since 2026-07-30
// (whose answers say "priority"), is the priority tier: reserved at the priority rates (402
// where only the standard worst case is covered), sent and billed at them where the price
// gives them, and dropped where it does not (a typed price), as "priority" is; a tier the
// gateway does not know ("ultrafast") is dropped too. Before, both were taken for the default
// tier: reserved at the standard rates and sent as they were, so that an upstream served them
// on its dearer tier and a price without that tier billed the standard rates.
func TestFastIsThePriorityTier(t *testing.T) {
	cfg := serviceTierConfig(t)
	cfg.Models = append(cfg.Models, config.Model{ID: "typed-chat", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, MaxOutputTokens: 4096,
		Backend: &config.Upstream{Provider: "sim-openai-chat", Model: "sim-typed-chat"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "typed-chat")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	c := g.Client(t)

	// 1,000 output tokens: $0.01 standard, $0.02 priority, plus a few input tokens.
	poor := g.NewTenant(t, "poor", 0, 15_000)
	poorBearer := map[string]string{"Authorization": "Bearer " + poor.Key}
	body := `{"model":"tiered-chat","service_tier":"fast","max_completion_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`
	if status, _, body := do(t, c, g.URL, request{"POST", "/v1/chat/completions", body}, poorBearer); status != 402 {
		t.Errorf("fast on a balance that covers only the standard worst case: %d %s; want 402", status, body)
	}

	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	var n int64
	for _, tc := range []struct {
		r       request
		dropped bool
		// wantTier is the tier the record says served the request, wantRates its rates.
		wantTier  string
		wantRates price.Rates
	}{
		{request{"POST", "/v1/chat/completions", `{"model":"tiered-chat","service_tier":"fast","messages":[{"role":"user","content":"hi"}]}`}, false, "priority", gpt5Priority},
		{request{"POST", "/v1/responses", `{"model":"tiered-responses","service_tier":"fast","input":"hi"}`}, false, "priority", gpt5Priority},
		{request{"POST", "/v1/chat/completions", `{"model":"typed-chat","service_tier":"fast","messages":[{"role":"user","content":"hi"}]}`}, true, "default", price.Rates{Input: 1_000_000, Output: 2_000_000}},
		{request{"POST", "/v1/chat/completions", `{"model":"tiered-chat","service_tier":"ultrafast","messages":[{"role":"user","content":"hi"}]}`}, true, "default", gpt5Standard},
	} {
		sent, named := sentAndDropped(t, g.Sim, c, g.URL, tc.r, bearer, "service_tier")
		if strings.Contains(sent, `"service_tier"`) == tc.dropped || named != tc.dropped {
			t.Errorf("%s: the upstream was sent %s (named as dropped: %v)", tc.r.body, sent, named)
		}
		n++
		rec := latestUsage(t, g, tenant.Account, n)
		if rec.ServiceTier != tc.wantTier || rec.Price.Rates.Input != tc.wantRates.Input || rec.Price.Rates.Output != tc.wantRates.Output {
			t.Errorf("%s: the record says tier %q at %+v; want %q at %+v", tc.r.body, rec.ServiceTier, rec.Price.Rates, tc.wantTier, tc.wantRates)
		}
	}
}

// TestPriorityIsReservedAtItsRates: a request for the priority tier reserves its worst case at
// the priority rates: a balance that covers the standard worst case but not the priority one
// refuses it with 402, and serves the same request on the default tier.
func TestPriorityIsReservedAtItsRates(t *testing.T) {
	// 1,000 output tokens: $0.01 standard, $0.02 priority, plus a few input tokens. A balance of
	// 15,000 micro-units covers the first and not the second.
	g := apitest.Start(t, apitest.Options{Config: serviceTierConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 15_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	req := func(tier string) string {
		return `{"model":"tiered-chat","service_tier":"` + tier + `","max_completion_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`
	}
	if status, _, body := do(t, c, g.URL, request{"POST", "/v1/chat/completions", req("priority")}, bearer); status != 402 {
		t.Errorf("priority: %d %s; want 402", status, body)
	}
	if status, _, body := do(t, c, g.URL, request{"POST", "/v1/chat/completions", req("default")}, bearer); status != 200 {
		t.Errorf("default: %d %s; want 200", status, body)
	}
}

// TestFastModeIsDropped: a Messages request for Anthropic's fast mode (speed "fast", priced at
// two to six times the standard rates, which no price has) goes upstream without it, named in
// x-tollgate-dropped-fields, and is billed at the standard rates it is then served at, written
// twice or escaped too; speed "standard" passes. Before, it went upstream as sent: served in
// fast mode and billed at the standard rates.
func TestFastModeIsDropped(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key, "anthropic-beta": "fast-mode-2026-02-01"}
	for _, tc := range []struct {
		body    string
		dropped bool
	}{
		{`{"model":"service-sonnet","max_tokens":16,"speed":"fast","messages":[{"role":"user","content":"hi"}]}`, true},
		{`{"model":"service-sonnet","max_tokens":16,"speed":"standard","messages":[{"role":"user","content":"hi"}],"speed":"fast"}`, true},
		{`{"model":"service-sonnet","max_tokens":16,"spe\u0065d":"f\u0061st","messages":[{"role":"user","content":"hi"}]}`, true},
		{`{"model":"service-sonnet","max_tokens":16,"speed":"standard","messages":[{"role":"user","content":"hi"}]}`, false},
	} {
		sent, named := sentAndDropped(t, g.Sim, c, g.URL, request{"POST", "/v1/messages", tc.body}, bearer, "speed")
		if named != tc.dropped || strings.Contains(sent, "fast") || strings.Contains(sent, `f\u0061st`) {
			t.Errorf("%s: the upstream was sent %s (named as dropped: %v, want %v)", tc.body, sent, named, tc.dropped)
		}
	}
}

// TestFallbacksAreDropped: a Messages request naming server-side fallback models (Anthropic's
// fallbacks, which the provider serves a declined request with) goes upstream without them,
// named in x-tollgate-dropped-fields: the gateway neither grants the key those models nor prices
// them. Before, they went upstream as sent: a tenant of service-sonnet could be served by any
// model, billed at service-sonnet's rates.
func TestFallbacksAreDropped(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key, "anthropic-beta": "server-side-fallback-2026-07-01"}
	for _, tc := range []struct {
		body    string
		dropped bool
	}{
		{`{"model":"service-sonnet","max_tokens":16,"fallbacks":[{"model":"claude-fable-5","speed":"fast"}],"messages":[{"role":"user","content":"hi"}]}`, true},
		{`{"model":"service-sonnet","max_tokens":16,"fallbacks":null,"messages":[{"role":"user","content":"hi"}]}`, false},
	} {
		sent, named := sentAndDropped(t, g.Sim, c, g.URL, request{"POST", "/v1/messages", tc.body}, bearer, "fallbacks")
		if named != tc.dropped || strings.Contains(sent, "fable") {
			t.Errorf("%s: the upstream was sent %s (named as dropped: %v, want %v)", tc.body, sent, named, tc.dropped)
		}
	}
}

// TestRegionalInferenceIsRefused: a Messages request asking for inference kept in one region
// (Anthropic's inference_geo "us", priced at 1.1 times the standard rates, which no price of the
// gateway states) is refused in the Messages envelope before any upstream call, since dropping
// the field would serve the request outside the region it asks for; the default region
// ("global") passes as sent. Before, "us" went upstream and was billed at the standard rates.
func TestRegionalInferenceIsRefused(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	status, _, body := do(t, c, g.URL, request{"POST", "/v1/messages",
		`{"model":"service-sonnet","max_tokens":16,"inference_geo":"us","messages":[{"role":"user","content":"hi"}]}`}, bearer)
	if status != 400 || !strings.Contains(string(body), `"invalid_request_error"`) || !strings.Contains(string(body), "inference_geo") {
		t.Errorf("inference_geo us: %d %s, want a 400 naming inference_geo", status, body)
	}
	if n := s.TotalRequests(); n != 0 {
		t.Errorf("inference_geo us: the upstream saw %d requests", n)
	}
	status, _, body = do(t, c, g.URL, request{"POST", "/v1/messages",
		`{"model":"service-sonnet","max_tokens":16,"inference_geo":"global","messages":[{"role":"user","content":"hi"}]}`}, bearer)
	if status != 200 || !strings.Contains(string(s.LastRequest().Body), `"inference_geo":"global"`) {
		t.Errorf("inference_geo global: %d %s, the upstream sent %s", status, body, s.LastRequest().Body)
	}
}
