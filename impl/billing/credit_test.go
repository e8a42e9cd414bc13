package billing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/store"
)

// noteOnCredit is the note of the ledger entry of a request served on credit.
const noteOnCredit = "served on credit during a database outage"

func TestParseFailureHandling(t *testing.T) {
	for _, f := range []FailureHandling{FailureRefuse, FailureContinue, FailureShare} {
		got, err := ParseFailureHandling(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFailureHandling(%q) = %v, %v", f.String(), got, err)
		}
	}
	if _, err := ParseFailureHandling("terminate"); err == nil {
		t.Error("an unknown handling was accepted")
	}
	if (OutagePolicy{}).FailureHandling != FailureRefuse {
		t.Error("the zero policy does not refuse")
	}
}

// TestOutageDefaults: the lease outlasts the outage cover, so that a hold renewed just before
// the database goes away is still usable for the whole cover.
func TestOutageDefaults(t *testing.T) {
	for _, c := range []struct {
		cover, lease time.Duration
	}{
		{0, 40 * time.Second}, // the default cover, 30 s
		{10 * time.Second, 30 * time.Second},
		{90 * time.Second, 120 * time.Second},
		{-1, 30 * time.Second},
	} {
		m := New(nil, Options{Outage: OutagePolicy{Cover: c.cover}})
		o := m.opts
		if o.Lease != c.lease || o.Outage.RiskMicros != DefaultRiskMicros {
			t.Errorf("cover %v: lease %v, risk %d; want lease %v", c.cover, o.Lease, o.Outage.RiskMicros, c.lease)
		}
		// The least a hold has left when the database goes away: a renewal was due but failed.
		if left := o.Lease - m.leaseMargin - o.Lease/6; o.Outage.Cover > 0 && left < o.Outage.Cover {
			t.Errorf("cover %v: a hold renewed last %v before the outage lasts only %v into it", o.Outage.Cover, o.Lease/6, left)
		}
	}
}

func TestSpendRate(t *testing.T) {
	start := time.Now()
	a := &account{}
	if r := a.spendRate(start); r != 0 {
		t.Fatalf("rate %g before any settlement", r)
	}
	// One settlement does not make a rate of its whole cost per second.
	a.noteSpend(start, 1_000)
	if r := a.spendRate(start); r >= 1_000 {
		t.Errorf("rate %g after one settlement of 1,000", r)
	}
	// 500 micro-units every 10 ms: 50,000 per second, right after three seconds already.
	now := start
	for range 300 {
		now = now.Add(10 * time.Millisecond)
		a.noteSpend(now, 500)
	}
	if r := a.spendRate(now); math.Abs(r-50_000) > 2_500 {
		t.Errorf("rate %g after 3 s of a steady 50,000 per second", r)
	}
	// After a minute of it, a pause of two seconds shrinks it by a fifth at most; a minute
	// all but ends it.
	for range 5_700 {
		now = now.Add(10 * time.Millisecond)
		a.noteSpend(now, 500)
	}
	if r := a.spendRate(now.Add(2 * time.Second)); r < 40_000 {
		t.Errorf("rate %g after a pause of 2 s", r)
	}
	if r := a.spendRate(now.Add(time.Minute)); r > 500 {
		t.Errorf("rate %g after a minute of nothing", r)
	}
}

// isOutageRefusal reports whether err is the failure handling's 503.
func isOutageRefusal(err error) bool {
	e := apierror.As(err)
	return errors.Is(err, ErrHoldSpent) && e != nil && e.Kind == apierror.KindUnavailable && e.RetryAfter > 0
}

// freeOf is the free credit of the meter's hold on the account.
func freeOf(m *Meter, acct uuid.UUID) int64 {
	a := m.account(acct, false)
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.free()
}

