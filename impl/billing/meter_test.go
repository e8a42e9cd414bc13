package billing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/store"
)

func TestChunk(t *testing.T) {
	m := New(nil, Options{})
	for _, c := range []struct{ worst, want int64 }{
		{0, 0},
		{1_000, 10_000},
		{100_000, 1_000_000},
		{500_000, 1_000_000},
		{2_000_000, 2_000_000},
		{math.MaxInt64, math.MaxInt64},
	} {
		if got := m.chunk(c.worst); got != c.want {
			t.Errorf("chunk(%d) = %d, want %d", c.worst, got, c.want)
		}
	}
}

// TestConcurrentReservationsAcrossTwoMeters: 200 concurrent requests at an account that covers
// only some of them, through two meters (two processes) on one database. Their actual costs add
// up to more than the balance, so the test sees both outcomes under any scheduling.
func TestConcurrentReservationsAcrossTwoMeters(t *testing.T) {
	cs, st1 := newDB(t)
	st2 := openStore(t, cs)
	const (
		balance = 1_000_000
		worst   = 10_000
		n       = 200
	)
	acct := newAccount(t, st1, balance)
	var logs logSink
	meters := []*Meter{
		New(st1, Options{Logger: logs.logger()}),
		New(st2, Options{Logger: logs.logger()}),
	}
	if meters[0].Holder() == meters[1].Holder() {
		t.Fatal("two meters share a holder name")
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErrs := make(chan error, len(meters))
	for _, m := range meters {
		go func() { runErrs <- m.Run(ctx) }()
	}

	// A watcher checks the database's view while the requests run.
	watchDone := make(chan struct{})
	var watchErr atomic.Value
	go func() {
		defer close(watchDone)
		for ctx.Err() == nil {
			c, err := st1.AccountCredit(context.Background(), acct)
			if err == nil && (c.BalanceMicros < 0 || c.HeldMicros < 0 || c.HeldMicros > c.BalanceMicros) {
				watchErr.Store(fmt.Sprintf("balance %d, held %d", c.BalanceMicros, c.HeldMicros))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	type outcome struct {
		settled bool
		charged int64
		err     error
	}
	results := make([]outcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := meters[i%2]
			<-start
			r, err := m.Reserve(context.Background(), acct, fmt.Sprintf("req-%03d", i), worst)
			if err != nil {
				results[i] = outcome{err: err}
				return
			}
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) // the upstream call
			// At least half the worst case each: 200 of them cost more than the balance
			// whatever the scheduling, so some must be refused even when the race detector
			// runs the requests one after another.
			actual := worst/2 + 1 + rand.Int64N(worst/2)
			charged := r.Settle(actual, UsageRecord{
				Model: "service-flint", Route: "/v1/chat/completions", Provider: "sim", UpstreamModel: fmt.Sprintf("expert-%d", i%3),
				InputTokens: int64(i), OutputTokens: actual,
			})
			if charged != actual {
				t.Errorf("request %d charged %d, want %d", i, charged, actual)
			}
			results[i] = outcome{settled: true, charged: charged}
		}()
	}
	close(start)
	wg.Wait()
	cancel()
	for range meters {
		if err := <-runErrs; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	<-watchDone
	if v := watchErr.Load(); v != nil {
		t.Errorf("the watcher saw %s", v)
	}

	var settled, refused int
	var charged int64
	for i, r := range results {
		switch {
		case r.settled:
			settled++
			charged += r.charged
		case r.err != nil:
			var ie *InsufficientError
			if !errors.As(r.err, &ie) {
				t.Fatalf("request %d: %v", i, r.err)
			}
			if ie.NeededMicros != worst || ie.AvailableMicros < 0 || ie.AvailableMicros >= worst {
				t.Errorf("request %d: %+v", i, ie)
			}
			refused++
		}
	}
	t.Logf("%d settled (%d micro-units), %d refused", settled, charged, refused)
	if settled == 0 || refused == 0 {
		t.Fatalf("%d settled and %d refused: the test should see both", settled, refused)
	}

	credit := checkRest(t, st1, acct)
	if credit.BalanceMicros != balance-charged {
		t.Errorf("balance %d, want grant %d - usage %d = %d", credit.BalanceMicros, balance, charged, balance-charged)
	}
	ledger := usageLedger(t, st1, acct)
	var ledgerUsage int64
	for _, e := range ledger {
		ledgerUsage += -e.AmountMicros
	}
	records, recordCost, err := st1.UsageTotals(context.Background(), acct)
	if err != nil {
		t.Fatal(err)
	}
	if ledgerUsage != charged || recordCost != charged {
		t.Errorf("usage: ledger %d, usage records %d, settled %d", ledgerUsage, recordCost, charged)
	}
	if len(ledger) != settled || int(records) != settled {
		t.Errorf("%d usage entries and %d usage records for %d settled requests", len(ledger), records, settled)
	}
	for i, r := range results {
		e, ok := ledger[store.UsageLedgerKey(fmt.Sprintf("req-%03d", i))]
		switch {
		case r.settled && (!ok || -e.AmountMicros != r.charged):
			t.Errorf("request %d: settled %d, ledger entry %+v (present %v)", i, r.charged, e, ok)
		case !r.settled && ok:
			t.Errorf("refused request %d has a ledger entry", i)
		}
	}
	if l := logs.all(); len(l) > 0 {
		t.Errorf("the meters logged:\n%s", strings.Join(l, "\n"))
	}
}

// TestSettleIdempotent: settling twice, the same request id reserved twice, and a batch
// written twice (a retried flush, including one whose first attempt committed unbeknown to the
// meter) all bill once.
func TestSettleIdempotent(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 1_000_000)
	m := New(st, Options{})

	r, err := m.Reserve(ctx, acct, "once", 1_000)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Settle(600, UsageRecord{}); got != 600 {
		t.Fatalf("first settle charged %d", got)
	}
	if got := r.Settle(900, UsageRecord{}); got != 0 {
		t.Fatalf("second settle charged %d", got)
	}
	r.Release() // after Settle: nothing

	// The same request id reserved and settled twice (in one batch, then in another).
	for _, cost := range []int64{300, 400} {
		r, err := m.Reserve(ctx, acct, "twice", 1_000)
		if err != nil {
			t.Fatal(err)
		}
		r.Settle(cost, UsageRecord{})
	}
	if err := m.flushAll(ctx); err != nil {
		t.Fatal(err)
	}
	r, err = m.Reserve(ctx, acct, "twice", 1_000)
	if err != nil {
		t.Fatal(err)
	}
	r.Settle(500, UsageRecord{})
	if err := m.flushAll(ctx); err != nil {
		t.Fatal(err)
	}

	// A retried flush: the record is written, then queued again as if the write had failed.
	r, err = m.Reserve(ctx, acct, "retried", 1_000)
	if err != nil {
		t.Fatal(err)
	}
	r.Settle(700, UsageRecord{})
	rec := m.queue[0]
	if err := m.flushAll(ctx); err != nil {
		t.Fatal(err)
	}
	requeue(m, rec)
	if err := m.flushAll(ctx); err != nil {
		t.Fatal(err)
	}

	// A write that committed but whose answer the meter never saw (the connection died at
	// COMMIT): the meter still has the cost pending and retries the batch.
	r, err = m.Reserve(ctx, acct, "lost-answer", 1_000)
	if err != nil {
		t.Fatal(err)
	}
	r.Settle(800, UsageRecord{})
	m.qmu.Lock()
	lost := m.queue
	m.queue = nil
	m.qmu.Unlock()
	if _, err := st.WriteUsage(ctx, m.Holder(), lost); err != nil {
		t.Fatal(err)
	}
	m.qmu.Lock()
	m.queue = append(lost, m.queue...)
	m.qmu.Unlock()
	if err := m.flushAll(ctx); err != nil {
		t.Fatal(err)
	}

	// The meter's view of its hold is exactly the database's.
	a := m.account(acct, false)
	holds, err := st.CreditHolds(ctx, acct)
	if err != nil || len(holds) != 1 {
		t.Fatalf("holds %+v, %v", holds, err)
	}
	a.mu.Lock()
	if a.dbAmount != holds[0].AmountMicros || a.pending != 0 || a.outstanding != 0 || a.free() != holds[0].AmountMicros {
		t.Errorf("meter: hold %d, pending %d, outstanding %d; database: hold %d", a.dbAmount, a.pending, a.outstanding, holds[0].AmountMicros)
	}
	a.mu.Unlock()

	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	credit := checkRest(t, st, acct)
	want := int64(1_000_000 - 600 - 300 - 700 - 800)
	if credit.BalanceMicros != want {
		t.Errorf("balance %d, want %d", credit.BalanceMicros, want)
	}
	ledger := usageLedger(t, st, acct)
	if len(ledger) != 4 {
		t.Errorf("%d usage entries, want 4: %+v", len(ledger), ledger)
	}
	for key, amount := range map[string]int64{"once": 600, "twice": 300, "retried": 700, "lost-answer": 800} {
		if e := ledger[store.UsageLedgerKey(key)]; -e.AmountMicros != amount {
			t.Errorf("%s: ledger entry %+v, want %d", key, e, -amount)
		}
	}
	if n, cost, _ := st.UsageTotals(ctx, acct); n != 4 || cost != 600+300+700+800 {
		t.Errorf("usage records: %d costing %d", n, cost)
	}
}

// requeue queues a record again as if its write had failed.
func requeue(m *Meter, rec store.UsageRecord) {
	a := m.account(rec.AccountID, false)
	a.mu.Lock()
	a.pending += rec.CostMicros
	a.pendingRecords++
	a.mu.Unlock()
	m.enqueue(rec)
}

// TestHotPathNoRoundTrip: once the process holds credit for the account, reservations and
// settlements send no statement to the database.
func TestHotPathNoRoundTrip(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	acct := newAccount(t, st, 1_000_000)
	var statements, grants atomic.Int64
	observed, err := store.OpenObserved(ctx, cs, func(sql string) {
		statements.Add(1)
		if strings.HasPrefix(sql, "-- name: TakeCreditHold ") {
			grants.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(observed.Close)
	m := New(observed, Options{}) // no Run: nothing in the background

	r, err := m.Reserve(ctx, acct, "first", 1_000)
	if err != nil {
		t.Fatal(err)
	}
	if s, g := statements.Load(), grants.Load(); s != 1 || g != 1 {
		t.Fatalf("the first reservation sent %d statements (%d grants), want one grant", s, g)
	}
	holds, err := st.CreditHolds(ctx, acct)
	if err != nil || len(holds) != 1 {
		t.Fatalf("holds %+v, %v", holds, err)
	}
	r.Settle(1, UsageRecord{})
	for i := range 1000 {
		r, err := m.Reserve(ctx, acct, fmt.Sprintf("hot-%d", i), 1_000)
		if err != nil {
			t.Fatal(err)
		}
		r.Settle(1, UsageRecord{})
	}
	if s := statements.Load(); s != 1 {
		t.Fatalf("1000 covered reservations and settlements sent %d statements, want none", s-1)
	}
	after, err := st.CreditHolds(ctx, acct)
	if err != nil || len(after) != 1 || after[0].Version != holds[0].Version || after[0].AmountMicros != holds[0].AmountMicros {
		t.Fatalf("the hold changed on the hot path: %+v -> %+v", holds, after)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if credit := checkRest(t, st, acct); credit.BalanceMicros != 1_000_000-1001 {
		t.Errorf("balance %d, want %d", credit.BalanceMicros, 1_000_000-1001)
	}
}

// TestCrashedHolderReaped: a process that holds credit and dies without Close strands it only
// until its lease expires; then another process reaps the hold and the account spends it.
func TestCrashedHolderReaped(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	acct := newAccount(t, st, 100_000)
	lease := 500 * time.Millisecond

	crashed := New(openStore(t, cs), Options{Lease: lease, Holder: "crashed-process"})
	r, err := crashed.Reserve(ctx, acct, "in-flight", 60_000)
	if err != nil {
		t.Fatal(err)
	}
	r.Settle(1_000, UsageRecord{}) // queued, never written: the process dies now

	// The survivor asks nobody to release credit (ReleaseWait -1): its wait would outlast
	// the short lease this test reaps.
	survivor := New(st, Options{Lease: lease, ReleaseWait: -1})
	_, err = survivor.Reserve(ctx, acct, "too-much", 50_000)
	var ie *InsufficientError
	if !errors.As(err, &ie) || ie.NeededMicros != 50_000 || ie.AvailableMicros != 40_000 {
		t.Fatalf("reserve while the crashed process holds 60,000: %v (%+v)", err, ie)
	}
	if apiErr := apierror.As(err); apiErr.Kind != apierror.KindInsufficientCredit {
		t.Errorf("apierror.As: %+v", apiErr)
	}
	if !errors.Is(err, store.ErrInsufficientCredit) {
		t.Error("the error is not store.ErrInsufficientCredit")
	}
	if n, err := survivor.ReapExpiredHolds(ctx); err != nil || n != 0 {
		t.Fatalf("reaped %d holds (%v) before the lease expired", n, err)
	}

	deadline := time.Now().Add(10 * lease)
	for {
		n, err := survivor.ReapExpiredHolds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the crashed process's hold was never reaped")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r, err = survivor.Reserve(ctx, acct, "everything", 100_000)
	if err != nil {
		t.Fatalf("after the reap the whole balance should be available: %v", err)
	}
	r.Settle(100_000, UsageRecord{})
	if err := survivor.Close(ctx); err != nil {
		t.Fatal(err)
	}
	credit := checkRest(t, st, acct)
	if credit.BalanceMicros != 0 {
		t.Errorf("balance %d, want 0 (the crashed process's unwritten usage is not billed)", credit.BalanceMicros)
	}
}

// TestLostHoldBillsWhatIsLeft: a process whose hold was reaped (it could not renew it) and whose
// credit another process then took still writes its usage, billed in full while the balance
// covers it (the other's hold gives up what it must); the other's usage written after it is
// then billed as far as the balance goes: never below zero, never failing the batch, and the
// part not billed is noted and logged.
func TestLostHoldBillsWhatIsLeft(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	acct := newAccount(t, st, 20_000)
	var logs logSink
	slow := New(openStore(t, cs), Options{Lease: 200 * time.Millisecond})
	other := New(st, Options{Logger: logs.logger()})

	r, err := slow.Reserve(ctx, acct, "slow", 10_000)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n, err := other.ReapExpiredHolds(ctx); err != nil || n != 1 {
		t.Fatalf("reaped %d (%v)", n, err)
	}
	r2, err := other.Reserve(ctx, acct, "other", 20_000)
	if err != nil {
		t.Fatal(err)
	}
	r.Settle(5_000, UsageRecord{})
	if err := slow.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r2.Settle(20_000, UsageRecord{})
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	credit := checkRest(t, st, acct)
	if credit.BalanceMicros != 0 {
		t.Errorf("balance %d, want 0", credit.BalanceMicros)
	}
	ledger := usageLedger(t, st, acct)
	if e := ledger[store.UsageLedgerKey("slow")]; e.AmountMicros != -5_000 || e.Note != "" {
		t.Errorf("the lost hold's usage entry: %+v, want 5000 billed", e)
	}
	if e := ledger[store.UsageLedgerKey("other")]; e.AmountMicros != -15_000 || !strings.Contains(e.Note, "not billed") {
		t.Errorf("the other's usage entry: %+v, want 15000 of 20000 billed, noted", e)
	}
	if len(logs.all()) == 0 {
		t.Error("the unbilled usage was not logged")
	}
}

// TestBalanceVisibleWithinFlushInterval: a settlement shows in Balance in well under a second.
func TestBalanceVisibleWithinFlushInterval(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 1_000_000)
	m := New(st, Options{})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	r, err := m.Reserve(ctx, acct, "visible", 50_000)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := m.Balance(ctx, acct); b != 1_000_000 {
		t.Errorf("a reservation in flight changed the balance shown to %d", b)
	}
	settled := time.Now()
	r.Settle(4_321, UsageRecord{})
	for {
		b, err := m.Balance(ctx, acct)
		if err != nil {
			t.Fatal(err)
		}
		if b == 1_000_000-4_321 {
			break
		}
		if time.Since(settled) > time.Second {
			t.Fatalf("balance still %d a second after the settlement", b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("visible after %v", time.Since(settled).Round(time.Millisecond))
	if _, err := m.Balance(ctx, uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown account: %v", err)
	}
}

// TestIdleHoldReturned: a hold nobody uses goes back to the account, and the next reservation
// draws a new one.
func TestIdleHoldReturned(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 1_000_000)
	m := New(st, Options{IdleRelease: 100 * time.Millisecond})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()

	r, err := m.Reserve(ctx, acct, "a", 10_000)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	deadline := time.Now().Add(3 * time.Second)
	for {
		c, err := st.AccountCredit(ctx, acct)
		if err != nil {
			t.Fatal(err)
		}
		if c.HeldMicros == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle hold was never returned (held %d)", c.HeldMicros)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r, err = m.Reserve(ctx, acct, "b", 10_000)
	if err != nil {
		t.Fatal(err)
	}
	r.Settle(10_000, UsageRecord{})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c := checkRest(t, st, acct); c.BalanceMicros != 990_000 {
		t.Errorf("balance %d", c.BalanceMicros)
	}
}

// TestReserveEdges: unknown accounts, empty request ids, free requests, Release, and Settle
// after Close.
func TestReserveEdges(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 0)
	m := New(st, Options{})

	if _, err := m.Reserve(ctx, uuid.New(), "x", 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown account: %v", err)
	}
	if _, err := m.Reserve(ctx, acct, "", 1); err == nil {
		t.Error("empty request id accepted")
	}
	if _, err := m.Reserve(ctx, acct, strings.Repeat("x", 201), 1); err == nil {
		t.Error("over-long request id accepted")
	}
	var ie *InsufficientError
	if _, err := m.Reserve(ctx, acct, "broke", 1); !errors.As(err, &ie) || ie.AvailableMicros != 0 || ie.NeededMicros != 1 {
		t.Errorf("empty account: %v", err)
	}
	free, err := m.Reserve(ctx, acct, "free", 0)
	if err != nil {
		t.Fatalf("a free request on an empty account: %v", err)
	}
	if got := free.Settle(5, UsageRecord{}); got != 0 {
		t.Errorf("a free reservation charged %d", got)
	}

	if _, _, err := st.Append(ctx, store.LedgerChange{AccountID: acct, AmountMicros: 50_000, Reason: store.ReasonGrant, IdempotencyKey: "top-up"}); err != nil {
		t.Fatal(err)
	}
	released, err := m.Reserve(ctx, acct, "released", 10_000)
	if err != nil {
		t.Fatal(err)
	}
	released.Release()
	released.Settle(10_000, UsageRecord{}) // after Release: nothing
	late, err := m.Reserve(ctx, acct, "late", 10_000)
	if err != nil {
		t.Fatal(err)
	}
	over, err := m.Reserve(ctx, acct, "over", 1_000)
	if err != nil {
		t.Fatal(err)
	}
	if got := over.Settle(5_000, UsageRecord{}); got != 1_000 {
		t.Errorf("a settlement above the reservation charged %d, want the reserved 1,000", got)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reserve(ctx, acct, "closed", 1); !errors.Is(err, ErrClosed) {
		t.Errorf("reserve after Close: %v", err)
	}
	if got := late.Settle(7_000, UsageRecord{}); got != 7_000 {
		t.Errorf("late settlement charged %d", got)
	}
	c := checkRest(t, st, acct)
	if c.BalanceMicros != 50_000-1_000-7_000 {
		t.Errorf("balance %d, want %d", c.BalanceMicros, 50_000-1_000-7_000)
	}
	ledger := usageLedger(t, st, acct)
	if len(ledger) != 3 { // free (0), over, late
		t.Errorf("usage entries: %+v", ledger)
	}
	if _, ok := ledger[store.UsageLedgerKey("released")]; ok {
		t.Error("a released reservation was billed")
	}
}

// TestFlushQueuedWritesWhatWasQueued: the periodic flush writes the records queued when it
// starts, not the ones settled meanwhile (which would chain tiny batches behind each other);
// flushAll, used to drain, writes everything.
func TestFlushQueuedWritesWhatWasQueued(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 1_000_000)
	m := New(st, Options{BatchSize: 2})
	settle := func(id string) {
		r, err := m.Reserve(ctx, acct, id, 1_000)
		if err != nil {
			t.Fatal(err)
		}
		r.Settle(100, UsageRecord{})
	}
	for i := range 5 {
		settle(fmt.Sprintf("q-%d", i))
	}
	// Five queued, written in batches of two: a limit of three writes two batches (2 + 1).
	if err := m.flush(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if n := len(m.queue); n != 2 {
		t.Fatalf("%d records left after writing three of five, want 2", n)
	}
	if err := m.flushQueued(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(m.queue); n != 0 {
		t.Fatalf("%d records left after flushQueued, want 0", n)
	}
	for i := range 3 {
		settle(fmt.Sprintf("r-%d", i))
	}
	if err := m.flushAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n, cost, err := st.UsageTotals(ctx, acct); err != nil || n != 8 || cost != 800 {
		t.Errorf("usage records: %d costing %d (%v), want 8 costing 800", n, cost, err)
	}
}
