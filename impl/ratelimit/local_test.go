package ratelimit

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestLocalEvictsIdleKeys(t *testing.T) {
	clock := newFakeClock()
	l := NewLocal(clock.Now)
	ctx := context.Background()
	for i := range 1000 {
		if _, err := l.Allow(ctx, fmt.Sprint("idle-", i), 5); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.len(); n != 1000 {
		t.Fatalf("holding %d keys, want 1000", n)
	}
	// Still within the window: nothing may be evicted.
	clock.Set(Window - time.Nanosecond)
	for range 2 * shardCount {
		_, _ = l.Allow(ctx, "busy", 1000)
	}
	if n := l.len(); n != 1001 {
		t.Fatalf("holding %d keys inside the window, want 1001", n)
	}
	// Once the idle keys' requests left the window, traffic on one key
	// sweeps every shard within shardCount sweep intervals.
	for i := range shardCount + 1 {
		clock.Set(Window + time.Duration(i)*sweepInterval)
		_, _ = l.Allow(ctx, "busy", 1000)
	}
	if n := l.len(); n != 1 {
		t.Fatalf("holding %d keys after the idle ones left the window, want 1", n)
	}
}

func TestLocalEvictionKeepsState(t *testing.T) {
	clock := newFakeClock()
	l := NewLocal(clock.Now)
	ctx := context.Background()
	_, _ = l.Allow(ctx, "k", 1)
	// Churn many keys through every shard while k is still limited.
	for i := range 5000 {
		clock.Set(time.Duration(i) * 10 * time.Millisecond)
		_, _ = l.Allow(ctx, fmt.Sprint("churn-", i), 1)
	}
	clock.Set(59 * time.Second)
	if d, _ := l.Allow(ctx, "k", 1); d.Allowed {
		t.Fatalf("k was forgotten while still in the window: %+v", d)
	}
}

func TestLocalRingSize(t *testing.T) {
	clock := newFakeClock()
	l := NewLocal(clock.Now)
	ctx := context.Background()
	ring := func(key string) int {
		s := l.shardFor(key)
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.keys[key].ring)
	}
	_, _ = l.Allow(ctx, "small", 3)
	if n := ring("small"); n != 3 {
		t.Fatalf("ring for limit 3 has %d slots, want 3", n)
	}
	_, _ = l.Allow(ctx, "big", 10000)
	if n := ring("big"); n != minRing {
		t.Fatalf("ring after one request has %d slots, want %d", n, minRing)
	}
	for range 20000 {
		_, _ = l.Allow(ctx, "big", 10000)
	}
	if n := ring("big"); n != 10000 {
		t.Fatalf("ring at cap 10000 has %d slots, want 10000", n)
	}
	// A raised limit grows the ring.
	clock.Set(30 * time.Second)
	if d, _ := l.Allow(ctx, "big", 20000); !d.Allowed || d.Remaining != 20000-10001 {
		t.Fatalf("request with a raised limit: %+v", d)
	}
	if n := ring("big"); n != 20000 {
		t.Fatalf("ring after raising the limit to 20000 has %d slots, want 20000", n)
	}
	// A lowered limit shrinks the ring once a request fits again: at
	// Window only the request at 30s is left.
	clock.Set(Window)
	if d, _ := l.Allow(ctx, "big", 10); !d.Allowed {
		t.Fatalf("request after the window with a lowered limit: %+v", d)
	}
	if n := ring("big"); n != 10 {
		t.Fatalf("ring after lowering the limit to 10 has %d slots, want 10", n)
	}
}

// BenchmarkLocalAllow measures Allow on the request path with the real
// clock, from parallel goroutines over many keys and over one hot key.
func BenchmarkLocalAllow(b *testing.B) {
	for _, nkeys := range []int{1, 10_000} {
		b.Run(fmt.Sprintf("keys=%d", nkeys), func(b *testing.B) {
			keys := make([]string, nkeys)
			for i := range keys {
				keys[i] = fmt.Sprintf("tenant-%d:route", i)
			}
			l := NewLocal(nil)
			ctx := context.Background()
			var next atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(7919))
				for pb.Next() {
					i++
					if i >= len(keys) {
						i = 0
					}
					_, _ = l.Allow(ctx, keys[i], 1000)
				}
			})
		})
	}
}