// TestOutageReserve: under steady traffic the meter keeps a hold's free credit at the outage
// reserve (Cover of the account's spend rate), far above what the chunks alone keep when they
// are capped (ChunkCapMicros), and never beyond half of what the account has left; when the
// database goes away for Cover, the account's requests at the same pace are all served from the
// hold, while an account whose meter keeps no reserve runs out of credit and gets 503. Once
// the database is back, every request is billed exactly once. The meters' clock is the test's:
// a request every 10 ms of it, 3 s of traffic before the outage and 10 s during it.
func TestOutageReserve(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	const (
		granted = 100_000_000
		worst   = 1_000
		cost    = 500 // 50,000 micro-units a second: 500,000 over the cover
		cover   = 10 * time.Second
		step    = 10 * time.Millisecond
	)
	covered, bare, small := newAccount(t, st, granted), newAccount(t, st, granted), newAccount(t, st, 600_000)
	relay := newRelay(t, cs)
	clock := newManualClock()
	opts := Options{Now: clock.Now, ChunkMultiplier: 10, ChunkCapMicros: 50_000, Outage: OutagePolicy{Cover: cover}}
	m := New(openStore(t, relay.ConnString()), opts)
	opts.Outage.Cover = -1
	plain := New(openStore(t, relay.ConnString()), opts)
	runMeter(t, m)
	runMeter(t, plain)
	var books settled
	tick := func(i int, phase string) {
		clock.advance(step)
		for _, s := range []struct {
			m    *Meter
			acct uuid.UUID
		}{{m, covered}, {plain, bare}, {m, small}} {
			if !books.serve(ctx, s.m, s.acct, fmt.Sprintf("%s-%d", phase, i), worst, cost) {
				t.Fatalf("%s %d refused", phase, i)
			}
			awaitGrant(s.m, s.acct)
		}
	}
	for i := range 300 {
		tick(i, "before")
	}
	a := m.account(covered, false)
	a.mu.Lock()
	reserve := m.outageReserve(a, clock.Now())
	a.mu.Unlock()
	if want := microsOver(cost/step.Seconds(), cover); math.Abs(float64(reserve-want)) > float64(want)/20 {
		t.Fatalf("outage reserve %d, want about %d", reserve, want)
	}
	if free := freeOf(m, covered); free < reserve {
		t.Errorf("the hold keeps %d free, below the outage reserve of %d", free, reserve)
	}
	if free := freeOf(plain, bare); free >= reserve/2 {
		t.Errorf("without an outage reserve the hold keeps %d free", free)
	}
	// The small account has 600,000: its hold never takes more than half of what is left.
	holds, err := st.CreditHolds(ctx, small)
	if err != nil {
		t.Fatal(err)
	}
	credit, err := st.AccountCredit(ctx, small)
	if err != nil {
		t.Fatal(err)
	}
	if len(holds) != 1 || holds[0].AmountMicros > credit.BalanceMicros/2+opts.ChunkCapMicros {
		t.Errorf("the small account's hold %+v of a balance of %d", holds, credit.BalanceMicros)
	}
	t.Logf("outage reserve %d; free credit with it %d, without %d; small account: hold %d of %d",
		reserve, freeOf(m, covered), freeOf(plain, bare), holds[0].AmountMicros, credit.BalanceMicros)

	relay.Cut()
	bareRefused := -1
	for i := range int(cover / step) {
		clock.advance(step)
		id := fmt.Sprintf("during-%d", i)
		if !books.serve(ctx, m, covered, id, worst, cost) {
			t.Fatalf("request %d of the outage refused: the outage reserve did not cover %v", i, cover)
		}
		if bareRefused < 0 {
			if r, err := plain.Reserve(ctx, bare, id, worst); err != nil {
				if !isOutageRefusal(err) {
					t.Fatalf("refusal of the bare account: %v", err)
				}
				bareRefused = i
			} else {
				r.Settle(cost, UsageRecord{})
				books.add(bare, id, cost)
			}
		}
	}
	if bareRefused < 0 {
		t.Fatal("the account without an outage reserve was served through the whole outage")
	}
	if s := m.CreditStats(); !s.DatabaseDown || s.OutageRefused != 0 {
		t.Errorf("credit stats after the outage: %+v", s)
	}
	t.Logf("the account without an outage reserve was refused after %v of the outage", time.Duration(bareRefused)*step)

	relay.Restore()
	for i := range 5 {
		clock.advance(step)
		books.serveUntil(t, m, covered, fmt.Sprintf("after-%d", i), worst, cost)
		books.serveUntil(t, plain, bare, fmt.Sprintf("after-%d", i), worst, cost)
	}
	flushUntil(t, m)
	flushUntil(t, plain)
	stopMeter(t, m)
	stopMeter(t, plain)
	for _, acct := range []uuid.UUID{covered, bare} {
		checkBilledOnce(t, st, acct, granted, books.costs[acct])
	}
	checkBilledOnce(t, st, small, 600_000, books.costs[small])
}

