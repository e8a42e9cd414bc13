package pricecatalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/impl/price"
)

// The LiteLLM fields of a price, in dollars per token.
const (
	liteInput   = "input_cost_per_token"
	liteOutput  = "output_cost_per_token"
	liteRead    = "cache_read_input_token_cost"
	liteWrite5m = "cache_creation_input_token_cost"
	liteWrite1h = "cache_creation_input_token_cost_above_1hr"
)

// liteTierField matches a long-context price: a price field followed by _above_<N>k_tokens.
var liteTierField = regexp.MustCompile(`^(.+)_above_([0-9]+)k_tokens$`)

// LoadLiteLLM reads a LiteLLM price list (the model_prices_and_context_window.json that LiteLLM
// keeps and many gateway operators already maintain) into a catalog, naming source (a path or
// URL) in every entry's Source and in every error.
//
// The file is a JSON object whose keys are model names and whose values are objects of prices
// in dollars per token. Each model becomes an entry of that name with Provider its
// litellm_provider and Effective "" (the file states no dates, so the entry holds from the
// beginning; overlaid on Builtin, it replaces the built-in entries of the same name on every
// day: Catalog.Overlay).
// The "sample_spec" key, which documents the format, is skipped, and so are models whose mode
// is not one of BilledModes (embeddings, images, audio, rerank, realtime and the like, which
// are not billed by the token kinds of a price.Price); a model without a mode is kept. A
// skipped model is remembered by name: looking it up finds no price, but an entry whose Err
// says that the file has it, skipped for its mode, so that a configuration naming it is told
// why rather than that there is no such entry (configuration trial). It never hides an entry
// of its name in a catalog it is overlaid on (Catalog.Overlay).
//
// Each price is read from its JSON text and multiplied by 10^12 (dollars per token to
// micro-units per million tokens) in exact decimal arithmetic, never through a float. The fields
// are input_cost_per_token (uncached input), output_cost_per_token (output, reasoning included),
// cache_read_input_token_cost, cache_creation_input_token_cost (the five-minute cache write) and
// cache_creation_input_token_cost_above_1hr (the one-hour write); the same fields ending in
// _above_<N>k_tokens are a long-context tier above N×1000 input tokens. The same fields ending
// in _flex and _priority are OpenAI's flex and priority service tiers (price.Price's
// ServiceTiers): a tier is read when both its input and its output price are there, its missing
// cache prices costing the tier's input price; it is not read for an entry with a long-context
// tier (the tier's own long-context prices would be needed, and a price.Price tier has none), so
// an answer served on it is billed at the standard rates. Batch prices, image tokens and
// per-query or per-request fees are not read. Nor are audio prices (input_cost_per_audio_token,
// output_cost_per_audio_token): a price.Price has no audio kind, so an entry that has them (a
// gpt-4o-audio-preview, say) is read for its text prices only, and the gateway refuses every
// request that carries audio or asks for it (convert.AudioRefusal) rather than bill its audio
// tokens at those text prices.
//
// A missing cache price is never cheaper than the provider may charge: a missing cache read
// costs the input price; a missing five-minute write the input price, and a missing one-hour
// write the five-minute write price, except for an Anthropic model (its litellm_provider names
// anthropic, or its name claude), whose missing writes cost Anthropic's 1.25 and 2 times input
// (AnthropicWrite5m, AnthropicWrite1h). Within a long-context tier the same holds against the
// tier's input price, and a tier without its own input or output price uses the base one.
//
// An entry whose price cannot be billed exactly is kept, refused, with Err naming the model and
// the field: a price that is not a whole number of micro-units per million tokens, is negative,
// is beyond int64, or is not a number; a chat model without an input or output price; an entry
// priced by LiteLLM's tiered_pricing list or above more than one threshold; an
// output_cost_per_reasoning_token that differs from output_cost_per_token (reasoning is billed
// as output). Lookup finds such an entry and its Err says why it has no price.
//
// A file that is not JSON, not an object, or has a model whose value is not an object is an
// error, and no catalog is returned.
func LoadLiteLLM(r io.Reader, source string) (*Catalog, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("litellm file %s: %s", source, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(r)
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, fail("empty, not a JSON object of models")
	}
	if err != nil {
		return nil, fail("%v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fail("not a JSON object of models")
	}
	var entries, skipped []Entry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fail("%v", err)
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fail("model %q: %v", name, err)
		}
		raw = bytes.TrimSpace(raw)
		if raw[0] != '{' {
			return nil, fail("model %q: the value is %s, not an object", name, jsonKind(raw))
		}
		if name == "sample_spec" {
			continue
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, fail("model %q: %v", name, err)
		}
		if e, keep := liteLLMEntry(name, fields, source); keep {
			entries = append(entries, e)
		} else {
			skipped = append(skipped, e)
		}
	}
	if _, err := dec.Token(); err == io.EOF { // the closing brace
		return nil, fail("%v", io.ErrUnexpectedEOF)
	} else if err != nil {
		return nil, fail("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fail("more after the JSON object of models")
	}
	c := New(entries...)
	for _, e := range skipped {
		c.skip(e)
	}
	return c, nil
}

