package pricecatalog

import "github.com/tollgate/tollgate/impl/price"

// The pages the built-in prices were read from.
const (
	anthropicPricing = "https://docs.anthropic.com/en/docs/about-claude/pricing"
	openAIPricing    = "https://platform.openai.com/docs/pricing"
)

// usd and cents are a dollar and a cent in micro-units, so that a price per million tokens
// reads as the pricing pages write it: 375*cents is "$3.75 / MTok", 125*cents/10 is "$0.125".
// Every one is an exact integer constant.
const (
	usd   = 1_000_000
	cents = usd / 100
)

// Builtin returns the catalog that ships with the gateway: the providers' published list prices
// (the standard tier, and OpenAI's flex and priority tiers where published; not batch) of the
// current Anthropic and OpenAI models, each entry
// naming the page it was read from and dated from the model's release or from the day its
// current price took effect.
//
// What was checked, and against what (in the search tool's stored copies of the pages):
//
//   - Anthropic: every rate of every model below against the "Model pricing" table of the
//     pricing page (stored copies of platform.claude.com/docs/{en,zh-CN}/about-claude/pricing,
//     where Anthropic's documentation now lives): base input, 5-minute and 1-hour cache
//     writes, cache hits, output. The long-context rates of Sonnet 4 and 4.5
//     above 200,000 input tokens ($6 / $7.50 / $12 / $0.60 / $22.50) against LiteLLM's
//     model_prices_and_context_window.json (the *_above_200k_tokens fields of
//     claude-sonnet-4-5 and claude-4-sonnet-20250514) and the launch coverage of the 1M context
//     window ($6 input, $22.50 output); the cache rates of the tier are the usual 1.25×, 2× and
//     0.1× of its input price. Sonnet 4.5's release date against its model page ("Released
//     September 29, 2025").
//   - OpenAI: gpt-5-mini and gpt-5-nano against their model pages on developers.openai.com
//     (input, cached input, output, and the snapshot dates 2025-08-07); the rest against
//     LiteLLM's file (input_cost_per_token, cache_read_input_token_cost,
//     output_cost_per_token) and third-party price tables citing
//     platform.openai.com/docs/pricing. OpenAI charges nothing extra to write its cache, so a
//     cache write costs the input price; "cached input" is the cache-read price.
//   - OpenAI's flex and priority tiers (the Flex and Priority tables of the pricing page):
//     against LiteLLM's file (the *_flex and *_priority fields of input_cost_per_token,
//     cache_read_input_token_cost and output_cost_per_token of each model's undated entry). A
//     tier is given only where LiteLLM lists its input, cached input and output prices (gpt-5.1
//     and gpt-5.2 have no flex prices there, gpt-5-nano no priority output price, and the o
//     models were not checked): an answer the upstream reports served on a tier the entry does
//     not give is billed at the standard rates, and a request asking for such a tier is sent
//     without it. The tiers came after some of the models' releases; a request could not be
//     served on a tier before it existed, so dating them from the entry changes no bill.
//
// Effective dates are release dates unless a comment says otherwise; dated snapshot names
// (claude-sonnet-4-5-20250929, gpt-4.1-2025-04-14) are not entries here.
func Builtin() *Catalog {
	var entries []Entry
	anthropic := func(name, effective string, r price.Rates, tier *price.Tier) {
		entries = append(entries, Entry{Name: name, Provider: "anthropic", Effective: effective,
			Source: anthropicPricing, Price: price.Price{Rates: r, LongContext: tier}})
	}
	openai := func(name, effective string, r price.Rates, tiers ...serviceTier) {
		p := price.Price{Rates: r}
		for _, t := range tiers {
			if p.ServiceTiers == nil {
				p.ServiceTiers = map[string]price.Rates{}
			}
			p.ServiceTiers[t.name] = t.rates
		}
		entries = append(entries, Entry{Name: name, Provider: "openai", Effective: effective,
			Source: openAIPricing, Price: p})
	}
	// sonnetLong is the long-context tier of Sonnet 4 and 4.5: the whole request at these rates
	// when its input (every kind) is above 200,000 tokens.
	sonnetLong := func() *price.Tier {
		return &price.Tier{AboveInputTokens: 200_000,
			Rates: anthropicRates(6*usd, 750*cents, 12*usd, 60*cents, 2250*cents)}
	}

	// Anthropic, in the pricing table's column order: base input, 5m cache writes, 1h cache
	// writes, cache hits, output. The cache prices are 1.25×, 2× and 0.1× the input price,
	// except Haiku 3's, which the page publishes rounded ($0.30 and $0.03, not $0.3125 and
	// $0.025) and which are billed as published.
	anthropic("claude-opus-4-5", "2025-11-24", anthropicRates(5*usd, 625*cents, 10*usd, 50*cents, 25*usd), nil)
	anthropic("claude-opus-4-1", "2025-08-05", anthropicRates(15*usd, 1875*cents, 30*usd, 150*cents, 75*usd), nil)
	anthropic("claude-opus-4", "2025-05-22", anthropicRates(15*usd, 1875*cents, 30*usd, 150*cents, 75*usd), nil)
	anthropic("claude-sonnet-4-5", "2025-09-29", anthropicRates(3*usd, 375*cents, 6*usd, 30*cents, 15*usd), sonnetLong())
	// The long-context tier came with the 1M-token context beta (2025-08-12); before it no
	// request could be above 200,000 input tokens, so dating it from the release changes no bill.
	anthropic("claude-sonnet-4", "2025-05-22", anthropicRates(3*usd, 375*cents, 6*usd, 30*cents, 15*usd), sonnetLong())
	anthropic("claude-3-7-sonnet", "2025-02-24", anthropicRates(3*usd, 375*cents, 6*usd, 30*cents, 15*usd), nil)
	anthropic("claude-haiku-4-5", "2025-10-15", anthropicRates(1*usd, 125*cents, 2*usd, 10*cents, 5*usd), nil)
	// Approximate: Haiku 3.5 launched on 2024-11-04 at $1 / $5 and was cut to these prices
	// later that year (the day is not sourced here); the entry is dated from the launch.
	anthropic("claude-3-5-haiku", "2024-11-04", anthropicRates(80*cents, 1*usd, 160*cents, 8*cents, 4*usd), nil)
	anthropic("claude-3-haiku", "2024-03-13", anthropicRates(25*cents, 30*cents, 50*cents, 3*cents, 125*cents), nil)

	// OpenAI, in the pricing table's column order: input, cached input, output; then the flex
	// and priority tiers' prices in the same order.
	openai("gpt-5.1", "2025-11-13", openAIRates(125*cents, 125*cents/10, 10*usd),
		priority(250*cents, 25*cents, 20*usd))
	openai("gpt-5", "2025-08-07", openAIRates(125*cents, 125*cents/10, 10*usd),
		flex(625*cents/10, 625*cents/100, 5*usd), priority(250*cents, 25*cents, 20*usd))
	openai("gpt-5-mini", "2025-08-07", openAIRates(25*cents, 25*cents/10, 2*usd),
		flex(125*cents/10, 125*cents/100, 1*usd), priority(45*cents, 45*cents/10, 360*cents))
	openai("gpt-5-nano", "2025-08-07", openAIRates(5*cents, 5*cents/10, 40*cents),
		flex(25*cents/10, 25*cents/100, 20*cents))
	// gpt-5.2: LiteLLM's gpt-5.2 and gpt-5.2-2025-12-11, and simonw/llm-prices.
	openai("gpt-5.2", "2025-12-11", openAIRates(175*cents, 175*cents/10, 14*usd),
		priority(350*cents, 35*cents, 28*usd))
	openai("gpt-4.1", "2025-04-14", openAIRates(2*usd, 50*cents, 8*usd),
		priority(350*cents, 875*cents/10, 14*usd))
	openai("gpt-4.1-mini", "2025-04-14", openAIRates(40*cents, 10*cents, 160*cents),
		priority(70*cents, 175*cents/10, 280*cents))
	openai("gpt-4.1-nano", "2025-04-14", openAIRates(10*cents, 25*cents/10, 40*cents),
		priority(20*cents, 5*cents, 80*cents))
	// Approximate: the price of the gpt-4o-2024-08-06 snapshot, dated from it; the gpt-4o alias
	// moved to it in October 2024 (before that gpt-4o was $5 / $15), and prompt caching, with
	// its cached-input price, began on 2024-10-01.
	openai("gpt-4o", "2024-08-06", openAIRates(250*cents, 125*cents, 10*usd),
		priority(425*cents, 2125*cents/10, 17*usd))
	openai("gpt-4o-mini", "2024-07-18", openAIRates(15*cents, 75*cents/10, 60*cents),
		priority(25*cents, 125*cents/10, 1*usd))
	// o3 launched at $10 / $2.50 cached / $40 (RooCodeInc/Roo-Code pull 2691 of 2025-04-17,
	// citing platform.openai.com/docs/models/o3); OpenAI cut it by 80% in June 2025: the date
	// 2025-06-10 is that of the announcement, approximate as an effective date.
	openai("o3", "2025-04-16", openAIRates(10*usd, 250*cents, 40*usd))
	openai("o3", "2025-06-10", openAIRates(2*usd, 50*cents, 8*usd))
	openai("o3-mini", "2025-01-31", openAIRates(110*cents, 55*cents, 440*cents))
	openai("o4-mini", "2025-04-16", openAIRates(110*cents, 275*cents/10, 440*cents))
	return New(entries...)
}