// TestOutageFailureHandling: with the database cut, a meter serves an account from its hold
// until the hold cannot cover a request. Under refuse every request after that gets a 503 with
// Retry-After (ErrHoldSpent); under continue requests are served on credit while the credit so
// served stays within the risk bound and within what the account had free at the last grant,
// and only then refused. Once the database is back, every request served is billed exactly
// once; those served on credit are marked in their usage records and ledger entries, and were
// billed from the account's free credit.
func TestOutageFailureHandling(t *testing.T) {
	const (
		worst = 1_000
		cost  = 700
	)
	for _, c := range []struct {
		name      string
		handling  FailureHandling
		balance   int64
		onCredit  int // requests served on credit before the first refusal
		fromHold  int // requests of the outage served from the hold
		riskBound int64
	}{
		// The first grant is a chunk of 10 worst cases; one request before the outage.
		{"refuse", FailureRefuse, 100_000, 0, 12, 3_000},
		{"continue", FailureContinue, 100_000, 3, 12, 3_000},
		// 4,000: the grant takes half (2,000), which leaves 2,000 free: on credit within it.
		{"continue within the free credit", FailureContinue, 4_000, 2, 1, 3_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cs, st := newDB(t)
			acct := newAccount(t, st, c.balance)
			relay := newRelay(t, cs)
			var logs logSink
			m := New(openStore(t, relay.ConnString()), Options{ChunkMultiplier: 10, Logger: logs.logger(),
				Outage: OutagePolicy{Cover: -1, FailureHandling: c.handling, RiskMicros: c.riskBound}})
			var books settled
			if !books.serve(ctx, m, acct, "before", worst, cost) {
				t.Fatal("refused before the outage")
			}
			flushUntil(t, m)

			relay.Cut()
			fromHold, onCredit, refused := 0, 0, 0
			var credited []string
			for i := 0; refused < 3; i++ {
				id := fmt.Sprintf("during-%d", i)
				r, err := m.Reserve(ctx, acct, id, worst)
				if err != nil {
					if !isOutageRefusal(err) {
						t.Fatalf("request %d: %v", i, err)
					}
					refused++
					continue
				}
				if refused > 0 {
					t.Fatalf("request %d served after a refusal", i)
				}
				if r.OnCredit() {
					onCredit++
					credited = append(credited, id)
				} else if onCredit > 0 {
					t.Fatalf("request %d served from the hold after one on credit", i)
				} else {
					fromHold++
				}
				r.Settle(cost, UsageRecord{})
				books.add(acct, id, cost)
			}
			if n := logs.count("the database cannot be reached"); n != 1 {
				t.Errorf("%d log lines of the outage, want 1:\n%s", n, strings.Join(logs.all(), "\n"))
			}
			if fromHold != c.fromHold || onCredit != c.onCredit {
				t.Fatalf("%d requests served from the hold and %d on credit, want %d and %d", fromHold, onCredit, c.fromHold, c.onCredit)
			}
			s := m.CreditStats()
			if !s.DatabaseDown || s.OutageRefused != 3 || s.OnCreditRequests != int64(onCredit) ||
				s.OnCreditMicros != int64(onCredit*cost) || s.AtRiskMicros != int64(onCredit*cost) {
				t.Errorf("credit stats during the outage: %+v", s)
			}
			if s.AtRiskMicros > c.riskBound {
				t.Errorf("%d micro-units on credit, beyond the bound of %d", s.AtRiskMicros, c.riskBound)
			}

			relay.Restore()
			flushUntil(t, m)
			if s := m.CreditStats(); s.AtRiskMicros != 0 {
				t.Errorf("%d micro-units still at risk once written", s.AtRiskMicros)
			}
			books.serveUntil(t, m, acct, "after", worst, cost)
			flushUntil(t, m)
			if s := m.CreditStats(); s.DatabaseDown {
				t.Error("the meter still believes the database is down")
			}
			stopMeter(t, m)
			checkBilledOnce(t, st, acct, c.balance, books.costs[acct])
			checkMarked(t, st, acct, credited)
		})
	}
}

