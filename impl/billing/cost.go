package billing

import (
	"github.com/tollgate/tollgate/impl/price"
)

// saturatingMul is a*b for non-negative a and b, or math.MaxInt64 when that overflows.
func saturatingMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > (1<<63-1)/b {
		return 1<<63 - 1
	}
	return a * b
}

// SaturatingAdd is a+b for non-negative amounts, or math.MaxInt64 when that overflows (which
// no account can cover).
func SaturatingAdd(a, b int64) int64 { return price.SaturatingAdd(a, b) }
