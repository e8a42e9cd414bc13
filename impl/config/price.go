package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/pricecatalog"
)

// Price is a model's price in integer micro-units (1 USD = 1,000,000) per million tokens of
// each kind, as the providers publish it. Catalog names an entry of the price catalog (the
// built-in one, or a LiteLLM price file given in price_catalog) whose prices are used for
// every kind not typed here: a typed price wins. Without a catalog entry, a cache kind not
// typed costs the most the provider may charge for it (a gateway never bills less than it may
// be charged): a cache read what uncached input costs; a cache write what input costs, or, for
// a model served by an anthropic-messages provider, Anthropic's 1.25 times input (five minutes)
// and 2 times input (one hour); and there is no long-context tier. Reasoning tokens are output
// tokens and cost the output price.
type Price struct {
	// Catalog names a catalog entry, e.g. "claude-sonnet-4-5" or "gpt-4.1-mini".
	Catalog       string `yaml:"catalog,omitempty"`
	InputPerMTok  int64  `yaml:"input_micros_per_mtok"`
	OutputPerMTok int64  `yaml:"output_micros_per_mtok"`
	// CacheReadPerMTok prices input read from the provider's prompt cache.
	CacheReadPerMTok *int64 `yaml:"cache_read_micros_per_mtok,omitempty"`
	// CacheWrite5mPerMTok and CacheWrite1hPerMTok price input written to the prompt cache for
	// five minutes and for one hour (Anthropic's 1.25× and 2× input; OpenAI's writes cost
	// what input costs).
	CacheWrite5mPerMTok *int64 `yaml:"cache_write_5m_micros_per_mtok,omitempty"`
	CacheWrite1hPerMTok *int64 `yaml:"cache_write_1h_micros_per_mtok,omitempty"`
	// LongContext prices the whole of a request whose input tokens of every kind together are
	// above its threshold.
	LongContext *LongContextPrice `yaml:"long_context,omitempty"`

	// resolved is the price with the catalog's numbers filled in (set by Validate).
	resolved *price.Price
}

// LongContextPrice is a long-context tier: its kinds not typed cost what the base kind does.
type LongContextPrice struct {
	AboveInputTokens    int64  `yaml:"above_input_tokens"`
	InputPerMTok        *int64 `yaml:"input_micros_per_mtok,omitempty"`
	OutputPerMTok       *int64 `yaml:"output_micros_per_mtok,omitempty"`
	CacheReadPerMTok    *int64 `yaml:"cache_read_micros_per_mtok,omitempty"`
	CacheWrite5mPerMTok *int64 `yaml:"cache_write_5m_micros_per_mtok,omitempty"`
	CacheWrite1hPerMTok *int64 `yaml:"cache_write_1h_micros_per_mtok,omitempty"`
}

// PriceCatalog names price lists, besides the built-in catalog, that prices may name.
type PriceCatalog struct {
	// LiteLLMFile is a file in the format of LiteLLM's model_prices_and_context_window.json
	// (read once at start; nothing is downloaded). Its entries win over the built-in ones of
	// the same name. A relative path is relative to the configuration file.
	LiteLLMFile string `yaml:"litellm_file,omitempty"`
	// Date is the day (YYYY-MM-DD) whose prices the catalog gives (default: today, UTC); a
	// catalog entry takes effect on its date.
	Date string `yaml:"date,omitempty"`
}

func (pc PriceCatalog) load(dir string) (*pricecatalog.Catalog, error) {
	cat := pricecatalog.Builtin()
	if pc.LiteLLMFile != "" {
		path := pc.LiteLLMFile
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		file, err := pricecatalog.LoadLiteLLMFile(path)
		if err != nil {
			return nil, fmt.Errorf("price_catalog: %w", err)
		}
		cat = cat.Overlay(file)
	}
	return cat, nil
}

// Resolved is the price with every kind filled in: after Validate, the catalog entry's numbers
// under the typed ones; for a Price that was never validated (built in code), the typed
// numbers with the cache kinds at the input price.
func (p Price) Resolved() price.Price {
	if p.resolved != nil {
		return *p.resolved
	}
	r, _ := p.resolve(nil, "", false)
	return r
}

