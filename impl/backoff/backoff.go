// Package backoff holds the retry timing shared by the gateway's upstream calls
// (impl/provider) and its consumer client (impl/client): reading a server's retry hint, and
// exponential backoff with jitter, the design of the official SDKs.
package backoff

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxJitter is the largest fraction subtracted from a computed backoff.
const MaxJitter = 0.25

// RetryAfter reads a server's retry hint: retry-after-ms (milliseconds) first, then Retry-After
// as seconds or as an HTTP date (relative to now). ok is false when there is no usable hint.
func RetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < float64(1<<53) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && s < float64(1<<31) {
			return time.Duration(s * float64(time.Second)), true
		}
		if at, err := http.ParseTime(v); err == nil {
			return at.Sub(now), true
		}
	}
	return 0, false
}

// Exponential is the delay before retry number n (0 for the first retry): initial·2^n, capped
// at max, minus up to MaxJitter of it scaled by r, a random number in [0, 1).
func Exponential(initial, max time.Duration, n int, r float64) time.Duration {
	d := max
	if n < 32 {
		if d = initial << n; d > max || d <= 0 {
			d = max
		}
	}
	if r < 0 || r >= 1 {
		r = 0
	}
	return time.Duration(float64(d) * (1 - r*MaxJitter))
}
