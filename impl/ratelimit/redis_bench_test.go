package ratelimit

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/impl/redistest"
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
