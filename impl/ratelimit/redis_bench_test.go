package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/redistest"
)

// BenchmarkRedisAllow measures one Allow round trip to the test Redis.
func BenchmarkRedisAllow(b *testing.B) {
	l := NewRedis(redistest.NewClient(b), redistest.Prefix(b), nil)
	ctx := context.Background()
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Allow(ctx, fmt.Sprint("k", next.Add(1)%1000), 1000); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkFallbackAllow measures Allow through a Fallback with Redis up:
// the Redis round trip plus the per-call timeout and the shadow log.
func BenchmarkFallbackAllow(b *testing.B) {
	f := NewFallback(redistest.NewClient(b), redistest.Prefix(b), FallbackOptions{})
	b.Cleanup(func() { _ = f.Close() })
	ctx := context.Background()
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := f.Allow(ctx, fmt.Sprint("k", next.Add(1)%1000), 1000); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if f.FallenBack() {
		b.Fatal("the limiter fell back during the benchmark")
	}
}

// BenchmarkFallbackDown measures Allow through a Fallback while Redis is
// unreachable: the local limiter alone.
func BenchmarkFallbackDown(b *testing.B) {
	f := NewFallback(unreachableClient(b), "p:", FallbackOptions{Replicas: 2, Logger: slog.New(slog.DiscardHandler)})
	b.Cleanup(func() { _ = f.Close() })
	ctx := context.Background()
	_, _ = f.Allow(ctx, "warm", 1) // finds Redis down
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = f.Allow(ctx, fmt.Sprint("k", next.Add(1)%1000), 1000)
		}
	})
}
