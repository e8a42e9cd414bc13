package addrlimit

import (
	"net/netip"
	"testing"
	"time"
)

// TestTakeRefillsAtTheRate: a bucket gives its burst at once, then a token per 60/PerMinute
// seconds, and says how long until the next; buckets are per key.
func TestTakeRefillsAtTheRate(t *testing.T) {
	now := time.Unix(1_000, 0)
	l := New[string](Rate{Burst: 3, PerMinute: 6}, func() time.Time { return now })
	for i := range 3 {
		if ok, _ := l.Take("a"); !ok {
			t.Fatalf("take %d of the burst refused", i+1)
		}
	}
	ok, wait := l.Take("a")
	if ok || wait != 10*time.Second {
		t.Fatalf("past the burst: %v, wait %v; want refused, 10s", ok, wait)
	}
	if ok, _ := l.Take("b"); !ok {
		t.Fatal("another key shares the first one's bucket")
	}
	now = now.Add(10 * time.Second)
	if ok, _ := l.Take("a"); !ok {
		t.Fatal("no token after its refill time")
	}
	if ok, _ := l.Take("a"); ok {
		t.Fatal("two tokens after one refill time")
	}
}

// TestKey: IPv4 addresses are their own bucket, IPv6 addresses share their /64, IPv4-mapped
// addresses are their IPv4 address, and what is not an address is the zero prefix.
func TestKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"192.0.2.7:5555", "192.0.2.7/32"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2::9%eth0]:443", "2001:db8:1:2::/64"},
		{"[::ffff:192.0.2.7]:1", "192.0.2.7/32"},
		{"192.0.2.8", "192.0.2.8/32"},
	} {
		if got := Key(c.in); got != netip.MustParsePrefix(c.want) {
			t.Errorf("Key(%q) = %v, want %s", c.in, got, c.want)
		}
	}
	if got := Key("not an address"); got.IsValid() {
		t.Errorf("Key of junk = %v", got)
	}
}

// TestSweepBoundsTheBuckets: past MaxTracked keys, idle (full) buckets are dropped.
func TestSweepBoundsTheBuckets(t *testing.T) {
	now := time.Unix(0, 0)
	l := New[int](Rate{Burst: 1, PerMinute: 60}, func() time.Time { return now })
	for i := range MaxTracked {
		l.Take(i)
	}
	now = now.Add(2 * time.Second) // every bucket full again
	l.Take(-1)
	if n := len(l.buckets); n != 1 {
		t.Errorf("%d buckets after the sweep, want 1", n)
	}
}
