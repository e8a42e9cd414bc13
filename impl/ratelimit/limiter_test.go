package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/impl/devkit/redistest"
)

// t0 is the fake clocks' starting time.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t0+d.
func (c *fakeClock) Set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t0.Add(d)
}

// impl names a Limiter implementation and how to make one for a test.
type impl struct {
	name string
	new  func(t *testing.T, now func() time.Time) Limiter
}

var impls = []impl{
	{"Local", func(_ *testing.T, now func() time.Time) Limiter { return NewLocal(now) }},
	{"Redis", func(t *testing.T, now func() time.Time) Limiter {
		return NewRedis(redistest.NewClient(t), redistest.Prefix(t), now)
	}},
	// Fallback with Redis up decides through Redis.
	{"Fallback", func(t *testing.T, now func() time.Time) Limiter {
		return newFallback(t, redistest.NewClient(t), redistest.Prefix(t), FallbackOptions{Now: now})
	}},
	// Fallback with Redis unreachable and one replica is exactly Local.
	{"FallbackRedisDown", func(t *testing.T, now func() time.Time) Limiter {
		return newFallback(t, unreachableClient(t), "p:", FallbackOptions{Now: now})
	}},
}

// newFallback returns a Fallback closed when t ends.
func newFallback(t testing.TB, client redis.UniversalClient, prefix string, o FallbackOptions) *Fallback {
	f := NewFallback(client, prefix, o)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// unreachableClient returns a client of a port nothing listens on.
func unreachableClient(t testing.TB) *redis.Client {
	o := &redis.Options{
		Addr:        "127.0.0.1:1", // nothing listens on port 1
		MaxRetries:  -1,
		DialTimeout: 200 * time.Millisecond,
	}
	TuneClientOptions(o)
	client := redis.NewClient(o)
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// forEachImpl runs f as a subtest for every implementation.
func forEachImpl(t *testing.T, f func(t *testing.T, im impl)) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) { f(t, im) })
	}
}

// step is one Allow call at t0+at and the decision it must return.
type step struct {
	at    time.Duration
	key   string
	limit int
	want  Decision
}

