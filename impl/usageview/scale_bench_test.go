package usageview_test

import (
	"bytes"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/usageview"
)

var scaleRows = flag.Int("usage-rows", 3_000_000, "rows BenchmarkUsagePageAtScale loads: two in three for the measured account")

// BenchmarkUsagePageAtScale loads -usage-rows usage rows (two million of one account by
// default, interleaved with a million of another) over 180 days with generate_series, then
// times each of the Usage page's calls and logs EXPLAIN (ANALYZE, BUFFERS) of what each sent,
// as the custom and as the generic plan. It is not part of make test (which runs no
// benchmarks); the numbers and plans are in docs/usage-page.md. Run it with
//
//	go test -run '^$' -bench UsagePageAtScale -benchtime 20x -v ./impl/usageview
func BenchmarkUsagePageAtScale(b *testing.B) {
	end := time.Date(2025, 6, 30, 12, 0, 0, 0, time.UTC)
	f := newFixture(b, end)
	main, other := f.bareAccount("main"), f.bareAccount("other")
	began := time.Now()
	keys := f.bulkLoad(bulkSpec{Main: main, Other: other, Rows: *scaleRows, Keys: 50, End: end, Span: 180 * 24 * time.Hour,
		Priced: true, Ledger: true})
	var count int64
	var size string
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*), pg_size_pretty(pg_total_relation_size('usage_records')) FROM usage_records WHERE account_id = $1`, main).Scan(&count, &size); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d rows (%d of the measured account; table and indexes %s) in %s", *scaleRows, count, size, time.Since(began).Round(time.Second))
	indexes, err := f.pool.Query(f.ctx, `SELECT indexrelname || ' ' || pg_size_pretty(pg_relation_size(indexrelid)) FROM pg_stat_user_indexes WHERE relname = 'usage_records' ORDER BY 1`)
	if err != nil {
		b.Fatal(err)
	}
	for indexes.Next() {
		var s string
		if err := indexes.Scan(&s); err != nil {
			b.Fatal(err)
		}
		b.Log("index ", s)
	}
	indexes.Close()

	// A cursor a million rows deep (OFFSET only here, to find it).
	var deep usageview.Cursor
	if err := f.pool.QueryRow(f.ctx, `SELECT started_at, id FROM usage_records WHERE account_id = $1 ORDER BY started_at DESC, id DESC OFFSET $2 LIMIT 1`,
		main, count/2).Scan(&deep.StartedAt, &deep.ID); err != nil {
		b.Fatal(err)
	}
	ts := f.traced()
	cases := []struct {
		name string
		run  func(*usageview.Service) error
	}{
		{"log/first-page", func(s *usageview.Service) error {
			_, err := s.RequestLog(f.ctx, main, usageview.Filter{}, usageview.Cursor{}, 50)
			return err
		}},
		{"log/deep-page", func(s *usageview.Service) error {
			_, err := s.RequestLog(f.ctx, main, usageview.Filter{}, deep, 50)
			return err
		}},
		{"log/by-key", func(s *usageview.Service) error {
			_, err := s.RequestLog(f.ctx, main, usageview.Filter{KeyID: keys[7]}, usageview.Cursor{}, 50)
			return err
		}},
		{"log/by-key-deep", func(s *usageview.Service) error {
			_, err := s.RequestLog(f.ctx, main, usageview.Filter{KeyID: keys[7]}, deep, 50)
			return err
		}},
		{"log/by-rare-model", func(s *usageview.Service) error {
			_, err := s.RequestLog(f.ctx, main, usageview.Filter{Model: rareModel}, usageview.Cursor{}, 50)
			return err
		}},
		{"log/by-status-failed", func(s *usageview.Service) error {
			_, err := s.RequestLog(f.ctx, main, usageview.Filter{Status: "failed"}, usageview.Cursor{}, 50)
			return err
		}},
		{"log/by-route-status-week", func(s *usageview.Service) error {
			_, err := s.RequestLog(f.ctx, main, usageview.Filter{Route: "/v1/messages", Status: "failed",
				From: end.AddDate(0, 0, -60), To: end.AddDate(0, 0, -53)}, usageview.Cursor{}, 50)
			return err
		}},
		{"daily/30d-by-model", func(s *usageview.Service) error {
			_, err := s.DailySpend(f.ctx, main, usageview.LastDays(30, end, time.UTC, usageview.GroupByModel))
			return err
		}},
		{"daily/30d-by-key", func(s *usageview.Service) error {
			_, err := s.DailySpend(f.ctx, main, usageview.LastDays(30, end, time.UTC, usageview.GroupByKey))
			return err
		}},
		{"daily/90d-by-model", func(s *usageview.Service) error {
			_, err := s.DailySpend(f.ctx, main, usageview.LastDays(90, end, time.UTC, usageview.GroupByModel))
			return err
		}},
		{"summary", func(s *usageview.Service) error {
			_, err := s.Summary(f.ctx, main)
			return err
		}},
		{"csv/one-day", func(s *usageview.Service) error {
			_, err := s.ExportCSV(f.ctx, main, usageview.Filter{From: end.AddDate(0, 0, -1), To: end}, io.Discard)
			return err
		}},
		{"statement/one-day", func(s *usageview.Service) error {
			_, err := s.WriteStatement(f.ctx, main, end.AddDate(0, 0, -1), end, testSeal, io.Discard)
			return err
		}},
		{"statement/30-days", func(s *usageview.Service) error {
			_, err := s.WriteStatement(f.ctx, main, end.AddDate(0, 0, -30), end, testSeal, io.Discard)
			return err
		}},
	}
	for _, c := range cases {
		if c.name == "statement/one-day" {
			st, err := f.svc.WriteStatement(f.ctx, main, end.AddDate(0, 0, -1), end, testSeal, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("statement/one-day: %d lines", st.Lines)
		}
		if c.name == "csv/one-day" {
			var buf bytes.Buffer
			n, err := f.svc.ExportCSV(f.ctx, main, usageview.Filter{From: end.AddDate(0, 0, -1), To: end}, &buf)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("csv/one-day: %d rows, %d bytes", n, buf.Len())
		} else {
			ts.last = nil
			if err := c.run(ts.svc); err != nil {
				b.Fatal(err)
			}
			// The first statements of a call (a statement reads many pages alike).
			for _, q := range ts.last[:min(len(ts.last), 3)] {
				b.Logf("%s, custom plan:\n%s", c.name, explain(f.ctx, b, f.pool, q, false))
				b.Logf("%s, generic plan:\n%s", c.name, explain(f.ctx, b, f.pool, q, true))
			}
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.run(f.svc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
