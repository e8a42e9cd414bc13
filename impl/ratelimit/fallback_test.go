package ratelimit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/impl/devkit/redistest"
	"github.com/tollgate/tollgate/impl/metrics"
)

// logBuffer collects a logger's lines; it is safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// count returns how many lines contain s.
func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for line := range strings.Lines(l.b.String()) {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// Log messages of the two changes of state.
const (
	logDown = "rate limiter: Redis unreachable"
	logUp   = "rate limiter: Redis is back"
)

// replica is one "gateway process" of a test: a Fallback limiter with its
// own metrics, wired as cmd/tollgate wires them.
type replica struct {
	*Fallback
	m *metrics.Metrics
}

// newReplica returns a replica on the server at url, sharing prefix, with
// short probe and heartbeat intervals; its logs go to logs.
func newReplica(t *testing.T, srv *redistest.Server, prefix, name string, logs io.Writer, o FallbackOptions) replica {
	client := srv.NewClient(t, func(o *redis.Options) {
		TuneClientOptions(o)
		// A long read timeout: only the limiter's own timeout may bound a
		// request's wait on a Redis that does not answer.
		o.ReadTimeout = 10 * time.Second
	})
	m := metrics.New()
	o.ProbeMin, o.ProbeMax = 20*ms, 200*ms
	if o.Heartbeat == 0 {
		o.Heartbeat = 50 * ms
	}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil)).With("replica", name)
	o.OnChange = func(fallback bool) {
		if fallback {
			m.RateLimiterFallback.Set(1)
		} else {
			m.RateLimiterFallback.Set(0)
		}
	}
	return replica{newFallback(t, client, prefix, o), m}
}

// gauge returns the line of tollgate_rate_limiter_fallback as the metrics
// listener serves it.
func (r replica) gauge(t *testing.T) string {
	t.Helper()
	rec := httptest.NewRecorder()
	r.m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if strings.HasPrefix(line, "tollgate_rate_limiter_fallback ") {
			return strings.TrimSpace(line)
		}
	}
	t.Fatal("no tollgate_rate_limiter_fallback in the metrics")
	return ""
}

// waitFor polls cond until it holds, failing t after a generous deadline.
// It waits for background probes and heartbeats; it measures nothing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// latencies records how long Allow calls took, for the test log.
type latencies struct {
	first time.Duration
	rest  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	if l.first == 0 {
		l.first = d
		return
	}
	l.rest = append(l.rest, d)
}

func (l *latencies) String() string {
	var sum, worst time.Duration
	for _, d := range l.rest {
		sum += d
		worst = max(worst, d)
	}
	mean := time.Duration(0)
	if len(l.rest) > 0 {
		mean = sum / time.Duration(len(l.rest))
	}
	return fmt.Sprintf("first request %v; the %d after it: mean %v, max %v", l.first, len(l.rest), mean, worst)
}

// allowN calls Allow n times for key at limit through r and returns the
// decisions, failing t on any error.
func allowN(t *testing.T, r Limiter, key string, limit, n int, lat *latencies) []Decision {
	t.Helper()
	var ds []Decision
	for i := range n {
		start := time.Now()
		d, err := r.Allow(context.Background(), key, limit)
		if lat != nil {
			lat.add(time.Since(start))
		}
		if err != nil {
			t.Fatalf("Allow(%q, %d) #%d: %v", key, limit, i, err)
		}
		ds = append(ds, d)
	}
	return ds
}

// allowed counts the allowed decisions and checks that every decision
// carries limit.
func allowed(t *testing.T, ds []Decision, limit int) int {
	t.Helper()
	n := 0
	for i, d := range ds {
		if d.Limit != limit {
			t.Fatalf("decision %d = %+v, want Limit %d", i, d, limit)
		}
		if d.Allowed {
			n++
		}
	}
	return n
}

