package billing

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/usagespill"
)

// TestRecordRefusedAsDataIsSetAside: trial h7's D1. An upstream reported 9,223,372,036,854,775,807
// input tokens; the record's day total overflowed in the database (bigint out of range), the
// writer retried the batch as if the database were away, and no usage record of any account was
// written after it, across restarts. A batch the database refuses as data is now written in
// halves down to the record it refuses, which is set aside (logged, counted, not billed): the
// records before and after it, of this account and another, are billed.
func TestRecordRefusedAsDataIsSetAside(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	const granted = 10_000_000
	acct, other := newAccount(t, st, granted), newAccount(t, st, granted)
	var logs logSink
	m := New(st, Options{Logger: logs.logger(), FlushInterval: time.Hour, RetryMax: 50 * time.Millisecond})
	p := checkpointPrice
	for _, c := range []struct {
		acct  uuid.UUID
		id    string
		input int64
	}{{acct, "before", 1000}, {acct, "absurd", math.MaxInt64}, {other, "other", 1000}, {acct, "after", 1000}} {
		r, err := m.Reserve(ctx, c.acct, c.id, 100_000)
		if err != nil {
			t.Fatal(err)
		}
		r.SettleUsage(UsageRecord{Model: "m", Route: "/v1/messages", Tokens: price.Tokens{Uncached: c.input, Output: 5}, Price: &p, Status: "ok"})
	}
	if err := m.flushAll(ctx); err != nil {
		t.Fatalf("the writer stops at the refused record: %v", err)
	}
	if s := m.WriterStats(); s.SetAside != 1 || s.Backlog != 0 || s.Queued != 0 {
		t.Errorf("writer %+v: want one record set aside, nothing waiting", s)
	}
	if err := m.Close(ctx); err != nil { // returns the holds
		t.Fatal(err)
	}
	checkBilledOnce(t, st, acct, granted, map[string]int64{"before": streamCost(1000, 5), "after": streamCost(1000, 5)})
	checkBilledOnce(t, st, other, granted, map[string]int64{"other": streamCost(1000, 5)})
	if got := strings.Join(logs.all(), "\n"); !strings.Contains(got, "set aside") || !strings.Contains(got, "absurd") {
		t.Errorf("the set-aside record is not logged with its request:\n%s", got)
	}
}

