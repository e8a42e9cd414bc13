package changefeed

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/store"
)

// clock is the real clock moved forward by the test.
type clock struct{ skew atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.skew.Load())) }
func (c *clock) advance(d time.Duration) { c.skew.Add(int64(d)) }

// logBuffer collects log lines for the test to read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.buf.String()), "\n")
}

// newTestFeed returns a feed with no store (the test drives its state changes), its clock, its
// metrics and its log.
func newTestFeed(maxStale time.Duration) (*Feed, *clock, *metrics.Metrics, *logBuffer) {
	clk := &clock{}
	m := metrics.New()
	logs := &logBuffer{}
	f := NewWithOptions(nil, Options{MaxStale: maxStale, Now: clk.now, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return f, clk, m, logs
}

// goLive does what a connection whose delivery the heartbeat proved does: a new generation,
// live.
func goLive(f *Feed) {
	f.connected()
	f.proved(f.state.Load().gen, f.now())
}

// metric reads one series (name with its labels, as the exposition writes it) from the
// metrics handler, as a scrape would; absent means 0.
func metric(t *testing.T, m *metrics.Metrics, series string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	match := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(rec.Body.String())
	if match == nil {
		return 0
	}
	v, err := strconv.ParseFloat(match[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var errDown = apierror.Unavailable("the database", errors.New("connection refused"))

// settle waits until the cache's background reloads have ended; what they did is then seen by
// the test (they end under the cache's lock).
func settle[K comparable, V any](t *testing.T, c *Cache[K, V]) {
	t.Helper()
	waitFor(t, "the background reloads to end", func() bool {
		c.reloadMu.Lock()
		defer c.reloadMu.Unlock()
		return len(c.reloading) == 0
	})
}

// counter is a load function that counts its calls and answers what the test sets. A
// background reload may call it: the test reads or sets its fields only once settled.
type counter struct {
	calls int
	value int
	err   error
}

func (c *counter) load(context.Context) (int, error) {
	c.calls++
	return c.value, c.err
}

// TestCacheLive: while the feed is live an entry is answered from memory until its TTL or an
// invalidation; a load that raced with an invalidation is not stored.
func TestCacheLive(t *testing.T) {
	f, clk, _, _ := newTestFeed(time.Minute)
	c := NewCache[string, int](f, "test", time.Minute, 10)
	ld := &counter{value: 1}
	ctx := context.Background()

	// Not live yet (never connected): every lookup of an unknown key loads.
	c.Get(ctx, "x", ld.load)
	goLive(f)
	if v, _ := c.Get(ctx, "a", ld.load); v != 1 || ld.calls != 2 {
		t.Fatalf("first lookup: %d after %d loads", v, ld.calls)
	}
	ld.value = 2
	if v, _ := c.Get(ctx, "a", ld.load); v != 1 || ld.calls != 2 {
		t.Fatalf("live: %d after %d loads", v, ld.calls)
	}
	c.Invalidate("a")
	if v, _ := c.Get(ctx, "a", ld.load); v != 2 {
		t.Fatalf("after Invalidate: %d", v)
	}
	clk.advance(time.Minute + time.Second)
	ld.value = 3
	if v, _ := c.Get(ctx, "a", ld.load); v != 3 {
		t.Fatalf("after the TTL: %d", v)
	}
	// A value loaded while an invalidation happened is not stored.
	c.Get(ctx, "b", func(context.Context) (int, error) { c.Invalidate("b"); return 100, nil })
	if v, _ := c.Get(ctx, "b", func(context.Context) (int, error) { return 200, nil }); v != 200 {
		t.Fatalf("a raced load was cached: %d", v)
	}
	c.Reset()
	ld.value = 4
	if v, _ := c.Get(ctx, "a", ld.load); v != 4 {
		t.Fatalf("after Reset: %d", v)
	}
	// A nil feed caches nothing.
	n := NewCache[string, int](nil, "test", time.Minute, 10)
	ld.calls = 0
	n.Get(ctx, "a", ld.load)
	n.Get(ctx, "a", ld.load)
	if ld.calls != 2 {
		t.Fatalf("a cache without a feed served from memory")
	}
}

// TestCacheDegraded: once the feed is lost, a known entry answers from memory without a lookup
// until MaxStale after the notifications were last known to flow, then gets the dependency
// error; an unknown key gets it at once. The state, the counter of answers from memory and one
// log line per change show it.
func TestCacheDegraded(t *testing.T) {
	f, clk, m, logs := newTestFeed(5 * time.Minute)
	c := NewCache[string, int](f, "test", time.Minute, 10)
	ctx := context.Background()
	goLive(f)
	if d, _ := f.Degraded(); d || metric(t, m, "tollgate_degraded") != 0 {
		t.Fatal("degraded while live")
	}
	ld := &counter{value: 7}
	c.Get(ctx, "known", ld.load)
	clk.advance(30 * time.Second)
	f.confirm(clk.now()) // a heartbeat: the notifications flowed until now
	knownUntil := clk.now()
	clk.advance(2 * time.Second)
	f.lost(f.state.Load().gen, errors.New("connection lost"))
	f.lost(f.state.Load().gen, errors.New("lost again")) // no second transition
	if d, since := f.Degraded(); !d || since.Before(knownUntil) || metric(t, m, "tollgate_degraded") != 1 {
		t.Fatalf("not degraded after the loss: %v %v", d, since)
	}

	ld.err = errDown
	// Past the entry's TTL (a minute after it was read) but within MaxStale of the last
	// heartbeat: the entry answers, with no lookup.
	clk.advance(4 * time.Minute)
	if v, err := c.Get(ctx, "known", ld.load); v != 7 || err != nil {
		t.Fatalf("known key while degraded: %d %v", v, err)
	}
	// Its re-check in the background could not reach the database: nothing changed.
	settle(t, c)
	if ld.calls != 2 {
		t.Fatalf("%d loads, want the first and one background re-check", ld.calls)
	}
	if got := metric(t, m, `tollgate_stale_cache_served_total{cache="test"}`); got != 1 {
		t.Fatalf("stale answers counted: %v", got)
	}
	if _, err := c.Get(ctx, "unknown", ld.load); !apierror.IsUnavailable(err) {
		t.Fatalf("unknown key while degraded: %v", err)
	}
	// The entry was read 32 s before the heartbeat, and its TTL is a minute: it was known
	// current until the heartbeat, and answers until MaxStale after it.
	clk.advance(knownUntil.Add(5*time.Minute - time.Second).Sub(clk.now()))
	if _, err := c.Get(ctx, "known", ld.load); err != nil {
		t.Fatalf("known key a second before MaxStale: %v", err)
	}
	settle(t, c)
	clk.advance(2 * time.Second)
	if _, err := c.Get(ctx, "known", ld.load); !apierror.IsUnavailable(err) {
		t.Fatalf("known key beyond MaxStale: %v", err)
	}

	goLive(f)
	if d, _ := f.Degraded(); d || metric(t, m, "tollgate_degraded") != 0 {
		t.Fatal("still degraded after reconnecting")
	}
	var transitions []string
	for _, l := range logs.lines() {
		if strings.Contains(l, "change notifications") {
			transitions = append(transitions, l)
		}
	}
	if len(transitions) != 3 || !strings.Contains(transitions[0], "live") || !strings.Contains(transitions[1], "level=WARN") ||
		!strings.Contains(transitions[1], "max_stale=5m0s") || !strings.Contains(transitions[2], "restored") || !strings.Contains(transitions[2], "degraded_for=") {
		t.Fatalf("log lines of the changes of state:\n%s", strings.Join(transitions, "\n"))
	}
}

// TestCacheReconnect: after a reconnection an entry of the earlier connection is re-checked
// before it is trusted; a key revoked meanwhile is refused and forgotten; when the re-check
// cannot reach the database the entry still answers within MaxStale, including across a second
// loss before it could be re-checked.
func TestCacheReconnect(t *testing.T) {
	f, clk, _, _ := newTestFeed(5 * time.Minute)
	c := NewCache[string, int](f, "test", 5*time.Minute, 10)
	ctx := context.Background()
	errRevoked := errors.New("revoked")
	goLive(f)
	for _, k := range []string{"kept", "revoked", "flapping"} {
		c.Get(ctx, k, func(context.Context) (int, error) { return 1, nil })
	}
	f.lost(f.state.Load().gen, errors.New("connection lost"))
	clk.advance(time.Minute)
	goLive(f)

	// Re-checked: the database says the key was revoked while this process could not hear.
	ld := &counter{err: errRevoked}
	if _, err := c.Get(ctx, "revoked", ld.load); !errors.Is(err, errRevoked) || ld.calls != 1 {
		t.Fatalf("revoked key after reconnection: %v after %d loads", err, ld.calls)
	}
	ld.err = errDown
	if _, err := c.Get(ctx, "revoked", ld.load); !apierror.IsUnavailable(err) {
		t.Fatalf("a revoked key answered from memory: %v", err)
	}
	// Re-checked: the database answers with the current value, which is trusted again.
	ld = &counter{value: 2}
	if v, _ := c.Get(ctx, "kept", ld.load); v != 2 || ld.calls != 1 {
		t.Fatalf("re-check: %d after %d loads", v, ld.calls)
	}
	if v, _ := c.Get(ctx, "kept", ld.load); v != 2 || ld.calls != 1 {
		t.Fatalf("after the re-check: %d after %d loads", v, ld.calls)
	}
	// The re-check cannot reach the database: the entry answers within MaxStale of the first
	// loss, and keeps doing so through a second loss before any re-check succeeded.
	ld = &counter{err: errDown}
	if v, err := c.Get(ctx, "flapping", ld.load); v != 1 || err != nil || ld.calls != 1 {
		t.Fatalf("failed re-check: %d %v after %d loads", v, err, ld.calls)
	}
	f.lost(f.state.Load().gen, errors.New("lost again"))
	clk.advance(3 * time.Minute)
	if v, err := c.Get(ctx, "flapping", ld.load); v != 1 || err != nil {
		t.Fatalf("second loss: %d %v", v, err)
	}
	settle(t, c)
	if ld.calls != 2 {
		t.Fatalf("second loss: %d loads, want the failed re-check and one failed background re-check", ld.calls)
	}
	clk.advance(time.Minute + time.Second)
	if _, err := c.Get(ctx, "flapping", ld.load); !apierror.IsUnavailable(err) {
		t.Fatalf("beyond MaxStale of the first loss: %v", err)
	}
}

// TestCacheUndelivered: a connection that listens but whose notifications never arrive (its
// heartbeat's does not) leaves the feed degraded, so a cache answers as in any degraded mode
// (from memory within MaxStale, re-checked in the background once older than a Heartbeat, then
// from the database); the warning naming the likely cause
// is logged once however many connections fail so, and again only after the feed was live.
// Heartbeats' notifications reach no subscriber, whichever process sent them.
func TestCacheUndelivered(t *testing.T) {
	f, clk, m, logs := newTestFeed(time.Minute)
	c := NewCache[string, int](f, "test", 5*time.Minute, 10)
	ctx := context.Background()
	for range 3 {
		f.connected()
		if d, _ := f.Degraded(); !d || f.Live() || metric(t, m, "tollgate_degraded") != 1 {
			t.Fatal("a connection not proven is live")
		}
		f.lost(f.state.Load().gen, errUndelivered)
	}
	ld := &counter{value: 1}
	if v, _ := c.Get(ctx, "a", ld.load); v != 1 || ld.calls != 1 {
		t.Fatalf("first lookup: %d after %d loads", v, ld.calls)
	}
	ld.value = 2 // changed, and the notification lost
	clk.advance(30 * time.Second)
	if v, _ := c.Get(ctx, "a", ld.load); v != 1 {
		t.Fatalf("within MaxStale: %d", v)
	}
	settle(t, c)
	if v, _ := c.Get(ctx, "a", ld.load); v != 2 || ld.calls != 2 {
		t.Fatalf("after the background re-check: %d after %d loads", v, ld.calls)
	}
	ld.err = errDown // and now the database is lost too
	clk.advance(30 * time.Second)
	if v, err := c.Get(ctx, "a", ld.load); v != 2 || err != nil {
		t.Fatalf("within MaxStale of the re-check: %d %v", v, err)
	}
	settle(t, c)
	clk.advance(31 * time.Second)
	if _, err := c.Get(ctx, "a", ld.load); !apierror.IsUnavailable(err) || ld.calls != 4 {
		t.Fatalf("beyond MaxStale: %v after %d loads", err, ld.calls)
	}
	ld.err = nil
	warnings := func() (n int) {
		for _, l := range logs.lines() {
			if strings.Contains(l, "not delivered") && strings.Contains(l, "pool_mode = transaction") {
				n++
			}
		}
		return n
	}
	if n := warnings(); n != 1 {
		t.Fatalf("%d warnings naming the cause after three connections, want 1:\n%s", n, strings.Join(logs.lines(), "\n"))
	}
	goLive(f)
	f.lost(f.state.Load().gen, errUndelivered)
	if n := warnings(); n != 2 {
		t.Fatalf("%d warnings after a live period and another loss, want 2", n)
	}

	var changed []string
	f.Subscribe(Handlers{KeyChanged: func(h [32]byte) { changed = append(changed, hex.EncodeToString(h[:])) },
		Reset: func() { changed = append(changed, "reset") }})
	key := strings.Repeat("ab", 32)
	f.notify(store.ChannelAPIKeyChanged, heartbeatMarker+strings.Repeat("0", 32)) // another process's heartbeat
	f.notify(store.ChannelAPIKeyChanged, key)
	if len(changed) != 1 || changed[0] != key {
		t.Fatalf("subscribers got %q, want only the key's change", changed)
	}
}

// TestCacheRevalidatesWhileDegraded: while degraded with a database that answers (the
// notifications lost, the queries working), an entry answered from memory that was read more
// than a Heartbeat ago starts a re-check in the background: a key revoked meanwhile is refused
// from the next request on, a changed value replaces the entry and starts its MaxStale window
// again, an entry read less than a Heartbeat ago starts none, and a re-check that raced with an
// invalidation is not stored.
func TestCacheRevalidatesWhileDegraded(t *testing.T) {
	f, clk, m, _ := newTestFeed(5 * time.Minute)
	c := NewCache[string, int](f, "test", 5*time.Minute, 10)
	ctx := context.Background()
	errRevoked := errors.New("revoked")
	goLive(f)
	for _, k := range []string{"revoked", "kept", "raced"} {
		c.Get(ctx, k, func(context.Context) (int, error) { return 1, nil })
	}
	f.lost(f.state.Load().gen, errUndelivered)

	// Read less than a Heartbeat ago: answered from memory, no re-check.
	clk.advance(DefaultHeartbeat - time.Second)
	ld := &counter{err: errRevoked}
	if v, err := c.Get(ctx, "revoked", ld.load); v != 1 || err != nil {
		t.Fatalf("within a heartbeat of its read: %d %v", v, err)
	}
	settle(t, c)
	if ld.calls != 0 {
		t.Fatalf("an entry read less than a heartbeat ago was re-checked (%d loads)", ld.calls)
	}

	// Revoked on another replica, its notification lost: the request that finds the entry
	// older than a Heartbeat is answered from memory, and the next one is refused.
	clk.advance(2 * time.Second)
	if v, err := c.Get(ctx, "revoked", ld.load); v != 1 || err != nil {
		t.Fatalf("the request that starts the re-check: %d %v", v, err)
	}
	settle(t, c)
	if _, err := c.Get(ctx, "revoked", ld.load); !errors.Is(err, errRevoked) {
		t.Fatalf("the revoked key after its re-check while degraded: %v", err)
	}
	if ld.calls != 2 {
		t.Fatalf("%d loads, want the background re-check and the refused lookup", ld.calls)
	}
	if n := metric(t, m, `tollgate_stale_cache_rechecks_total{cache="test",outcome="gone"}`); n != 1 {
		t.Errorf("tollgate_stale_cache_rechecks_total gone: %v, want 1", n)
	}

	// Changed: the re-check's value replaces the entry, current as of its read.
	ld = &counter{value: 2}
	if v, _ := c.Get(ctx, "kept", ld.load); v != 1 {
		t.Fatalf("the request that starts the re-check: %d", v)
	}
	settle(t, c)
	if v, _ := c.Get(ctx, "kept", ld.load); v != 2 || ld.calls != 1 {
		t.Fatalf("after the re-check: %d after %d loads", v, ld.calls)
	}
	if n := metric(t, m, `tollgate_stale_cache_rechecks_total{cache="test",outcome="current"}`); n != 1 {
		t.Errorf("tollgate_stale_cache_rechecks_total current: %v, want 1", n)
	}
	// Its MaxStale window starts at the re-check: the database lost too, it still answers
	// from memory a second before MaxStale after it, long after MaxStale from the loss.
	rechecked := clk.now()
	ld.err = errDown
	clk.advance(5*time.Minute - time.Second)
	if v, err := c.Get(ctx, "kept", ld.load); v != 2 || err != nil {
		t.Fatalf("within MaxStale of the re-check: %d %v", v, err)
	}
	settle(t, c)
	clk.advance(rechecked.Add(5*time.Minute + time.Second).Sub(clk.now()))
	if _, err := c.Get(ctx, "kept", ld.load); !apierror.IsUnavailable(err) {
		t.Fatalf("beyond MaxStale of the re-check: %v", err)
	}

	// A re-check during which an invalidation happened is not stored.
	c.Get(ctx, "raced", func(context.Context) (int, error) { c.Invalidate("raced"); return 100, nil })
	settle(t, c)
	if v, err := c.Get(ctx, "raced", func(context.Context) (int, error) { return 200, nil }); v != 200 || err != nil {
		t.Fatalf("a raced re-check was stored: %d %v", v, err)
	}
}

// TestCacheRevalidationHungDatabase: while degraded with a database that does not answer, the
// requests are answered from memory at once while their re-checks hang; at most one re-check
// runs per key and maxReloads per cache, each bounded by LookupTimeout; a re-check that fails
// for want of the database changes nothing, and no other starts for a Heartbeat.
func TestCacheRevalidationHungDatabase(t *testing.T) {
	clk := &clock{}
	const lookupTimeout = 2 * time.Second
	f := NewWithOptions(nil, Options{MaxStale: 5 * time.Minute, LookupTimeout: lookupTimeout, Now: clk.now,
		Logger: slog.New(slog.NewTextHandler(&logBuffer{}, nil))})
	c := NewCache[int, int](f, "test", 5*time.Minute, 100)
	ctx := context.Background()
	goLive(f)
	for k := range 10 {
		c.Get(ctx, k, func(context.Context) (int, error) { return k, nil })
	}
	f.lost(f.state.Load().gen, errors.New("heartbeat: context deadline exceeded"))
	clk.advance(time.Minute)

	var entered atomic.Int32
	var mu sync.Mutex
	var deadlines []time.Duration
	hung := func(ctx context.Context) (int, error) {
		entered.Add(1)
		d, ok := ctx.Deadline()
		mu.Lock()
		deadlines = append(deadlines, map[bool]time.Duration{true: time.Until(d), false: -1}[ok])
		mu.Unlock()
		<-ctx.Done()
		return 0, apierror.Unavailable("the database", ctx.Err())
	}
	// Many requests for one key at once, then one for each other key: all answered from
	// memory while the re-checks hang.
	began := time.Now()
	var wg sync.WaitGroup
	answers := make(chan int, 100)
	for range 50 {
		wg.Go(func() {
			v, err := c.Get(context.Background(), 0, hung)
			if err != nil {
				v = -1
			}
			answers <- v
		})
	}
	wg.Wait()
	for k := 1; k < 10; k++ {
		if v, err := c.Get(ctx, k, hung); v != k || err != nil {
			t.Fatalf("key %d while its re-check hangs: %d %v", k, v, err)
		}
	}
	close(answers)
	for v := range answers {
		if v != 0 {
			t.Fatalf("a request for the key whose re-check hangs got %d", v)
		}
	}
	if took := time.Since(began); took >= lookupTimeout {
		t.Fatalf("the requests took %v: they waited for their re-checks", took)
	}
	c.reloadMu.Lock()
	running := len(c.reloading)
	c.reloadMu.Unlock()
	if running != maxReloads {
		t.Fatalf("%d re-checks running, want %d (one per key, at most %d)", running, maxReloads, maxReloads)
	}
	settle(t, c) // they end at LookupTimeout
	if n := entered.Load(); n != maxReloads {
		t.Fatalf("%d re-checks started, want %d", n, maxReloads)
	}
	for _, d := range deadlines {
		if d <= 0 || d > lookupTimeout {
			t.Fatalf("a re-check's deadline %v from its start, want within LookupTimeout (%v)", d, lookupTimeout)
		}
	}

	// Failed for want of the database: the entries answer as before, and no re-check starts
	// until a Heartbeat has passed.
	if v, err := c.Get(ctx, 0, hung); v != 0 || err != nil {
		t.Fatalf("after its failed re-check: %d %v", v, err)
	}
	settle(t, c)
	if n := entered.Load(); n != maxReloads {
		t.Fatalf("a re-check started %d right after one failed for want of the database", n-maxReloads)
	}
	clk.advance(DefaultHeartbeat + lookupTimeout)
	ld := &counter{value: 10}
	if v, _ := c.Get(ctx, 0, ld.load); v != 0 {
		t.Fatalf("the request that starts the re-check: %d", v)
	}
	settle(t, c)
	if v, _ := c.Get(ctx, 0, ld.load); v != 10 || ld.calls != 1 {
		t.Fatalf("the re-check a heartbeat after the failure: %d after %d loads", v, ld.calls)
	}
}