// TestFallbackOutage runs two replicas on one redis-server, stops the
// server mid-test and starts it again, empty, on the same port: every
// request is answered without error; during the outage each replica allows
// its share, cap/2, counting its own requests from before the outage; the
// state metric and the log lines follow the changes; after the restart the
// decisions are Redis's again, and Redis, which came back empty, counts the
// requests of the whole window, from before the outage and during it.
func TestFallbackOutage(t *testing.T) {
	const limit = 10
	srv, prefix, a, b, clock, logs := twoReplicas(t)
	if a.gauge(t) != "tollgate_rate_limiter_fallback 0" {
		t.Fatalf("before the outage: %s", a.gauge(t))
	}

	// Redis up: one cap, shared.
	for i, r := range []replica{a, a, a, b, b, b} {
		d := allowN(t, r, "spread", limit, 1, nil)[0]
		if want := ok(limit, limit-1-i, Window); d != want {
			t.Fatalf("request %d through Redis = %+v, want %+v", i, d, want)
		}
	}

	// Redis down.
	clock.Set(1 * s)
	srv.Stop(t)
	var latA, latB latencies
	for _, r := range []struct {
		name string
		replica
		lat *latencies
	}{{"a", a, &latA}, {"b", b, &latB}} {
		// A fresh key: each replica allows cap/2.
		if n := allowed(t, allowN(t, r, "fresh", limit, 8, r.lat), limit/2); n != limit/2 {
			t.Errorf("replica %s allowed %d of 8 requests for a fresh key during the outage, want %d", r.name, n, limit/2)
		}
		// A key it had 3 requests for through Redis: 2 more.
		if n := allowed(t, allowN(t, r, "spread", limit, 5, r.lat), limit/2); n != 2 {
			t.Errorf("replica %s allowed %d more requests for a key it had 3 through Redis, want 2", r.name, n)
		}
		if !r.FallenBack() {
			t.Errorf("replica %s is not in fallback during the outage", r.name)
		}
		if g := r.gauge(t); g != "tollgate_rate_limiter_fallback 1" {
			t.Errorf("replica %s during the outage: %s", r.name, g)
		}
	}
	t.Logf("Allow latency while redis-server is stopped: a: %v; b: %v", &latA, &latB)
	if n := logs.count(logDown); n != 2 {
		t.Errorf("%d %q lines, want one per replica", n, logDown)
	}

	// Redis back, empty.
	clock.Set(2 * s)
	srv.Start(t)
	waitFor(t, "both replicas to use Redis again", func() bool { return !a.FallenBack() && !b.FallenBack() })
	for _, r := range []replica{a, b} {
		if g := r.gauge(t); g != "tollgate_rate_limiter_fallback 0" {
			t.Errorf("after the outage: %s", g)
		}
	}
	if n, m := logs.count(logDown), logs.count(logUp); n != 2 || m != 2 {
		t.Errorf("%d %q and %d %q lines, want one of each per replica", n, logDown, m, logUp)
	}
	// The new server is empty (its epoch changed): each replica wrote back its whole window,
	// the requests it allowed through Redis before the outage as well as those during it, so
	// the key's minute is counted whole (trial h2: 56 requests in a minute on a cap of 30
	// when only the outage's were written back).
	client := srv.NewClient(t, nil)
	for key, want := range map[string]int64{"fresh": limit, "spread": limit} {
		if n, err := client.ZCard(context.Background(), prefix+key).Result(); err != nil || n != want {
			t.Errorf("ZCARD %s after the outage = %d, %v; want %d", key, n, err, want)
		}
	}
	// The decisions are Redis's again: the full cap, shared, and spent for both keys.
	if d := allowN(t, a, "fresh", limit, 1, nil)[0]; d != no(limit, 59*s, 59*s) {
		t.Errorf("a fresh key's 11th request after the outage = %+v, want refused by Redis", d)
	}
	if d := allowN(t, a, "spread", limit, 1, nil)[0]; d != no(limit, 58*s, 58*s) {
		t.Errorf("a after the outage = %+v, want refused by Redis (its minute is spent)", d)
	}
	if d := allowN(t, b, "spread", limit, 1, nil)[0]; d != no(limit, 58*s, 58*s) {
		t.Errorf("b after the outage = %+v, want refused by Redis (its minute is spent)", d)
	}

	// A replica that stops leaves the count.
	_ = b.Close()
	waitFor(t, "a to count one replica", func() bool { return a.Replicas() == 1 })
}

