package changefeed

import (
	"sync"
	"time"
)

// Cache is an in-memory cache that trusts its entries only while the feed is live: while
// notifications may be missed it serves nothing from memory. Its owner subscribes to the feed
// and calls Invalidate or Reset on the notifications that concern it. A lookup that raced with
// an invalidation is not stored, so a change announced while a value was being read from the
// database is never hidden by that stale value.
type Cache[K comparable, V any] struct {
	feed  *Feed
	ttl   time.Duration
	max   int
	now   func() time.Time
	mu    sync.RWMutex
	items map[K]cacheItem[V]
	epoch uint64 // grows on every invalidation
}

type cacheItem[V any] struct {
	value   V
	expires time.Time
}

// NewCache returns a cache over feed whose entries live at most ttl (a bound for missed
// notifications) and which holds at most max entries (it empties itself beyond that); now is
// the clock (nil: time.Now).
func NewCache[K comparable, V any](feed *Feed, ttl time.Duration, max int, now func() time.Time) *Cache[K, V] {
	if now == nil {
		now = time.Now
	}
	return &Cache[K, V]{feed: feed, ttl: ttl, max: max, now: now, items: map[K]cacheItem[V]{}}
}

// Get returns the cached value of k, or calls load and caches what it returns (errors are not
// cached).
func (c *Cache[K, V]) Get(k K, load func() (V, error)) (V, error) {
	now := c.now()
	live := c.feed != nil && c.feed.Live()
	if live {
		c.mu.RLock()
		it, ok := c.items[k]
		c.mu.RUnlock()
		if ok && now.Before(it.expires) {
			return it.value, nil
		}
	}
	c.mu.RLock()
	epoch := c.epoch
	c.mu.RUnlock()
	v, err := load()
	if err != nil || !live {
		return v, err
	}
	c.mu.Lock()
	if c.epoch == epoch {
		if len(c.items) >= c.max {
			clear(c.items)
		}
		c.items[k] = cacheItem[V]{value: v, expires: now.Add(c.ttl)}
	}
	c.mu.Unlock()
	return v, nil
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
