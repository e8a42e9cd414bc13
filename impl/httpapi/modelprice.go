package httpapi

import (
	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/routing"
)

// modelLimits sets the model's context window and output bound on its wire form, as the
// engine's registry holds them (what the context check and the clamp read).
func modelLimits(out *api.Model, m *routing.Model) {
	if m.ContextTokens > 0 {
		window := m.ContextTokens
		out.ContextLength, out.MaxInputTokens = &window, &window
	}
	maxTokens := m.MaxOutputTokens
	out.MaxTokens = &maxTokens
}

// modelPricing is what the account is billed for the model, as the schema ModelPricing says:
// for a fusion model whose experts are priced differently, the highest rate of any expert kind
// by kind (routing.Model.MaxPrice, what a request's reservation holds), named as such, with the
// lowest base rates beside it.
func modelPricing(m *routing.Model) api.ModelPricing {
	p := m.MaxPrice()
	r := wireRates(p.Rates)
	out := api.ModelPricing{
		Basis: api.ModelPricingBasisModel, Free: isFree(p),
		InputMicrosPerMtok: r.InputMicrosPerMtok, CacheReadMicrosPerMtok: r.CacheReadMicrosPerMtok,
		CacheWrite5mMicrosPerMtok: r.CacheWrite5mMicrosPerMtok, CacheWrite1hMicrosPerMtok: r.CacheWrite1hMicrosPerMtok,
		OutputMicrosPerMtok: r.OutputMicrosPerMtok,
		Prompt:              r.Prompt, InputCacheRead: r.InputCacheRead, InputCacheWrite: r.InputCacheWrite,
		InputCacheWrite1h: r.InputCacheWrite1h, Completion: r.Completion,
	}
	if !m.PricedAlike() {
		out.Basis = api.ModelPricingBasisHighestOfExperts
		low := wireRates(lowestRates(m.Experts))
		out.Lowest = &low
	}
	if t := p.LongContext; t != nil {
		lr := wireRates(t.Rates)
		out.LongContext = &api.ModelLongContextRates{
			AboveInputTokens:   t.AboveInputTokens,
			InputMicrosPerMtok: lr.InputMicrosPerMtok, CacheReadMicrosPerMtok: lr.CacheReadMicrosPerMtok,
			CacheWrite5mMicrosPerMtok: lr.CacheWrite5mMicrosPerMtok, CacheWrite1hMicrosPerMtok: lr.CacheWrite1hMicrosPerMtok,
			OutputMicrosPerMtok: lr.OutputMicrosPerMtok,
			Prompt:              lr.Prompt, InputCacheRead: lr.InputCacheRead, InputCacheWrite: lr.InputCacheWrite,
			InputCacheWrite1h: lr.InputCacheWrite1h, Completion: lr.Completion,
		}
	}
	if len(p.ServiceTiers) > 0 {
		tiers := make(map[string]api.ModelRates, len(p.ServiceTiers))
		for name, tr := range p.ServiceTiers {
			tiers[name] = wireRates(tr)
		}
		out.ServiceTiers = &tiers
	}
	if hosted := hostedPrices(m.Experts); len(hosted) > 0 {
		out.HostedTools = &hosted
	}
	return out
}

// wireRates are rates in micro-units per million tokens and in dollars per token.
func wireRates(r price.Rates) api.ModelRates {
	return api.ModelRates{
		InputMicrosPerMtok: r.Input, CacheReadMicrosPerMtok: r.CacheRead,
		CacheWrite5mMicrosPerMtok: r.CacheWrite5m, CacheWrite1hMicrosPerMtok: r.CacheWrite1h, OutputMicrosPerMtok: r.Output,
		Prompt: usdPerToken(r.Input), InputCacheRead: usdPerToken(r.CacheRead),
		InputCacheWrite: usdPerToken(r.CacheWrite5m), InputCacheWrite1h: usdPerToken(r.CacheWrite1h), Completion: usdPerToken(r.Output),
	}
}

// isFree reports whether p charges for no token at all, on any tier (a price configured
// free: true).
func isFree(p price.Price) bool {
	if p.Rates != (price.Rates{}) || (p.LongContext != nil && p.LongContext.Rates != (price.Rates{})) {
		return false
	}
	for _, r := range p.ServiceTiers {
		if r != (price.Rates{}) {
			return false
		}
	}
	return true
}

// lowestRates are, kind by kind, the lowest base rates of the experts.
func lowestRates(experts []routing.Expert) price.Rates {
	low := experts[0].Price.Rates
	for _, e := range experts[1:] {
		r := e.Price.Rates
		low = price.Rates{Input: min(low.Input, r.Input), CacheRead: min(low.CacheRead, r.CacheRead),
			CacheWrite5m: min(low.CacheWrite5m, r.CacheWrite5m), CacheWrite1h: min(low.CacheWrite1h, r.CacheWrite1h),
			Output: min(low.Output, r.Output)}
	}
	return low
}

// hostedPrices are the hosted tools the experts' providers run, by name, each at the highest
// price and bound of calls of the experts that run it.
func hostedPrices(experts []routing.Expert) map[string]api.HostedToolPrice {
	out := map[string]api.HostedToolPrice{}
	for _, e := range experts {
		for t, h := range e.Hosted {
			if h.MaxCalls <= 0 {
				continue
			}
			name := llm.HostedTool(t).String()
			was := out[name]
			micros := max(was.MicrosPerCall, h.PricePerCallMicros)
			out[name] = api.HostedToolPrice{MicrosPerCall: micros, UsdPerCall: price.Decimal(micros, 6), MaxCalls: max(was.MaxCalls, h.MaxCalls)}
		}
	}
	return out
}

// usdPerToken is a rate in micro-units per million tokens as exact dollars per token: the
// rate divided by 10^12 (3000000 is "0.000003").
func usdPerToken(microsPerMTok int64) string { return price.Decimal(microsPerMTok, 12) }
