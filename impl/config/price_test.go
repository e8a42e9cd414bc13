package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/price"
)

// priceConfig is a configuration with one model whose price is the YAML given.
func priceConfig(priceYAML, extra string) string {
	return `
providers:
  - {name: p, kind: anthropic-messages, base_url: builtin:simulator}
models:
  - id: m
    family: messages
    price: ` + priceYAML + `
    max_output_tokens: 100
    backend: {provider: p, model: x}
` + extra
}

// TestPriceFromCatalog: a model's price can name a catalog entry; a typed number wins over the
// entry's, kind by kind; the price keeps the entry's name and date.
func TestPriceFromCatalog(t *testing.T) {
	c, err := Parse([]byte(priceConfig(`{catalog: claude-sonnet-4-5}`, "")))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Models[0].Price.Resolved()
	want := price.Rates{Input: 3_000_000, CacheRead: 300_000, CacheWrite5m: 3_750_000, CacheWrite1h: 6_000_000, Output: 15_000_000}
	if got.Rates != want || got.LongContext == nil || got.LongContext.AboveInputTokens != 200_000 {
		t.Fatalf("claude-sonnet-4-5 resolved to %+v", got)
	}
	if got.Catalog != "claude-sonnet-4-5" || got.Effective == "" {
		t.Errorf("the price does not name its entry and date: %q %q", got.Catalog, got.Effective)
	}

	c, err = Parse([]byte(priceConfig(`{catalog: claude-sonnet-4-5, output_micros_per_mtok: 14000000, cache_read_micros_per_mtok: 250000}`, "")))
	if err != nil {
		t.Fatal(err)
	}
	got = c.Models[0].Price.Resolved()
	if got.Output != 14_000_000 || got.CacheRead != 250_000 || got.Input != 3_000_000 || got.CacheWrite1h != 6_000_000 {
		t.Errorf("typed numbers over the catalog: %+v", got.Rates)
	}
	if !strings.Contains(got.Catalog, "typed") {
		t.Errorf("a price with typed overrides does not say so: %q", got.Catalog)
	}
}

// TestTypedPriceDefaults: without a catalog entry, the cache kinds not typed cost the most the
// provider may charge for them: on an anthropic-messages provider (priceConfig's) a cache write
// costs Anthropic's 1.25 times input for five minutes and 2 times for an hour (trial h12 D5: it
// cost input, so Anthropic's writes were billed below what Anthropic charges); a typed tier
// fills its output from the base rates and its cache kinds from its own input price.
func TestTypedPriceDefaults(t *testing.T) {
	c, err := Parse([]byte(priceConfig(`{input_micros_per_mtok: 1000000, output_micros_per_mtok: 4000000, cache_read_micros_per_mtok: 100000,
      long_context: {above_input_tokens: 128000, input_micros_per_mtok: 2000000}}`, "")))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Models[0].Price.Resolved()
	if got.Rates != (price.Rates{Input: 1_000_000, CacheRead: 100_000, CacheWrite5m: 1_250_000, CacheWrite1h: 2_000_000, Output: 4_000_000}) {
		t.Errorf("typed price: %+v", got.Rates)
	}
	if got.LongContext == nil || got.LongContext.Rates != (price.Rates{Input: 2_000_000, CacheRead: 2_000_000, CacheWrite5m: 2_500_000, CacheWrite1h: 4_000_000, Output: 4_000_000}) ||
		got.LongContext.AboveInputTokens != 128_000 {
		t.Errorf("typed tier: %+v", got.LongContext)
	}
	if got.Catalog != "" {
		t.Errorf("a typed price names a catalog entry: %q", got.Catalog)
	}
	// On an OpenAI provider, writing the cache costs what input costs.
	openai := strings.Replace(priceConfig(`{input_micros_per_mtok: 1000000, output_micros_per_mtok: 4000000}`, ""), "anthropic-messages", "openai-chat", 1)
	c, err = Parse([]byte(strings.Replace(openai, "family: messages", "family: chat", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Models[0].Price.Resolved(); got.Rates != (price.Rates{Input: 1_000_000, CacheRead: 1_000_000, CacheWrite5m: 1_000_000, CacheWrite1h: 1_000_000, Output: 4_000_000}) {
		t.Errorf("typed price on an OpenAI provider: %+v", got.Rates)
	}
}

// TestPriceRefusals: an unknown entry, a negative price and a tier without a threshold are
// refused with the model named.
func TestPriceRefusals(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{`{catalog: no-such-model}`, `model "m": price: no catalog entry "no-such-model"`},
		{`{input_micros_per_mtok: -1}`, `model "m": price: negative price`},
		{`{input_micros_per_mtok: 1, long_context: {input_micros_per_mtok: 2}}`, `above_input_tokens must be positive`},
	} {
		_, err := Parse([]byte(priceConfig(c.yaml, "")))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.yaml, err, c.want)
		}
	}
}

