package pricecatalog

import (
	"encoding/json"
	"maps"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/price"
)

// excerpt is entries copied unchanged from LiteLLM's model_prices_and_context_window.json; see
// testdata/README.md.
const excerpt = "testdata/litellm_excerpt.json"

func loadExcerpt(t *testing.T) *Catalog {
	t.Helper()
	c, err := LoadLiteLLMFile(excerpt)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Each field of the excerpt's entries maps exactly: dollars per token × 10^12.
func TestLoadLiteLLMExcerpt(t *testing.T) {
	c := loadExcerpt(t)
	rates := func(in, read, w5m, w1h, out int64) price.Rates {
		return price.Rates{Input: in, CacheRead: read, CacheWrite5m: w5m, CacheWrite1h: w1h, Output: out}
	}
	for _, tc := range []struct {
		name     string
		provider string
		want     price.Price
	}{
		// Every field given, both tiers: 3e-06, 3e-07, 3.75e-06, 6e-06, 1.5e-05 and above 200k
		// tokens 6e-06, 6e-07, 7.5e-06, 1.2e-05, 2.25e-05.
		{"claude-sonnet-4-5", "anthropic", price.Price{
			Rates: rates(3_000_000, 300_000, 3_750_000, 6_000_000, 15_000_000),
			LongContext: &price.Tier{AboveInputTokens: 200_000,
				Rates: rates(6_000_000, 600_000, 7_500_000, 12_000_000, 22_500_000)}}},
		// No one-hour write in either tier: an Anthropic model's costs Anthropic's 2 times the
		// input price ($6 and $12, the pricing page's; trial h12 D5: it cost the five-minute
		// write's 1.25 times).
		{"claude-4-sonnet-20250514", "anthropic", price.Price{
			Rates: rates(3_000_000, 300_000, 3_750_000, 6_000_000, 15_000_000),
			LongContext: &price.Tier{AboveInputTokens: 200_000,
				Rates: rates(6_000_000, 600_000, 7_500_000, 12_000_000, 22_500_000)}}},
		{"claude-haiku-4-5", "anthropic", price.Price{Rates: rates(1_000_000, 100_000, 1_250_000, 2_000_000, 5_000_000)}},
		{"claude-opus-4-1", "anthropic", price.Price{Rates: rates(15_000_000, 1_500_000, 18_750_000, 30_000_000, 75_000_000)}},
		// LiteLLM's one-hour write for Haiku 3 is 6e-06 ($6, where Anthropic publishes $0.50): read as
		// written, since the file is what it is.
		{"claude-3-haiku-20240307", "anthropic", price.Price{Rates: rates(250_000, 30_000, 300_000, 6_000_000, 1_250_000)}},
		// OpenAI: no cache-write fields, so writes cost the input price (on every tier); the
		// flex and priority tiers are read from the *_flex and *_priority fields; batch prices
		// are not read.
		{"gpt-4.1-mini", "openai", price.Price{Rates: rates(400_000, 100_000, 400_000, 400_000, 1_600_000),
			ServiceTiers: map[string]price.Rates{"priority": rates(700_000, 175_000, 700_000, 700_000, 2_800_000)}}},
		{"gpt-4o", "openai", price.Price{Rates: rates(2_500_000, 1_250_000, 2_500_000, 2_500_000, 10_000_000),
			ServiceTiers: map[string]price.Rates{"priority": rates(4_250_000, 2_125_000, 4_250_000, 4_250_000, 17_000_000)}}},
		{"gpt-5", "openai", price.Price{Rates: rates(1_250_000, 125_000, 1_250_000, 1_250_000, 10_000_000),
			ServiceTiers: map[string]price.Rates{
				"flex":     rates(625_000, 62_500, 625_000, 625_000, 5_000_000),
				"priority": rates(2_500_000, 250_000, 2_500_000, 2_500_000, 20_000_000)}}},
		// A tier above 272k tokens; its writes default to its own input price. Its flex and
		// priority prices are not read: a service tier of a price has no long-context tier.
		{"gpt-5.4", "openai", price.Price{
			Rates: rates(2_500_000, 250_000, 2_500_000, 2_500_000, 15_000_000),
			LongContext: &price.Tier{AboveInputTokens: 272_000,
				Rates: rates(5_000_000, 500_000, 5_000_000, 5_000_000, 22_500_000)}}},
	} {
		e, ok := c.Lookup(tc.name, "2026-01-01")
		if !ok {
			t.Errorf("%s: not found", tc.name)
			continue
		}
		if e.Err != nil {
			t.Errorf("%s: refused: %v", tc.name, e.Err)
			continue
		}
		tc.want.Catalog = tc.name
		if !equalPrice(e.Price, tc.want) {
			t.Errorf("%s: %s, want %s", tc.name, show(e.Price), show(tc.want))
		}
		if e.Provider != tc.provider || e.Source != excerpt || e.Effective != "" {
			t.Errorf("%s: provider %q, source %q, effective %q", tc.name, e.Provider, e.Source, e.Effective)
		}
	}

	// The Sonnet 4.5 example costs the same at LiteLLM's price.
	p, err := c.Price("claude-sonnet-4-5", "2026-01-01")
	if err != nil {
		t.Fatal(err)
	}
	tokens := price.Tokens{Uncached: 2_000, CacheWrite1h: 10_000, CacheRead: 50_000, Output: 500}
	if got := price.Cost(tokens, p).Total(); got != 88_500 {
		t.Errorf("claude-sonnet-4-5 at LiteLLM's price: %d, want 88500", got)
	}
}

// Where the excerpt and the built-in catalog both price a model, they agree.
func TestLoadLiteLLMAgreesWithBuiltin(t *testing.T) {
	lite, builtin := loadExcerpt(t), Builtin()
	for _, name := range []string{"claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1", "gpt-4.1-mini", "gpt-4o", "gpt-5"} {
		a, err := lite.Price(name, "2026-01-01")
		if err != nil {
			t.Fatal(err)
		}
		b, err := builtin.Price(name, "2026-01-01")
		if err != nil {
			t.Fatal(err)
		}
		a.Effective, b.Effective = "", ""
		if !equalPrice(a, b) {
			t.Errorf("%s: LiteLLM %s, built-in %s", name, show(a), show(b))
		}
	}
}

// TestLoadLiteLLMSkipsAndRefuses: the sample_spec and the models of a mode not billed by tokens
// are skipped, and models whose prices cannot be billed exactly are refused. Looking up a model
// skipped for its mode finds no price but an error naming the file, the model, the mode and
// the modes read, so that a configuration naming it is told why instead of "no catalog entry"
// (configuration trial).
func TestLoadLiteLLMSkipsAndRefuses(t *testing.T) {
	c := loadExcerpt(t)
	if e, ok := c.Lookup("sample_spec", "2026-01-01"); ok {
		t.Errorf("sample_spec: kept as %+v", e)
	}
	for name, mode := range map[string]string{"1024-x-1024/dall-e-2": "image_generation", "cohere.embed-english-v3": "embedding", "gpt-4o-mini-realtime-preview": "realtime"} {
		want := `litellm file testdata/litellm_excerpt.json: model "` + name + `" is skipped for its mode "` + mode +
			`": only entries of mode chat, responses, completion (or none) are read for prices`
		e, ok := c.Lookup(name, "2026-01-01")
		if !ok || e.Err == nil || e.Err.Error() != want || e.Price.Rates != (price.Rates{}) {
			t.Errorf("%s: found %v, %+v, want no price and the error %s", name, ok, e, want)
		}
		if _, err := c.Price(name, "2026-01-01"); err == nil || err.Error() != want {
			t.Errorf("%s: Price's error %v", name, err)
		}
	}
	if e, ok := c.Lookup("bedrock/cohere.embed-english-v3", "2026-01-01"); !ok || e.Err == nil || !strings.Contains(e.Err.Error(), `mode "embedding"`) {
		t.Errorf("a skipped model with a provider prefix: found %v, %+v", ok, e)
	}
	refused := map[string]string{
		"databricks/databricks-meta-llama-3-1-405b-instruct": `litellm file testdata/litellm_excerpt.json: model "databricks/databricks-meta-llama-3-1-405b-instruct": ` +
			`output_cost_per_token 1.5000020000000002e-05 USD per token is 15000020.000000002 micro-units per million tokens, not a whole number`,
		"dashscope/qwen-plus-2025-07-28": `litellm file testdata/litellm_excerpt.json: model "dashscope/qwen-plus-2025-07-28": ` +
			`tiered_pricing is not supported: a price has one long-context tier at most`,
	}
	for name, want := range refused {
		e, ok := c.Lookup(name, "2026-01-01")
		if !ok || e.Err == nil || e.Err.Error() != want {
			t.Errorf("%s: found %v, error %v, want %s", name, ok, e.Err, want)
		}
		if e.Price.Rates != (price.Rates{}) {
			t.Errorf("%s: a refused entry has rates %+v", name, e.Price.Rates)
		}
		if _, err := c.Price(name, "2026-01-01"); err != e.Err {
			t.Errorf("%s: Price's error %v", name, err)
		}
	}
	if got, want := len(c.Names()), 11; got != want {
		t.Errorf("%d names, want %d: %v", got, want, c.Names())
	}
}

// Prices that cannot be billed exactly are refused, naming the model and the field; the rest
// of the file loads.
func TestLoadLiteLLMRefusesInexactPrices(t *testing.T) {
	file := `{
		"ok":   {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05, "mode": "chat"},
		"foo":  {"input_cost_per_token": 1.2345678901234e-07, "output_cost_per_token": 1e-06},
		"neg":  {"input_cost_per_token": 1e-06, "output_cost_per_token": -2e-06},
		"big":  {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e300},
		"str":  {"input_cost_per_token": "3e-06", "output_cost_per_token": 1e-06},
		"read": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06, "cache_read_input_token_cost": 1e-20},
		"tier": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06, "input_cost_per_token_above_200k_tokens": 2.0000001e-06},
		"two":  {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06, "input_cost_per_token_above_128k_tokens": 2e-06, "output_cost_per_token_above_200k_tokens": 2e-06},
		"nout": {"input_cost_per_token": 1e-06, "mode": "completion"},
		"why":  {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06, "output_cost_per_reasoning_token": 4e-06},
		"mode": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06, "mode": 3}
	}`
	c, err := LoadLiteLLM(strings.NewReader(file), "prices.json")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"foo":  `input_cost_per_token 1.2345678901234e-07 USD per token is 123456.78901234 micro-units per million tokens, not a whole number`,
		"neg":  `output_cost_per_token -2e-06 USD per token is negative`,
		"big":  `output_cost_per_token 1e300 USD per token is more than 9223372036854775807 micro-units per million tokens`,
		"str":  `input_cost_per_token "3e-06" is not a number`,
		"read": `cache_read_input_token_cost 1e-20 USD per token is 0.00000001 micro-units per million tokens, not a whole number`,
		"tier": `input_cost_per_token_above_200k_tokens 2.0000001e-06 USD per token is 2000000.1 micro-units per million tokens, not a whole number`,
		"two":  `prices above both 128k and 200k input tokens: a price has one long-context tier at most`,
		"nout": `no output_cost_per_token`,
		"why":  `output_cost_per_reasoning_token 4e-06 differs from output_cost_per_token 1e-06: reasoning is billed as output`,
		"mode": `mode 3 is not a string`,
	}
	for name, msg := range want {
		msg = `litellm file prices.json: model "` + name + `": ` + msg
		if _, err := c.Price(name, "2026-01-01"); err == nil || err.Error() != msg {
			t.Errorf("%s: error %v\nwant %s", name, err, msg)
		}
	}
	if p, err := c.Price("ok", "2026-01-01"); err != nil || p.Input != 3_000_000 || p.Output != 15_000_000 || p.CacheRead != 3_000_000 {
		t.Errorf("ok: %+v, %v", p, err)
	}
}

