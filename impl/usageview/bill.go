package usageview

import (
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/impl/price"
)

// The token kinds of a bill, as the providers price them.
const (
	KindUncached     = "uncached input"
	KindCacheRead    = "cache read"
	KindCacheWrite5m = "cache write (5 min)"
	KindCacheWrite1h = "cache write (1 h)"
	KindOutput       = "output"
)

// BillPart is one token kind of a request's bill: its count at its rate.
type BillPart struct {
	// Kind is one of the Kind constants.
	Kind   string
	Tokens int64
	// RateMicros is the kind's price per million tokens, in micro-units (the long-context
	// tier's when it applied).
	RateMicros int64
	// CostMicros is the kind's cost as the usage record keeps it: Tokens × RateMicros / 1,000,000,
	// rounded up to a whole micro-unit.
	CostMicros int64
}

// Bill is how a priced request's cost was made: one part per token kind that has tokens or a
// cost, in the order uncached input, cache read, cache writes (5 minutes, 1 hour), output. Its
// parts, plus HostedMicros, less WaivedMicros, add up to CostMicros. It is nil for a request
// billed before per-kind prices (Price nil).
func (r Request) Bill() []BillPart {
	if r.Price == nil {
		return nil
	}
	rates, _ := r.Price.RatesFor(r.InputTokens)
	all := []BillPart{
		{KindUncached, r.UncachedTokens(), rates.Input, r.Costs.Input},
		{KindCacheRead, r.CacheReadTokens, rates.CacheRead, r.Costs.CacheRead},
		{KindCacheWrite5m, r.CacheWrite5mTokens, rates.CacheWrite5m, r.Costs.CacheWrite5m},
		{KindCacheWrite1h, r.CacheWrite1hTokens, rates.CacheWrite1h, r.Costs.CacheWrite1h},
		{KindOutput, r.OutputTokens, rates.Output, r.Costs.Output},
	}
	parts := make([]BillPart, 0, len(all))
	for _, p := range all {
		if p.Tokens != 0 || p.CostMicros != 0 {
			parts = append(parts, p)
		}
	}
	return parts
}

// Rates are the rates the request was billed at (the long-context tier's when it applied);
// ok is false for a request billed before per-kind prices.
func (r Request) Rates() (rates price.Rates, ok bool) {
	if r.Price == nil {
		return price.Rates{}, false
	}
	rates, _ = r.Price.RatesFor(r.InputTokens)
	return rates, true
}

// RateUSD is a price per million tokens, in micro-units, as dollars with at least two decimals
// and no trailing zeros beyond them ("3.00", "0.30", "0.075", "0.000125"): exact, never rounded.
func RateUSD(micros int64) string {
	s := USD(micros)
	whole, frac, _ := strings.Cut(s, ".")
	frac = strings.TrimRight(frac, "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return whole + "." + frac
}

// Thousands writes n with a comma between every three digits ("1,234,567").
func Thousands(n int64) string {
	digits := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, digits = "-", digits[1:]
	}
	var b strings.Builder
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + b.String()
}
