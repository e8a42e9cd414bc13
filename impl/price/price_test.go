package price

import (
	"math"
	"testing"
)

// Prices used below, in micro-units per million tokens, from the providers' pricing pages:
// claude-sonnet-4-5 (https://docs.anthropic.com/en/docs/about-claude/pricing: $3 input, $3.75
// five-minute cache write, $6 one-hour cache write, $0.30 cache read, $15 output; above 200,000
// input tokens $6, $7.50, $12, $0.60, $22.50) and gpt-4.1-mini
// (https://platform.openai.com/docs/pricing: $0.40 input, $0.10 cached input, $1.60 output;
// OpenAI's cache writes cost what input costs).
var (
	sonnet = Price{
		Rates:       Rates{Input: 3_000_000, CacheWrite5m: 3_750_000, CacheWrite1h: 6_000_000, CacheRead: 300_000, Output: 15_000_000},
		LongContext: &Tier{AboveInputTokens: 200_000, Rates: Rates{Input: 6_000_000, CacheWrite5m: 7_500_000, CacheWrite1h: 12_000_000, CacheRead: 600_000, Output: 22_500_000}},
	}
	gpt41mini = Price{Rates: Rates{Input: 400_000, CacheRead: 100_000, CacheWrite5m: 400_000, CacheWrite1h: 400_000, Output: 1_600_000}}
)

// TestCostPerKind: the two examples, priced kind by kind, and the long-context tier.
func TestCostPerKind(t *testing.T) {
	// Messages: 2,000 input + 10,000 one-hour cache writes + 50,000 cache reads + 500 output:
	// 2,000×3 + 10,000×6 + 50,000×0.30 + 500×15 = 6,000 + 60,000 + 15,000 + 7,500.
	b := Cost(Tokens{Uncached: 2_000, CacheWrite1h: 10_000, CacheRead: 50_000, Output: 500}, sonnet)
	if want := (Breakdown{Input: 6_000, CacheWrite1h: 60_000, CacheRead: 15_000, Output: 7_500}); b != want || b.Total() != 88_500 {
		t.Errorf("sonnet: %+v (total %d), want %+v (88,500)", b, b.Total(), want)
	}
	// The old bill (every prompt token at the input price) is not what this costs.
	if old := Part(62_000, 3_000_000) + Part(500, 15_000_000); old == b.Total() {
		t.Error("cache-priced bill equals the all-input bill")
	}
	// chat / Responses: 52,000 prompt tokens of which 50,000 cached + 500 output:
	// 2,000×0.40 + 50,000×0.10 + 500×1.60 = 800 + 5,000 + 800.
	if b := Cost(Tokens{Uncached: 2_000, CacheRead: 50_000, Output: 500}, gpt41mini); b.Total() != 6_600 {
		t.Errorf("gpt-4.1-mini: %+v (total %d), want 6,600", b, b.Total())
	}
	// Above 200,000 input tokens (of every kind together) the whole request is at the tier.
	b = Cost(Tokens{Uncached: 1_000, CacheRead: 199_000, CacheWrite5m: 1_000, Output: 1_000}, sonnet)
	if want := (Breakdown{Input: 6_000, CacheRead: 119_400, CacheWrite5m: 7_500, Output: 22_500, LongContext: true}); b != want {
		t.Errorf("long context: %+v, want %+v", b, want)
	}
	b = Cost(Tokens{Uncached: 1_000, CacheRead: 199_000, Output: 1_000}, sonnet) // exactly 200,000: base rates
	if b.LongContext || b.Total() != 3_000+59_700+15_000 {
		t.Errorf("at the threshold: %+v", b)
	}
}

// TestPartRounding: each kind's part is rounded up to a whole micro-unit, in 128-bit integers.
func TestPartRounding(t *testing.T) {
	for _, c := range []struct{ tokens, rate, want int64 }{
		{0, 3_000_000, 0},
		{1, 1, 1},           // a millionth of a micro-unit rounds up to one
		{1_000_000, 1, 1},   // exactly one
		{1_000_001, 1, 2},   // just over
		{3, 250_000, 1},     // 0.75
		{7, 1_250_000, 9},   // 8.75
		{-5, 1_000_000, 0},  // negative counts are zero
		{10, -1_000_000, 0}, // negative rates are zero
		{math.MaxInt64, 1_000_000, math.MaxInt64},
		{math.MaxInt64, 2_000_000, math.MaxInt64}, // saturates
		{1 << 40, 1 << 30, 1_180_591_620_717_412},
	} {
		if got := Part(c.tokens, c.rate); got != c.want {
			t.Errorf("Part(%d, %d) = %d, want %d", c.tokens, c.rate, got, c.want)
		}
	}
	b := Breakdown{Input: math.MaxInt64, Output: 1}
	if b.Total() != math.MaxInt64 {
		t.Error("Total does not saturate")
	}
}

