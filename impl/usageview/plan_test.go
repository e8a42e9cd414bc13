package usageview_test

import (
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/usageview"
)

// TestQueryPlansUseTheIndexes loads 45,000 rows (30,000 of one account) and shows, with
// EXPLAIN ANALYZE of exactly what each call sent, that the request log's pages (first, deep,
// filtered by key, model, route and status, as the generic plan of a prepared statement and as
// a custom plan) read migration 0009's indexes (one per monthly partition since 0014) (a generic plan in their order, with no sort) and never scan
// usage_records whole, that the daily chart and the burn rate read the rollup usage_daily only,
// and that a statement's lines find their usage records through the unique index of
// (account_id, request_id, started_at), one lookup per line in the partitions that run-time
// pruning keeps.
func TestQueryPlansUseTheIndexes(t *testing.T) {
	end := time.Date(2025, 6, 30, 12, 0, 0, 0, time.UTC)
	f := newFixture(t, end)
	main, other := f.bareAccount("main"), f.bareAccount("other")
	keys := f.bulkLoad(bulkSpec{Main: main, Other: other, Rows: 45_000, Keys: 20, End: end, Span: 365 * 24 * time.Hour,
		Priced: true, Ledger: true})
	ts := f.traced()

	deep, err := ts.svc.RequestLog(f.ctx, main, usageview.Filter{}, usageview.Cursor{}, 50)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		deep, err = ts.svc.RequestLog(f.ctx, main, usageview.Filter{}, deep.Next, 500)
		if err != nil {
			t.Fatal(err)
		}
	}
	// usage_records is partitioned by month (migration 0014): each partition has its own copy
	// of the table's indexes, named after the partition and the columns.
	const mainIdx, keyIdx, modelIdx = "_account_id_started_at_id_idx", "_account_id_api_key_id_started_at_id_idx", "_account_id_model_started_at_id_idx"
	const rollup, recordByRequest = "usage_daily", "_account_id_request_id_started_at_key"
	cases := []struct {
		name  string
		run   func() error
		index string
		only  bool // the rollup, never usage_records
		stmt  int  // which of the call's statements to explain
	}{
		{"first page", func() error {
			_, err := ts.svc.RequestLog(f.ctx, main, usageview.Filter{}, usageview.Cursor{}, 50)
			return err
		}, mainIdx, false, 0},
		{"deep page", func() error {
			_, err := ts.svc.RequestLog(f.ctx, main, usageview.Filter{}, deep.Next, 50)
			return err
		}, mainIdx, false, 0},
		{"by key", func() error {
			_, err := ts.svc.RequestLog(f.ctx, main, usageview.Filter{KeyID: keys[3]}, usageview.Cursor{}, 50)
			return err
		}, keyIdx, false, 0},
		{"by rare model", func() error {
			_, err := ts.svc.RequestLog(f.ctx, main, usageview.Filter{Model: rareModel}, usageview.Cursor{}, 50)
			return err
		}, modelIdx, false, 0},
		{"by status and route in a week", func() error {
			_, err := ts.svc.RequestLog(f.ctx, main, usageview.Filter{Status: "failed", Route: "/v1/messages",
				From: end.AddDate(0, 0, -14), To: end.AddDate(0, 0, -7)}, usageview.Cursor{}, 50)
			return err
		}, mainIdx, false, 0},
		{"daily by model", func() error {
			_, err := ts.svc.DailySpend(f.ctx, main, usageview.LastDays(30, end, time.UTC, usageview.GroupByModel))
			return err
		}, rollup, true, 0},
		{"daily by key", func() error {
			_, err := ts.svc.DailySpend(f.ctx, main, usageview.LastDays(30, end, time.UTC, usageview.GroupByKey))
			return err
		}, rollup, true, 0},
		{"burn rate", func() error {
			_, err := ts.svc.BurnRate(f.ctx, main)
			return err
		}, rollup, true, 0},
		{"statement lines", func() error {
			_, err := ts.svc.WriteStatement(f.ctx, main, end.AddDate(0, 0, -7), end, testSeal, io.Discard)
			return err
		}, recordByRequest, false, 1},
	}
	// A sort of the rows (a Merge Append of the partitions' index scans in order has a sort
	// key too, and sorts nothing).
	sortNode := regexp.MustCompile(`(?m)^\s*(-> +)?Sort +\(`)
	for _, c := range cases {
		ts.last = nil
		if err := c.run(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		q := ts.last[c.stmt]
		for _, generic := range []bool{false, true} {
			plan := explain(f.ctx, t, f.pool, q, generic)
			// As a generic plan (which knows no selectivity), a log page reads its rows in the
			// index's order and stops: no sort of all the rows that match. A custom plan may sort
			// the few rows it knows a rare filter finds.
			sorted := generic && !c.only && sortNode.MatchString(plan)
			if wholeScan(plan) || !strings.Contains(plan, c.index) || sorted ||
				(c.only && strings.Contains(plan, "usage_records")) {
				t.Errorf("%s (generic plan %v): want %s (rollup only: %v), got\n%s", c.name, generic, c.index, c.only, plan)
			} else if testing.Verbose() {
				t.Logf("%s (generic plan %v):\n%s", c.name, generic, plan)
			}
		}
	}
}

// wholeScan reports whether a plan scans a partition of usage_records whole and filters away
// more than a thousand rows: what the indexes are for. (A sequential scan of a partition too
// small for an index to pay, such as the first few days of a span, is the planner's right
// choice.)
func wholeScan(plan string) bool {
	removed := regexp.MustCompile(`Rows Removed by Filter: (\d+)`)
	lines := strings.Split(plan, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "Seq Scan on usage_records") {
			continue
		}
		for _, next := range lines[i+1:] {
			if strings.Contains(next, "->") {
				break
			}
			if m := removed.FindStringSubmatch(next); m != nil && len(m[1]) >= 4 {
				return true
			}
		}
		if strings.Contains(l, "Seq Scan on usage_records ") {
			return true // the unpartitioned table
		}
	}
	return false
}