func TestLoadLiteLLMMalformed(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{``, `litellm file f.json: empty, not a JSON object of models`},
		{`[{"gpt-4o": {}}]`, `litellm file f.json: not a JSON object of models`},
		{`"gpt-4o"`, `litellm file f.json: not a JSON object of models`},
		{`{"gpt-4o": "2.5e-06"}`, `litellm file f.json: model "gpt-4o": the value is a string, not an object`},
		{`{"gpt-4o": [1]}`, `litellm file f.json: model "gpt-4o": the value is an array, not an object`},
		{`{"sample_spec": 1}`, `litellm file f.json: model "sample_spec": the value is a number, not an object`},
		{`{"gpt-4o": {"input_cost_per_token": 1e-06,}}`, `litellm file f.json: model "gpt-4o": invalid character '}' looking for beginning of object key string`},
		{`{"gpt-4o": {}`, `litellm file f.json: unexpected EOF`},
		{`{"gpt-4o": {}} {}`, `litellm file f.json: more after the JSON object of models`},
	} {
		c, err := LoadLiteLLM(strings.NewReader(tc.file), "f.json")
		if err == nil || err.Error() != tc.want || c != nil {
			t.Errorf("%q: %v, %v\nwant %s", tc.file, c, err, tc.want)
		}
	}
	if _, err := LoadLiteLLMFile("testdata/no-such-file.json"); err == nil {
		t.Error("a missing file loads")
	}
}

