package mcpauth

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// The registration, token and revocation endpoints take no credential worth the name (public
// clients), so each keeps a token bucket per client address, in memory in each gateway
// process: enough to stop one address from filling oauth_clients or hammering the database,
// not a global quota.
//
// Each bucket holds up to burst requests and refills at perMinute requests a minute.
var (
	registerLimit = addressRate{burst: 20, perMinute: 10}
	tokenLimit    = addressRate{burst: 60, perMinute: 60}
	revokeLimit   = addressRate{burst: 30, perMinute: 30}
)

// documentHostLimit bounds the fetches of client ID metadata documents per host the URLs
// name, in each gateway process: any signed-in member can make the consent page fetch any
// public https URL, and without a bound a loop of them would make the gateway a relay of GETs
// at one third party. A real client's document is fetched once per authorization.
var documentHostLimit = addressRate{burst: 10, perMinute: 10}

// addressRate is a token bucket's size and refill rate.
type addressRate struct {
	burst     float64
	perMinute float64
}

// maxTrackedAddresses bounds the buckets kept per endpoint: past it, the buckets that are full
// again (their address idle) are dropped, and if that is not enough, all of them.
const maxTrackedAddresses = 50_000

// keyedLimiter keeps one token bucket per key: a client address (addressLimiter), or the host
// of a client ID metadata document (documentHostLimit).
type keyedLimiter[K comparable] struct {
	rate addressRate
	now  func() time.Time

	mu      sync.Mutex
	buckets map[K]*addressBucket
}

// addressLimiter keeps one token bucket per client address.
type addressLimiter = keyedLimiter[netip.Prefix]

// addressBucket is the state of one address's bucket.
type addressBucket struct {
	tokens float64
	at     time.Time
}

func newAddressLimiter(rate addressRate, now func() time.Time) *addressLimiter {
	return newKeyedLimiter[netip.Prefix](rate, now)
}

func newKeyedLimiter[K comparable](rate addressRate, now func() time.Time) *keyedLimiter[K] {
	return &keyedLimiter[K]{rate: rate, now: now, buckets: map[K]*addressBucket{}}
}

// take takes a token from the key's bucket; when there is none it returns false and how long
// until there is one.
func (l *keyedLimiter[K]) take(key K) (bool, time.Duration) {
	now := l.now()
	perSecond := l.rate.perMinute / 60
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxTrackedAddresses {
			l.sweep(now)
		}
		b = &addressBucket{tokens: l.rate.burst, at: now}
		l.buckets[key] = b
	}
	if elapsed := now.Sub(b.at).Seconds(); elapsed > 0 {
		b.tokens = math.Min(l.rate.burst, b.tokens+elapsed*perSecond)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / perSecond * float64(time.Second))
}

// sweep drops the buckets that are full again, or all of them when none is; l.mu is held.
func (l *keyedLimiter[K]) sweep(now time.Time) {
	perSecond := l.rate.perMinute / 60
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*perSecond >= l.rate.burst {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= maxTrackedAddresses {
		clear(l.buckets)
	}
}

// addressKey is the bucket of a client address: the IPv4 address, or the IPv6 /64 (one host
// commonly has a whole /64 to choose addresses from).
func addressKey(remoteAddr string) netip.Prefix {
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

// limited wraps an endpoint's handler with the limiter: a request over its address's rate is
// answered 429 with Retry-After, in the OAuth error shape.
func limited(l *addressLimiter, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ok, wait := l.take(addressKey(r.RemoteAddr))
		if !ok {
			seconds := max(1, int(math.Ceil(wait.Seconds())))
			w.Header().Set("Retry-After", strconv.Itoa(seconds))
			writeError(w, http.StatusTooManyRequests, "temporarily_unavailable",
				"too many requests from this address; retry in "+strconv.Itoa(seconds)+" seconds")
			return
		}
		next(w, r)
	}
}
