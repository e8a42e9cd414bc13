package usageview_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usageview"
)

// TestDailySpend stacks five days of spend in New York (across the switch to daylight saving
// time) by model and by key: each request counts on its local day, days without spend are
// zeros, requests just outside the days and another account's requests do not count, keys
// are labelled by name and prefix, and MaxGroups folds the cheapest groups into one.
func TestDailySpend(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	now := time.Date(2025, 3, 12, 15, 0, 0, 0, time.UTC)
	f := newFixture(t, now)
	a, b := f.account("a"), f.account("b")
	k1, k2 := f.key(a, "alpha"), f.key(a, "beta")
	rec := func(acct uuid.UUID, at string, model string, key uuid.UUID, cost int64) store.UsageRecord {
		start, err := time.Parse(time.RFC3339, at)
		if err != nil {
			t.Fatal(err)
		}
		return store.UsageRecord{AccountID: acct, APIKeyID: key, Model: model, Route: "/v1/messages", Provider: "sim",
			UpstreamModel: "e", CostMicros: cost, Status: "completed", StartedAt: start}
	}
	f.write(
		rec(a, "2025-03-08T04:30:00Z", "m-x", k1, 1000),       // 2025-03-07 23:30 EST: before the first day
		rec(a, "2025-03-09T04:30:00Z", "m-a", k1, 100),        // 2025-03-08 23:30 EST
		rec(a, "2025-03-09T05:30:00Z", "m-b", uuid.Nil, 200),  // 2025-03-09 00:30 EST
		rec(a, "2025-03-10T16:00:00Z", "m-a", k2, 300),        // 2025-03-10 12:00 EDT
		rec(a, "2025-03-12T14:00:00Z", "m-a", k1, 50),         // 2025-03-12 10:00 EDT
		rec(a, "2025-03-13T04:30:00Z", "m-a", k1, 5000),       // 2025-03-13 00:30 EDT: after the last day
		rec(b, "2025-03-10T16:00:00Z", "m-a", uuid.Nil, 7777), // another account
	)
	days := func(d usageview.Daily) []string {
		var out []string
		for _, day := range d.Days {
			out = append(out, day.Format("2006-01-02 15:04 MST"))
		}
		return out
	}
	wantDays := []string{"2025-03-08 00:00 EST", "2025-03-09 00:00 EST", "2025-03-10 00:00 EDT", "2025-03-11 00:00 EDT", "2025-03-12 00:00 EDT"}

	byModel, err := f.svc.DailySpend(f.ctx, a, usageview.LastDays(5, now, ny, usageview.GroupByModel))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(days(byModel), wantDays) {
		t.Fatalf("days %v, want %v", days(byModel), wantDays)
	}
	type group struct {
		label  string
		micros []int64
		total  int64
	}
	groups := func(d usageview.Daily) []group {
		var out []group
		for _, g := range d.Groups {
			out = append(out, group{g.Label, g.Micros, g.TotalMicros})
		}
		return out
	}
	same := func(got, want []group) bool {
		return slices.EqualFunc(got, want, func(a, b group) bool {
			return a.label == b.label && a.total == b.total && slices.Equal(a.micros, b.micros)
		})
	}
	want := []group{{"m-a", []int64{100, 0, 300, 0, 50}, 450}, {"m-b", []int64{0, 200, 0, 0, 0}, 200}}
	if got := groups(byModel); !same(got, want) {
		t.Errorf("by model %+v, want %+v", got, want)
	}
	if !slices.Equal(byModel.DayMicros, []int64{100, 200, 300, 0, 50}) || byModel.TotalMicros != 650 || byModel.Requests != 4 {
		t.Errorf("day totals %v, total %d over %d requests", byModel.DayMicros, byModel.TotalMicros, byModel.Requests)
	}

	byKey, err := f.svc.DailySpend(f.ctx, a, usageview.LastDays(5, now, ny, usageview.GroupByKey))
	if err != nil {
		t.Fatal(err)
	}
	want = []group{{"beta (tgk_beta…)", []int64{0, 0, 300, 0, 0}, 300}, {"no key", []int64{0, 200, 0, 0, 0}, 200},
		{"alpha (tgk_alph…)", []int64{100, 0, 0, 0, 50}, 150}}
	if got := groups(byKey); !same(got, want) {
		t.Errorf("by key %+v, want %+v", got, want)
	}
	if byKey.Groups[0].KeyID != k2 || byKey.Groups[0].Key != k2.String() || byKey.Groups[1].KeyID != uuid.Nil {
		t.Errorf("key ids %+v", byKey.Groups)
	}

	q := usageview.LastDays(5, now, ny, usageview.GroupByKey)
	q.MaxGroups = 2
	folded, err := f.svc.DailySpend(f.ctx, a, q)
	if err != nil {
		t.Fatal(err)
	}
	want = []group{{"beta (tgk_beta…)", []int64{0, 0, 300, 0, 0}, 300}, {"2 others", []int64{100, 200, 0, 0, 50}, 350}}
	if got := groups(folded); !same(got, want) || !folded.Groups[1].Other {
		t.Errorf("folded %+v, want %+v", got, want)
	}

	// UTC days come from the rollup (usage_daily); the same requests, other days.
	utc, err := f.svc.DailySpend(f.ctx, a, usageview.LastDays(5, now, time.UTC, usageview.GroupByModel))
	if err != nil {
		t.Fatal(err)
	}
	want = []group{{"m-x", []int64{1000, 0, 0, 0, 0}, 1000}, {"m-a", []int64{0, 100, 300, 0, 50}, 450}, {"m-b", []int64{0, 200, 0, 0, 0}, 200}}
	if got := groups(utc); !same(got, want) || utc.Days[0] != time.Date(2025, 3, 8, 0, 0, 0, 0, time.UTC) {
		t.Errorf("UTC by model %+v, want %+v", got, want)
	}
	utcKeys, err := f.svc.DailySpend(f.ctx, a, usageview.LastDays(5, now, time.UTC, usageview.GroupByKey))
	if err != nil {
		t.Fatal(err)
	}
	want = []group{{"alpha (tgk_alph…)", []int64{1000, 100, 0, 0, 50}, 1150}, {"beta (tgk_beta…)", []int64{0, 0, 300, 0, 0}, 300},
		{"no key", []int64{0, 200, 0, 0, 0}, 200}}
	if got := groups(utcKeys); !same(got, want) {
		t.Errorf("UTC by key %+v, want %+v", got, want)
	}

	// The other account sees only its own.
	other, err := f.svc.DailySpend(f.ctx, b, usageview.LastDays(5, now, ny, usageview.GroupByModel))
	if err != nil {
		t.Fatal(err)
	}
	if other.TotalMicros != 7777 || len(other.Groups) != 1 {
		t.Errorf("account b: %+v", other)
	}
	if _, err := f.svc.DailySpend(f.ctx, a, usageview.DailyQuery{From: now.AddDate(-2, 0, 0), To: now, GroupBy: usageview.GroupByModel}); err == nil {
		t.Error("two years at once were accepted")
	}
	if _, err := f.svc.DailySpend(f.ctx, a, usageview.DailyQuery{From: now, To: now.AddDate(0, 0, 1), GroupBy: "route"}); err == nil {
		t.Error("an unknown grouping was accepted")
	}
}