// TestWorst: the reservation covers whatever kinds the input turns out to be, and the tier.
func TestWorst(t *testing.T) {
	// 10,000 input tokens that may all be one-hour cache writes ($6) + 1,000 output.
	if got, want := Worst(10_000, 1_000, sonnet), int64(60_000+15_000); got != want {
		t.Errorf("Worst = %d, want %d", got, want)
	}
	// Above the threshold: at the tier's one-hour write ($12) and output ($22.50).
	if got, want := Worst(300_000, 1_000, sonnet), int64(3_600_000+22_500); got != want {
		t.Errorf("Worst above the threshold = %d, want %d", got, want)
	}
	// Every possible split of the input costs no more than the worst case.
	for _, tok := range []Tokens{
		{Uncached: 10_000, Output: 1_000}, {CacheRead: 10_000, Output: 1_000}, {CacheWrite5m: 10_000, Output: 1_000},
		{CacheWrite1h: 10_000, Output: 1_000}, {Uncached: 2_500, CacheRead: 2_500, CacheWrite5m: 2_500, CacheWrite1h: 2_500, Output: 1_000},
	} {
		if c := Cost(tok, sonnet).Total(); c > Worst(10_000, 1_000, sonnet) {
			t.Errorf("%+v costs %d, above the worst case", tok, c)
		}
	}
}

// TestMax: the price a fusion model reserves at is the dearer expert's, kind by kind.
func TestMax(t *testing.T) {
	m := Max(sonnet, gpt41mini)
	if m.Rates != sonnet.Rates || m.LongContext == nil || m.LongContext.AboveInputTokens != 200_000 {
		t.Errorf("Max = %+v", m)
	}
	cheapTier := Price{Rates: Rates{Input: 1}, LongContext: &Tier{AboveInputTokens: 100_000, Rates: Rates{Input: 2}}}
	m = Max(gpt41mini, cheapTier)
	if m.LongContext == nil || m.LongContext.AboveInputTokens != 100_000 || m.LongContext.Input != 400_000 || m.LongContext.Output != 1_600_000 {
		t.Errorf("Max with one tier = %+v", m.LongContext)
	}
	for _, in := range []int64{50_000, 150_000, 250_000} {
		for _, p := range []Price{gpt41mini, cheapTier, sonnet} {
			if Worst(in, 1000, p) > Worst(in, 1000, Max(Max(gpt41mini, cheapTier), sonnet)) {
				t.Errorf("the max price's worst case is below one of its prices' at %d input tokens", in)
			}
		}
	}
}

// TestCacheSavings: what the cache saved against the uncached input price.
func TestCacheSavings(t *testing.T) {
	// 50,000 reads save 50,000×(3-0.30) = 135,000; 10,000 one-hour writes cost 10,000×(6-3) =
	// 30,000 more than input.
	cached := Tokens{Uncached: 2_000, CacheWrite1h: 10_000, CacheRead: 50_000, Output: 500}
	if got := CacheSavings(cached, sonnet, Cost(cached, sonnet)); got != 105_000 {
		t.Errorf("savings %d, want 105,000", got)
	}
	uncached := Tokens{Uncached: 2_000, Output: 500}
	if got := CacheSavings(uncached, sonnet, Cost(uncached, sonnet)); got != 0 {
		t.Errorf("savings without cache %d", got)
	}
}

