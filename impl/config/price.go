package config

import (
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/pricecatalog"
)

// Price is a model's price in integer micro-units (1 USD = 1,000,000) per million tokens of
// each kind, as the providers publish it. Catalog names an entry of the price catalog (the
// built-in one, or a LiteLLM price file given in price_catalog) whose prices are used for
// every kind not typed here: a typed price wins, 0 included (input_micros_per_mtok: 0 beside
// catalog makes input free; a field left out, or null, is not typed). Without a catalog entry,
// a cache kind not typed costs the most the provider may charge for it (a gateway never bills
// less than it may be charged): a cache read what uncached input costs; a cache write what
// input costs, or, for a model served by an anthropic-messages provider, Anthropic's 1.25 times
// input (five minutes) and 2 times input (one hour); and there is no long-context tier.
// Reasoning tokens are output tokens and cost the output price.
type Price struct {
	// Free serves the model without charge, which no price typed or from the catalog says
	// otherwise: a model whose upstream has no price at all is refused at start unless its
	// price says free, so that a forgotten price is not a free model (configuration trial).
	Free bool `yaml:"free,omitempty"`
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

	// inputTyped and outputTyped record that the YAML gave InputPerMTok and OutputPerMTok
	// (UnmarshalYAML), so that a typed 0 overrides a catalog entry's price; a Price built in
	// code types the ones it sets to other than 0.
	inputTyped, outputTyped bool

	// resolved is the price with the catalog's numbers filled in (set by Validate).
	resolved *price.Price
}

// UnmarshalYAML decodes a price and records which of input_micros_per_mtok and
// output_micros_per_mtok the YAML gives (not null), since their int64 fields cannot tell a
// typed 0 from a field left out (configuration trial: a 0 beside catalog kept the entry's
// price). A key merged in with a YAML merge key (<<: *anchor) counts as one written in the
// price, by YAML's merge rules (mergedEntries): a free tier merged in is as free as one typed.
// Unknown keys are errors here too, in long_context and in merged mappings as well, as the
// configuration's decoder makes them everywhere else.
func (p *Price) UnmarshalYAML(n *yaml.Node) error {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	inputTyped, outputTyped := false, false
	var unknown []string
	if n.Kind == yaml.MappingNode {
		entries := mergedEntries(n)
		unknown = unknownKeys(entries, reflect.TypeFor[Price]())
		for _, e := range entries {
			given := e.value.ShortTag() != "!!null"
			switch e.key.Value {
			case "input_micros_per_mtok":
				inputTyped = given
			case "output_micros_per_mtok":
				outputTyped = given
			case "long_context":
				if e.value.Kind == yaml.MappingNode {
					unknown = append(unknown, unknownKeys(mergedEntries(e.value), reflect.TypeFor[LongContextPrice]())...)
				}
			}
		}
	}
	if unknown != nil {
		return &yaml.TypeError{Errors: unknown}
	}
	// plain has Price's fields without its methods, so decoding it does not come back here.
	type plain Price
	var v plain
	if err := n.Decode(&v); err != nil {
		return err
	}
	*p = Price(v)
	p.inputTyped, p.outputTyped = inputTyped, outputTyped
	return nil
}

// mergedEntry is one key of a mapping as the decoder reads it, and its value with aliases
// followed.
type mergedEntry struct{ key, value *yaml.Node }

// mergedEntries lists the entries of the mapping m as the decoder reads them, merge keys (<<)
// followed: m's own keys first, then those of what a merge key brings in (a mapping, an alias
// of one, or a list of them in order, each read the same way, its own merge key included),
// each key taken from the first place that gives it, as YAML's merge rules and the decoder
// have it (the mapping's own key wins over a merged one, an earlier mapping of a list over a
// later one). A merge key's value that is no mapping is skipped here: the decoder refuses it.
func mergedEntries(m *yaml.Node) []mergedEntry {
	var out []mergedEntry
	seen := map[string]bool{}
	visiting := map[*yaml.Node]bool{}
	var read func(m *yaml.Node)
	read = func(m *yaml.Node) {
		for m.Kind == yaml.AliasNode && m.Alias != nil {
			m = m.Alias
		}
		if m.Kind != yaml.MappingNode || visiting[m] {
			return
		}
		visiting[m] = true
		defer delete(visiting, m)
		var merge *yaml.Node
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			if isMergeKey(k) {
				merge = v
				continue
			}
			if seen[k.Value] {
				continue
			}
			seen[k.Value] = true
			for v.Kind == yaml.AliasNode && v.Alias != nil {
				v = v.Alias
			}
			out = append(out, mergedEntry{k, v})
		}
		if merge == nil {
			return
		}
		for merge.Kind == yaml.AliasNode && merge.Alias != nil {
			merge = merge.Alias
		}
		if merge.Kind == yaml.SequenceNode {
			for _, item := range merge.Content {
				read(item)
			}
			return
		}
		read(merge)
	}
	read(m)
	return out
}

