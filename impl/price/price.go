// Package price holds what tokens cost and the arithmetic of a bill. A Price is a model's
// price as the providers publish it, in integer micro-units (1 USD = 1,000,000) per million
// tokens of each kind: uncached input, input read from the provider's prompt cache, input
// written to it for five minutes or for one hour, and output (reasoning tokens are output and
// priced as output), with an optional long-context tier that prices the whole request when its
// input is above a threshold, and optional rates for a provider's other service tiers (OpenAI's
// flex and priority processing). Tokens are a request's counts per kind; Cost turns the two into a
// Breakdown whose parts are each rounded up to a whole micro-unit and whose Total is their sum,
// so that a usage record carrying the counts and the price reproduces its cost exactly.
//
// Everything here is integer arithmetic in 128 bits; nothing is a float.
package price

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// PerMillion is the number of tokens a price is quoted for.
const PerMillion = 1_000_000

// Rates are prices per million tokens of each kind, in micro-units.
type Rates struct {
	Input        int64 `json:"input"`
	CacheRead    int64 `json:"cache_read"`
	CacheWrite5m int64 `json:"cache_write_5m"`
	CacheWrite1h int64 `json:"cache_write_1h"`
	Output       int64 `json:"output"`
}

// Tier is a long-context price: a request whose input tokens of every kind together are above
// AboveInputTokens is billed, all of it, at Rates (Anthropic's prices above 200,000 input
// tokens, say).
type Tier struct {
	AboveInputTokens int64 `json:"above_input_tokens"`
	Rates
}

// Price is a model's price: its base rates (the provider's standard service tier), an optional
// long-context tier, the rates of other service tiers, and where the numbers came from.
type Price struct {
	Rates
	LongContext *Tier `json:"long_context,omitempty"`
	// ServiceTiers are the rates of the provider's other service tiers, by the name the upstream
	// reports the tier by in its answer's service_tier ("flex", "priority"): a request served on
	// one of them is billed, all of it, at its rates (AtServiceTier). A tier not here is billed
	// at the base rates.
	ServiceTiers map[string]Rates `json:"service_tiers,omitempty"`
	// ServiceTier names the service tier whose rates Rates are, on a price AtServiceTier
	// resolved to a tier of ServiceTiers; "" for the base rates.
	ServiceTier string `json:"service_tier,omitempty"`
	// HostedPerCall is, on a usage record's price, what each call of the hosted tools the
	// request called cost (micro-units a call, by the tool's name: "web_search"), so that the
	// record's hosted cost is reproducible from it alone: calls × price, tool by tool.
	HostedPerCall map[string]int64 `json:"hosted_micros_per_call,omitempty"`
	// Catalog names the catalog entry the price was taken from ("" when typed in the
	// configuration), and Effective the date (YYYY-MM-DD) from which the catalog says it holds.
	Catalog   string `json:"catalog,omitempty"`
	Effective string `json:"effective,omitempty"`
}

// Tokens are a request's token counts per kind. Input tokens of the four kinds are disjoint:
// Uncached + CacheRead + CacheWrite5m + CacheWrite1h is every input token. Reasoning is the
// part of Output spent on reasoning; it is billed as output and counted only for the record.
type Tokens struct {
	Uncached     int64 `json:"uncached_input"`
	CacheRead    int64 `json:"cache_read"`
	CacheWrite5m int64 `json:"cache_write_5m"`
	CacheWrite1h int64 `json:"cache_write_1h"`
	Output       int64 `json:"output"`
	Reasoning    int64 `json:"reasoning"`
}

// Input is every input token: uncached, read from and written to the cache.
func (t Tokens) Input() int64 {
	return SaturatingAdd(SaturatingAdd(nonNeg(t.Uncached), nonNeg(t.CacheRead)), SaturatingAdd(nonNeg(t.CacheWrite5m), nonNeg(t.CacheWrite1h)))
}

