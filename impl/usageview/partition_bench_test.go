package usageview_test

import (
	"io"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usageview"
)

// BenchmarkUsageAtScale loads -usage-rows usage rows over 365 days (and their ledger entries)
// with generate_series, then measures the usage writer (batches
// of 500 records, as the gateway's writer sends them), the request log's first page and the
// 30-day chart (UTC, from the rollup, and in another time zone, from the rows); on the
// partitioned table it also archives the oldest whole month to Parquet and reads a page and a
// day's CSV of it back through DuckDB. It logs the bytes per row in PostgreSQL (table, TOAST
// and indexes) and in Parquet. Not part of make test; docs/speed.md has the numbers and the
// commands, e.g.
//
//	go test -run '^$' -bench UsageAtScale -benchtime 20x -usage-rows 10000000 ./impl/usageview
//
// The same file run on the code before migration 0014 measures the unpartitioned table (with
// benchArchived a no-op there).
func BenchmarkUsageAtScale(b *testing.B) {
	end := time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC)
	f := newFixture(b, end)
	var partitioned bool
	if err := f.pool.QueryRow(f.ctx, `SELECT relkind = 'p' FROM pg_class WHERE oid = 'usage_records'::regclass`).Scan(&partitioned); err != nil {
		b.Fatal(err)
	}
	layout := map[bool]string{true: "partitioned", false: "unpartitioned"}[partitioned]
	main, other := f.bareAccount("main"), f.bareAccount("other")
	began := time.Now()
	f.bulkLoad(bulkSpec{Main: main, Other: other, Rows: *scaleRows, Keys: 50, End: end, Span: 365 * 24 * time.Hour,
		Priced: true, Ledger: true})
	b.Logf("%s: loaded %d rows and their ledger entries in %s", layout, *scaleRows, time.Since(began).Round(time.Second))
	var size, rows int64
	if err := f.pool.QueryRow(f.ctx, `SELECT CASE WHEN relkind = 'p' THEN (SELECT sum(pg_total_relation_size(relid))::bigint FROM pg_partition_tree('usage_records'))
		ELSE pg_total_relation_size(oid) END FROM pg_class WHERE oid = 'usage_records'::regclass`).Scan(&size); err != nil {
		b.Fatal(err)
	}
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM usage_records`).Scan(&rows); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: usage_records (table, TOAST, indexes) %d bytes for %d rows: %.1f bytes per row", layout, size, rows, float64(size)/float64(rows))

	n := 0
	b.Run("write/batch-500", func(b *testing.B) {
		records := 0
		start := time.Now()
		for b.Loop() {
			recs := make([]store.UsageRecord, 500)
			for i := range recs {
				n++
				at := end.Add(time.Duration(n) * time.Millisecond)
				acct := main
				if i%3 == 0 {
					acct = other
				}
				recs[i] = store.UsageRecord{AccountID: acct, RequestID: "bench-" + uuid.NewString(), Model: "service-flint",
					Route: "/v1/messages", Provider: "sim", UpstreamModel: "expert-1", Status: "ok",
					InputTokens: 1000, OutputTokens: 200, CostMicros: 1234, StartedAt: at, FinishedAt: at.Add(time.Second)}
			}
			res, err := f.st.WriteUsage(f.ctx, "bench", recs)
			if err != nil || res.Written != len(recs) {
				b.Fatalf("%+v %v", res, err)
			}
			records += len(recs)
		}
		b.ReportMetric(float64(records)/time.Since(start).Seconds(), "records/s")
	})
	oldMonth := time.Date(end.Year()-1, end.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	oldDay := oldMonth.AddDate(0, 0, 14)
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"log/first-page", func() error {
			_, err := f.svc.RequestLog(f.ctx, main, usageview.Filter{}, usageview.Cursor{}, 50)
			return err
		}},
		{"daily/30d-utc", func() error {
			_, err := f.svc.DailySpend(f.ctx, main, usageview.LastDays(30, end, time.UTC, usageview.GroupByModel))
			return err
		}},
		{"daily/30d-new-york", func() error {
			ny, _ := time.LoadLocation("America/New_York")
			_, err := f.svc.DailySpend(f.ctx, main, usageview.LastDays(30, end, ny, usageview.GroupByModel))
			return err
		}},
		// The month BenchmarkUsageAtScale archives on the partitioned table, read from
		// PostgreSQL (benchArchived reads it from its archive).
		{"month-old/log-first-page", func() error {
			_, err := f.svc.RequestLog(f.ctx, main, usageview.Filter{From: oldMonth, To: oldMonth.AddDate(0, 1, 0)}, usageview.Cursor{}, 50)
			return err
		}},
		{"month-old/csv-one-day", func() error {
			_, err := f.svc.ExportCSV(f.ctx, main, usageview.Filter{From: oldDay, To: oldDay.AddDate(0, 0, 1)}, io.Discard)
			return err
		}},
		{"month-old/statement-one-day", func() error {
			_, err := f.svc.WriteStatement(f.ctx, main, oldDay, oldDay.AddDate(0, 0, 1), testSeal, io.Discard)
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	if partitioned {
		benchArchived(b, f, main, end)
	}
}