// TestSummary: the burn rate is the spend of the last seven UTC days (today so far included)
// over the time they span, older spend does not count, the days left are the balance over it,
// and an account without recent spend says so.
func TestSummary(t *testing.T) {
	now := time.Date(2025, 5, 20, 12, 0, 0, 0, time.UTC)
	f := newFixture(t, now)
	a, idle := f.account("a"), f.account("idle")
	rec := func(ago time.Duration, cost int64) store.UsageRecord {
		return store.UsageRecord{AccountID: a, Model: "m", Route: "/v1/messages", Provider: "sim", UpstreamModel: "e",
			CostMicros: cost, Status: "completed", StartedAt: now.Add(-ago)}
	}
	f.write(rec(time.Hour, 3000), rec(6*24*time.Hour, 4000), rec(8*24*time.Hour, 100_000))
	s, err := f.svc.Summary(f.ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	const granted = 1 << 40
	// The window starts at the UTC midnight six days before today's: 6.5 days before now.
	if s.BalanceMicros != granted-107_000 || s.SpentMicros != 7000 || s.Requests != 2 || s.PerDayMicros() != 1076 ||
		s.NoRecentSpend || !s.Since.Equal(time.Date(2025, 5, 14, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("summary %+v (per day %d)", s, s.PerDayMicros())
	}
	if want := float64(granted-107_000) / (7000 / 6.5); s.DaysLeft != want {
		t.Fatalf("days left %v, want %v", s.DaysLeft, want)
	}
	s, err = f.svc.Summary(f.ctx, idle)
	if err != nil {
		t.Fatal(err)
	}
	if !s.NoRecentSpend || s.DaysLeft != 0 || s.BalanceMicros != granted {
		t.Fatalf("idle account: %+v", s)
	}
	if _, err := f.svc.Summary(f.ctx, uuid.New()); !errors.Is(err, usageview.ErrNotFound) {
		t.Fatalf("unknown account: %v", err)
	}
}

// TestDailyRollupMatchesTheRecords: usage_daily, kept by the trigger in the usage writer's
// transaction, is at every moment the sum of usage_records per UTC day, model and key: after
// concurrent writers on two accounts, a batch written twice (its records skipped the second
// time) and records without a key.
func TestDailyRollupMatchesTheRecords(t *testing.T) {
	now := time.Date(2025, 5, 20, 12, 0, 0, 0, time.UTC)
	f := newFixture(t, now)
	a, b := f.account("a"), f.account("b")
	ka, kb := f.key(a, "alpha"), f.key(b, "beta")
	batch := func(w, n int) []store.UsageRecord {
		var out []store.UsageRecord
		for i := range 40 {
			acct, key := a, ka
			if i%2 == 1 {
				acct, key = b, kb
			}
			if i%5 == 0 {
				key = uuid.Nil
			}
			at := now.Add(-time.Duration(i*w+n) * 97 * time.Minute)
			out = append(out, store.UsageRecord{AccountID: acct, RequestID: fmt.Sprintf("w%d-%d-%d", w, n, i), APIKeyID: key,
				Model: []string{"m1", "m2", "m3"}[i%3], Route: "/r", Provider: "p", UpstreamModel: "e",
				CostMicros: int64(i*7 + w), Status: "completed", StartedAt: at, FinishedAt: at.Add(time.Second)})
		}
		return out
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() { // waited for below
			defer wg.Done()
			for n := range 10 {
				if _, err := f.st.WriteUsage(f.ctx, fmt.Sprintf("writer-%d", w), batch(w, n)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	res, err := f.st.WriteUsage(f.ctx, "writer-0", batch(0, 0))
	if err != nil || res.Written != 0 {
		t.Fatalf("the batch again: %+v, %v", res, err)
	}
	var diff int
	if err := f.pool.QueryRow(f.ctx, `
		WITH records AS (
			SELECT account_id, (started_at AT TIME ZONE 'UTC')::date AS day, model,
			       COALESCE(api_key_id, '00000000-0000-0000-0000-000000000000'::uuid) AS api_key_id,
			       count(*)::bigint AS requests, sum(cost_micros)::bigint AS cost_micros
			FROM usage_records GROUP BY 1, 2, 3, 4)
		SELECT count(*) FROM (
			(SELECT * FROM records EXCEPT SELECT account_id, day, model, api_key_id, requests, cost_micros FROM usage_daily)
			UNION ALL
			(SELECT account_id, day, model, api_key_id, requests, cost_micros FROM usage_daily EXCEPT SELECT * FROM records)) d`).Scan(&diff); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM usage_daily`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if diff != 0 || rows < 10 {
		t.Fatalf("usage_daily differs from usage_records in %d rows (of %d)", diff, rows)
	}
}

// TestKeyLabelShowsTheNameAsItself: a key's name is a tenant's text; in a label beside the key's
// prefix its control and bidirectional characters are written as \u escapes, so that a name
// made before names were checked cannot reverse the prefix shown after it ("ci ‮" showed
// "ci (6tGs…nxQEsgoJ_kgt)" for tgk_JogsEQxn…sGt6).
func TestKeyLabelShowsTheNameAsItself(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{usageview.KeyLabel("ci \u202e", "tgk_Jogs"), `ci \u202e (tgk_Jogs…)`},
		{usageview.KeyLabelLastFour("ci \u202e", "tgk_Jogs", "sGt6"), `ci \u202e (tgk_Jogs…sGt6)`},
		{usageview.KeyLabel("x\x1b[31m", ""), `x\u001b[31m`},
		{usageview.KeyLabel("ci", "tgk_Jogs"), "ci (tgk_Jogs…)"},
	} {
		if c.got != c.want {
			t.Errorf("label %q, want %q", c.got, c.want)
		}
	}
}
