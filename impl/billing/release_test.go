package billing

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
)

// holdOf is the holder's hold of the account in the database (0 when it has none).
func holdOf(t *testing.T, st *store.Store, acct uuid.UUID, holder string) int64 {
	t.Helper()
	holds, err := st.CreditHolds(context.Background(), acct)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range holds {
		if h.Holder == holder {
			return h.AmountMicros
		}
	}
	return 0
}

// awaitReleaseListener waits until m listens for the other processes' requests to release
// holds: an ask sent before would reach nobody.
func awaitReleaseListener(t *testing.T, m *Meter) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !m.releaseListening.Load(); {
		if time.Now().After(deadline) {
			t.Fatal("the meter's release listener did not subscribe within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestIdleHoldReleasedWhenAnotherProcessNeedsIt runs two meters on one database. Meter A draws
// a hold of almost all of an account's credit for one request, settles it and has nothing open:
// its hold is idle, and its own idle release is 5 s away. Meter B's request, whose worst case
// the balance covers but A's hold blocks, is served, within well under the idle release,
// because B asks A to release its idle hold and A does (before this change B answered 402
// until A's idle release). Then, with A's credit in an open reservation, B's request is
// refused with 402 after the same ask, and A's hold and reservation stay whole. The books
// balance (nothing held at rest, the ledger is the balance, each request billed once) and no
// hold is released twice.
func TestIdleHoldReleasedWhenAnotherProcessNeedsIt(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	const granted = 10_000
	acct := newAccount(t, st, granted)
	opts := func(holder string) Options {
		// No outage reserve: A's hold is what its request drew, nothing more. The wait is
		// generous against a slow machine; a release that is seen ends it early.
		return Options{Holder: holder, ReleaseWait: 2 * time.Second, Outage: OutagePolicy{Cover: -1}}
	}
	a, b := New(st, opts("gw-a")), New(st, opts("gw-b"))
	runMeter(t, a)
	runMeter(t, b)
	awaitReleaseListener(t, a)
	awaitReleaseListener(t, b)
	var books settled

	// A draws 9,000 (the account has 1,000 left) and settles 1,000: its hold of 8,000 is idle
	// once the record is written, which A's writer does on the ask at the latest.
	if !books.serve(ctx, a, acct, "a-1", 9_000, 1_000) {
		t.Fatal("A's first request was refused")
	}
	if held := holdOf(t, st, acct, "gw-a"); held < 8_000 {
		t.Fatalf("A holds %d, want at least 8,000", held)
	}

	// B needs 3,000: the balance (9,000 once A's record is written) covers it, A's hold blocks it.
	began := time.Now()
	r, err := b.Reserve(ctx, acct, "b-1", 3_000)
	took := time.Since(began)
	if err != nil {
		t.Fatalf("B's request, which the balance covers, was refused after %v: %v", took.Round(time.Millisecond), err)
	}
	t.Logf("B served after %v (the idle release would have taken 5 s)", took.Round(time.Millisecond))
	if took >= a.opts.IdleRelease {
		t.Errorf("B waited %v: as long as the idle release", took)
	}
	if b.CreditStats().ReleaseAsks != 1 || a.CreditStats().ReleasedOnAsk != 1 {
		t.Errorf("B asked %d times, A released %d holds on ask; want 1 and 1", b.CreditStats().ReleaseAsks, a.CreditStats().ReleasedOnAsk)
	}
	if held := holdOf(t, st, acct, "gw-a"); held != 0 {
		t.Errorf("A still holds %d after releasing on ask", held)
	}
	if st := a.account(acct, false); st != nil {
		st.mu.Lock()
		if st.hasHold || st.dbAmount != 0 || st.busy != nil || st.releasing {
			t.Errorf("A's view after the release: hold %v of %d, busy %v, releasing %v", st.hasHold, st.dbAmount, st.busy != nil, st.releasing)
		}
		st.mu.Unlock()
	}
	r.Settle(2_000, UsageRecord{})
	books.add(acct, "b-1", 2_000)

	// A serves again from a new hold: its view of the released one is right.
	if !books.serve(ctx, a, acct, "a-2", 1_000, 500) {
		t.Fatal("A's request after its release was refused")
	}
	flushUntil(t, a)
	flushUntil(t, b)

	// Now A's credit is in an open reservation: B is refused, and A's hold stays whole.
	acct2 := newAccount(t, st, granted)
	open, err := a.Reserve(ctx, acct2, "a2-open", 9_000)
	if err != nil {
		t.Fatal(err)
	}
	asked, released := b.releaseAsks.Load(), a.releasedOnAsk.Load()
	_, err = b.Reserve(ctx, acct2, "b2-1", 3_000)
	var insufficient *InsufficientError
	if !errors.As(err, &insufficient) {
		t.Fatalf("B's request that A's open reservation blocks: %v, want an InsufficientError", err)
	}
	if b.releaseAsks.Load() != asked+1 || a.releasedOnAsk.Load() != released {
		t.Errorf("B asked %d more times (an ask nobody answers is not repeated), A released %d more holds; want 1 and 0",
			b.releaseAsks.Load()-asked, a.releasedOnAsk.Load()-released)
	}
	if held := holdOf(t, st, acct2, "gw-a"); held != 9_000 {
		t.Errorf("A's hold with an open reservation is %d, want 9,000", held)
	}
	open.Settle(8_000, UsageRecord{})
	books.add(acct2, "a2-open", 8_000)

	stopMeter(t, a)
	stopMeter(t, b)
	for id, costs := range books.costs {
		credit := checkRest(t, st, id)
		ledger := usageLedger(t, st, id)
		var spent int64
		for req, cost := range costs {
			e, ok := ledger[store.UsageLedgerKey(req)]
			if !ok || -e.AmountMicros != cost {
				t.Errorf("request %s: ledger entry %+v, want %d", req, e, -cost)
			}
			spent += cost
		}
		if len(ledger) != len(costs) || credit.BalanceMicros != granted-spent {
			t.Errorf("account %s: %d usage entries for %d requests, balance %d, want %d",
				id, len(ledger), len(costs), credit.BalanceMicros, granted-spent)
		}
	}
}

// TestFreePartOfABusyHoldReleasedOnAsk: a process asked to release its hold while one of its
// requests of the account is in flight gives back at once the part of the hold that no request
// uses, and keeps the part its request reserved; the other process's request, which the
// balance covers, is served, and the books balance. On the code before, the busy hold was kept
// whole and the request refused (the false 402 that the three-host test found with requests
// sent to every host at once).
func TestFreePartOfABusyHoldReleasedOnAsk(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	const granted = 10_000
	acct := newAccount(t, st, granted)
	opts := func(holder string) Options {
		return Options{Holder: holder, ReleaseWait: 2 * time.Second, Outage: OutagePolicy{Cover: -1}}
	}
	a, b := New(st, opts("gw-a")), New(st, opts("gw-b"))
	runMeter(t, a)
	runMeter(t, b)
	awaitReleaseListener(t, a)
	awaitReleaseListener(t, b)
	var books settled

	// A draws 9,000 and settles 1,000 of it: its hold is 8,000 once the record is written.
	if !books.serve(ctx, a, acct, "a-1", 9_000, 1_000) {
		t.Fatal("A's first request was refused")
	}
	flushUntil(t, a)
	// A request of A is in flight, reserving 1,000 of the hold: 7,000 of it are free.
	open, err := a.Reserve(ctx, acct, "a-open", 1_000)
	if err != nil {
		t.Fatal(err)
	}
	if held := holdOf(t, st, acct, "gw-a"); held != 8_000 {
		t.Fatalf("A holds %d, want 8,000", held)
	}

	// B needs 3,000: the balance (9,000) covers it, A's hold leaves 1,000 available.
	r, err := b.Reserve(ctx, acct, "b-1", 3_000)
	if err != nil {
		t.Fatalf("B's request, which the balance covers, was refused while A's hold was busy: %v", err)
	}
	if held := holdOf(t, st, acct, "gw-a"); held != 1_000 {
		t.Errorf("A holds %d after giving back its free part, want the 1,000 its request reserved", held)
	}
	if b.CreditStats().ReleaseAsks != 1 || a.CreditStats().ReleasedOnAsk != 1 {
		t.Errorf("B asked %d times, A answered %d asks with a release; want 1 and 1", b.CreditStats().ReleaseAsks, a.CreditStats().ReleasedOnAsk)
	}
	if v := a.account(acct, false); v != nil {
		v.mu.Lock()
		if !v.hasHold || v.dbAmount != 1_000 || v.outstanding != 1_000 || v.busy != nil {
			t.Errorf("A's view after giving back: hold %v of %d, outstanding %d, busy %v; want a hold of 1,000 all reserved",
				v.hasHold, v.dbAmount, v.outstanding, v.busy != nil)
		}
		v.mu.Unlock()
	}

	// A's request settles within what it kept; B's too; both are billed once.
	open.Settle(600, UsageRecord{})
	books.add(acct, "a-open", 600)
	r.Settle(2_500, UsageRecord{})
	books.add(acct, "b-1", 2_500)
	// And A serves again, from what is left.
	if !books.serve(ctx, a, acct, "a-2", 1_000, 400) {
		t.Fatal("A's request after giving back part of its hold was refused")
	}
	stopMeter(t, a)
	stopMeter(t, b)
	credit := checkRest(t, st, acct)
	ledger := usageLedger(t, st, acct)
	var spent int64
	for req, cost := range books.costs[acct] {
		if e, ok := ledger[store.UsageLedgerKey(req)]; !ok || -e.AmountMicros != cost {
			t.Errorf("request %s: ledger entry %+v, want %d", req, e, -cost)
		}
		spent += cost
	}
	if len(ledger) != len(books.costs[acct]) || credit.BalanceMicros != granted-spent {
		t.Errorf("%d usage entries for %d requests, balance %d, want %d", len(ledger), len(books.costs[acct]), credit.BalanceMicros, granted-spent)
	}
}

// TestHoldCoveredRequestAsksNobody shows that the common path is untouched: requests that the
// hold covers, and a 402 for an account whose balance does not cover the request whatever the
// others hold, send no ask to the other processes.
func TestHoldCoveredRequestAsksNobody(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 10_000)
	m := New(st, Options{Holder: "gw-only"})
	runMeter(t, m)
	var books settled
	for i := range 5 {
		if !books.serve(ctx, m, acct, "r-"+string(rune('a'+i)), 500, 100) {
			t.Fatalf("request %d refused", i)
		}
	}
	if _, err := m.Reserve(ctx, acct, "too-much", 20_000); !errors.Is(err, store.ErrInsufficientCredit) {
		t.Fatalf("a request beyond the balance: %v", err)
	}
	if n := m.releaseAsks.Load(); n != 0 {
		t.Errorf("%d asks to release holds, want none", n)
	}
	stopMeter(t, m)
	checkRest(t, st, acct)
}
