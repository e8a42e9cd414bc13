package billing

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// BenchmarkReserveSettle measures the hot path: a reservation covered by the process's hold and
// its settlement, from many goroutines at one account (the writer is not running, so the
// queue only grows).
func BenchmarkReserveSettle(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.ConnString(b))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	a, err := st.CreateAccount(ctx, "bench", "default")
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := st.Append(ctx, store.LedgerChange{AccountID: a.ID, AmountMicros: 1 << 50, Reason: store.ReasonGrant, IdempotencyKey: "g"}); err != nil {
		b.Fatal(err)
	}
	m := New(st, Options{ChunkCapMicros: 1 << 40})
	var seq atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := m.Reserve(ctx, a.ID, fmt.Sprint(seq.Add(1)), 1_000)
			if err != nil {
				b.Error(err)
				return
			}
			r.Settle(1, UsageRecord{})
		}
	})
}