// gpt5 is gpt-5's price with its flex and priority tiers, per million tokens, from OpenAI's
// pricing page (https://platform.openai.com/docs/pricing: Standard $1.25 / $0.125 cached /
// $10, Flex $0.625 / $0.0625 / $5, Priority $2.50 / $0.25 / $20), as LiteLLM's
// model_prices_and_context_window.json lists them.
var gpt5 = Price{
	Rates: Rates{Input: 1_250_000, CacheRead: 125_000, CacheWrite5m: 1_250_000, CacheWrite1h: 1_250_000, Output: 10_000_000},
	ServiceTiers: map[string]Rates{
		"flex":     {Input: 625_000, CacheRead: 62_500, CacheWrite5m: 625_000, CacheWrite1h: 625_000, Output: 5_000_000},
		"priority": {Input: 2_500_000, CacheRead: 250_000, CacheWrite5m: 2_500_000, CacheWrite1h: 2_500_000, Output: 20_000_000},
	},
}

// TestAtServiceTier: a request served on a tier the price gives is billed, all of it, at the
// tier's rates, and the price it keeps says which tier and carries no other tiers; any other
// tier ("default", "scale", "") is billed at the base rates, long-context tier included.
func TestAtServiceTier(t *testing.T) {
	// 2,000 uncached + 50,000 cached input + 500 output on priority:
	// 2,000×2.50 + 50,000×0.25 + 500×20 = 5,000 + 12,500 + 10,000.
	tok := Tokens{Uncached: 2_000, CacheRead: 50_000, Output: 500}
	p := gpt5.AtServiceTier("priority")
	if b := Cost(tok, p); b.Total() != 27_500 || p.ServiceTier != "priority" || p.ServiceTiers != nil {
		t.Errorf("priority: %+v (total %d), price %+v", b, b.Total(), p)
	}
	// Flex: 2,000×0.625 + 50,000×0.0625 + 500×5 = 1,250 + 3,125 + 2,500.
	if b := Cost(tok, gpt5.AtServiceTier("flex")); b.Total() != 6_875 {
		t.Errorf("flex: %+v (total %d)", b, b.Total())
	}
	for _, tier := range []string{"", "default", "scale", "standard"} {
		p := gpt5.AtServiceTier(tier)
		if b := Cost(tok, p); b.Total() != 13_750 || p.ServiceTier != "" || p.ServiceTiers != nil {
			t.Errorf("%q: %+v (total %d), price %+v", tier, b, b.Total(), p)
		}
	}
	// A price without tiers keeps its long-context tier on every tier name.
	if p := sonnet.AtServiceTier("priority"); p.LongContext == nil || p.Rates != sonnet.Rates || p.ServiceTier != "" {
		t.Errorf("sonnet on priority: %+v", p)
	}
}

// TestWorstOnTier: a request asking for a tier is reserved at the dearer of the base rates and
// the tier's; one asking for none, or for a tier the price does not give, at the base rates.
func TestWorstOnTier(t *testing.T) {
	// 1,000 input tokens and 1,000 output tokens: standard 1,250 + 10,000; priority 2,500 + 20,000.
	if got := WorstOnTier(1_000, 1_000, gpt5, "priority"); got != 22_500 {
		t.Errorf("priority: %d, want 22,500", got)
	}
	for _, tier := range []string{"", "flex", "scale"} {
		if got := WorstOnTier(1_000, 1_000, gpt5, tier); got != 11_250 {
			t.Errorf("%q: %d, want 11,250", tier, got)
		}
	}
	if got := Worst(1_000, 1_000, gpt5); got != 11_250 {
		t.Errorf("Worst: %d, want 11,250", got)
	}
}

// TestMaxServiceTiers: the dearer of two prices covers each tier either gives, a price without
// the tier counting its base rates for it.
func TestMaxServiceTiers(t *testing.T) {
	m := Max(gpt5, sonnet)
	if got := m.ServiceTiers["priority"]; got.Input != 3_000_000 || got.Output != 20_000_000 || got.CacheWrite1h != 6_000_000 {
		t.Errorf("priority of the two: %+v", got)
	}
	if got := m.ServiceTiers["flex"]; got != sonnet.Rates {
		t.Errorf("flex of the two: %+v, want sonnet's base %+v", got, sonnet.Rates)
	}
	if got := WorstOnTier(1_000, 1_000, m, "priority"); got < WorstOnTier(1_000, 1_000, gpt5, "priority") || got < Worst(1_000, 1_000, sonnet) {
		t.Errorf("the reservation of the two on priority, %d, does not cover each", got)
	}
}
