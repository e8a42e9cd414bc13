package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

// TestUsagePartitionMigrationConvertsRows: migration 0014 converts a usage_records table that
// has rows (over fourteen months, one a year back) into the partitioned table in place: every
// row is kept with its id in its month's partition, the rollup is unchanged, new records take
// ids after the old ones (and a trace id), a record of a month without a partition goes to the
// default partition, a later migration can add a column, and the old uniqueness of a request
// still holds through the ledger: writing an old request again bills nothing.
func TestUsagePartitionMigrationConvertsRows(t *testing.T) {
	ctx := context.Background()
	s := migratedBefore(t, "0014")
	var account string
	if err := s.pool.QueryRow(ctx, `INSERT INTO accounts (name, balance_micros) VALUES ('old', 1000000000) RETURNING id`).Scan(&account); err != nil {
		t.Fatal(err)
	}
	// 420 rows, one every 1,000 minutes back from now (about 9.7 months), and 3 a year back,
	// each with its ledger entry as the writer makes them.
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO usage_records (account_id, request_id, model, route, provider, upstream_model,
			input_tokens, output_tokens, cost_micros, status, started_at, finished_at)
		SELECT $1, 'old-' || g, 'm', '/v1/messages', 'p', 'u', 10, 5, g, 'ok',
			CASE WHEN g > 420 THEN now() - interval '400 days' ELSE now() - g * interval '1000 minutes' END, now()
		FROM generate_series(1, 423) g`, account); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO credit_ledger (account_id, amount_micros, balance_after_micros, reason, idempotency_key, note)
		SELECT account_id, -cost_micros, 1000000000 - SUM(cost_micros) OVER (ORDER BY id), 'usage', 'usage:' || request_id, ''
		FROM usage_records ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	snapshot := func(q string) string {
		var out string
		if err := s.pool.QueryRow(ctx, q).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	const rowsQ = `SELECT string_agg(id || ':' || request_id || ':' || cost_micros || ':' || started_at, ',' ORDER BY id) FROM usage_records`
	const dailyQ = `SELECT string_agg(day || ':' || requests || ':' || cost_micros, ',' ORDER BY day) FROM usage_daily`
	rowsBefore, dailyBefore := snapshot(rowsQ), snapshot(dailyQ)

	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(rowsQ); got != rowsBefore {
		t.Errorf("the rows changed:\nbefore %s\nafter  %s", rowsBefore, got)
	}
	if got := snapshot(dailyQ); got != dailyBefore {
		t.Errorf("usage_daily changed:\nbefore %s\nafter  %s", dailyBefore, got)
	}
	var kind string
	var partitions, inDefault, misplaced int
	if err := s.pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE oid = 'usage_records'::regclass`).Scan(&kind); err != nil || kind != "p" {
		t.Fatalf("usage_records is of kind %q (%v), want a partitioned table", kind, err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM usage_partition_months()`).Scan(&partitions); err != nil || partitions < 13 {
		t.Errorf("%d monthly partitions (%v), want at least the rows' 12 and the months ahead", partitions, err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM usage_records_default`).Scan(&inDefault); err != nil || inDefault != 0 {
		t.Errorf("%d rows in the default partition (%v)", inDefault, err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM usage_records
		WHERE tableoid::regclass::text <> usage_partition_name(date_trunc('month', started_at AT TIME ZONE 'UTC')::date)`).Scan(&misplaced); err != nil || misplaced != 0 {
		t.Errorf("%d rows outside their month's partition (%v)", misplaced, err)
	}

	acct := mustUUID(t, account)
	now := time.Now()
	trace := [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	res, err := s.WriteUsage(ctx, "p", []UsageRecord{
		{AccountID: acct, RequestID: "new-1", Model: "m", Route: "/v1/messages", Status: "ok", StartedAt: now, FinishedAt: now, CostMicros: 7, TraceID: trace},
		// Billed before the migration: skipped although its start time differs.
		{AccountID: acct, RequestID: "old-5", Model: "m", Route: "/v1/messages", Status: "ok", StartedAt: now, FinishedAt: now, CostMicros: 9},
		// Far in the future: no partition, the default one takes it.
		{AccountID: acct, RequestID: "new-2", Model: "m", Route: "/v1/messages", Status: "ok", StartedAt: now.AddDate(3, 0, 0), FinishedAt: now.AddDate(3, 0, 0), CostMicros: 1},
	})
	if err != nil || res.Written != 2 || res.Skipped != 1 {
		t.Fatalf("writing after the migration: %+v, %v", res, err)
	}
	recs, err := s.UsageRecords(ctx, acct, 2)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]UsageRecord{}
	for _, r := range recs {
		byID[r.RequestID] = r
	}
	if r := byID["new-1"]; r.TraceID != trace {
		t.Errorf("the new record's trace id reads back as %x", r.TraceID)
	}
	var newID, maxOld int64
	if err := s.pool.QueryRow(ctx, `SELECT id FROM usage_records WHERE request_id = 'new-1'`).Scan(&newID); err != nil {
		t.Fatal(err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT max(id) FROM usage_records WHERE request_id LIKE 'old-%'`).Scan(&maxOld); err != nil {
		t.Fatal(err)
	}
	if newID <= maxOld {
		t.Errorf("a new record took id %d, not after the old rows' %d", newID, maxOld)
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM usage_records_default`).Scan(&inDefault); err != nil || inDefault != 1 {
		t.Errorf("%d rows in the default partition (%v), want the far future one", inDefault, err)
	}
	if _, err := s.pool.Exec(ctx, `ALTER TABLE usage_records ADD COLUMN later_column text`); err != nil {
		t.Errorf("a later migration's ADD COLUMN: %v", err)
	}
}

// TestUsagePartitionsAheadConcurrently: replicas making the same months' partitions at once
// make each exactly once, and making them again makes none.
func TestUsagePartitionsAheadConcurrently(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.ConnString(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	made := make([]int, 8)
	for i := range made {
		wg.Go(func() {
			for m := 0; m < 6; m++ {
				var ok bool
				if err := s.pool.QueryRow(ctx, `SELECT usage_partition_create((date_trunc('month', now()) + make_interval(months => 10 + $1))::date)`, m).Scan(&ok); err != nil {
					t.Error(err)
				}
				if ok {
					made[i]++
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range made {
		total += n
	}
	if total != 6 {
		t.Errorf("%d partitions made by 8 concurrent callers for 6 months, want 6", total)
	}
}