// isMergeKey reports whether k is a merge key (<<), by the decoder's rule: a plain << or one
// tagged !!merge, not a quoted "<<".
func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge")
}

// unknownKeys lists, as a decoder with KnownFields words them, the keys of entries (a
// mapping's, merged keys included: mergedEntries) that name no field of the struct type t (by
// its yaml tag): Node.Decode, which an UnmarshalYAML method must use, does not refuse them.
func unknownKeys(entries []mergedEntry, t reflect.Type) []string {
	known := map[string]bool{}
	for i := range t.NumField() {
		if tag, ok := t.Field(i).Tag.Lookup("yaml"); ok {
			name, _, _ := strings.Cut(tag, ",")
			known[name] = true
		}
	}
	var unknown []string
	for _, e := range entries {
		if k := e.key; !known[k.Value] {
			unknown = append(unknown, fmt.Sprintf("line %d: field %s not found in type %s", k.Line, k.Value, t))
		}
	}
	return unknown
}

// typedInput and typedOutput report whether p types its input and output prices: given in
// the YAML (0 included), or set to other than 0 in code.
func (p Price) typedInput() bool  { return p.inputTyped || p.InputPerMTok != 0 }
func (p Price) typedOutput() bool { return p.outputTyped || p.OutputPerMTok != 0 }

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
	return c.resolvePriceOn(p, anthropic, c.PriceDay(time.Now()))
}

// resolvePriceOn is resolvePrice with the catalog's entries in force on day.
func (c *Config) resolvePriceOn(p *Price, anthropic bool, day string) error {
	r, err := p.resolve(c.catalog, day, anthropic)
	if err != nil {
		return err
	}
	if p.Free && (r.Input != 0 || r.Output != 0 || r.CacheRead != 0 || r.CacheWrite5m != 0 || r.CacheWrite1h != 0) {
		return errors.New("price: free and a price at once; say one")
	}
	p.resolved = &r
	return nil
}

// priced reports whether p, resolved, charges for something, or says that it is free.
func (p Price) priced() bool {
	r := p.Resolved()
	return p.Free || r.Input > 0 || r.Output > 0
}

// validDay reports whether day is a calendar day written YYYY-MM-DD: catalog entries are found
// by comparing such days as text, which "2025/06/01" or "2025-6-1" would sort past every real
// one (configuration trial: price_catalog.date "2025/06/01" took o3's later price).
func validDay(day string) bool {
	t, err := time.Parse(time.DateOnly, day)
	return err == nil && t.Format(time.DateOnly) == day
}

// PriceDay is the day (YYYY-MM-DD) whose catalog prices hold at now: price_catalog.date when it
// is set, else now's day in UTC.
func (c *Config) PriceDay(now time.Time) string {
	if c.PriceCatalog.Date != "" {
		return c.PriceCatalog.Date
	}
	return now.UTC().Format(time.DateOnly)
}

// eachPrice calls fn with every price of the configuration (each model's, and each upstream's
// own) and whether it prices a model an anthropic-messages provider serves, as Validate
// resolves them.
func (c *Config) eachPrice(fn func(where string, p *Price, anthropic bool)) {
	anthropic := map[string]bool{}
	for _, p := range c.Providers {
		anthropic[p.Name] = p.Kind == KindAnthropicMessages
	}
	for i := range c.Models {
		m := &c.Models[i]
		ups := m.Experts
		if m.Backend != nil {
			ups = []Upstream{*m.Backend}
		}
		onAnthropic := false
		for _, u := range ups {
			onAnthropic = onAnthropic || anthropic[u.Provider]
		}
		fn(fmt.Sprintf("model %q", m.ID), &m.Price, onAnthropic)
		if m.Backend != nil && m.Backend.Price != nil {
			fn(fmt.Sprintf("model %q: upstream %s/%s", m.ID, m.Backend.Provider, m.Backend.Model), m.Backend.Price, anthropic[m.Backend.Provider])
		}
		for _, u := range m.Experts {
			if u.Price != nil {
				fn(fmt.Sprintf("model %q: upstream %s/%s", m.ID, u.Provider, u.Model), u.Price, anthropic[u.Provider])
			}
		}
	}
}

// NextPriceChange is the first day after day on which a catalog entry that one of the
// configuration's prices names takes effect (its price changes then), or "" when none does or
// price_catalog.date pins the day. A gateway that runs across that day bills from it on at the
// new price (PricedOn); trial h12 D6: the prices were resolved once, at start.
func (c *Config) NextPriceChange(day string) string {
	if c.PriceCatalog.Date != "" {
		return ""
	}
	next := ""
	c.eachPrice(func(_ string, p *Price, _ bool) {
		if p.Catalog == "" {
			return
		}
		if d := c.catalog.NextChange(p.Catalog, day); d != "" && (next == "" || d < next) {
			next = d
		}
	})
	return next
}

