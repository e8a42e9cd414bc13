package billing

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/store"
)

// TestKeyCapRetryOfSettledRequestCountsOnce: a request settled against its key's cap and then
// run again with the same request id (an agent's step whose model call was settled but whose
// step did not commit) reserves nothing new and settles nothing new, from the same process or
// another, even when what is left of the cap would not cover its worst case: the key's budget
// counts the request id once, as the ledger does (the probe: 358 counted where the usage
// records charged 179).
func TestKeyCapRetryOfSettledRequestCountsOnce(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	acct := newAccount(t, st, 10_000_000)
	c := newCappedKey(t, st, acct, 300, store.CapPeriodDaily)
	m := New(st, Options{Holder: "a"})
	other := New(openStore(t, cs), Options{Holder: "b"})

	r, err := m.ReserveForKey(ctx, acct, "agt_s_1", 250, &c)
	if err != nil {
		t.Fatal(err)
	}
	r.Settle(179, UsageRecord{KeyID: c.KeyID})
	for i, mm := range []*Meter{m, other, m} {
		// 250 more would pass the cap (179 spent of 300): the retry needs nothing of it.
		r, err := mm.ReserveForKey(ctx, acct, "agt_s_1", 250, &c)
		if err != nil {
			t.Fatalf("retry %d of a settled request: %v", i, err)
		}
		if b := budget(t, st, c); b.SpentMicros != 179 || b.ReservedMicros != 0 {
			t.Fatalf("retry %d reserved: budget %+v, want 179 spent and nothing reserved", i, b)
		}
		if i == 2 {
			r.Release()
		} else {
			r.Settle(179, UsageRecord{KeyID: c.KeyID})
		}
		if b := budget(t, st, c); b.SpentMicros != 179 || b.ReservedMicros != 0 {
			t.Fatalf("retry %d settled: budget %+v, want 179 spent once", i, b)
		}
	}
	// The marker outlives the maintenance's deletion of stale rows.
	if _, err := st.DeleteStaleKeyReservations(ctx, keySettledRetention); err != nil {
		t.Fatal(err)
	}
	if r, err := m.ReserveForKey(ctx, acct, "agt_s_1", 250, &c); err != nil {
		t.Fatalf("retry after the stale rows' deletion: %v", err)
	} else {
		r.Settle(179, UsageRecord{KeyID: c.KeyID})
	}
	// Another request id is counted as before: 121 are left of the cap.
	if _, err := m.ReserveForKey(ctx, acct, "agt_s_2", 122, &c); !isKeyCap(err, 122, 121) {
		t.Fatalf("a new request past the cap: %v", err)
	}
	for _, mm := range []*Meter{m, other} {
		if err := mm.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, usage, err := st.UsageTotals(ctx, acct); err != nil || usage != 179 {
		t.Fatalf("usage %d (%v), want 179", usage, err)
	}
	if b := budget(t, st, c); b.SpentMicros != 179 {
		t.Fatalf("budget %+v: the key counts other than the ledger charges", b)
	}
	checkRest(t, st, acct)
}

// TestKilledKeyReservationRetriedCountsOnce: a process reserves against a key's cap and is
// killed (no settlement, no release, its row stays); the retry of the request with the same
// request id, by another process, takes the reservation over instead of failing: while the dead
// process's lease lasts (its amount is replaced by the retry's, not added to it) and after the
// reaper returned it (the retry reserves anew). The retry's settlement counts the cost once, and
// a late settlement of the first attempt (a process cut off, not dead) adds nothing more.
func TestKilledKeyReservationRetriedCountsOnce(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	acct := newAccount(t, st, 10_000_000)
	c := newCappedKey(t, st, acct, 1000, store.CapPeriodMonthly)
	dead := New(openStore(t, cs), Options{Holder: "dead", Lease: time.Second})
	live := New(st, Options{Holder: "live"})

	// Within the lease: 700 held by the dead process, the retry's 900 fits because it replaces it.
	lost, err := dead.ReserveForKey(ctx, acct, "agt_k_1", 700, &c)
	if err != nil {
		t.Fatal(err)
	}
	r, err := live.ReserveForKey(ctx, acct, "agt_k_1", 900, &c)
	if err != nil {
		t.Fatalf("retry while the dead process's reservation is live: %v", err)
	}
	if b := budget(t, st, c); b.ReservedMicros != 900 || b.SpentMicros != 0 {
		t.Fatalf("budget %+v, want the retry's 900 reserved only", b)
	}
	// The row is the live process's now: its lease is renewed with the live process's.
	if n, err := st.RenewKeyReservations(ctx, "live", time.Minute); err != nil || n != 1 {
		t.Fatalf("renewed %d (%v), want the taken-over reservation", n, err)
	}
	r.Settle(400, UsageRecord{KeyID: c.KeyID})
	if b := budget(t, st, c); b.ReservedMicros != 0 || b.SpentMicros != 400 {
		t.Fatalf("budget %+v, want 400 spent once", b)
	}

	// After the lease and the reaper.
	lost2, err := dead.ReserveForKey(ctx, acct, "agt_k_2", 500, &c)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := live.ReapExpiredKeyReservations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead process's reservation was never reaped")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if b := budget(t, st, c); b.ReservedMicros != 0 {
		t.Fatalf("budget %+v after the reaper", b)
	}
	// 600 left of the cap: 601 is refused, as for any request.
	if _, err := live.ReserveForKey(ctx, acct, "agt_k_2", 601, &c); !isKeyCap(err, 601, 600) {
		t.Fatalf("a retry past the cap: %v", err)
	}
	r, err = live.ReserveForKey(ctx, acct, "agt_k_2", 600, &c)
	if err != nil {
		t.Fatalf("retry of a reaped reservation: %v", err)
	}
	if b := budget(t, st, c); b.ReservedMicros != 600 || b.SpentMicros != 400 {
		t.Fatalf("budget %+v, want the retry's 600 reserved", b)
	}
	r.Settle(100, UsageRecord{KeyID: c.KeyID})
	if err := live.Close(ctx); err != nil { // the retries' usage is written
		t.Fatal(err)
	}
	// The first attempts settle late (their process was cut off, not dead): the key's budget
	// counted their request ids already, and the ledger billed them already.
	lost.Settle(650, UsageRecord{KeyID: c.KeyID})
	lost2.Settle(500, UsageRecord{KeyID: c.KeyID})
	if b := budget(t, st, c); b.ReservedMicros != 0 || b.SpentMicros != 500 {
		t.Fatalf("budget %+v, want 500 spent (400 and 100)", b)
	}
	if err := dead.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, usage, err := st.UsageTotals(ctx, acct); err != nil || usage != 500 {
		t.Fatalf("usage %d (%v), want 500: the key's budget counts what the ledger charges", usage, err)
	}
}