// Breakdown is a cost per token kind, each part rounded up to a whole micro-unit.
type Breakdown struct {
	Input        int64
	CacheRead    int64
	CacheWrite5m int64
	CacheWrite1h int64
	Output       int64
	// LongContext reports that the long-context tier's rates applied.
	LongContext bool
}

// Total is the sum of the parts (math.MaxInt64 when that overflows).
func (b Breakdown) Total() int64 {
	return SaturatingAdd(SaturatingAdd(SaturatingAdd(b.Input, b.CacheRead), SaturatingAdd(b.CacheWrite5m, b.CacheWrite1h)), b.Output)
}

// RatesFor are the rates a request with inputTokens input tokens (of every kind) is billed at:
// the long-context tier's above its threshold, the base rates otherwise.
func (p Price) RatesFor(inputTokens int64) (Rates, bool) {
	if p.LongContext != nil && inputTokens > p.LongContext.AboveInputTokens {
		return p.LongContext.Rates, true
	}
	return p.Rates, false
}

// AtServiceTier is the price a request served on tier is billed at: the tier's rates, and no
// long-context tier, when p has rates for it (OpenAI publishes one price per tier, whatever the
// prompt's length, for the models its catalog entries give tiers); otherwise p's base rates and
// long-context tier. The result carries no ServiceTiers: it is the price of one request, which
// its usage record keeps and its bill is reproduced from.
func (p Price) AtServiceTier(tier string) Price {
	out := p
	out.ServiceTiers = nil
	if r, ok := p.ServiceTiers[tier]; ok && tier != "" {
		out.Rates, out.LongContext, out.ServiceTier = r, nil, tier
	}
	return out
}

// HasServiceTier reports whether p has rates of its own for the service tier.
func (p Price) HasServiceTier(tier string) bool {
	_, ok := p.ServiceTiers[tier]
	return ok
}

// Cost is what t costs at p: each kind's count times its rate, divided by a million and
// rounded up to a whole micro-unit, so that no part is billed less than it cost. Negative
// counts and rates count as zero; a part beyond math.MaxInt64 is math.MaxInt64.
func Cost(t Tokens, p Price) Breakdown {
	r, long := p.RatesFor(t.Input())
	return Breakdown{
		Input:        Part(t.Uncached, r.Input),
		CacheRead:    Part(t.CacheRead, r.CacheRead),
		CacheWrite5m: Part(t.CacheWrite5m, r.CacheWrite5m),
		CacheWrite1h: Part(t.CacheWrite1h, r.CacheWrite1h),
		Output:       Part(t.Output, r.Output),
		LongContext:  long,
	}
}

// Worst is the most a request with up to inputTokens input tokens and outputTokens output
// tokens can cost at p, whichever kinds its input turns out to be: every input token at the
// dearest input kind (a one-hour cache write costs twice the input price at Anthropic), at the
// long-context tier's rates when the input may be above its threshold, and never less than at
// the base rates.
func Worst(inputTokens, outputTokens int64, p Price) int64 {
	return WorstOnTier(inputTokens, outputTokens, p, "")
}

// WorstOnTier is Worst for a request that asked for the service tier: never less than Worst,
// and never less than at the tier's rates when p has them.
func WorstOnTier(inputTokens, outputTokens int64, p Price, tier string) int64 {
	worst := worstAt(inputTokens, outputTokens, p.Rates)
	if p.LongContext != nil && inputTokens > p.LongContext.AboveInputTokens {
		worst = max(worst, worstAt(inputTokens, outputTokens, p.LongContext.Rates))
	}
	if r, ok := p.ServiceTiers[tier]; ok && tier != "" {
		worst = max(worst, worstAt(inputTokens, outputTokens, r))
	}
	return worst
}

func worstAt(in, out int64, r Rates) int64 {
	return SaturatingAdd(Part(in, r.MaxInput()), Part(out, r.Output))
}

// MaxInput is the dearest of the input kinds' rates.
func (r Rates) MaxInput() int64 {
	return max(r.Input, r.CacheRead, r.CacheWrite5m, r.CacheWrite1h)
}

