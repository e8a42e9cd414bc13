package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// BenchmarkWriteUsage measures the batching writer's transaction: each iteration writes and
// bills one batch of new usage records of one account, drawn from the holder's hold. Point
// TEST_DATABASE_URL at a cluster with pg_stat_statements to see what each statement costs the
// database.
func BenchmarkWriteUsage(b *testing.B) {
	for _, size := range []int{20, 200} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) { benchmarkWriteUsage(b, size) })
	}
}

func benchmarkWriteUsage(b *testing.B, batchSize int) {
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
	if _, _, err := st.Append(ctx, store.LedgerChange{AccountID: a.ID, AmountMicros: 1 << 50, Reason: store.ReasonGrant, IdempotencyKey: "grant"}); err != nil {
		b.Fatal(err)
	}
	const holder = "bench-process"
	if _, err := st.TakeCreditHold(ctx, store.HoldRequest{AccountID: a.ID, Holder: holder, NeedMicros: 1 << 40, WantMicros: 1 << 40, Lease: time.Hour}); err != nil {
		b.Fatal(err)
	}
	key := uuid.New()
	now := time.Now()
	batch := make([]store.UsageRecord, batchSize)
	seq := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i := range batch {
			seq++
			batch[i] = store.UsageRecord{
				AccountID: a.ID, RequestID: fmt.Sprintf("req-%08d", seq), APIKeyID: key,
				Model: "service-flint", Route: "/v1/chat/completions", Provider: "sim", UpstreamModel: "expert-1",
				InputTokens: 1200, OutputTokens: 300, CostMicros: 1_000 + int64(i), Status: "completed",
				StartedAt: now, FinishedAt: now,
			}
		}
		res, err := st.WriteUsage(ctx, holder, batch)
		if err != nil {
			b.Fatal(err)
		}
		if res.Written != batchSize {
			b.Fatalf("wrote %d of %d records", res.Written, batchSize)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batchSize), "µs/record")
}