// LoadLiteLLMFile is LoadLiteLLM of the file at path, with the path as the source.
func LoadLiteLLMFile(path string) (*Catalog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("litellm file: %w", err)
	}
	defer f.Close()
	return LoadLiteLLM(f, path)
}

// BilledModes are the LiteLLM modes whose entries are read for prices: the models billed by
// the token kinds of a price.Price. An entry without a mode is read too.
var BilledModes = []string{"chat", "responses", "completion"}

// liteLLMEntry is the entry of one model's fields, and whether to keep it: false for a mode
// that is not billed by tokens, with the entry's Err saying so.
func liteLLMEntry(name string, fields map[string]json.RawMessage, source string) (Entry, bool) {
	e := Entry{Name: name, Source: source}
	refuse := func(format string, args ...any) (Entry, bool) {
		e.Err = fmt.Errorf("litellm file %s: model %q: %s", source, name, fmt.Sprintf(format, args...))
		e.Price = price.Price{}
		return e, true
	}
	var mode string
	if raw, ok := present(fields, "mode"); ok {
		if json.Unmarshal(raw, &mode) != nil {
			return refuse("mode %s is not a string", raw)
		}
	}
	if mode != "" && !slices.Contains(BilledModes, mode) {
		e.Err = fmt.Errorf("litellm file %s: model %q is skipped for its mode %q: only entries of mode %s (or none) are read for prices",
			source, name, mode, strings.Join(BilledModes, ", "))
		return e, false
	}
	if raw, ok := present(fields, "litellm_provider"); ok {
		if json.Unmarshal(raw, &e.Provider) != nil {
			return refuse("litellm_provider %s is not a string", raw)
		}
	}
	if _, ok := present(fields, "tiered_pricing"); ok {
		return refuse("tiered_pricing is not supported: a price has one long-context tier at most")
	}

	// The long-context threshold, if any field has one.
	threshold := ""
	for key := range fields {
		m := liteTierField.FindStringSubmatch(key)
		if m == nil || !isLitePriceField(m[1]) {
			continue
		}
		if _, ok := present(fields, key); !ok {
			continue
		}
		if threshold != "" && threshold != m[2] {
			a, b := min(threshold, m[2]), max(threshold, m[2])
			return refuse("prices above both %sk and %sk input tokens: a price has one long-context tier at most", a, b)
		}
		threshold = m[2]
	}

	var err error
	// get is the price of a field in micro-units per million tokens, or def when it is absent.
	get := func(key string, def int64) int64 {
		if err != nil {
			return 0
		}
		var v int64
		var ok bool
		v, ok, err = litePrice(fields, key)
		if !ok {
			return def
		}
		return v
	}
	for _, key := range []string{liteInput, liteOutput} {
		if _, ok := present(fields, key); !ok {
			return refuse("no %s", key)
		}
	}
	// An Anthropic model's cache writes cost more than input: missing write prices are
	// Anthropic's multiples of the input price, never less (trial h12 D5: a missing one-hour
	// price was the five-minute one, 1.25 times input where Anthropic charges 2 times).
	write5m, write1h := func(in int64) int64 { return in }, func(_, w5m int64) int64 { return w5m }
	if strings.Contains(e.Provider, "anthropic") || strings.Contains(strings.ToLower(name), "claude") {
		write5m = AnthropicWrite5m
		write1h = func(in, w5m int64) int64 { return max(AnthropicWrite1h(in), w5m) }
	}
	var base price.Rates
	base.Input = get(liteInput, 0)
	base.Output = get(liteOutput, 0)
	base.CacheRead = get(liteRead, base.Input)
	base.CacheWrite5m = get(liteWrite5m, write5m(base.Input))
	base.CacheWrite1h = get(liteWrite1h, write1h(base.Input, base.CacheWrite5m))
	if reasoning := get("output_cost_per_reasoning_token", base.Output); err == nil && reasoning != base.Output {
		return refuse("output_cost_per_reasoning_token %s differs from %s %s: reasoning is billed as output",
			fields["output_cost_per_reasoning_token"], liteOutput, fields[liteOutput])
	}
	e.Price.Rates = base
	if threshold != "" {
		above := func(key string) string { return key + "_above_" + threshold + "k_tokens" }
		var t price.Tier
		n, perr := strconv.ParseInt(threshold, 10, 64)
		if perr != nil || n > math.MaxInt64/1000 {
			return refuse("the threshold %sk tokens is too large", threshold)
		}
		t.AboveInputTokens = n * 1000
		t.Input = get(above(liteInput), base.Input)
		t.Output = get(above(liteOutput), base.Output)
		t.CacheRead = get(above(liteRead), t.Input)
		t.CacheWrite5m = get(above(liteWrite5m), write5m(t.Input))
		t.CacheWrite1h = get(above(liteWrite1h), write1h(t.Input, t.CacheWrite5m))
		e.Price.LongContext = &t
	}
	if threshold == "" {
		for _, tier := range []string{"flex", "priority"} {
			on := func(key string) string { return key + "_" + tier }
			_, hasIn := present(fields, on(liteInput))
			_, hasOut := present(fields, on(liteOutput))
			if !hasIn || !hasOut {
				continue
			}
			var r price.Rates
			r.Input = get(on(liteInput), 0)
			r.Output = get(on(liteOutput), 0)
			r.CacheRead = get(on(liteRead), r.Input)
			r.CacheWrite5m = get(on(liteWrite5m), r.Input)
			r.CacheWrite1h = get(on(liteWrite1h), r.CacheWrite5m)
			if e.Price.ServiceTiers == nil {
				e.Price.ServiceTiers = map[string]price.Rates{}
			}
			e.Price.ServiceTiers[tier] = r
		}
	}
	if err != nil {
		return refuse("%v", err)
	}
	return e, true
}