// checkMarked checks that exactly the requests credited were served on credit, in their usage
// records and in the notes of their ledger entries.
func checkMarked(t *testing.T, st *store.Store, acct uuid.UUID, credited []string) {
	t.Helper()
	want := make(map[string]bool)
	for _, id := range credited {
		want[id] = true
	}
	records, err := st.UsageRecords(context.Background(), acct, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		if r.OnCredit != want[r.RequestID] {
			t.Errorf("request %s: usage record on credit %v, want %v", r.RequestID, r.OnCredit, want[r.RequestID])
		}
	}
	for key, e := range usageLedger(t, st, acct) {
		id := strings.TrimPrefix(key, "usage:")
		if marked := strings.HasPrefix(e.Note, noteOnCredit); marked != want[id] {
			t.Errorf("request %s: ledger note %q", id, e.Note)
		}
	}
}

// TestOnCreditBeyondFreeCredit: what was served on credit is billed in full while the
// account's balance covers it, even when another process holds the rest of the credit: that
// hold gives up what it must (trial h2: three replicas held most of a funded account, and half
// of what was served on credit through a 64-second outage was written off). The other
// process's own usage, written after, is billed as far as the balance goes (never below zero,
// the rest noted as not billed): what goes unbilled is what the account could not pay.
func TestOnCreditBeyondFreeCredit(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	const granted = 20_000
	acct := newAccount(t, st, granted)
	relay := newRelay(t, cs)
	cut := New(openStore(t, relay.ConnString()), Options{ChunkMultiplier: 10,
		Outage: OutagePolicy{Cover: -1, FailureHandling: FailureContinue, RiskMicros: 5_000}})
	other := New(st, Options{})
	var books settled
	books.serve(ctx, cut, acct, "first", 1_000, 700) // a hold of 10,000
	// The other process holds all but 500 of the account's free credit.
	const otherHeld = 9_500
	held, err := other.Reserve(ctx, acct, "other", otherHeld)
	if err != nil {
		t.Fatal(err)
	}
	relay.Cut()
	var credited []string
	for i := 0; ; i++ {
		id := fmt.Sprintf("during-%d", i)
		r, err := cut.Reserve(ctx, acct, id, 1_000)
		if err != nil {
			break
		}
		if r.OnCredit() {
			credited = append(credited, id)
		}
		r.Settle(700, UsageRecord{})
		books.add(acct, id, 700)
	}
	if len(credited) == 0 {
		t.Fatal("nothing served on credit")
	}
	relay.Restore()
	flushUntil(t, cut)
	stopMeter(t, cut)
	held.Settle(otherHeld, UsageRecord{})
	stopMeter(t, other)

	credit := checkRest(t, st, acct)
	ledger := usageLedger(t, st, acct)
	var billed, creditBilled int64
	onCredit := make(map[string]bool)
	for _, id := range credited {
		onCredit[id] = true
	}
	for id, cost := range books.costs[acct] {
		e, ok := ledger[store.UsageLedgerKey(id)]
		if !ok {
			t.Errorf("request %s has no ledger entry", id)
			continue
		}
		billed -= e.AmountMicros
		if onCredit[id] {
			creditBilled -= e.AmountMicros
			if !strings.HasPrefix(e.Note, noteOnCredit) {
				t.Errorf("request %s served on credit: note %q", id, e.Note)
			}
		}
		if -e.AmountMicros != cost || strings.Contains(e.Note, "not billed") {
			t.Errorf("request %s billed %d of %d: note %q", id, -e.AmountMicros, cost, e.Note)
		}
	}
	checkMarked(t, st, acct, credited)
	if creditBilled != int64(700*len(credited)) {
		t.Errorf("%d of %d served on credit billed", creditBilled, 700*len(credited))
	}
	// The other's request is billed what the balance had left, the rest noted.
	e := ledger[store.UsageLedgerKey("other")]
	if credit.BalanceMicros != 0 || -e.AmountMicros != granted-billed || !strings.Contains(e.Note, "not billed") {
		t.Errorf("balance %d; the cut process billed %d, the other %d (%q)", credit.BalanceMicros, billed, -e.AmountMicros, e.Note)
	}
	t.Logf("%d requests on credit, %d micro-units of them billed; the other process's %d billed %d", len(credited), creditBilled, otherHeld, -e.AmountMicros)
}