// AnthropicWrite5m and AnthropicWrite1h are Anthropic's prices of writing the prompt cache for
// five minutes and for one hour, from the input price: 1.25 and 2 times it (the five-minute one
// rounded up to a whole micro-unit per million tokens), for a price that does not give them.
func AnthropicWrite5m(input int64) int64 { return input/4*5 + (input%4*5+3)/4 }

// AnthropicWrite1h: see AnthropicWrite5m.
func AnthropicWrite1h(input int64) int64 { return price.SaturatingAdd(input, input) }

// anthropicRates are rates in the column order of Anthropic's pricing table.
func anthropicRates(input, write5m, write1h, read, output int64) price.Rates {
	return price.Rates{Input: input, CacheWrite5m: write5m, CacheWrite1h: write1h, CacheRead: read, Output: output}
}

// serviceTier is the name and rates of one of a model's other service tiers.
type serviceTier struct {
	name  string
	rates price.Rates
}

// flex and priority are OpenAI's flex and priority tiers at these prices (input, cached input,
// output), named as an answer's service_tier reports them.
func flex(input, cachedInput, output int64) serviceTier {
	return serviceTier{"flex", openAIRates(input, cachedInput, output)}
}

func priority(input, cachedInput, output int64) serviceTier {
	return serviceTier{"priority", openAIRates(input, cachedInput, output)}
}

// openAIRates are rates in the column order of OpenAI's pricing table; writing the cache costs
// the input price.
func openAIRates(input, cachedInput, output int64) price.Rates {
	return price.Rates{Input: input, CacheRead: cachedInput, CacheWrite5m: input, CacheWrite1h: input, Output: output}
}
