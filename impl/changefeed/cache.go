package changefeed

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/impl/apierror"
)

// Cache is an in-memory cache of what a gateway process reads from the database, kept current
// by the feed. Its owner subscribes to the feed and calls Invalidate or Reset on the
// notifications that concern it.
//
// While the feed is live an entry is answered from memory until its TTL (a bound on a missed
// notification). While the feed is lost (degraded mode) an entry is answered from memory as
// long as it was known to be current less than the feed's MaxStale ago; an entry of an earlier
// connection is re-checked with the database before it is trusted again. A lookup whose load
// fails with a dependency error (apierror.Unavailable) falls back to the entry when it is within
// MaxStale; any other failure (a revoked key, a deleted account) drops the entry. A lookup that
// raced with an invalidation is not stored, so a change announced while a value was being read
// from the database is never hidden by that stale value.
//
// While degraded, an entry answered from memory that was read from the database more than the
// feed's Heartbeat ago is also re-checked in the background (stale-while-revalidate), for the
// notifications may be lost while the database still answers (a pooler in transaction mode, a
// proxy): the request is answered from memory at once, and one reload of the key starts. Its
// value replaces the entry (current as of its read: its MaxStale window starts again); the
// database's refusal (a non-Unavailable error) drops the entry, so the next lookup is refused;
// a dependency error changes nothing, and the cache starts no other reload for a Heartbeat. A
// reload that raced with an invalidation is not stored. The reloads are bounded: at most one per
// key and maxReloads per cache run at once (a request that would start another starts none),
// each within LookupTimeout, so a database that hangs holds at most maxReloads goroutines of a
// cache, each for LookupTimeout.
type Cache[K comparable, V any] struct {
	feed  *Feed
	ttl   time.Duration
	max   int
	stale prometheus.Counter // nil without metrics
	// rechecked counts the background re-checks by outcome (recheckCurrent, recheckGone,
	// recheckUnavailable); nil without metrics.
	rechecked [numRecheckOutcomes]prometheus.Counter
	mu        sync.RWMutex
	items     map[K]cacheItem[V]
	epoch     uint64 // grows on every invalidation

	// reloadMu guards reloading, the keys being reloaded in the background while degraded.
	reloadMu  sync.Mutex
	reloading map[K]struct{}
	// reloadPausedUntil (Unix nanoseconds) is when reloads may start again after one failed
	// for want of the database.
	reloadPausedUntil atomic.Int64
}

// maxReloads bounds the background reloads of one cache running at once (see Cache).
const maxReloads = 4

type cacheItem[V any] struct {
	value V
	// loaded is when the value was read from the database (when the read began).
	loaded time.Time
	// gen is the feed's generation when it was read.
	gen uint64
}

// NewCache returns a cache over feed whose entries are trusted while the feed is live for at
// most ttl, and which holds at most max entries (it empties itself beyond that); name labels
// its answers from memory in tollgate_stale_cache_served_total. With a nil feed nothing is
// cached: every lookup loads.
func NewCache[K comparable, V any](feed *Feed, name string, ttl time.Duration, max int) *Cache[K, V] {
	c := &Cache[K, V]{feed: feed, ttl: ttl, max: max, items: map[K]cacheItem[V]{}}
	if feed != nil && feed.opts.Metrics != nil {
		c.stale = feed.opts.Metrics.StaleServed.WithLabelValues(name)
		for o, label := range recheckOutcomeLabels {
			c.rechecked[o] = feed.opts.Metrics.StaleRechecks.WithLabelValues(name, label)
		}
	}
	return c
}

// Get returns the value of k: from memory when the entry may be trusted, else from load
// (called with ctx bounded by the feed's LookupTimeout), whose value is cached and whose
// errors are not. See Cache for when an entry is trusted.
func (c *Cache[K, V]) Get(ctx context.Context, k K, load func(context.Context) (V, error)) (V, error) {
	if c.feed == nil {
		return load(ctx)
	}
	st := c.feed.state.Load()
	now := c.feed.now()
	c.mu.RLock()
	it, ok := c.items[k]
	epoch := c.epoch
	c.mu.RUnlock()
	if ok && st.live && it.gen == st.gen && now.Before(it.loaded.Add(c.ttl)) {
		return it.value, nil
	}
	usable := ok && c.withinMaxStale(st, it, now)
	if usable && !st.live {
		// Degraded: changes may be missed whether or not the database answers a lookup now,
		// so the entry answers without waiting for one; an entry read more than a Heartbeat
		// ago is re-checked in the background, and the feed's reconnection re-checks it too.
		if now.Sub(it.loaded) >= c.feed.opts.Heartbeat {
			c.reload(ctx, k, st.gen, epoch, now, load)
		}
		c.servedStale()
		return it.value, nil
	}
	lctx, cancel := context.WithTimeout(ctx, c.feed.opts.LookupTimeout)
	v, err := load(lctx)
	cancel()
	if err == nil {
		c.mu.Lock()
		if c.epoch == epoch {
			if len(c.items) >= c.max {
				clear(c.items)
			}
			c.items[k] = cacheItem[V]{value: v, loaded: now, gen: st.gen}
		}
		c.mu.Unlock()
		return v, nil
	}
	if apierror.IsUnavailable(err) {
		if usable {
			c.servedStale()
			return it.value, nil
		}
		var zero V
		return zero, err
	}
	// The database answered that the entry is wrong now: it must never be answered again.
	if ok {
		c.mu.Lock()
		c.epoch++
		delete(c.items, k)
		c.mu.Unlock()
	}
	var zero V
	return zero, err
}