// TestPriceFromLiteLLMFile: price_catalog.litellm_file (relative to the configuration file)
// adds LiteLLM's entries; a model naming one whose price cannot be represented exactly in
// micro-units is refused with the model and the field named, and one naming an entry skipped
// for its mode (an embedding model) is told so, with the mode.
func TestPriceFromLiteLLMFile(t *testing.T) {
	dir := t.TempDir()
	prices := `{
  "sample_spec": {"input_cost_per_token": 0},
  "my-model": {"litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 1.5e-06, "output_cost_per_token": 6e-06, "cache_read_input_token_cost": 3.75e-07},
  "odd-model": {"litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 1.2345678901234e-07, "output_cost_per_token": 1e-06},
  "text-embedding-3-small": {"litellm_provider": "openai", "mode": "embedding", "input_cost_per_token": 2e-08, "output_cost_per_token": 0}
}`
	if err := os.WriteFile(filepath.Join(dir, "prices.json"), []byte(prices), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(priceYAML string) string {
		path := filepath.Join(dir, "tollgate.yaml")
		if err := os.WriteFile(path, []byte(priceConfig(priceYAML, "price_catalog: {litellm_file: prices.json}\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	c, err := Load(write(`{catalog: my-model}`))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Models[0].Price.Resolved()
	if got.Rates != (price.Rates{Input: 1_500_000, CacheRead: 375_000, CacheWrite5m: 1_500_000, CacheWrite1h: 1_500_000, Output: 6_000_000}) {
		t.Errorf("my-model: %+v", got.Rates)
	}
	_, err = Load(write(`{catalog: odd-model}`))
	if err == nil || !strings.Contains(err.Error(), `"odd-model"`) || !strings.Contains(err.Error(), "input_cost_per_token") {
		t.Errorf("an inexact price: %v, want an error naming odd-model and input_cost_per_token", err)
	}
	// An entry the file has but that was skipped for its mode is named as such, with the
	// modes that are read (configuration trial: "no catalog entry").
	_, err = Load(write(`{catalog: text-embedding-3-small}`))
	if want := `model "m": price: catalog entry "text-embedding-3-small": litellm file ` + filepath.Join(dir, "prices.json") +
		`: model "text-embedding-3-small" is skipped for its mode "embedding": only entries of mode chat, responses, completion (or none) are read for prices`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("an entry skipped for its mode: %v, want %s", err, want)
	}
}

// TestShippedConfigurationsUseTheCatalog: the example configuration prices its models from the
// catalog, so that claude-sonnet-4-5's cache writes and gpt-4.1-mini's cached input are priced
// as published.
func TestShippedConfigurationsUseTheCatalog(t *testing.T) {
	ex := Example()
	sonnet, _ := ex.Model("service-sonnet")
	if p := sonnet.Backend.Price; p != nil {
		t.Fatalf("service-sonnet's backend has its own price %+v", p)
	}
	if got := sonnet.Price.Resolved(); got.CacheWrite1h != 6_000_000 || got.CacheRead != 300_000 {
		t.Errorf("service-sonnet: %+v", got)
	}
	base, _ := ex.Model("service-flint-base")
	if got := base.Price.Resolved(); got.CacheRead != 100_000 || got.Input != 400_000 {
		t.Errorf("service-flint-base: %+v", got)
	}
	def := Default()
	ds, _ := def.Model("service-sonnet")
	if got := ds.Price.Resolved(); got.CacheWrite5m != 3_750_000 {
		t.Errorf("the default service-sonnet: %+v", got)
	}
}

// TestPricedOnADay: the configuration names the day its catalog prices next change, and a copy
// priced for another day takes that day's entries without changing the original; an upstream's
// own price is priced too, and a pinned price_catalog.date has no change ahead.
func TestPricedOnADay(t *testing.T) {
	c, err := Parse([]byte(`
providers:
  - {name: p, kind: openai-chat, base_url: builtin:simulator}
models:
  - id: m
    family: chat
    price: {catalog: o3}
    max_output_tokens: 100
    experts:
      - {provider: p, model: x}
      - {provider: p, model: y, price: {catalog: o3, output_micros_per_mtok: 1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.NextPriceChange("2025-05-01"); got != "2025-06-10" {
		t.Errorf("the change after 2025-05-01 on %q, want 2025-06-10 (o3's price cut)", got)
	}
	if got := c.NextPriceChange("2025-06-10"); got != "" {
		t.Errorf("a change after the last one, on %q", got)
	}
	before, err := c.PricedOn("2025-06-09")
	if err != nil {
		t.Fatal(err)
	}
	m := before.Models[0]
	if p := m.Price.Resolved(); p.Input != 10_000_000 || p.Effective != "2025-04-16" {
		t.Errorf("o3 on 2025-06-09: %+v", p)
	}
	if p := m.Experts[1].Price.Resolved(); p.Input != 10_000_000 || p.Output != 1 {
		t.Errorf("the upstream's own o3 price on 2025-06-09: %+v", p)
	}
	if p := c.Models[0].Experts[1].Price.Resolved(); p.Input != 2_000_000 {
		t.Errorf("pricing a copy changed the original: %+v", p)
	}
	if _, err := c.PricedOn("2025-01-01"); err == nil {
		t.Error("a day before o3's first entry priced without a word")
	}
	c.PriceCatalog.Date = "2025-05-01"
	if got := c.NextPriceChange("2025-05-01"); got != "" {
		t.Errorf("a pinned catalog date changes on %q", got)
	}
}

// TestTypedRatesCarryTheTiers: numbers typed beside a catalog entry carry the entry's service
// tiers and long-context tier with them in proportion, kind by kind, and a typed input carries
// the cache kinds left untyped: a markup over an entry is a markup throughout. Configuration
// trial: doubling gpt-5-mini's standard rates left its priority tier cheaper than standard, and
// doubling claude-sonnet-4-5's made a request above 200,000 input tokens cost less than one
// below.
func TestTypedRatesCarryTheTiers(t *testing.T) {
	c, err := Parse([]byte(priceConfig(`{catalog: claude-sonnet-4-5, input_micros_per_mtok: 6000000, output_micros_per_mtok: 30000000}`, "")))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Models[0].Price.Resolved()
	// Anthropic's published rates doubled: $6, $0.60, $7.50, $12, $30; above 200,000 input
	// tokens $12, $1.20, $15, $24, $45.
	if want := (price.Rates{Input: 6_000_000, CacheRead: 600_000, CacheWrite5m: 7_500_000, CacheWrite1h: 12_000_000, Output: 30_000_000}); got.Rates != want {
		t.Errorf("standard rates %+v, want %+v", got.Rates, want)
	}
	if want := (price.Rates{Input: 12_000_000, CacheRead: 1_200_000, CacheWrite5m: 15_000_000, CacheWrite1h: 24_000_000, Output: 45_000_000}); got.LongContext == nil || got.LongContext.Rates != want {
		t.Errorf("long-context rates %+v, want %+v", got.LongContext, want)
	}
	below := price.Cost(price.Tokens{Uncached: 200_000, Output: 10_000}, got).Total()
	above := price.Cost(price.Tokens{Uncached: 200_001, Output: 10_000}, got).Total()
	if above < below {
		t.Errorf("one more input token made the request cheaper: %d against %d", above, below)
	}

	c, err = Parse([]byte(`
providers:
  - {name: o, kind: openai-chat, base_url: builtin:simulator}
models:
  - {id: m, family: chat, max_output_tokens: 100, backend: {provider: o, model: x},
     price: {catalog: gpt-5-mini, input_micros_per_mtok: 500000, output_micros_per_mtok: 4000000}}
`))
	if err != nil {
		t.Fatal(err)
	}
	got = c.Models[0].Price.Resolved()
	// gpt-5-mini's priority tier ($0.45, $3.60) and flex ($0.125, $1) doubled.
	if p := got.ServiceTiers["priority"]; p.Input != 900_000 || p.Output != 7_200_000 || p.CacheRead != 90_000 {
		t.Errorf("priority %+v, want $0.90, $7.20 and cache reads $0.09", p)
	}
	if f := got.ServiceTiers["flex"]; f.Input != 250_000 || f.Output != 2_000_000 {
		t.Errorf("flex %+v, want $0.25 and $2", f)
	}
}

// TestExplicitZeroOverridesTheCatalog: a typed price of 0 beside a catalog entry is a price,
// and wins over the entry's as any typed number does (configuration trial: the typed fields
// could not tell 0 from unset, so input_micros_per_mtok: 0 kept the entry's input price). A
// typed 0 input carries the untyped cache kinds and the tiers with it, as a typed markup does;
// a field left out, or null, still takes the entry's price, and a misspelt key beside them is
// still an error.
func TestExplicitZeroOverridesTheCatalog(t *testing.T) {
	c, err := Parse([]byte(priceConfig(`{catalog: claude-sonnet-4-5, input_micros_per_mtok: 0}`, "")))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Models[0].Price.Resolved()
	if want := (price.Rates{Output: 15_000_000}); got.Rates != want {
		t.Errorf("input 0 over claude-sonnet-4-5: %+v, want %+v", got.Rates, want)
	}
	if got.LongContext == nil || got.LongContext.Input != 0 || got.LongContext.Output != 22_500_000 {
		t.Errorf("input 0 over claude-sonnet-4-5's long-context tier: %+v, want input 0 and output $22.50", got.LongContext)
	}
	if !strings.Contains(got.Catalog, "typed") {
		t.Errorf("a price with a typed 0 does not say it has typed overrides: %q", got.Catalog)
	}

	c, err = Parse([]byte(priceConfig(`{catalog: claude-sonnet-4-5, output_micros_per_mtok: 0, cache_read_micros_per_mtok: 0}`, "")))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Models[0].Price.Resolved().Rates, (price.Rates{Input: 3_000_000, CacheWrite5m: 3_750_000, CacheWrite1h: 6_000_000}); got != want {
		t.Errorf("output and cache reads 0 over claude-sonnet-4-5: %+v, want %+v", got, want)
	}

	c, err = Parse([]byte(priceConfig(`{catalog: claude-sonnet-4-5, input_micros_per_mtok: null}`, "")))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Models[0].Price.Resolved(); got.Input != 3_000_000 || strings.Contains(got.Catalog, "typed") {
		t.Errorf("a null input price over claude-sonnet-4-5: %+v, want the entry's $3", got)
	}

	// Zero everywhere charges nothing: it must say free.
	if _, err := Parse([]byte(priceConfig(`{catalog: claude-sonnet-4-5, input_micros_per_mtok: 0, output_micros_per_mtok: 0}`, ""))); err == nil {
		t.Error("a price of 0 for input and output over a catalog entry was accepted without free: true")
	}
	for _, yaml := range []string{`{catalog: claude-sonnet-4-5, input_micros_per_mtk: 0}`, `{catalog: claude-sonnet-4-5, long_context: {above_input_tokens: 1, inptu_micros_per_mtok: 0}}`} {
		if _, err := Parse([]byte(priceConfig(yaml, ""))); err == nil || !strings.Contains(err.Error(), "unknown key") {
			t.Errorf("%s: %v, want an unknown field refused", yaml, err)
		}
	}
}

// mergedPriceConfig is a configuration whose first model's price defines the anchors the
// others merge in (a YAML merge key, <<), as an operator writes a free tier once and reuses
// it: zero_in types input 0, zero_out types output 0, no_in says input null, and sonnet names
// claude-sonnet-4-5. models is the YAML of the models after the first.
func mergedPriceConfig(models string) string {
	return `
providers:
  - {name: p, kind: anthropic-messages, base_url: builtin:simulator}
models:
  - id: anchors
    family: messages
    price: {<<: [&zero_in {input_micros_per_mtok: 0}, &zero_out {output_micros_per_mtok: 0}, &no_in {input_micros_per_mtok: null}, &sonnet {catalog: claude-sonnet-4-5}], output_micros_per_mtok: 1}
    max_output_tokens: 100
    backend: {provider: p, model: x}
` + models
}

// TestMergedZeroPriceIsTyped: a price of 0 merged in with a YAML merge key (<<: *anchor) is a
// typed 0, as the same 0 written in the price is, and wins over the catalog entry's price;
// a price merged in as null, or not given at all, stays untyped and takes the entry's. The
// mapping's own keys win over merged ones, the first of a list of merged mappings wins over
// the later ones (YAML's merge rules, as the decoder applies them), and a merge inside a
// merged mapping counts too. A misspelt key in a merged mapping is refused as one written in
// the price is. Before this, the typed-0 check read only the keys written in the price
// itself, so a free tier merged in kept the catalog's input price: requests billed that the
// operator had made free.
func TestMergedZeroPriceIsTyped(t *testing.T) {
	const sonnetOutput = 15_000_000
	for _, c := range []struct {
		name, price   string
		input, output int64
	}{
		{"merged 0 beside a written catalog", `{<<: *zero_in, catalog: claude-sonnet-4-5}`, 0, sonnetOutput},
		{"merged 0 and merged catalog", `{<<: [*zero_in, *sonnet]}`, 0, sonnetOutput},
		{"merged 0 on an expert", ``, 0, sonnetOutput},
		{"a merged output 0", `{<<: [*zero_out, *sonnet]}`, 3_000_000, 0},
		{"a merge inside a merged mapping", `{<<: {<<: *zero_in, catalog: claude-sonnet-4-5}}`, 0, sonnetOutput},
		{"the price's own key wins over a merged 0", `{<<: [*zero_in, *sonnet], input_micros_per_mtok: 2000000}`, 2_000_000, sonnetOutput},
		{"the price's own null wins over a merged 0", `{<<: [*zero_in, *sonnet], input_micros_per_mtok: null}`, 3_000_000, sonnetOutput},
		{"the first merged mapping wins: 0", `{<<: [*zero_in, *no_in, *sonnet]}`, 0, sonnetOutput},
		{"the first merged mapping wins: null", `{<<: [*no_in, *zero_in, *sonnet]}`, 3_000_000, sonnetOutput},
		{"merged null is not typed", `{<<: [*no_in, *sonnet]}`, 3_000_000, sonnetOutput},
		{"nothing merged but the catalog", `{<<: *sonnet}`, 3_000_000, sonnetOutput},
	} {
		var models string
		if c.price == "" { // the expert case: the expert's own price merges the 0 in
			models = `  - id: m
    family: messages
    price: {free: true}
    max_output_tokens: 100
    experts: [{provider: p, model: y, price: {<<: *zero_in, catalog: claude-sonnet-4-5}}, {provider: p, model: z}]
`
		} else {
			models = "  - {id: m, family: messages, max_output_tokens: 100, backend: {provider: p, model: x}, price: " + c.price + "}\n"
		}
		cfg, err := Parse([]byte(mergedPriceConfig(models)))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		m, _ := cfg.Model("m")
		p := m.Price
		if c.price == "" {
			p = *m.Experts[0].Price
		}
		got := p.Resolved()
		if got.Input != c.input || got.Output != c.output {
			t.Errorf("%s: input %d output %d, want %d and %d", c.name, got.Input, got.Output, c.input, c.output)
		}
		if want := c.input != 3_000_000 || c.output != sonnetOutput; strings.Contains(got.Catalog, "typed") != want {
			t.Errorf("%s: the price's entry is %q, want it to say it has typed overrides: %v", c.name, got.Catalog, want)
		}
	}
	// A merged 0 is a 0 without a catalog too: input and output 0 charge nothing and must say
	// free, merged in or not.
	if _, err := Parse([]byte(mergedPriceConfig("  - {id: m, family: messages, max_output_tokens: 100, backend: {provider: p, model: x}, price: {<<: [*zero_in, *zero_out]}}\n"))); err == nil ||
		!strings.Contains(err.Error(), "say free: true") {
		t.Errorf("a merged price of 0 for input and output: %v, want it refused without free: true", err)
	}
	for _, bad := range []string{
		`{<<: {inptu_micros_per_mtok: 0}, catalog: claude-sonnet-4-5}`,
		`{<<: [*sonnet, {<<: {input_micros_per_mtk: 0}}]}`,
		`{catalog: claude-sonnet-4-5, long_context: {<<: {above_input_tokens: 1, inptu_micros_per_mtok: 0}}}`,
	} {
		_, err := Parse([]byte(mergedPriceConfig("  - {id: m, family: messages, max_output_tokens: 100, backend: {provider: p, model: x}, price: " + bad + "}\n")))
		if err == nil || !strings.Contains(err.Error(), "unknown key") {
			t.Errorf("%s: %v, want the misspelt merged key refused", bad, err)
		}
	}
}