// TestKeyRetryAcrossPeriods: a retry that counts in another cap period than its first attempt
// (a daily cap, the retry after midnight) takes the reservation over into the new period: the
// old period's budget no longer holds it.
func TestKeyRetryAcrossPeriods(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 10_000_000)
	c := newCappedKey(t, st, acct, 1000, store.CapPeriodDaily)
	today := store.CapPeriodDaily.Start(time.Now())
	yesterday := today.AddDate(0, 0, -1)
	req := store.KeyReservationRequest{KeyID: c.KeyID, PeriodStart: yesterday, CapMicros: 1000,
		AmountMicros: 800, RequestID: "agt_p_1", Holder: "a", Lease: time.Minute}
	if kr, err := st.ReserveKeyBudget(ctx, req); err != nil || !kr.Reserved {
		t.Fatalf("%+v %v", kr, err)
	}
	req.PeriodStart, req.AmountMicros, req.Holder = today, 300, "b"
	if kr, err := st.ReserveKeyBudget(ctx, req); err != nil || !kr.Reserved || kr.Settled {
		t.Fatalf("retry in the next period: %+v %v", kr, err)
	}
	if b, _ := st.GetKeyBudget(ctx, c.KeyID, yesterday); b.ReservedMicros != 0 {
		t.Fatalf("yesterday's budget %+v still holds the retried reservation", b)
	}
	if ok, err := st.SettleKeyReservation(ctx, c.KeyID, "agt_p_1", 200); err != nil || !ok {
		t.Fatalf("settle: %v %v", ok, err)
	}
	if b := budget(t, st, c); b.ReservedMicros != 0 || b.SpentMicros != 200 {
		t.Fatalf("today's budget %+v, want 200 spent", b)
	}
}

