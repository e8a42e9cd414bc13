package usagearchive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/sealedid"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usageview"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// world is a migrated database with two accounts' usage over four months, the archiver and the
// read model (which reads archives from the same directory storage).
type world struct {
	ctx     context.Context
	st      *store.Store
	pool    *pgxpool.Pool
	storage *dataset.DirStorage
	views   *usageview.Service
	arch    *Archiver
	now     time.Time
	a, b    uuid.UUID
	keyA    uuid.UUID
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	url := pgtest.ConnString(t)
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storage, err := dataset.NewDirStorage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{ctx: ctx, st: st, pool: st.Pool(), storage: storage, now: time.Now().UTC()}
	w.views = usageview.New(st.Pool(), usageview.Options{Archive: storage})
	w.arch = New(Options{Usage: w.views, Storage: storage, RetentionMonths: 1, BatchRows: 7, TempDir: t.TempDir(),
		Now: func() time.Time { return w.now }})
	for i, name := range []string{"acme", "globex"} {
		acct, err := st.CreateAccount(ctx, name, "default")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Append(ctx, store.LedgerChange{AccountID: acct.ID, AmountMicros: 1 << 40, Reason: store.ReasonGrant,
			IdempotencyKey: "grant"}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			w.a = acct.ID
		} else {
			w.b = acct.ID
		}
	}
	hash := make([]byte, 32)
	hash[0] = 1
	k, err := st.CreateAPIKey(ctx, store.NewAPIKey{AccountID: w.a, Name: "ci", Hash: hash, DisplayPrefix: "tgk_ci"})
	if err != nil {
		t.Fatal(err)
	}
	w.keyA = k.ID
	return w
}