func TestMicrosPerMillion(t *testing.T) {
	for _, tc := range []struct {
		num  string
		want int64
	}{
		{"3e-06", 3_000_000},
		{"3.75e-06", 3_750_000},
		{"1.5e-05", 15_000_000},
		{"2.5e-08", 25_000},
		{"0.000003", 3_000_000},
		{"1.25e-07", 125_000},
		{"1.875e-05", 18_750_000},
		{"2.25e-05", 22_500_000},
		{"5e-09", 5_000},
		{"0.00018", 180_000_000},
		{"3E-6", 3_000_000},
		{"3e+0", 3_000_000_000_000},
		{"0", 0},
		{"0.0", 0},
		{"-0.0", 0},
		{"0e999999999999999999999", 0},
		{"1e-12", 1},
		{"0.000000000001", 1},
		{"9223372.036854775807", math.MaxInt64},
	} {
		got, err := microsPerMillion(tc.num)
		if err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.num, got, err, tc.want)
		}
	}
	for _, num := range []string{"1e-13", "1.2345678901234e-07", "-1e-06", "9223372.036854775808", "1e999999999999999999999", "1e-999999999999999999999"} {
		if got, err := microsPerMillion(num); err == nil {
			t.Errorf("%s: %d, want an error", num, got)
		}
	}
}