// TestLeaseRunsOutDuringOutage: a process cut off from the database uses its hold only while
// its own view of the lease lasts, which ends before the lease can expire in the database (so
// before any other process can reap the hold and hand its credit out again): then its requests
// are refused although the hold still has credit. When the database is back before anyone
// reaped the hold, the process renews it at once (its own reaper waits a reap interval) and
// serves from it again: the same hold, and the usage of the outage billed from it.
func TestLeaseRunsOutDuringOutage(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	const granted = 1_000_000
	acct := newAccount(t, st, granted)
	relay := newRelay(t, cs)
	m := New(openStore(t, relay.ConnString()), Options{Lease: time.Second, ReapInterval: 300 * time.Millisecond,
		ChunkMultiplier: 100, Outage: OutagePolicy{Cover: -1}})
	runMeter(t, m)
	var books settled
	books.serve(ctx, m, acct, "before", 1_000, 10)
	flushUntil(t, m)
	holdRow := func() store.CreditHold {
		t.Helper()
		holds, err := st.CreditHolds(ctx, acct)
		if err != nil || len(holds) != 1 {
			t.Fatalf("holds %+v (%v)", holds, err)
		}
		return holds[0]
	}
	before := holdRow()

	relay.Cut()
	cutAt := time.Now()
	for i := 0; ; i++ {
		id := fmt.Sprintf("during-%d", i)
		r, err := m.Reserve(ctx, acct, id, 1_000)
		if err != nil {
			if !isOutageRefusal(err) {
				t.Fatal(err)
			}
			break
		}
		r.Settle(10, UsageRecord{})
		books.add(acct, id, 10)
		time.Sleep(20 * time.Millisecond)
	}
	if free := freeOf(m, acct); free < 1_000 {
		t.Fatalf("refused with %d free in the hold: not for its lease", free)
	}
	t.Logf("the hold served for %v of the outage", time.Since(cutAt).Round(time.Millisecond))
	// Stay cut off past the lease's end in the database: nobody could reap the hold meanwhile.
	time.Sleep(time.Until(holdRow().ExpiresAt.Add(200 * time.Millisecond)))
	relay.Restore()
	waitFor(t, "the hold to be renewed", func() bool { return holdRow().ExpiresAt.After(time.Now()) })
	books.serveUntil(t, m, acct, "after", 1_000, 10)
	flushUntil(t, m)
	after := holdRow()
	if after.CreatedAt != before.CreatedAt {
		t.Errorf("the hold was reaped and drawn again (created %v, then %v)", before.CreatedAt, after.CreatedAt)
	}
	stopMeter(t, m)
	checkBilledOnce(t, st, acct, granted, books.costs[acct])
}
