package clocktest

import (
	"testing"
	"time"
)

func TestUntilPast(t *testing.T) {
	for _, c := range []struct {
		now  time.Time
		want time.Duration
	}{
		{time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC), 0},
		{time.Date(2026, 12, 5, 23, 58, 59, 0, time.UTC), 0},
		{time.Date(2026, 12, 5, 23, 59, 30, 0, time.UTC), 30*time.Second + margin},
		{time.Date(2026, 12, 31, 23, 59, 59, 900_000_000, time.UTC), 100*time.Millisecond + margin},
		{time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		// Another zone's time is read in UTC: 18:59:50 in New York in winter is 23:59:50 UTC.
		{time.Date(2026, 12, 5, 18, 59, 50, 0, time.FixedZone("EST", -5*3600)), 10*time.Second + margin},
	} {
		if got := untilPast(c.now, time.Minute); got != c.want {
			t.Errorf("at %v: wait %v, want %v", c.now, got, c.want)
		}
	}
}
