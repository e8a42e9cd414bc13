package billing

import (
	"math"
	"math/bits"

	"github.com/tollgate/tollgate/impl/config"
)

// Price is a model's price in integer micro-units per million tokens, input and output apart.
type Price = config.Price

// perMillion is the number of tokens a price is quoted for.
const perMillion = 1_000_000

// Cost is what inputTokens and outputTokens cost at p, in micro-units: the exact
// (inputTokens*p.InputPerMTok + outputTokens*p.OutputPerMTok) / 1,000,000 rounded up to a whole
// micro-unit, so that a request is never billed less than it cost. It is computed in 128-bit
// integers, never floats; negative counts and prices count as zero, and a cost beyond
// math.MaxInt64 is math.MaxInt64 (which no account can cover).
func Cost(inputTokens, outputTokens int64, p Price) int64 {
	hi1, lo1 := bits.Mul64(nonNegative(inputTokens), nonNegative(p.InputPerMTok))
	hi2, lo2 := bits.Mul64(nonNegative(outputTokens), nonNegative(p.OutputPerMTok))
	// Each product is below 2^126, so neither sum below overflows 128 bits.
	lo, carry := bits.Add64(lo1, lo2, 0)
	hi, _ := bits.Add64(hi1, hi2, carry)
	lo, carry = bits.Add64(lo, perMillion-1, 0) // round up
	hi += carry
	if hi >= perMillion { // the quotient would not fit in 64 bits
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, perMillion)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

func nonNegative(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}

// saturatingMul is a*b for non-negative a and b, or math.MaxInt64 when that overflows.
func saturatingMul(a, b int64) int64 {
	hi, lo := bits.Mul64(nonNegative(a), nonNegative(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// SaturatingAdd is a+b for non-negative amounts, or math.MaxInt64 when that overflows (which
// no account can cover).
func SaturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