// Shorthands for expected decisions.
func ok(limit, remaining int, reset time.Duration) Decision {
	return Decision{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
}

func no(limit int, retry, reset time.Duration) Decision {
	return Decision{Limit: limit, RetryAfter: retry, ResetAfter: reset}
}

// Shorthands for durations.
const (
	us = time.Microsecond
	ms = time.Millisecond
	s  = time.Second
)

// semanticCases is the table every implementation must pass.
var semanticCases = []struct {
	name  string
	steps []step
}{
	{"cap then exact RetryAfter", []step{
		{0, "k", 3, ok(3, 2, 60*s)},
		{10 * s, "k", 3, ok(3, 1, 50*s)},
		{20 * s, "k", 3, ok(3, 0, 40*s)},
		{30 * s, "k", 3, no(3, 30*s, 30*s)},
		{59*s + 999*ms, "k", 3, no(3, 1*ms, 1*ms)},
		// (t-60s, t] excludes the request at t0 exactly at t0+60s.
		{60 * s, "k", 3, ok(3, 0, 10*s)},
		{60 * s, "k", 3, no(3, 10*s, 10*s)},
		{69*s + 999*ms, "k", 3, no(3, 1*ms, 1*ms)},
		{70 * s, "k", 3, ok(3, 0, 10*s)},
	}},
	{"rejected requests are not counted", rejectedNotCounted()},
	{"window boundary", []step{
		{0, "k", 1, ok(1, 0, 60*s)},
		{59*s + 999*ms + 999*us, "k", 1, no(1, 1*us, 1*us)},
		{60 * s, "k", 1, ok(1, 0, 60*s)},
		{120*s - 1*us, "k", 1, no(1, 1*us, 1*us)},
		{120 * s, "k", 1, ok(1, 0, 60*s)},
	}},
	{"sub-second times", []step{
		{0, "k", 2, ok(2, 1, 60*s)},
		{500 * ms, "k", 2, ok(2, 0, 59*s+500*ms)},
		{1 * s, "k", 2, no(2, 59*s, 59*s)},
		{60 * s, "k", 2, ok(2, 0, 500*ms)},
		{60*s + 400*ms, "k", 2, no(2, 100*ms, 100*ms)},
		{60*s + 500*ms, "k", 2, ok(2, 0, 59*s+500*ms)},
	}},
	{"keys are independent", []step{
		{0, "a", 1, ok(1, 0, 60*s)},
		{0, "b", 1, ok(1, 0, 60*s)},
		{1 * s, "a", 1, no(1, 59*s, 59*s)},
		{1 * s, "b", 1, no(1, 59*s, 59*s)},
		{1 * s, "c", 1, ok(1, 0, 60*s)},
		{1 * s, "c", 2, ok(2, 0, 60*s)},
		{2 * s, "a", 2, ok(2, 0, 58*s)},
	}},
	{"limit raised", []step{
		{0, "k", 2, ok(2, 1, 60*s)},
		{1 * s, "k", 2, ok(2, 0, 59*s)},
		{2 * s, "k", 2, no(2, 58*s, 58*s)},
		{2 * s, "k", 4, ok(4, 1, 58*s)},
		{3 * s, "k", 4, ok(4, 0, 57*s)},
		{4 * s, "k", 4, no(4, 56*s, 56*s)},
		{4 * s, "k", 5, ok(5, 0, 56*s)},
	}},
	{"limit lowered then raised again", []step{
		{0, "k", 4, ok(4, 3, 60*s)},
		{1 * s, "k", 4, ok(4, 2, 59*s)},
		{2 * s, "k", 4, ok(4, 1, 58*s)},
		{3 * s, "k", 4, ok(4, 0, 57*s)},
		// 4 counted, limit 2: the count drops below 2 when the request
		// at 2s leaves, at 62s.
		{4 * s, "k", 2, no(2, 58*s, 56*s)},
		{5 * s, "k", 1, no(1, 58*s, 55*s)},
		// Lowering the limit forgot nothing.
		{5 * s, "k", 5, ok(5, 0, 55*s)},
		{6 * s, "k", 5, no(5, 54*s, 54*s)},
		// At 62s the window (2s, 62s] holds 3s and 5s.
		{62 * s, "k", 2, no(2, 1*s, 1*s)},
		{63 * s, "k", 2, ok(2, 0, 2*s)},
		{63 * s, "k", 4, ok(4, 1, 2*s)},
	}},
	{"limit zero or less is unlimited", []step{
		{0, "k", 0, Decision{Allowed: true}},
		{0, "k", 0, Decision{Allowed: true}},
		{0, "k", -1, Decision{Allowed: true}},
		// Unlimited calls record nothing.
		{0, "k", 1, ok(1, 0, 60*s)},
		{1 * s, "k", 0, Decision{Allowed: true}},
		{1 * s, "k", 1, no(1, 59*s, 59*s)},
	}},
}

// rejectedNotCounted fills a cap of 2, hammers the key while limited, and
// checks that only the allowed requests count afterwards.
func rejectedNotCounted() []step {
	steps := []step{
		{0, "k", 2, ok(2, 1, 60*s)},
		{1 * s, "k", 2, ok(2, 0, 59*s)},
	}
	for at := 2 * s; at < 60*s; at += 500 * ms {
		steps = append(steps, step{at, "k", 2, no(2, 60*s-at, 60*s-at)})
	}
	return append(steps,
		step{60 * s, "k", 2, ok(2, 0, 1*s)},
		step{60 * s, "k", 2, no(2, 1*s, 1*s)},
		step{61 * s, "k", 2, ok(2, 0, 59*s)},
		step{61 * s, "k", 2, no(2, 59*s, 59*s)},
	)
}

func TestSemantics(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		for _, tc := range semanticCases {
			t.Run(tc.name, func(t *testing.T) {
				clock := newFakeClock()
				l := im.new(t, clock.Now)
				for i, st := range tc.steps {
					clock.Set(st.at)
					got, err := l.Allow(context.Background(), st.key, st.limit)
					if err != nil {
						t.Fatalf("step %d: Allow(%q, %d) at t0+%v: %v", i, st.key, st.limit, st.at, err)
					}
					if got != st.want {
						t.Fatalf("step %d: Allow(%q, %d) at t0+%v = %+v, want %+v", i, st.key, st.limit, st.at, got, st.want)
					}
				}
			})
		}
	})
}