// Max is, kind by kind, the dearer of two prices (and of their long-context tiers, the lower
// threshold kept, and of their service tiers, a price without a tier counting its base rates
// for it), for a reservation that must cover whichever of several upstreams serves.
func Max(a, b Price) Price {
	out := Price{Rates: maxRates(a.Rates, b.Rates)}
	for _, tiers := range []map[string]Rates{a.ServiceTiers, b.ServiceTiers} {
		for name := range tiers {
			if out.ServiceTiers == nil {
				out.ServiceTiers = map[string]Rates{}
			}
			out.ServiceTiers[name] = maxRates(a.tierRates(name), b.tierRates(name))
		}
	}
	switch {
	case a.LongContext == nil && b.LongContext == nil:
	case a.LongContext == nil:
		t := Tier{AboveInputTokens: b.LongContext.AboveInputTokens, Rates: maxRates(a.Rates, b.LongContext.Rates)}
		out.LongContext = &t
	case b.LongContext == nil:
		t := Tier{AboveInputTokens: a.LongContext.AboveInputTokens, Rates: maxRates(b.Rates, a.LongContext.Rates)}
		out.LongContext = &t
	default:
		t := Tier{AboveInputTokens: min(a.LongContext.AboveInputTokens, b.LongContext.AboveInputTokens),
			Rates: maxRates(a.LongContext.Rates, b.LongContext.Rates)}
		out.LongContext = &t
	}
	return out
}

// tierRates are the rates p bills the service tier at: the tier's own, or the base rates.
func (p Price) tierRates(tier string) Rates {
	if r, ok := p.ServiceTiers[tier]; ok {
		return r
	}
	return p.Rates
}

func maxRates(a, b Rates) Rates {
	return Rates{Input: max(a.Input, b.Input), CacheRead: max(a.CacheRead, b.CacheRead),
		CacheWrite5m: max(a.CacheWrite5m, b.CacheWrite5m), CacheWrite1h: max(a.CacheWrite1h, b.CacheWrite1h),
		Output: max(a.Output, b.Output)}
}

// Part is tokens × perMTok / 1,000,000 rounded up to a whole micro-unit, in 128-bit integers;
// negative values count as zero, and a result beyond math.MaxInt64 is math.MaxInt64.
func Part(tokens, perMTok int64) int64 {
	hi, lo := bits.Mul64(uint64(nonNeg(tokens)), uint64(nonNeg(perMTok)))
	lo, carry := bits.Add64(lo, PerMillion-1, 0)
	hi += carry
	if hi >= PerMillion {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, PerMillion)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// SaturatingAdd is a+b for non-negative amounts, or math.MaxInt64 when that overflows.
func SaturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func nonNeg(v int64) int64 {
	if v < 0 {
		return 0
	}
	return v
}

// CacheSavings is what the prompt cache saved on t at p, whose cost is b (Cost(t, p)): what its
// cached tokens (read and written) would have cost as uncached input, less what they cost;
// negative when cache writes cost more than the reads saved.
func CacheSavings(t Tokens, p Price, b Breakdown) int64 {
	r, _ := p.RatesFor(t.Input())
	cached := SaturatingAdd(SaturatingAdd(nonNeg(t.CacheRead), nonNeg(t.CacheWrite5m)), nonNeg(t.CacheWrite1h))
	return Part(cached, r.Input) - (b.CacheRead + b.CacheWrite5m + b.CacheWrite1h)
}

// Decimal is n divided by 10^scale, written exactly in decimal without trailing zeros
// (Decimal(1500, 3) is "1.5", Decimal(0, 12) is "0"): a rate in micro-units per million tokens
// as dollars per token (scale 12) or per million tokens (scale 6), with no rounding.
func Decimal(n int64, scale int) string {
	sign := ""
	u := uint64(n)
	if n < 0 {
		sign, u = "-", uint64(-n)
	}
	digits := strconv.FormatUint(u, 10)
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	whole, frac := digits[:len(digits)-scale], strings.TrimRight(digits[len(digits)-scale:], "0")
	if frac == "" {
		return sign + whole
	}
	return sign + whole + "." + frac
}