// TestKeyReservationSameRequestIDConcurrently: two processes reserve and settle the same
// request ids at the same moment (a step run twice at once): no error, and each request id is
// counted once in the key's budget, as in the ledger.
func TestKeyReservationSameRequestIDConcurrently(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	acct := newAccount(t, st, 100_000_000)
	meters := []*Meter{New(st, Options{Holder: "a"}), New(openStore(t, cs), Options{Holder: "b"})}
	c := newCappedKey(t, st, acct, 1_000_000, store.CapPeriodNone)
	const ids = 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*ids)
	for i := range ids {
		for _, m := range meters {
			wg.Go(func() {
				r, err := m.ReserveForKey(ctx, acct, fmt.Sprintf("agt_c_%d", i), 900, &c)
				if err != nil {
					errs <- err
					return
				}
				r.Settle(100, UsageRecord{KeyID: c.KeyID})
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, m := range meters {
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	b := budget(t, st, c)
	if b.SpentMicros != ids*100 || b.ReservedMicros != 0 {
		t.Fatalf("budget %+v, want %d spent (each request id once) and nothing reserved", b, ids*100)
	}
	if _, usage, err := st.UsageTotals(ctx, acct); err != nil || usage != b.SpentMicros {
		t.Fatalf("usage %d (%v), the key's budget %d", usage, err, b.SpentMicros)
	}
}

// TestKeyCapRetryAfterAFailedAttemptCounts: an agent's step whose model call failed (every
// upstream refused it: its reservation released; or its answer was unusable: settled at 0
// under an id of its own, "_undelivered_", so that the call's id stays free for the retry) is
// retried with the same request id, as the agents' jobs retry it. The ledger bills the retry
// (the failed attempt left no record under the call's id), so the key's budget must count it
// too: it reserves the retry's worst case within the cap and adds its cost to the spend. (It
// did not: the release, and the settlement at 0 under another id, marked the key's row settled,
// as a request counted already; the retry was then served against no cap and its cost never
// reached the budget, so a capped key's agent could spend past its cap one failed step at a
// time.)
func TestKeyCapRetryAfterAFailedAttemptCounts(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 10_000_000)
	c := newCappedKey(t, st, acct, 1000, store.CapPeriodDaily)
	m := New(st, Options{Holder: "a"})

	// The first attempt of step 1 is refused by every upstream: released.
	r, err := m.ReserveForKey(ctx, acct, "agt_f_1", 600, &c)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	if b := budget(t, st, c); b.SpentMicros != 0 || b.ReservedMicros != 0 {
		t.Fatalf("released: budget %+v, want nothing spent or reserved", b)
	}
	// Its retry is reserved against the cap, and counted.
	r, err = m.ReserveForKey(ctx, acct, "agt_f_1", 600, &c)
	if err != nil {
		t.Fatal(err)
	}
	if b := budget(t, st, c); b.ReservedMicros != 600 {
		t.Fatalf("retry after a release: budget %+v, want its 600 reserved against the cap", b)
	}
	if got := r.Settle(400, UsageRecord{KeyID: c.KeyID}); got != 400 {
		t.Fatalf("charged %d, want 400", got)
	}
	if b := budget(t, st, c); b.SpentMicros != 400 || b.ReservedMicros != 0 {
		t.Fatalf("retry after a release settled: budget %+v, want 400 spent", b)
	}

	// The first attempt of step 2 answers with an unusable body: settled at 0 under an id of
	// its own (exchange.SettleUndelivered for an in-process call).
	r, err = m.ReserveForKey(ctx, acct, "agt_f_2", 500, &c)
	if err != nil {
		t.Fatal(err)
	}
	r.Settle(0, UsageRecord{KeyID: c.KeyID, Status: "upstream_malformed", RequestID: "agt_f_2_undelivered_0a1b2c3d"})
	if b := budget(t, st, c); b.SpentMicros != 400 || b.ReservedMicros != 0 {
		t.Fatalf("undelivered: budget %+v, want 400 spent and nothing reserved", b)
	}
	// 600 are left of the cap: a retry of 601 is refused, as any request would be.
	if _, err := m.ReserveForKey(ctx, acct, "agt_f_2", 601, &c); !isKeyCap(err, 601, 600) {
		t.Fatalf("a retry past the cap: %v", err)
	}
	r, err = m.ReserveForKey(ctx, acct, "agt_f_2", 500, &c)
	if err != nil {
		t.Fatal(err)
	}
	r.Settle(300, UsageRecord{KeyID: c.KeyID})
	if b := budget(t, st, c); b.SpentMicros != 700 || b.ReservedMicros != 0 {
		t.Fatalf("retry after an undelivered attempt settled: budget %+v, want 700 spent", b)
	}
	// 300 are left: the cap holds for the next step.
	if _, err := m.ReserveForKey(ctx, acct, "agt_f_3", 301, &c); !isKeyCap(err, 301, 300) {
		t.Fatalf("a request past the cap: %v", err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, usage, err := st.UsageTotals(ctx, acct); err != nil || usage != 700 {
		t.Fatalf("usage %d (%v), want 700", usage, err)
	}
	if b := budget(t, st, c); b.SpentMicros != 700 {
		t.Fatalf("budget %+v: the key counts other than the ledger charges", b)
	}
	checkRest(t, st, acct)
}
