package usageview_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
)

// BenchmarkWriteUsageCost measures what migration 0009 adds to the usage writer: the same
// batches (200 records of one account, as store's BenchmarkWriteUsage) written on a database
// with 0009's indexes and rollup trigger, and on one where they were dropped. Run it with
//
//	go test -run '^$' -bench WriteUsageCost -count 3 ./impl/usageview
func BenchmarkWriteUsageCost(b *testing.B) {
	for _, with := range []bool{true, false} {
		b.Run(fmt.Sprintf("with-0009=%v", with), func(b *testing.B) {
			f := newFixture(b, time.Now())
			if !with {
				for _, stmt := range []string{`DROP TRIGGER usage_daily_add ON usage_records`,
					`DROP INDEX usage_records_account_started_idx`, `DROP INDEX usage_records_account_model_started_idx`, `DROP INDEX usage_records_account_key_started_idx`} {
					if _, err := f.pool.Exec(f.ctx, stmt); err != nil {
						b.Fatal(err)
					}
				}
			}
			acct := f.account("bench")
			keys := []uuid.UUID{f.key(acct, "k1"), f.key(acct, "k2"), f.key(acct, "k3")}
			const holder = "bench-process"
			if _, err := f.st.TakeCreditHold(f.ctx, store.HoldRequest{AccountID: acct, Holder: holder, NeedMicros: 1 << 39, WantMicros: 1 << 39, Lease: time.Hour}); err != nil {
				b.Fatal(err)
			}
			batch := make([]store.UsageRecord, 200)
			seq := 0
			now := time.Now()
			for b.Loop() {
				for i := range batch {
					seq++
					batch[i] = store.UsageRecord{AccountID: acct, RequestID: fmt.Sprintf("req-%08d", seq), APIKeyID: keys[i%3],
						Model: []string{"service-flint", "service-sonnet"}[i%2], Route: "/v1/chat/completions", Provider: "sim",
						UpstreamModel: "expert-1", InputTokens: 1200, OutputTokens: 300, CostMicros: 1_000, Status: "completed",
						StartedAt: now, FinishedAt: now}
				}
				if res, err := f.st.WriteUsage(f.ctx, holder, batch); err != nil || res.Written != len(batch) {
					b.Fatalf("%+v, %v", res, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(batch)), "µs/record")
		})
	}
}