func TestConcurrentCap(t *testing.T) {
	const (
		goroutines = 50
		perG       = 20
		limit      = 100
	)
	forEachImpl(t, func(t *testing.T, im impl) {
		clock := newFakeClock() // frozen
		l := im.new(t, clock.Now)
		var (
			mu        sync.Mutex
			allowed   int
			remaining = map[int]bool{}
			errs      []error
			wg        sync.WaitGroup
		)
		for range goroutines {
			wg.Go(func() {
				for range perG {
					d, err := l.Allow(context.Background(), "hot", limit)
					mu.Lock()
					switch {
					case err != nil:
						errs = append(errs, err)
					case d.Allowed:
						allowed++
						remaining[d.Remaining] = true
					case d.RetryAfter != Window || d.ResetAfter != Window:
						errs = append(errs, fmt.Errorf("rejected with %+v, want RetryAfter and ResetAfter %v", d, Window))
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("%d errors, first: %v", len(errs), errs[0])
		}
		if allowed != limit {
			t.Fatalf("allowed %d of %d requests at cap %d", allowed, goroutines*perG, limit)
		}
		if len(remaining) != limit {
			t.Fatalf("allowed requests reported %d distinct Remaining values, want %d", len(remaining), limit)
		}
	})
}

func TestRealClock(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		l := im.new(t, nil)
		ctx := context.Background()
		for i := range 2 {
			if d, err := l.Allow(ctx, "k", 2); err != nil || !d.Allowed {
				t.Fatalf("request %d: %+v, %v; want allowed", i, d, err)
			}
		}
		d, err := l.Allow(ctx, "k", 2)
		if err != nil || d.Allowed {
			t.Fatalf("third request: %+v, %v; want rejected", d, err)
		}
		if d.RetryAfter <= Window-10*time.Second || d.RetryAfter > Window {
			t.Fatalf("RetryAfter = %v, want just under %v", d.RetryAfter, Window)
		}
	})
}

func TestRedisInstancesShareCap(t *testing.T) {
	clock := newFakeClock()
	prefix := redistest.Prefix(t)
	a := NewRedis(redistest.NewClient(t), prefix, clock.Now)
	b := NewRedis(redistest.NewClient(t), prefix, clock.Now)
	ctx := context.Background()
	allow := func(name string, l *Redis, want Decision) {
		t.Helper()
		got, err := l.Allow(ctx, "shared", 5)
		if err != nil {
			t.Fatalf("Allow via %s: %v", name, err)
		}
		if got != want {
			t.Fatalf("Allow via %s at %v = %+v, want %+v", name, clock.Now().Sub(t0), got, want)
		}
	}
	for i, l := range []*Redis{a, a, a, b, b} {
		clock.Set(time.Duration(i) * s)
		allow(fmt.Sprint("request ", i), l, ok(5, 4-i, 60*s-time.Duration(i)*s))
	}
	clock.Set(10 * s)
	allow("A", a, no(5, 50*s, 50*s))
	allow("B", b, no(5, 50*s, 50*s))
	clock.Set(60 * s)
	allow("B after the oldest left", b, ok(5, 0, 1*s))
	allow("A", a, no(5, 1*s, 1*s))

	// A limiter with another prefix does not share the cap.
	c := NewRedis(redistest.NewClient(t), redistest.Prefix(t), clock.Now)
	allow("another prefix", c, ok(5, 4, 60*s))
}

// TestRedisWaitNeverExceedsTheWindow: a request another process recorded with a clock read a
// little later (it ran its script first) sits in this call's future; the waits told to the
// refused client are still at most one Window (seen in make test as a Retry-After of 61).
func TestRedisWaitNeverExceedsTheWindow(t *testing.T) {
	early, late := newFakeClock(), newFakeClock()
	late.Set(3 * time.Millisecond)
	prefix := redistest.Prefix(t)
	a := NewRedis(redistest.NewClient(t), prefix, late.Now)
	b := NewRedis(redistest.NewClient(t), prefix, early.Now)
	ctx := context.Background()
	if d, err := a.Allow(ctx, "skew", 1); err != nil || !d.Allowed {
		t.Fatalf("the first request: %+v, %v", d, err)
	}
	d, err := b.Allow(ctx, "skew", 1)
	if err != nil || d.Allowed {
		t.Fatalf("the second request: %+v, %v; want refused", d, err)
	}
	if d.RetryAfter > Window || d.ResetAfter > Window || d.RetryAfter < Window-time.Millisecond {
		t.Errorf("RetryAfter %v, ResetAfter %v: want at most %v (and about that)", d.RetryAfter, d.ResetAfter, Window)
	}
}

func TestRedisKeyExpires(t *testing.T) {
	client := redistest.NewClient(t)
	prefix := redistest.Prefix(t)
	l := NewRedis(client, prefix, nil)
	ctx := context.Background()
	if _, err := l.Allow(ctx, "k", 3); err != nil {
		t.Fatal(err)
	}
	ttl, err := client.PTTL(ctx, prefix+"k").Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= Window-10*time.Second || ttl > Window {
		t.Fatalf("PTTL of %q = %v, want just under %v", prefix+"k", ttl, Window)
	}
	if n, err := client.ZCard(ctx, prefix+"k").Result(); err != nil || n != 1 {
		t.Fatalf("ZCARD = %d, %v; want 1", n, err)
	}
}

func TestRedisError(t *testing.T) {
	l := NewRedis(unreachableClient(t), "p:", nil)
	d, err := l.Allow(context.Background(), "k", 3)
	if err == nil {
		t.Fatalf("Allow with an unreachable server = %+v, nil; want an error", d)
	}
	if d.Allowed {
		t.Fatalf("Allow with an unreachable server allowed: %+v", d)
	}
	if d, err := l.Allow(context.Background(), "k", 0); err != nil || !d.Allowed {
		t.Fatalf("unlimited Allow touched Redis: %+v, %v", d, err)
	}
}