// PricedOn returns a copy of the validated configuration with every price resolved from the
// catalog's entries in force on day; c is not changed. The copy shares everything but its
// models. A price that cannot be resolved on day (its entry is not in force yet) keeps the
// resolution it had, and the error names it; the copy is usable either way.
func (c *Config) PricedOn(day string) (*Config, error) {
	out := *c
	out.Models = slices.Clone(c.Models)
	for i := range out.Models {
		m := &out.Models[i]
		if m.Backend != nil {
			b := *m.Backend
			if b.Price != nil {
				p := *b.Price
				b.Price = &p
			}
			m.Backend = &b
		}
		m.Experts = slices.Clone(m.Experts)
		for j := range m.Experts {
			if e := &m.Experts[j]; e.Price != nil {
				p := *e.Price
				e.Price = &p
			}
		}
	}
	var errs []error
	out.eachPrice(func(where string, p *Price, anthropic bool) {
		if err := out.resolvePriceOn(p, anthropic, day); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	})
	return &out, errors.Join(errs...)
}

// followTypedRates is a catalog entry's price r (its standard rates catalog, before the typed
// numbers of p replaced some of them in r) with the rest following the typed numbers in
// proportion: each typed kind's ratio to the entry's standard rate of that kind scales the
// same kind of the entry's service tiers and long-context tier, and a typed input price scales
// the cache kinds left untyped (the providers price them as multiples of input), at the
// standard rates and in the tiers. So a markup typed over an entry is a markup throughout
// (configuration trial: doubling gpt-5-mini's standard rates left its priority tier at the
// entry's, cheaper than standard; doubling claude-sonnet-4-5's made a request above 200,000
// input tokens cost less than one below). A kind the entry prices at 0 has no ratio: its tiers
// stay as the entry has them.
func followTypedRates(r price.Price, catalog price.Rates, p Price) price.Price {
	type ratio struct{ num, den int64 }
	var rIn, rOut, rRead, rW5, rW1 ratio
	if p.typedInput() && catalog.Input > 0 {
		rIn = ratio{p.InputPerMTok, catalog.Input}
	}
	if p.typedOutput() && catalog.Output > 0 {
		rOut = ratio{p.OutputPerMTok, catalog.Output}
	}
	scale := func(v int64, q ratio) int64 {
		if q.den == 0 {
			return v
		}
		n := new(big.Int).Mul(big.NewInt(v), big.NewInt(q.num))
		n.Add(n, big.NewInt(q.den-1)) // rounded up: never below the proportion
		return n.Quo(n, big.NewInt(q.den)).Int64()
	}
	// A cache kind: its typed ratio, else the input's.
	cacheRatio := func(typed *int64, catalogRate int64) ratio {
		if typed != nil {
			if catalogRate > 0 {
				return ratio{*typed, catalogRate}
			}
			return ratio{}
		}
		return rIn
	}
	rRead = cacheRatio(p.CacheReadPerMTok, catalog.CacheRead)
	rW5 = cacheRatio(p.CacheWrite5mPerMTok, catalog.CacheWrite5m)
	rW1 = cacheRatio(p.CacheWrite1hPerMTok, catalog.CacheWrite1h)
	if p.CacheReadPerMTok == nil {
		r.CacheRead = scale(catalog.CacheRead, rRead)
	}
	if p.CacheWrite5mPerMTok == nil {
		r.CacheWrite5m = scale(catalog.CacheWrite5m, rW5)
	}
	if p.CacheWrite1hPerMTok == nil {
		r.CacheWrite1h = scale(catalog.CacheWrite1h, rW1)
	}
	follow := func(t price.Rates) price.Rates {
		return price.Rates{Input: scale(t.Input, rIn), Output: scale(t.Output, rOut), CacheRead: scale(t.CacheRead, rRead),
			CacheWrite5m: scale(t.CacheWrite5m, rW5), CacheWrite1h: scale(t.CacheWrite1h, rW1)}
	}
	if r.LongContext != nil {
		lc := *r.LongContext
		lc.Rates = follow(lc.Rates)
		r.LongContext = &lc
	}
	if len(r.ServiceTiers) > 0 {
		tiers := make(map[string]price.Rates, len(r.ServiceTiers))
		for name, t := range r.ServiceTiers {
			tiers[name] = follow(t)
		}
		r.ServiceTiers = tiers
	}
	return r
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
	catalogRates := base.Rates
	set := func(dst *int64, v int64, typed bool) {
		if typed || !hasCatalog {
			*dst = v
		}
	}
	set(&base.Input, p.InputPerMTok, p.typedInput())
	set(&base.Output, p.OutputPerMTok, p.typedOutput())
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
	if hasCatalog {
		base = followTypedRates(base, catalogRates, p)
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
	if hasCatalog && (p.typedInput() || p.typedOutput() || p.CacheReadPerMTok != nil ||
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
