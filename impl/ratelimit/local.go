package ratelimit

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// shardCount is the number of independently locked key shards of a
	// Local limiter. It must be a power of two.
	shardCount = 64
	// evictPerCall bounds how many idle keys one Allow call evicts from its
	// own shard, so that no single request pays for a large eviction.
	evictPerCall = 8
	// sweepInterval is how often, in limiter time, one whole shard is swept
	// for idle keys, so that shards no request touches are cleaned too.
	sweepInterval = time.Second
	// minRing is the smallest ring allocated for a key; rings grow by
	// doubling up to the key's limit.
	minRing = 8
)

// Local is an in-process Limiter. For each key it keeps a ring of the times
// of the requests allowed in the last Window, never more than the key's
// limit, so memory is O(limit) per active key.
//
// Keys are spread over mutex-guarded shards, so Allow calls for different
// keys rarely contend. Keys whose newest allowed request has left the window
// are evicted lazily by later Allow calls; a Local owns no goroutine and
// needs no Close.
//
// A Local is safe for concurrent use. Its zero value is not usable; create
// one with NewLocal.
type Local struct {
	now   func() time.Time
	epoch time.Time
	seed  maphash.Seed

	// nextSweep is the limiter time, in nanoseconds since epoch, after
	// which the next Allow call sweeps the shard after sweepCursor.
	nextSweep   atomic.Int64
	sweepCursor atomic.Uint32

	shards [shardCount]shard
}

var _ Limiter = (*Local)(nil)

// shard is one mutex-guarded part of a Local's key space.
type shard struct {
	mu   sync.Mutex
	keys map[string]*entry
	// idleHead and idleTail form a list of the shard's entries ordered by
	// the time of their newest allowed request, oldest first, so that idle
	// keys are found at the head without scanning the map.
	idleHead, idleTail *entry
	// The padding keeps the hot fields of neighbouring shards on separate
	// cache lines.
	_ [64]byte
}

// entry is the sliding log of one key: a ring of allowed request times in
// nanoseconds since the limiter's epoch, oldest first.
type entry struct {
	key        string
	ring       []int64
	head, n    int
	prev, next *entry
}

// NewLocal returns an in-process limiter that reads the time from now. A nil
// now means time.Now.
func NewLocal(now func() time.Time) *Local {
	if now == nil {
		now = time.Now
	}
	l := &Local{now: now, epoch: now(), seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].keys = make(map[string]*entry)
	}
	return l
}

// Allow records one request for key if fewer than limit requests for key
// were allowed in the last Window. A limit of zero or less means unlimited.
// Allow never returns an error; the context is not used.
func (l *Local) Allow(_ context.Context, key string, limit int) (Decision, error) {
	if limit <= 0 {
		return unlimited, nil
	}
	// Durations between times that carry a monotonic reading, as time.Now
	// returns, are immune to wall clock steps.
	now := int64(l.now().Sub(l.epoch))
	cut := now - int64(Window)

	s := l.shardFor(key)
	s.mu.Lock()
	s.evict(cut, evictPerCall)
	d := s.allow(key, limit, now, cut)
	s.mu.Unlock()

	if next := l.nextSweep.Load(); now >= next &&
		l.nextSweep.CompareAndSwap(next, now+int64(sweepInterval)) {
		l.sweep(cut)
	}
	return d, nil
}

// shardFor returns the shard that holds key.
func (l *Local) shardFor(key string) *shard {
	return &l.shards[maphash.String(l.seed, key)&(shardCount-1)]
}

// sweep evicts every idle key of the next shard in turn.
func (l *Local) sweep(cut int64) {
	s := &l.shards[l.sweepCursor.Add(1)&(shardCount-1)]
	s.mu.Lock()
	s.evict(cut, -1)
	s.mu.Unlock()
}

// len returns the number of keys the limiter currently holds.
func (l *Local) len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.keys)
		s.mu.Unlock()
	}
	return n
}

