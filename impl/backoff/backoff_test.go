package backoff

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second, true},
		{http.Header{"Retry-After": {"2"}, "Retry-After-Ms": {"150"}}, 150 * time.Millisecond, true},
		{http.Header{"Retry-After": {now.Add(3 * time.Second).Format(http.TimeFormat)}}, 3 * time.Second, true},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{}, 0, false},
	}
	for _, c := range cases {
		if d, ok := RetryAfter(c.h, now); d != c.want || ok != c.ok {
			t.Errorf("%v: %v %v, want %v %v", c.h, d, ok, c.want, c.ok)
		}
	}
}

func TestExponential(t *testing.T) {
	if d := Exponential(500*time.Millisecond, 8*time.Second, 0, 0); d != 500*time.Millisecond {
		t.Error(d)
	}
	if d := Exponential(500*time.Millisecond, 8*time.Second, 2, 0.999); d < 1500*time.Millisecond || d > 2*time.Second {
		t.Error(d)
	}
	if d := Exponential(500*time.Millisecond, 8*time.Second, 40, 0); d != 8*time.Second {
		t.Error(d)
	}
}