// reload starts the background re-check of k's entry while degraded (see Cache), unless one is
// running for k, maxReloads are running, or reloads are paused. gen, epoch and now are the
// feed's generation, the cache's epoch and the time when the request read the entry.
func (c *Cache[K, V]) reload(ctx context.Context, k K, gen, epoch uint64, now time.Time, load func(context.Context) (V, error)) {
	if now.UnixNano() < c.reloadPausedUntil.Load() {
		return
	}
	c.reloadMu.Lock()
	_, running := c.reloading[k]
	if running || len(c.reloading) >= maxReloads {
		c.reloadMu.Unlock()
		return
	}
	if c.reloading == nil {
		c.reloading = map[K]struct{}{}
	}
	c.reloading[k] = struct{}{}
	c.reloadMu.Unlock()
	// The reload keeps the request's values (its trace) but not its end: the request is
	// answered at once.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.feed.opts.LookupTimeout)
	go func() {
		defer func() {
			cancel()
			c.reloadMu.Lock()
			delete(c.reloading, k)
			c.reloadMu.Unlock()
		}()
		v, err := load(lctx)
		c.countRecheck(err)
		switch {
		case err == nil:
			c.mu.Lock()
			if c.epoch == epoch {
				if len(c.items) >= c.max {
					clear(c.items)
				}
				c.items[k] = cacheItem[V]{value: v, loaded: now, gen: gen}
			}
			c.mu.Unlock()
		case apierror.IsUnavailable(err):
			c.reloadPausedUntil.Store(c.feed.now().Add(c.feed.opts.Heartbeat).UnixNano())
		default:
			// The database answered that the entry is wrong now.
			c.mu.Lock()
			c.epoch++
			delete(c.items, k)
			c.mu.Unlock()
		}
	}()
}

// The outcomes of a background re-check, as tollgate_stale_cache_rechecks_total labels them.
const (
	recheckCurrent = iota
	recheckGone
	recheckUnavailable
	numRecheckOutcomes
)

var recheckOutcomeLabels = [numRecheckOutcomes]string{"current", "gone", "unavailable"}

// countRecheck counts a background re-check whose load returned err.
func (c *Cache[K, V]) countRecheck(err error) {
	o := recheckCurrent
	switch {
	case err == nil:
	case apierror.IsUnavailable(err):
		o = recheckUnavailable
	default:
		o = recheckGone
	}
	if ctr := c.rechecked[o]; ctr != nil {
		ctr.Inc()
	}
}

// withinMaxStale reports whether the entry was known to be current less than MaxStale ago.
// An entry is known current while the feed of its generation is live (but never beyond its
// TTL), and, once that feed is lost, until the last moment the notifications were known to
// flow, or until it was read if it was read later.
func (c *Cache[K, V]) withinMaxStale(st *state, it cacheItem[V], now time.Time) bool {
	var current time.Time
	switch {
	case it.gen == st.gen && st.live:
		current = now
	case it.gen == st.gen:
		current = later(it.loaded, st.knownUntil)
	default:
		known, ok := st.knownUntilOf(it.gen)
		if !ok {
			return false // its generation ended more than MaxStale ago
		}
		current = later(it.loaded, known)
	}
	if expires := it.loaded.Add(c.ttl); current.After(expires) {
		current = expires
	}
	return now.Sub(current) <= c.feed.opts.MaxStale
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (c *Cache[K, V]) servedStale() {
	if c.stale != nil {
		c.stale.Inc()
	}
}

// Invalidate drops k.
func (c *Cache[K, V]) Invalidate(k K) {
	c.mu.Lock()
	c.epoch++
	delete(c.items, k)
	c.mu.Unlock()
}

// Reset drops everything.
func (c *Cache[K, V]) Reset() {
	c.mu.Lock()
	c.epoch++
	clear(c.items)
	c.mu.Unlock()
}
