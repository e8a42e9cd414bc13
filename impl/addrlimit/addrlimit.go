// Package addrlimit keeps token buckets per key, in memory in each gateway process: a client
// address (ByAddress, keyed by Key), or any other comparable key (the host a URL names, say).
// It bounds what one address can make an unauthenticated endpoint do (fill a table, hammer the
// database, drive calls to a third party); it is not a global quota, and each process keeps
// its own buckets.
package addrlimit

import (
	"math"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Rate is a token bucket's size (Burst requests) and refill rate (PerMinute requests a minute).
type Rate struct {
	Burst     float64
	PerMinute float64
}

// MaxTracked bounds the buckets a Limiter keeps: past it, the buckets that are full again
// (their key idle) are dropped, and if that is not enough, all of them.
const MaxTracked = 50_000

// Limiter keeps one token bucket per key.
type Limiter[K comparable] struct {
	rate Rate
	now  func() time.Time

	mu      sync.Mutex
	buckets map[K]*bucket
}

// ByAddress keeps one token bucket per client address (Key).
type ByAddress = Limiter[netip.Prefix]

// bucket is the state of one key's bucket.
type bucket struct {
	tokens float64
	at     time.Time
}

// New returns a Limiter of rate whose clock is now (time.Now when nil).
func New[K comparable](rate Rate, now func() time.Time) *Limiter[K] {
	if now == nil {
		now = time.Now
	}
	return &Limiter[K]{rate: rate, now: now, buckets: map[K]*bucket{}}
}

// Take takes a token from the key's bucket; when there is none it returns false and how long
// until there is one.
func (l *Limiter[K]) Take(key K) (bool, time.Duration) {
	now := l.now()
	perSecond := l.rate.PerMinute / 60
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= MaxTracked {
			l.sweep(now)
		}
		b = &bucket{tokens: l.rate.Burst, at: now}
		l.buckets[key] = b
	}
	if elapsed := now.Sub(b.at).Seconds(); elapsed > 0 {
		b.tokens = math.Min(l.rate.Burst, b.tokens+elapsed*perSecond)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / perSecond * float64(time.Second))
}

// sweep drops the buckets that are full again, or all of them when none is; l.mu is held.
func (l *Limiter[K]) sweep(now time.Time) {
	perSecond := l.rate.PerMinute / 60
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*perSecond >= l.rate.Burst {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= MaxTracked {
		clear(l.buckets)
	}
}

// Key is the bucket of a client address (a net/http Request's RemoteAddr): the IPv4 address,
// or the IPv6 /64 (one host commonly has a whole /64 to choose addresses from).
func Key(remoteAddr string) netip.Prefix {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	ip = ip.WithZone("").Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}