// isLitePriceField reports whether key is one of the price fields a tier is read for.
func isLitePriceField(key string) bool {
	switch key {
	case liteInput, liteOutput, liteRead, liteWrite5m, liteWrite1h:
		return true
	}
	return false
}

// present is the field's JSON text, and whether it is there and not null.
func present(fields map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	raw, ok := fields[key]
	raw = bytes.TrimSpace(raw)
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// litePrice is the price in field key (dollars per token) in micro-units per million tokens,
// whether it is present, and an error naming the field when it cannot be represented exactly.
func litePrice(fields map[string]json.RawMessage, key string) (int64, bool, error) {
	raw, ok := present(fields, key)
	if !ok {
		return 0, false, nil
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return 0, true, fmt.Errorf("%s %s is not a number", key, raw)
	}
	v, err := microsPerMillion(string(raw))
	if err != nil {
		return 0, true, fmt.Errorf("%s %s USD per token %w", key, raw, err)
	}
	return v, true, nil
}

// microsPerMillion converts a JSON number of dollars per token to micro-units per million tokens:
// the number times 10^12, exactly, by moving its decimal point. It refuses a result that is not a
// whole number, is negative, or is beyond math.MaxInt64; the error completes the sentence
// "<field> <number> USD per token ...".
func microsPerMillion(num string) (int64, error) {
	negative := strings.HasPrefix(num, "-")
	num = strings.TrimPrefix(num, "-")
	exp := 0
	if i := strings.IndexAny(num, "eE"); i >= 0 {
		e, err := strconv.Atoi(num[i+1:])
		switch {
		case errors.Is(err, strconv.ErrRange) && strings.HasPrefix(num[i+1:], "-"):
			e = -1 << 30
		case errors.Is(err, strconv.ErrRange):
			e = 1 << 30
		case err != nil:
			return 0, fmt.Errorf("is not a number")
		}
		exp, num = e, num[:i]
	}
	whole, frac, _ := strings.Cut(num, ".")
	// The value is digits × 10^scale.
	digits := strings.TrimLeft(whole+frac, "0")
	scale := exp + 12 - len(frac)
	for strings.HasSuffix(digits, "0") {
		digits, scale = digits[:len(digits)-1], scale+1
	}
	switch {
	case digits == "":
		return 0, nil
	case negative:
		return 0, errors.New("is negative")
	case scale < -40:
		return 0, errors.New("is not a whole number of micro-units per million tokens")
	case scale < 0:
		point := len(digits) + scale
		var s string
		if point > 0 {
			s = digits[:point] + "." + digits[point:]
		} else {
			s = "0." + strings.Repeat("0", -point) + digits
		}
		return 0, fmt.Errorf("is %s micro-units per million tokens, not a whole number", s)
	case len(digits)+scale > 19:
		return 0, fmt.Errorf("is more than %d micro-units per million tokens", int64(math.MaxInt64))
	}
	v, err := strconv.ParseInt(digits+strings.Repeat("0", scale), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("is more than %d micro-units per million tokens", int64(math.MaxInt64))
	}
	return v, nil
}

// jsonKind names the kind of a JSON value by its first byte.
func jsonKind(raw []byte) string {
	switch raw[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