// TestFallbackFrozenRedis freezes the redis-server (SIGSTOP: connections
// are accepted, nothing answers). No request waits for the client's 10 s
// read timeout: the first waits for the limiter's timeout, the following
// ones not at all; when the server thaws the limiter uses it again.
func TestFallbackFrozenRedis(t *testing.T) {
	srv := redistest.NewServer(t)
	logs := &logBuffer{}
	a := newReplica(t, srv, redistest.Prefix(t), "a", logs, FallbackOptions{})
	if n := allowed(t, allowN(t, a, "k", 1000, 3, nil), 1000); n != 3 {
		t.Fatalf("allowed %d of 3 through Redis", n)
	}
	srv.Freeze(t)
	var lat latencies
	if n := allowed(t, allowN(t, a, "k", 1000, 50, &lat), 1000); n != 50 {
		t.Errorf("allowed %d of 50 during the outage, want 50", n)
	}
	t.Logf("Allow latency while redis-server is frozen (limiter timeout %v): %v", DefaultTimeout, &lat)
	// Not a speed assertion: it shows that the request did not wait for
	// the client's read timeout (10 s).
	if lat.first >= 5*time.Second {
		t.Errorf("the first request during the outage took %v", lat.first)
	}
	if !a.FallenBack() || logs.count(logDown) != 1 {
		t.Errorf("fallback %v, %d %q lines; want true, 1", a.FallenBack(), logs.count(logDown), logDown)
	}
	srv.Thaw(t)
	waitFor(t, "the limiter to use Redis again", func() bool { return !a.FallenBack() })
	if logs.count(logUp) != 1 {
		t.Errorf("%d %q lines, want 1", logs.count(logUp), logUp)
	}
}

// TestFallbackStartsDown starts a limiter while Redis is down: it limits
// to the cap shared out by the configured replica count, then uses Redis
// once it is up, learns the replica count from it, and Redis counts the
// requests allowed before.
func TestFallbackStartsDown(t *testing.T) {
	srv := redistest.NewServer(t)
	srv.Stop(t)
	clock := newFakeClock()
	logs := &logBuffer{}
	a := newReplica(t, srv, redistest.Prefix(t), "a", logs, FallbackOptions{Now: clock.Now, Replicas: 3})
	if n := allowed(t, allowN(t, a, "k", 9, 5, nil), 3); n != 3 {
		t.Fatalf("allowed %d of 5 at cap 9 with 3 replicas configured, want 3", n)
	}
	if !a.FallenBack() || a.Replicas() != 3 {
		t.Fatalf("fallback %v with %d replicas; want true with 3", a.FallenBack(), a.Replicas())
	}
	srv.Start(t)
	waitFor(t, "the limiter to use Redis", func() bool { return !a.FallenBack() })
	if a.Replicas() != 1 {
		t.Errorf("%d replicas after Redis is up, want the 1 learnt", a.Replicas())
	}
	if d := allowN(t, a, "k", 9, 1, nil)[0]; d != ok(9, 5, Window) {
		t.Errorf("after Redis is up: %+v, want allowed by Redis with 5 left", d)
	}
}

// TestFallbackShare: during an outage each process allows the cap divided
// by the replica count, rounded down, and at least one request.
func TestFallbackShare(t *testing.T) {
	for _, tc := range []struct{ limit, replicas, want int }{
		{10, 1, 10}, {10, 2, 5}, {5, 2, 2}, {10, 3, 3}, {2, 3, 1}, {1, 5, 1},
	} {
		t.Run(fmt.Sprintf("cap %d over %d", tc.limit, tc.replicas), func(t *testing.T) {
			f := newFallback(t, unreachableClient(t), "p:", FallbackOptions{Now: newFakeClock().Now, Replicas: tc.replicas})
			if n := allowed(t, allowN(t, f, "k", tc.limit, tc.limit+2, nil), tc.want); n != tc.want {
				t.Fatalf("allowed %d, want %d", n, tc.want)
			}
		})
	}
}

