package pricecatalog

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/price"
)

// The issue's examples: a Messages request to claude-sonnet-4-5 and a Chat Completions request to
// gpt-4.1-mini, priced as Anthropic's and OpenAI's pricing pages publish them.
func TestBuiltinIssueExamples(t *testing.T) {
	c := Builtin()
	for _, tc := range []struct {
		model  string
		tokens price.Tokens
		want   int64
	}{
		// 2,000 × $3 + 10,000 × $6 (one-hour writes) + 50,000 × $0.30 + 500 × $15, per million:
		// 6,000 + 60,000 + 15,000 + 7,500 micro-units.
		{"claude-sonnet-4-5", price.Tokens{Uncached: 2_000, CacheWrite1h: 10_000, CacheRead: 50_000, Output: 500}, 88_500},
		// 2,000 × $0.40 + 50,000 × $0.10 (cached input) + 500 × $1.60, per million:
		// 800 + 5,000 + 800 micro-units.
		{"gpt-4.1-mini", price.Tokens{Uncached: 2_000, CacheRead: 50_000, Output: 500}, 6_600},
	} {
		p, err := c.Price(tc.model, "2025-12-01")
		if err != nil {
			t.Fatal(err)
		}
		b := price.Cost(tc.tokens, p)
		if b.Total() != tc.want || b.LongContext {
			t.Errorf("%s: %+v costs %d (%+v), want %d", tc.model, tc.tokens, b.Total(), b, tc.want)
		}
	}
}

func TestBuiltinEntries(t *testing.T) {
	c := Builtin()
	lineup := []string{
		"claude-opus-4-5", "claude-opus-4-1", "claude-opus-4", "claude-sonnet-4-5", "claude-sonnet-4",
		"claude-3-7-sonnet", "claude-haiku-4-5", "claude-3-5-haiku", "claude-3-haiku",
		"gpt-5", "gpt-5-mini", "gpt-5-nano", "gpt-5.1", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano",
		"gpt-4o", "gpt-4o-mini", "o3", "o4-mini",
	}
	for _, name := range lineup {
		if len(c.Entries(name)) == 0 {
			t.Errorf("no built-in entry for %s", name)
		}
	}
	for _, name := range c.Names() {
		for _, e := range c.Entries(name) {
			if e.Err != nil {
				t.Errorf("%s: refused: %v", name, e.Err)
			}
			if _, err := time.Parse(time.DateOnly, e.Effective); err != nil {
				t.Errorf("%s: effective date %q: %v", name, e.Effective, err)
			}
			if e.Price.Catalog != name || e.Price.Effective != e.Effective {
				t.Errorf("%s: the price names %q of %q", name, e.Price.Catalog, e.Price.Effective)
			}
			tiers := []price.Rates{e.Price.Rates}
			if e.Price.LongContext != nil {
				tiers = append(tiers, e.Price.LongContext.Rates)
			}
			for _, r := range tiers {
				// Rates are int64 micro-units per million tokens, whole by their type.
				if r.Input <= 0 || r.Output <= 0 || r.CacheRead < 0 || r.CacheWrite5m < 0 || r.CacheWrite1h < 0 {
					t.Errorf("%s: rates %+v: input and output must be positive, the rest not negative", name, r)
				}
				switch e.Provider {
				case "anthropic":
					if e.Source != anthropicPricing {
						t.Errorf("%s: source %q", name, e.Source)
					}
					if name == "claude-3-haiku" {
						// Published rounded: $0.30 for 5-minute writes and $0.03 for cache hits.
						want := price.Rates{Input: 250_000, CacheWrite5m: 300_000, CacheWrite1h: 500_000, CacheRead: 30_000, Output: 1_250_000}
						if r != want {
							t.Errorf("%s: rates %+v, want the published %+v", name, r, want)
						}
						continue
					}
					if r.CacheWrite5m*4 != r.Input*5 || r.CacheWrite1h != r.Input*2 || r.CacheRead*10 != r.Input {
						t.Errorf("%s: rates %+v are not 1.25×, 2× and 0.1× the input for 5m and 1h writes and reads", name, r)
					}
				case "openai":
					if e.Source != openAIPricing {
						t.Errorf("%s: source %q", name, e.Source)
					}
					if r.CacheWrite5m != r.Input || r.CacheWrite1h != r.Input || r.CacheRead >= r.Input {
						t.Errorf("%s: rates %+v: writes must cost the input price, reads less", name, r)
					}
				default:
					t.Errorf("%s: provider %q", name, e.Provider)
				}
			}
		}
	}
	for _, name := range []string{"claude-sonnet-4-5", "claude-sonnet-4"} {
		p, err := c.Price(name, "2025-12-01")
		if err != nil {
			t.Fatal(err)
		}
		want := price.Tier{AboveInputTokens: 200_000, Rates: price.Rates{Input: 6_000_000, CacheWrite5m: 7_500_000,
			CacheWrite1h: 12_000_000, CacheRead: 600_000, Output: 22_500_000}}
		if p.LongContext == nil || *p.LongContext != want {
			t.Errorf("%s: long-context tier %+v, want %+v", name, p.LongContext, want)
		}
	}
}

