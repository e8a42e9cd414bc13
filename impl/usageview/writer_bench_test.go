package usageview_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
)

// BenchmarkWriteUsageCost measures what migration 0009 adds to the usage writer: batches of 200
// records of one account (as store's BenchmarkWriteUsage) written through the real writer on
// four databases: with all of 0009, without its rollup trigger, without its three indexes, and
// without both. The databases take turns, a few batches each, round after round, so that a
// host whose load changes (other work on its cores) weighs on all four alike; each reports the
// median time of a batch per record over the rounds. Run it with
//
//	go test -run '^$' -bench WriteUsageCost -benchtime 1x ./impl/usageview
func BenchmarkWriteUsageCost(b *testing.B) {
	trigger := []string{`DROP TRIGGER usage_daily_add ON usage_records`}
	indexes := []string{`DROP INDEX usage_records_account_started_idx`, `DROP INDEX usage_records_account_model_started_idx`,
		`DROP INDEX usage_records_account_key_started_idx`}
	type variant struct {
		name   string
		drop   []string
		f      *fixture
		acct   uuid.UUID
		keys   []uuid.UUID
		timing []float64 // µs per record, one per batch
	}
	variants := []*variant{{name: "all-of-0009"}, {name: "without-trigger", drop: trigger},
		{name: "without-indexes", drop: indexes}, {name: "without-0009", drop: append(append([]string{}, trigger...), indexes...)}}
	const holder, batchSize, rounds, perTurn = "bench-process", 200, 30, 4
	for _, v := range variants {
		v.f = newFixture(b, time.Now())
		for _, stmt := range v.drop {
			if _, err := v.f.pool.Exec(v.f.ctx, stmt); err != nil {
				b.Fatal(err)
			}
		}
		v.acct = v.f.account("bench")
		v.keys = []uuid.UUID{v.f.key(v.acct, "k1"), v.f.key(v.acct, "k2"), v.f.key(v.acct, "k3")}
		if _, err := v.f.st.TakeCreditHold(v.f.ctx, store.HoldRequest{AccountID: v.acct, Holder: holder, NeedMicros: 1 << 39, WantMicros: 1 << 39, Lease: time.Hour}); err != nil {
			b.Fatal(err)
		}
	}
	seq := 0
	now := time.Now()
	for b.Loop() {
		for range rounds {
			for _, v := range variants {
				for range perTurn {
					batch := make([]store.UsageRecord, batchSize)
					for i := range batch {
						seq++
						batch[i] = store.UsageRecord{AccountID: v.acct, RequestID: fmt.Sprintf("req-%08d", seq), APIKeyID: v.keys[i%3],
							Model: []string{"service-flint", "service-sonnet"}[i%2], Route: "/v1/chat/completions", Provider: "sim",
							UpstreamModel: "expert-1", InputTokens: 1200, OutputTokens: 300, CostMicros: 1_000, Status: "completed",
							StartedAt: now, FinishedAt: now}
					}
					began := time.Now()
					if res, err := v.f.st.WriteUsage(v.f.ctx, holder, batch); err != nil || res.Written != batchSize {
						b.Fatalf("%+v, %v", res, err)
					}
					v.timing = append(v.timing, float64(time.Since(began).Microseconds())/batchSize)
				}
			}
		}
	}
	for _, v := range variants {
		slices.Sort(v.timing)
		b.ReportMetric(v.timing[len(v.timing)/2], "µs/record:"+v.name)
		b.Logf("%s: median %.1f µs/record, quartiles %.1f–%.1f, over %d batches", v.name, v.timing[len(v.timing)/2],
			v.timing[len(v.timing)/4], v.timing[len(v.timing)*3/4], len(v.timing))
	}
}