// TestFallbackCallerGone: a request whose caller went away says nothing
// about Redis: it is answered locally and the limiter stays on Redis.
func TestFallbackCallerGone(t *testing.T) {
	f := newFallback(t, redistest.NewClient(t), redistest.Prefix(t), FallbackOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if d, err := f.Allow(ctx, "k", 3); err != nil || !d.Allowed {
		t.Fatalf("Allow with a cancelled context = %+v, %v; want allowed", d, err)
	}
	if f.FallenBack() {
		t.Fatal("a cancelled caller made the limiter fall back")
	}
}

// TestFallbackRedisLostItsLogs: a Redis that loses its data between two heartbeats, without
// any request seeing it fail (a quick restart, a flush), gets each replica's window of
// requests written back at the next beat, so the key's minute stays counted whole.
func TestFallbackRedisLostItsLogs(t *testing.T) {
	const limit = 10
	srv, prefix, a, b, _, _ := twoReplicas(t)
	for _, r := range []replica{a, a, a, b, b, b} {
		allowN(t, r, "key", limit, 1, nil)
	}
	client := srv.NewClient(t, nil)
	ctx := context.Background()
	keys, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v %v", keys, err)
	}
	if err := client.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replicas to write their windows back", func() bool {
		n, err := client.ZCard(ctx, prefix+"key").Result()
		return err == nil && n == 6
	})
	if a.FallenBack() || b.FallenBack() {
		t.Error("a replica fell back")
	}
	if d := allowN(t, a, "key", limit, 1, nil)[0]; d != ok(limit, 3, 60*s) {
		t.Errorf("after the loss = %+v, want allowed by Redis with 3 left", d)
	}
}

// twoReplicas starts a redis-server and two replicas on it, sharing a fake clock and a log,
// once both count two replicas.
func twoReplicas(t *testing.T) (srv *redistest.Server, prefix string, a, b replica, clock *fakeClock, logs *logBuffer) {
	t.Helper()
	srv = redistest.NewServer(t)
	clock = newFakeClock()
	prefix = redistest.Prefix(t)
	logs = &logBuffer{}
	a = newReplica(t, srv, prefix, "a", logs, FallbackOptions{Now: clock.Now})
	b = newReplica(t, srv, prefix, "b", logs, FallbackOptions{Now: clock.Now})
	waitFor(t, "both replicas to count two replicas", func() bool { return a.Replicas() == 2 && b.Replicas() == 2 })
	return srv, prefix, a, b, clock, logs
}