// FuzzMicrosPerMillion checks the decimal conversion against math/big for any JSON number.
func FuzzMicrosPerMillion(f *testing.F) {
	for _, s := range []string{"3e-06", "3.75e-06", "1.5e-05", "2.5e-08", "0.000003", "1.25e-07", "1.2345678901234e-07",
		"-1e-06", "0", "1e300", "9223372.036854775807", "1.5000020000000002e-05"} {
		f.Add(s)
	}
	scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(12), nil))
	f.Fuzz(func(t *testing.T, num string) {
		if len(num) > 64 || num != strings.TrimSpace(num) || !json.Valid([]byte(num)) || (num[0] != '-' && (num[0] < '0' || num[0] > '9')) {
			return
		}
		if i := strings.IndexAny(num, "eE"); i >= 0 && len(strings.TrimLeft(num[i+1:], "+-")) > 3 {
			return // keep math/big's work small
		}
		r, ok := new(big.Rat).SetString(num)
		if !ok {
			t.Fatalf("math/big cannot read %q", num)
		}
		r.Mul(r, scale)
		exact := r.IsInt() && r.Sign() >= 0 && r.Num().IsInt64()
		got, err := microsPerMillion(num)
		switch {
		case exact && (err != nil || got != r.Num().Int64()):
			t.Errorf("%s: %d, %v; want %s", num, got, err, r.Num())
		case !exact && err == nil:
			t.Errorf("%s: %d, want an error (exactly %s)", num, got, r.FloatString(20))
		}
	})
}

