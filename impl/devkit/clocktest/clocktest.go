// Package clocktest keeps tests that run against the real clock off the UTC day boundaries that
// change what they assert: a key's daily or monthly credit cap starts again at 00:00 UTC (on the
// first of the month for a monthly one), and a test that reserves before it and reads the
// budget after it finds two periods where it expects one.
package clocktest

import (
	"testing"
	"time"
)

// NotAcrossMidnight returns at once unless the next 00:00 UTC is less than within away; then it
// sleeps until just after it, so that a test that takes less than within runs in one UTC day
// (and one UTC month).
func NotAcrossMidnight(t testing.TB, within time.Duration) {
	t.Helper()
	if d := untilPast(time.Now(), within); d > 0 {
		t.Logf("clocktest: %v to 00:00 UTC, less than the %v the test may take; waiting until it has passed", d, within)
		time.Sleep(d)
	}
}

// margin is how long after midnight NotAcrossMidnight wakes (the database's clock may lag a
// little).
const margin = 100 * time.Millisecond

// untilPast is how long to wait at now for the next 00:00 UTC to be behind, when it is less
// than within ahead; else 0.
func untilPast(now time.Time, within time.Duration) time.Duration {
	now = now.UTC()
	next := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	if left := next.Sub(now); left < within {
		return left + margin
	}
	return 0
}