// TestFallbackFlappingRedis stops Redis (a crash: it comes back empty) six times in a row,
// each time as soon as both replicas use it again, with traffic spread evenly over them: each
// outage lets a fresh key have its cap and no more, Redis counts after each return exactly the
// requests allowed, and once the window has passed every key has its whole cap again (none is
// locked out). A Redis that comes back empty has lost the set of live replicas too: the first
// replica to beat read a count of one and, until its next heartbeat, took the whole cap as its
// share, so an outage soon after the return let a key have a cap and a half across two
// replicas (three halves of the cap: the documented bound is the cap for even traffic).
func TestFallbackFlappingRedis(t *testing.T) {
	const limit = 10
	srv := redistest.NewServer(t)
	clock := newFakeClock()
	prefix := redistest.Prefix(t)
	logs := &logBuffer{}
	// Heartbeats far apart, as in production (5 s) against an outage that comes back soon.
	o := FallbackOptions{Now: clock.Now, Heartbeat: 2 * time.Second}
	a := newReplica(t, srv, prefix, "a", logs, o)
	b := newReplica(t, srv, prefix, "b", logs, o)
	waitFor(t, "both replicas to count two replicas", func() bool { return a.Replicas() == 2 && b.Replicas() == 2 })

	client := srv.NewClient(t, nil)
	ctx := context.Background()
	allowedBy := make(map[string]int)
	const flaps = 6
	for flap := range flaps {
		clock.Set(time.Duration(flap) * s)
		key := fmt.Sprintf("flap-%d", flap)
		srv.Stop(t)
		for _, r := range []replica{a, b} {
			allowedBy[key] += allowed(t, allowN(t, r, key, limit, limit, nil), max(1, limit/r.Replicas()))
			if !r.FallenBack() {
				t.Fatalf("flap %d: a replica is not in fallback with Redis stopped", flap)
			}
		}
		if allowedBy[key] > limit {
			t.Errorf("flap %d: a fresh key had %d requests across two replicas during the outage, cap %d (shares: a %d, b %d)",
				flap, allowedBy[key], limit, max(1, limit/a.Replicas()), max(1, limit/b.Replicas()))
		}
		srv.Start(t)
		waitFor(t, "both replicas to use Redis again", func() bool { return !a.FallenBack() && !b.FallenBack() })
		for k, want := range allowedBy {
			if n, err := client.ZCard(ctx, prefix+k).Result(); err != nil || n != int64(want) {
				t.Errorf("flap %d: Redis counts %d (%v) requests of %s, %d were allowed", flap, n, err, k, want)
			}
		}
	}

	// A window later, each key has its whole cap again.
	clock.Set(Window + flaps*s)
	for k := range allowedBy {
		if n := allowed(t, append(allowN(t, a, k, limit, limit/2, nil), allowN(t, b, k, limit, limit/2+1, nil)...), limit); n != limit {
			t.Errorf("%s a window after the flapping: %d of %d requests allowed, want its cap %d", k, n, limit+1, limit)
		}
	}
}

// TestCarryTwiceCountsOnce: the requests a replica allowed during an outage are written into
// Redis when it is back, in pipelines; a carry that Redis failing again cuts short after some
// of them is done again, from its start, by the next probe. Each carried request had a new
// member each time, so those of the first pipelines were counted twice, and a key they filled
// was refused until they left the window (a flapping Redis locked keys out after it came
// back). Carrying the same requests again now counts them once.
func TestCarryTwiceCountsOnce(t *testing.T) {
	const limit = 10
	srv := redistest.NewServer(t)
	clock := newFakeClock()
	prefix := redistest.Prefix(t)
	a := newReplica(t, srv, prefix, "a", &logBuffer{}, FallbackOptions{Now: clock.Now})
	waitFor(t, "the replica to beat", func() bool { return a.Replicas() == 1 })
	srv.Stop(t)
	clock.Set(1 * s)
	if n := allowed(t, allowN(t, a, "key", limit, 4, nil), limit); n != 4 {
		t.Fatalf("%d of 4 requests allowed during the outage", n)
	}
	clock.Set(2 * s)
	if n := allowed(t, allowN(t, a, "key", limit, 2, nil), limit); n != 2 {
		t.Fatalf("%d of 2 requests allowed during the outage", n)
	}
	srv.Start(t)
	waitFor(t, "the replica to use Redis again", func() bool { return !a.FallenBack() })
	client := srv.NewClient(t, nil)
	ctx := context.Background()
	if n, err := client.ZCard(ctx, prefix+"key").Result(); err != nil || n != 6 {
		t.Fatalf("Redis counts %d (%v) requests after the outage, want 6", n, err)
	}
	// The carry again, as the probe after a carry cut short does it.
	now := a.local.clock()
	if n, _, err := a.carry(now-int64(Window), now); err != nil || n != 6 {
		t.Fatalf("carried %d requests again (%v), want 6", n, err)
	}
	if n, err := client.ZCard(ctx, prefix+"key").Result(); err != nil || n != 6 {
		t.Errorf("Redis counts %d (%v) requests after carrying them again, want 6", n, err)
	}
	if d := allowN(t, a, "key", limit, 1, nil)[0]; d != ok(limit, limit-7, Window-1*s) {
		t.Errorf("the next request = %+v, want allowed by Redis with %d left", d, limit-7)
	}
}