// writeMonths writes n records per account in each of the three months before now's and in
// now's month: priced (and fitted to their credit) and unpriced, with and without a key,
// hosted calls and a trace id.
func (w *world) writeMonths(t *testing.T, n int) {
	t.Helper()
	p := price.Price{Rates: price.Rates{Input: 3_000_000, CacheRead: 300_000, CacheWrite5m: 3_750_000, CacheWrite1h: 6_000_000, Output: 15_000_000}}
	this := monthOf(w.now)
	var recs []store.UsageRecord
	for m := -3; m <= 0; m++ {
		for i := range n {
			for _, acct := range []uuid.UUID{w.a, w.b} {
				start := this.AddDate(0, m, 0).Add(time.Duration(i)*37*time.Hour + time.Duration(i)*time.Microsecond)
				if m == 0 {
					start = this.Add(time.Duration(i) * time.Minute)
				}
				r := store.UsageRecord{AccountID: acct, RequestID: fmt.Sprintf("r-%s-%d-%d", acct.String()[:4], m, i),
					Model: []string{"service-flint", "service-sonnet"}[i%2], Route: "/v1/messages", Provider: "sim",
					UpstreamModel: "expert-1", Status: []string{"ok", "upstream_error"}[min(i%5, 1)],
					StartedAt: start, FinishedAt: start.Add(1234 * time.Millisecond)}
				if acct == w.a && i%2 == 0 {
					r.APIKeyID = w.keyA
				}
				if i%3 == 0 {
					tok := price.Tokens{Uncached: 1000 + int64(i), CacheRead: 200, CacheWrite5m: 50, Output: 300 + int64(i), Reasoning: 10}
					r.Price, r.Costs = &p, price.Cost(tok, p)
					r.InputTokens, r.OutputTokens = tok.Input(), tok.Output
					r.CacheReadTokens, r.CacheWrite5mTokens, r.ReasoningTokens = tok.CacheRead, tok.CacheWrite5m, tok.Reasoning
					r.CostMicros = r.Costs.Total()
					r.FittedOutputTokens = 1024 + int64(i) // a request fitted to its credit
				} else {
					r.InputTokens, r.OutputTokens, r.CostMicros = 10+int64(i), 20, 1000+int64(i)
				}
				if i%4 == 1 {
					r.HostedCalls = map[string]int64{"web_search": 2}
				}
				if i%2 == 1 {
					r.TraceID = [16]byte{1, 2, 3, byte(i), 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, byte(m + 10)}
				}
				recs = append(recs, r)
			}
		}
	}
	res, err := w.st.WriteUsage(w.ctx, "archive-test", recs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != len(recs) {
		t.Fatalf("wrote %d of %d records", res.Written, len(recs))
	}
}

// reads is every read the archive must not change, for one account: the request log paged 4
// rows at a time (whole pages as values), filtered by model, by key and by status, its CSV
// export, and the statement of the whole span.
type reads struct {
	pages    [][]usageview.Request
	filtered [][]usageview.Request
	csv      []byte
	stmt     []byte
	daily    []usageview.Daily
}

func (w *world) read(t *testing.T, acct uuid.UUID) reads {
	t.Helper()
	var out reads
	after := usageview.Cursor{}
	for {
		p, err := w.views.RequestLog(w.ctx, acct, usageview.Filter{}, after, 4)
		if err != nil {
			t.Fatal(err)
		}
		out.pages = append(out.pages, normal(p.Requests))
		if p.Next.IsZero() {
			break
		}
		after = p.Next
	}
	from := monthOf(w.now).AddDate(0, -3, 10)
	for _, f := range []usageview.Filter{{Model: "service-flint"}, {KeyID: w.keyA}, {Status: "upstream_error", From: from},
		{From: from, To: monthOf(w.now).AddDate(0, -1, 3)}} {
		p, err := w.views.RequestLog(w.ctx, acct, f, usageview.Cursor{}, 500)
		if err != nil {
			t.Fatal(err)
		}
		out.filtered = append(out.filtered, normal(p.Requests))
	}
	var csv bytes.Buffer
	if _, err := w.views.ExportCSV(w.ctx, acct, usageview.Filter{}, &csv); err != nil {
		t.Fatal(err)
	}
	out.csv = csv.Bytes()
	var stmt bytes.Buffer
	if _, err := w.views.WriteStatement(w.ctx, acct, monthOf(w.now).AddDate(-1, 0, 0), w.now.Add(time.Hour), statementSeal, &stmt); err != nil {
		t.Fatal(err)
	}
	out.stmt = stmt.Bytes()
	// The chart of the four months, by model and by key, in UTC (the rollup) and in a zone
	// whose days the rows give (PostgreSQL's and the archives').
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for _, loc := range []*time.Location{time.UTC, ny} {
		for _, by := range []usageview.GroupBy{usageview.GroupByModel, usageview.GroupByKey} {
			d, err := w.views.DailySpend(w.ctx, acct, usageview.LastDays(130, w.now, loc, by))
			if err != nil {
				t.Fatal(err)
			}
			out.daily = append(out.daily, d)
		}
	}
	return out
}

// normal puts the requests' times in UTC (PostgreSQL's driver gives local times, DuckDB's UTC:
// the same instants) so that pages compare as values.
func normal(rs []usageview.Request) []usageview.Request {
	for i := range rs {
		rs[i].StartedAt, rs[i].FinishedAt = rs[i].StartedAt.UTC(), rs[i].FinishedAt.UTC()
	}
	return rs
}

func (w *world) same(t *testing.T, when string, want, got reads) {
	t.Helper()
	if !reflect.DeepEqual(want.pages, got.pages) {
		t.Errorf("%s: the request log's pages differ (%d pages before, %d after)", when, len(want.pages), len(got.pages))
	}
	if !reflect.DeepEqual(want.filtered, got.filtered) {
		t.Errorf("%s: the filtered request logs differ", when)
	}
	if !bytes.Equal(want.csv, got.csv) {
		t.Errorf("%s: the CSV export differs:\nbefore:\n%s\nafter:\n%s", when, want.csv, got.csv)
	}
	if !reflect.DeepEqual(want.daily, got.daily) {
		t.Errorf("%s: the daily spend differs", when)
	}
	if !bytes.Equal(want.stmt, got.stmt) {
		t.Errorf("%s: the statement differs:\nbefore:\n%s\nafter:\n%s", when, want.stmt, got.stmt)
	}
}

// TestArchiveKeepsEveryRead archives the two months past a one-month retention, stopping the
// archiver after each of its steps first (as a crash there would), and checks that the usage
// page's reads of both accounts (request log pages, filtered logs, CSV export, statement, the
// daily chart in UTC and in New York's days) are
// the same before, after each stop and after the archival, byte for byte for CSV and
// statements; that the months' partitions are gone and their objects hold exactly their rows;
// that a rerun does nothing; and that each account's archived reads hold its own rows only.
func TestArchiveKeepsEveryRead(t *testing.T) {
	w := newWorld(t)
	w.writeMonths(t, 9)
	beforeA, beforeB := w.read(t, w.a), w.read(t, w.b)
	if len(beforeA.csv) == 0 || bytes.Count(beforeA.csv, []byte("\n")) != 1+4*9 {
		t.Fatalf("account A's export has %d lines before archival", bytes.Count(beforeA.csv, []byte("\n")))
	}
	due, err := w.arch.DueMonths(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The migration made partitions from this month on: the past months' records went to the
	// default partition, and nothing is due. Making their partitions (as the conversion of an
	// old table does) moves them out of it, which changes no read.
	if len(due) != 0 {
		t.Fatalf("due before the past months have partitions: %v", due)
	}
	for m := -3; m < 0; m++ {
		if _, err := w.views.CreatePartition(w.ctx, monthOf(w.now).AddDate(0, m, 0)); err != nil {
			t.Fatal(err)
		}
	}
	w.same(t, "after moving rows out of the default partition", beforeA, w.read(t, w.a))
	if due, err = w.arch.DueMonths(w.ctx); err != nil || len(due) != 2 {
		t.Fatalf("due months: %v, %v (want the two before last month)", due, err)
	}

	for _, step := range []Step{StepWritten, StepStored, StepVerified} {
		stopAfter = func(s Step) bool { return s == step }
		err := w.arch.RunOnce(w.ctx)
		stopAfter = nil
		if !errors.Is(err, errStopped) {
			t.Fatalf("stopped after step %d: %v", step, err)
		}
		if got, _ := w.views.ArchivedMonths(w.ctx); len(got) != 0 {
			t.Fatalf("a month is archived after a stop at step %d: %v", step, got)
		}
		w.same(t, fmt.Sprintf("after a stop at step %d", step), beforeA, w.read(t, w.a))
	}

	if err := w.arch.RunOnce(w.ctx); err != nil {
		t.Fatal(err)
	}
	archived, err := w.views.ArchivedMonths(w.ctx)
	if err != nil || len(archived) != 2 {
		t.Fatalf("archived months: %v, %v", archived, err)
	}
	for i, m := range archived {
		if !m.Month.Equal(due[i]) || m.Records != 2*9 || m.ObjectKey != ObjectKey(due[i]) || m.ObjectBytes <= 0 {
			t.Errorf("archive %d: %+v", i, m)
		}
		if _, err := w.storage.Stat(w.ctx, m.ObjectKey); err != nil {
			t.Errorf("archive %d's object: %v", i, err)
		}
		if n, c, err := w.views.MonthTotals(w.ctx, m.Month, m.End()); err != nil || n != 0 || c != 0 {
			t.Errorf("PostgreSQL still has %d records (%d micro-units) of %s: %v", n, c, m.Month.Format("2006-01"), err)
		}
	}
	months, err := w.views.PartitionMonths(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range months {
		if m.Before(due[1].AddDate(0, 1, 0)) {
			t.Errorf("the partition of %s is still there", m.Format("2006-01"))
		}
	}
	afterA, afterB := w.read(t, w.a), w.read(t, w.b)
	w.same(t, "account A after archival", beforeA, afterA)
	w.same(t, "account B after archival", beforeB, afterB)
	if bytes.Contains(afterA.csv, []byte("r-"+w.b.String()[:4])) || bytes.Contains(afterB.csv, []byte("r-"+w.a.String()[:4])) {
		t.Error("an account's export holds the other account's requests")
	}
	// The archived rows keep their trace ids.
	traced := 0
	for _, p := range afterA.pages {
		for _, r := range p {
			if r.TraceID != ([16]byte{}) && r.StartedAt.Before(due[1].AddDate(0, 1, 0)) {
				traced++
			}
		}
	}
	if traced != 2*4 {
		t.Errorf("%d archived requests of account A have a trace id, want 8", traced)
	}
	if err := w.arch.RunOnce(w.ctx); err != nil {
		t.Fatalf("a second run: %v", err)
	}
	if got, _ := w.views.ArchivedMonths(w.ctx); len(got) != 2 {
		t.Errorf("a second run changed the archives: %v", got)
	}
	// A request of an archived month is still billed once: the ledger remembers it.
	dup := store.UsageRecord{AccountID: w.a, RequestID: fmt.Sprintf("r-%s-%d-%d", w.a.String()[:4], -3, 0), Model: "m",
		Route: "/v1/messages", Status: "ok", StartedAt: due[0].Add(time.Hour), FinishedAt: due[0].Add(2 * time.Hour), CostMicros: 5}
	if res, err := w.st.WriteUsage(w.ctx, "archive-test", []store.UsageRecord{dup}); err != nil || res.Written != 0 {
		t.Errorf("rewriting an archived request: %+v, %v", res, err)
	}
}

// statementSeal seals the ledger entries of the statements these tests write.
var statementSeal = func() *sealedid.Seal {
	s, err := sealedid.New(bytes.Repeat([]byte{5}, sealedid.KeySize))
	if err != nil {
		panic(err)
	}
	return s
}()