func equalPrice(a, b price.Price) bool {
	if (a.LongContext == nil) != (b.LongContext == nil) {
		return false
	}
	if a.LongContext != nil && *a.LongContext != *b.LongContext {
		return false
	}
	if !maps.Equal(a.ServiceTiers, b.ServiceTiers) {
		return false
	}
	return a.Rates == b.Rates && a.ServiceTier == b.ServiceTier && a.Catalog == b.Catalog && a.Effective == b.Effective
}

func show(p price.Price) string {
	b, _ := json.Marshal(p)
	return string(b)
}

// TestLiteLLMFileReplacesTheBuiltinEntry: overlaid on the built-in catalog, a LiteLLM file's
// entry of a name replaces the built-in entries of that name on every day, a refused one
// included (its error is what a price naming it gets); the names the file does not have keep
// their built-in entries. Configuration trial: the dated built-in entry won from its date on,
// so a file pricing gpt-4.1-mini at twice the built-in price billed the built-in one.
func TestLiteLLMFileReplacesTheBuiltinEntry(t *testing.T) {
	file, err := LoadLiteLLM(strings.NewReader(`{
		"gpt-4.1-mini": {"litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 8e-07, "output_cost_per_token": 3.2e-06},
		"gpt-5-mini": {"litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 1.2345678901234e-07, "output_cost_per_token": 2e-06}}`), "ops.json")
	if err != nil {
		t.Fatal(err)
	}
	cat := Builtin().Overlay(file)
	e, ok := cat.Lookup("gpt-4.1-mini", "2026-12-05")
	if !ok || e.Err != nil || e.Price.Input != 800_000 || e.Price.Output != 3_200_000 {
		t.Errorf("gpt-4.1-mini: %+v, want the file's $0.80 and $3.20", e)
	}
	if e, ok := cat.Lookup("gpt-5-mini", "2026-12-05"); !ok || e.Err == nil {
		t.Errorf("gpt-5-mini, refused in the file: %+v, want the file's refusal", e)
	}
	if e, ok := cat.Lookup("claude-sonnet-4-5", "2026-12-05"); !ok || e.Price.Input != 3_000_000 {
		t.Errorf("claude-sonnet-4-5, not in the file: %+v, want the built-in $3", e)
	}
}

// TestSkippedEntryHidesNothing: a LiteLLM entry skipped for its mode does not replace the
// built-in entry of its name (it has no price to give), and a name found nowhere else finds
// the skipped entry's reason through the overlay.
func TestSkippedEntryHidesNothing(t *testing.T) {
	file, err := LoadLiteLLM(strings.NewReader(`{
		"gpt-4.1-mini": {"litellm_provider": "openai", "mode": "embedding", "input_cost_per_token": 1e-07, "output_cost_per_token": 0},
		"text-embedding-3-small": {"litellm_provider": "openai", "mode": "embedding", "input_cost_per_token": 2e-08, "output_cost_per_token": 0}}`), "ops.json")
	if err != nil {
		t.Fatal(err)
	}
	cat := Builtin().Overlay(file)
	if e, ok := cat.Lookup("gpt-4.1-mini", "2026-12-05"); !ok || e.Err != nil || e.Price.Input != 400_000 {
		t.Errorf("gpt-4.1-mini, skipped in the file: %+v, want the built-in $0.40", e)
	}
	if _, err := cat.Price("text-embedding-3-small", "2026-12-05"); err == nil || !strings.Contains(err.Error(), `skipped for its mode "embedding"`) {
		t.Errorf("text-embedding-3-small through the overlay: %v", err)
	}
}