// resolvePrice checks p and fills in its resolved price from the configuration's catalog;
// anthropic says whether it prices a model an anthropic-messages provider serves.
func (c *Config) resolvePrice(p *Price, anthropic bool) error {
	day := c.PriceCatalog.Date
	if day == "" {
		day = time.Now().UTC().Format(time.DateOnly)
	}
	r, err := p.resolve(c.catalog, day, anthropic)
	if err != nil {
		return err
	}
	p.resolved = &r
	return nil
}

func (p Price) resolve(cat *pricecatalog.Catalog, day string, anthropic bool) (price.Price, error) {
	var base price.Price
	hasCatalog := false
	if p.Catalog != "" {
		if cat == nil {
			return price.Price{}, fmt.Errorf("price: catalog entry %q: no catalog", p.Catalog)
		}
		e, ok := cat.Lookup(p.Catalog, day)
		if !ok {
			return price.Price{}, fmt.Errorf("price: no catalog entry %q in force on %s", p.Catalog, day)
		}
		if e.Err != nil {
			return price.Price{}, fmt.Errorf("price: catalog entry %q: %w", p.Catalog, e.Err)
		}
		base, hasCatalog = e.Price, true
	}
	set := func(dst *int64, v int64) {
		if v != 0 || !hasCatalog {
			*dst = v
		}
	}
	set(&base.Input, p.InputPerMTok)
	set(&base.Output, p.OutputPerMTok)
	// What an untyped cache kind costs, from the input price, without a catalog entry: a read,
	// and at OpenAI a write, what input costs.
	asInput := func(in int64) int64 { return in }
	write5m, write1h := asInput, asInput
	if anthropic {
		write5m, write1h = pricecatalog.AnthropicWrite5m, pricecatalog.AnthropicWrite1h
	}
	for _, k := range []struct {
		typed *int64
		dst   *int64
		def   func(int64) int64
	}{{p.CacheReadPerMTok, &base.CacheRead, asInput},
		{p.CacheWrite5mPerMTok, &base.CacheWrite5m, write5m}, {p.CacheWrite1hPerMTok, &base.CacheWrite1h, write1h}} {
		switch {
		case k.typed != nil:
			*k.dst = *k.typed
		case !hasCatalog:
			*k.dst = k.def(base.Input)
		}
	}
	if p.LongContext != nil {
		lc := p.LongContext
		if lc.AboveInputTokens <= 0 {
			return price.Price{}, errors.New("price: long_context.above_input_tokens must be positive")
		}
		tier := price.Tier{AboveInputTokens: lc.AboveInputTokens, Rates: base.Rates}
		fromCatalog := base.LongContext != nil
		if fromCatalog {
			tier.Rates = base.LongContext.Rates
		}
		if lc.InputPerMTok != nil {
			tier.Input = *lc.InputPerMTok
		}
		for _, k := range []struct {
			typed *int64
			dst   *int64
			def   func(int64) int64
		}{{lc.OutputPerMTok, &tier.Output, nil}, {lc.CacheReadPerMTok, &tier.CacheRead, asInput},
			{lc.CacheWrite5mPerMTok, &tier.CacheWrite5m, write5m}, {lc.CacheWrite1hPerMTok, &tier.CacheWrite1h, write1h}} {
			switch {
			case k.typed != nil:
				*k.dst = *k.typed
			case !fromCatalog && k.def != nil:
				// An untyped cache kind of a typed tier costs what the tier's own input
				// implies, as at the base rates: the base's would bill less than the tier.
				*k.dst = max(*k.dst, k.def(tier.Input))
			}
		}
		base.LongContext = &tier
	}
	if hasCatalog && (p.InputPerMTok != 0 || p.OutputPerMTok != 0 || p.CacheReadPerMTok != nil ||
		p.CacheWrite5mPerMTok != nil || p.CacheWrite1hPerMTok != nil || p.LongContext != nil) {
		// Typed numbers over a catalog entry: the price is the configuration's, read from that entry.
		base.Catalog += " (with typed overrides)"
	}
	if negative(base.Rates) || (base.LongContext != nil && negative(base.LongContext.Rates)) {
		return price.Price{}, errors.New("price: negative price")
	}
	return base, nil
}

func negative(r price.Rates) bool {
	return r.Input < 0 || r.Output < 0 || r.CacheRead < 0 || r.CacheWrite5m < 0 || r.CacheWrite1h < 0
}