// TestSplitBatchFailingAfterItsFirstHalfCountsItOnce: a batch that the database refuses as data
// is written in halves (TestRecordRefusedAsDataIsSetAside); when its first half is written (and
// its refused record set aside) and the second half's write then fails for another reason (the
// database goes away, a timeout), only what was not written waits in the backlog. The whole
// batch went there: its replay skipped the records billed already (the ledger bills a request
// once), but took their costs off the account's pending costs a second time and set the refused
// record aside twice, so that the process saw more free credit in its hold than it had (the
// account's pending went below zero by the first half's cost, for good).
func TestSplitBatchFailingAfterItsFirstHalfCountsItOnce(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	const granted = 10_000_000
	acct, other := newAccount(t, st, granted), newAccount(t, st, granted)
	db, err := pgx.Connect(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	// PostgreSQL refuses "bad" as data (as an absurd count is refused), and fails the first
	// write of "other" as a database that goes away would (not as data).
	if _, err := db.Exec(ctx, `
		CREATE SEQUENCE usage_fail_once;
		CREATE FUNCTION usage_faults() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.request_id = 'bad' THEN
				RAISE EXCEPTION 'refused as data by the test' USING ERRCODE = '22003';
			END IF;
			IF NEW.request_id = 'other' AND nextval('usage_fail_once') = 1 THEN
				RAISE EXCEPTION 'a failure of the database, by the test' USING ERRCODE = '40001';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER usage_faults BEFORE INSERT ON usage_records FOR EACH ROW EXECUTE FUNCTION usage_faults()`); err != nil {
		t.Fatal(err)
	}
	m := New(st, Options{FlushInterval: time.Hour, RetryMax: 50 * time.Millisecond})
	p := checkpointPrice
	// One batch, halves [before, bad] and [other, after].
	for _, c := range []struct {
		acct uuid.UUID
		id   string
	}{{acct, "before"}, {acct, "bad"}, {other, "other"}, {acct, "after"}} {
		r, err := m.Reserve(ctx, c.acct, c.id, 100_000)
		if err != nil {
			t.Fatal(err)
		}
		r.SettleUsage(UsageRecord{Model: "m", Route: "/v1/messages", Tokens: price.Tokens{Uncached: 1000, Output: 5}, Price: &p, Status: "ok"})
	}
	if err := m.flushAll(ctx); err == nil {
		t.Fatal("the second half's write did not fail")
	}
	if s := m.WriterStats(); s.Backlog != 2 || s.SetAside != 1 {
		t.Errorf("after the failed write: writer %+v, want the two records not written in the backlog and one set aside", s)
	}
	if err := m.flushAll(ctx); err != nil {
		t.Fatalf("the backlog's replay: %v", err)
	}
	if s := m.WriterStats(); s.Backlog != 0 || s.Queued != 0 || s.SetAside != 1 {
		t.Errorf("writer %+v: want nothing waiting and the refused record set aside once", s)
	}
	for _, id := range []uuid.UUID{acct, other} {
		a := m.account(id, false)
		a.mu.Lock()
		pending, records := a.pending, a.pendingRecords
		a.mu.Unlock()
		if pending != 0 || records != 0 {
			t.Errorf("account %s: %d micro-units in %d records pending once everything is written, want none", id, pending, records)
		}
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st, acct, granted, map[string]int64{"before": streamCost(1000, 5), "after": streamCost(1000, 5)})
	checkBilledOnce(t, st, other, granted, map[string]int64{"other": streamCost(1000, 5)})
}

// TestRecordRefusedAsDataIsQuarantined: a record the database refused as data was only logged
// and counted (TestRecordRefusedAsDataIsSetAside), in no file, so `admin usage import-spill`
// could not bill it once an operator had fixed the cause. With a spill it is kept in the
// spill's quarantine file with the database's reason; an import while the database still
// refuses it reports it as failing, with that reason, and goes on; once the cause is gone
// (here a trigger, dropped) the import bills it, once.
func TestRecordRefusedAsDataIsQuarantined(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	const granted = 10_000_000
	acct := newAccount(t, st, granted)
	db, err := pgx.Connect(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `
		CREATE FUNCTION usage_faults() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.request_id = 'bad' THEN
				RAISE EXCEPTION 'refused as data by the test' USING ERRCODE = '23514';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER usage_faults BEFORE INSERT ON usage_records FOR EACH ROW EXECUTE FUNCTION usage_faults()`); err != nil {
		t.Fatal(err)
	}
	sp := openSpill(t, filepath.Join(t.TempDir(), "usage-0.spill"), usagespill.Options{})
	m := New(st, Options{Spill: sp, Holder: "host/1/abcd", FlushInterval: time.Hour, RetryMax: 50 * time.Millisecond})
	p := checkpointPrice
	for _, id := range []string{"before", "bad", "after"} {
		r, err := m.Reserve(ctx, acct, id, 100_000)
		if err != nil {
			t.Fatal(err)
		}
		r.SettleUsage(UsageRecord{Model: "m", Route: "/v1/messages", Tokens: price.Tokens{Uncached: 1000, Output: 5}, Price: &p, Status: "ok"})
	}
	if err := m.flushAll(ctx); err != nil {
		t.Fatal(err)
	}
	if s := m.WriterStats(); s.SetAside != 1 || s.Backlog != 0 {
		t.Errorf("writer %+v: want one record set aside, nothing waiting", s)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	file, err := usagespill.ReadSetAside(sp.Path() + ".quarantine")
	if err != nil {
		t.Fatalf("the refused record is not in the quarantine file: %v", err)
	}
	if len(file.Records) != 1 || file.Unread != 0 {
		t.Fatalf("quarantine file %+v, want the refused record only", file)
	}
	q := file.Records[0]
	if q.Entry.Record.RequestID != "bad" || q.Entry.Record.AccountID != acct || q.Entry.Holder != "host/1/abcd" ||
		q.Entry.Record.CostMicros != streamCost(1000, 5) || !strings.Contains(q.Reason, "refused as data by the test") {
		t.Errorf("quarantined %+v (%s), want request bad of the account, its cost and the database's reason", q.Entry, q.Reason)
	}

	// The cause is not fixed yet: the record still fails, with the database's reason.
	done, err := Reimport(ctx, st, file.Records, true)
	if err != nil || len(done) != 1 || done[0].Billed || !strings.Contains(done[0].Fault, "refused as data by the test") {
		t.Fatalf("import while the database refuses the record: %+v, %v", done, err)
	}
	checkBilledOnce(t, st, acct, granted, map[string]int64{"before": streamCost(1000, 5), "after": streamCost(1000, 5)})

	if _, err := db.Exec(ctx, `DROP TRIGGER usage_faults ON usage_records`); err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		done, err = Reimport(ctx, st, file.Records, true)
		if err != nil || len(done) != 1 || done[0].Fault != "" || done[0].Billed != (run == 1) || done[0].AlreadyBilled != (run == 2) {
			t.Fatalf("import %d once the cause is fixed: %+v, %v", run, done, err)
		}
	}
	checkBilledOnce(t, st, acct, granted, map[string]int64{"before": streamCost(1000, 5), "bad": streamCost(1000, 5), "after": streamCost(1000, 5)})
}

// TestRefusedRecordSetAsideOnceAcrossRestarts: a process that set a refused record aside and
// died before it emptied its spill file leaves the record there; the next process replays it,
// the database refuses it again, and it was counted with the records set aside and logged as
// an error a second time (an operator reading the counter took it for two records), though the
// quarantine file held it already. It is now passed over with a line at info level, counted
// once in all.
func TestRefusedRecordSetAsideOnceAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	acct := newAccount(t, st, 10_000_000)
	db, err := pgx.Connect(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `
		CREATE FUNCTION usage_faults() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			RAISE EXCEPTION 'refused as data by the test' USING ERRCODE = '23514';
		END $$;
		CREATE TRIGGER usage_faults BEFORE INSERT ON usage_records FOR EACH ROW EXECUTE FUNCTION usage_faults()`); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "usage.spill")
	_, entries := goneProcessEntries(acct, 1)
	for process := 1; process <= 2; process++ {
		// The spill file as the process that died left it: the record, not yet emptied.
		sp := openSpill(t, path, usagespill.Options{})
		if _, err := sp.Append(entries); err != nil {
			t.Fatal(err)
		}
		sp.Close()
		sp = openSpill(t, path, usagespill.Options{})
		var logs logSink
		m := New(st, Options{Logger: logs.logger(), Spill: sp, Holder: fmt.Sprintf("host/%d/abcd", process), FlushInterval: time.Hour, RetryMax: 50 * time.Millisecond})
		if err := m.flushAll(ctx); err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if process == 1 {
			want = 1
		}
		if s := m.WriterStats(); s.SetAside != want {
			t.Errorf("process %d: %d set aside, want %d:\n%s", process, s.SetAside, want, strings.Join(logs.all(), "\n"))
		}
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
		sp.Close()
		file, err := usagespill.ReadSetAside(path + ".quarantine")
		if err != nil || len(file.Records) != 1 {
			t.Fatalf("process %d: the quarantine file %+v, %v: want the record once", process, file, err)
		}
	}
}