// allow decides one request for key at time now; s.mu must be held.
func (s *shard) allow(key string, limit int, now, cut int64) Decision {
	e := s.keys[key]
	if e == nil {
		// Clone the key so the map does not pin a larger buffer the
		// caller's string may point into.
		e = &entry{key: strings.Clone(key)}
		s.keys[e.key] = e
	}
	e.expire(cut)

	if e.n >= limit {
		// The n-limit+1 oldest requests must leave the window before the
		// count drops below limit; the last of them is the one at index
		// n-limit. It is the oldest unless limit was lowered.
		blocking := e.at(e.n - limit)
		return Decision{
			Limit:      limit,
			RetryAfter: time.Duration(blocking - cut),
			ResetAfter: time.Duration(e.at(0) - cut),
		}
	}

	ts := now
	if e.n > 0 {
		// Callers read the clock before taking the lock, so a concurrent
		// call may have recorded a slightly later time; keep the ring
		// sorted.
		ts = max(ts, e.at(e.n-1))
	}
	e.push(ts, limit)
	s.touch(e)
	return Decision{
		Allowed:    true,
		Limit:      limit,
		Remaining:  limit - e.n,
		ResetAfter: time.Duration(e.at(0) - cut),
	}
}

// evict removes up to budget idle entries (all of them if budget < 0)
// whose newest allowed request is at or before cut; s.mu must be held.
func (s *shard) evict(cut int64, budget int) {
	for i := 0; i != budget; i++ {
		e := s.idleHead
		if e == nil || (e.n > 0 && e.at(e.n-1) > cut) {
			return
		}
		s.unlink(e)
		delete(s.keys, e.key)
	}
}

// touch moves e to the tail of the idle list; s.mu must be held.
func (s *shard) touch(e *entry) {
	if s.idleTail == e {
		return
	}
	if e.prev != nil || s.idleHead == e {
		s.unlink(e)
	}
	e.prev = s.idleTail
	if s.idleTail != nil {
		s.idleTail.next = e
	} else {
		s.idleHead = e
	}
	s.idleTail = e
}

// unlink removes e from the idle list; s.mu must be held.
func (s *shard) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.idleHead = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.idleTail = e.prev
	}
	e.prev, e.next = nil, nil
}

// at returns the i-th oldest recorded time, 0 <= i < e.n.
func (e *entry) at(i int) int64 {
	j := e.head + i
	if j >= len(e.ring) {
		j -= len(e.ring)
	}
	return e.ring[j]
}

// expire drops the recorded times at or before cut.
func (e *entry) expire(cut int64) {
	for e.n > 0 && e.ring[e.head] <= cut {
		e.head++
		if e.head == len(e.ring) {
			e.head = 0
		}
		e.n--
	}
	if e.n == 0 {
		e.head = 0
	}
}

// push records ts as the newest time; e.n < limit must hold. The ring grows
// by doubling up to limit, and shrinks to limit once a lowered limit lets a
// request through.
func (e *entry) push(ts int64, limit int) {
	switch {
	case e.n == len(e.ring):
		e.resize(min(limit, max(minRing, 2*len(e.ring))))
	case len(e.ring) > limit:
		e.resize(limit)
	}
	j := e.head + e.n
	if j >= len(e.ring) {
		j -= len(e.ring)
	}
	e.ring[j] = ts
	e.n++
}

// resize moves the recorded times into a new ring of size c >= e.n.
func (e *entry) resize(c int) {
	r := make([]int64, c)
	if k := copy(r, e.ring[e.head:]); k < e.n {
		copy(r[k:], e.ring[:e.n-k])
	}
	e.ring, e.head = r, 0
}

// clock returns the limiter's current time in nanoseconds since its epoch,
// the unit of the recorded times.
func (l *Local) clock() int64 { return int64(l.now().Sub(l.epoch)) }

// unixMicros converts a recorded time to microseconds since the Unix epoch,
// the unit of the Redis limiter's scores.
func (l *Local) unixMicros(ts int64) int64 {
	return l.epoch.Add(time.Duration(ts)).UnixMicro()
}

// recorded calls fn for every key that has recorded times in (from, to],
// with those times oldest first. fn runs with no lock held and owns ts.
func (l *Local) recorded(from, to int64, fn func(key string, ts []int64)) {
	type found struct {
		key string
		ts  []int64
	}
	var batch []found
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for key, e := range s.keys {
			var ts []int64
			for j := range e.n {
				if t := e.at(j); t > from && t <= to {
					ts = append(ts, t)
				}
			}
			if len(ts) > 0 {
				batch = append(batch, found{key, ts})
			}
		}
		s.mu.Unlock()
		for _, f := range batch {
			fn(f.key, f.ts)
		}
		batch = batch[:0]
	}
}