// Lookup picks the entry in force on a day: o3 has its launch price, then the price of the
// June 2025 cut.
func TestLookupEffectiveDay(t *testing.T) {
	c := Builtin()
	if got := len(c.Entries("o3")); got != 2 {
		t.Fatalf("o3 has %d entries, want 2", got)
	}
	for _, tc := range []struct {
		day   string
		input int64 // 0: no entry
	}{
		{"2025-04-15", 0},
		{"2025-04-16", 10_000_000},
		{"2025-06-09", 10_000_000},
		{"2025-06-10", 2_000_000},
		{"2026-01-01", 2_000_000},
	} {
		e, ok := c.Lookup("o3", tc.day)
		if tc.input == 0 {
			if ok {
				t.Errorf("o3 on %s: found %+v before launch", tc.day, e)
			}
			if _, err := c.Price("o3", tc.day); !errors.Is(err, ErrNotFound) {
				t.Errorf("o3 on %s: Price's error %v, want ErrNotFound", tc.day, err)
			}
			continue
		}
		if !ok || e.Price.Input != tc.input {
			t.Errorf("o3 on %s: %+v (found %v), want input %d", tc.day, e.Price, ok, tc.input)
		}
		if e.Price.Effective != e.Effective || e.Effective > tc.day {
			t.Errorf("o3 on %s: entry of %s, price of %s", tc.day, e.Effective, e.Price.Effective)
		}
	}
	if e, ok := c.Lookup("openai/o3", "2026-01-01"); !ok || e.Name != "o3" {
		t.Errorf("openai/o3: %+v, %v", e, ok)
	}
}

// TestBuiltinServiceTiers holds the OpenAI tiers to the rules the pricing page states for them:
// flex is billed at half the standard price of every kind ("Flex processing ... at Batch API
// rates", 50% off), priority costs more than standard on every kind, and writing the cache
// costs the tier's input price, as on the standard tier. Only OpenAI entries have tiers.
func TestBuiltinServiceTiers(t *testing.T) {
	c := Builtin()
	half := func(r price.Rates) price.Rates {
		return price.Rates{Input: r.Input / 2, CacheRead: r.CacheRead / 2, CacheWrite5m: r.CacheWrite5m / 2, CacheWrite1h: r.CacheWrite1h / 2, Output: r.Output / 2}
	}
	tiered := 0
	for _, name := range c.Names() {
		for _, e := range c.Entries(name) {
			if len(e.Price.ServiceTiers) > 0 && e.Provider != "openai" {
				t.Errorf("%s: tiers on a %s entry", name, e.Provider)
			}
			for tier, r := range e.Price.ServiceTiers {
				tiered++
				base := e.Price.Rates
				if r.CacheWrite5m != r.Input || r.CacheWrite1h != r.Input {
					t.Errorf("%s %s: cache writes %+v are not the input price", name, tier, r)
				}
				switch tier {
				case "flex":
					if r != half(base) {
						t.Errorf("%s flex: %+v, want half of %+v", name, r, base)
					}
				case "priority":
					if r.Input <= base.Input || r.CacheRead <= base.CacheRead || r.Output <= base.Output {
						t.Errorf("%s priority: %+v is not dearer than %+v", name, r, base)
					}
				default:
					t.Errorf("%s: unknown tier %q", name, tier)
				}
			}
		}
	}
	if tiered < 10 {
		t.Errorf("only %d tiers in the catalog", tiered)
	}
}

// TestAnthropicWrites: the default write prices are Anthropic's published multiples of input
// (1.25 and 2 times), the five-minute one rounded up to a whole micro-unit, as the pricing
// page's entries have them.
func TestAnthropicWrites(t *testing.T) {
	for _, c := range []struct{ in, w5m, w1h int64 }{
		{3_000_000, 3_750_000, 6_000_000}, {800_000, 1_000_000, 1_600_000}, {1, 2, 2}, {3, 4, 6}, {4, 5, 8}, {0, 0, 0},
	} {
		if got := AnthropicWrite5m(c.in); got != c.w5m {
			t.Errorf("AnthropicWrite5m(%d) = %d, want %d", c.in, got, c.w5m)
		}
		if got := AnthropicWrite1h(c.in); got != c.w1h {
			t.Errorf("AnthropicWrite1h(%d) = %d, want %d", c.in, got, c.w1h)
		}
	}
	// Every Anthropic entry of the catalog agrees, but Haiku 3's, which the page rounds.
	c := Builtin()
	for _, name := range c.Names() {
		for _, e := range c.Entries(name) {
			if e.Provider != "anthropic" || name == "claude-3-haiku" {
				continue
			}
			if r := e.Price.Rates; r.CacheWrite5m != AnthropicWrite5m(r.Input) || r.CacheWrite1h != AnthropicWrite1h(r.Input) {
				t.Errorf("%s: writes %d / %d for input %d", name, r.CacheWrite5m, r.CacheWrite1h, r.Input)
			}
		}
	}
}
