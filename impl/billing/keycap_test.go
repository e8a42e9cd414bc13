package billing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/devkit/clocktest"
	"github.com/tollgate/tollgate/impl/store"
)

// newCappedKey creates a key of the account with a credit cap of capMicros in period.
func newCappedKey(t *testing.T, st *store.Store, acct uuid.UUID, capMicros int64, period store.CapPeriod) KeyCap {
	t.Helper()
	if period != store.CapPeriodNone {
		// The meters reserve in the period of their clock and budget reads the period of its
		// own: both must be the one period of the test.
		clocktest.NotAcrossMidnight(t, 30*time.Second)
	}
	k, err := st.CreateAPIKey(context.Background(), store.NewAPIKey{
		AccountID: acct, Name: "capped", Hash: []byte(uuid.NewString()[:32]), DisplayPrefix: "tgk_test",
		CreditCapMicros: &capMicros, CapPeriod: period,
	})
	if err != nil {
		t.Fatal(err)
	}
	return KeyCap{KeyID: k.ID, CapMicros: capMicros, Period: period}
}

// budget returns the key's budget in the current period.
func budget(t *testing.T, st *store.Store, c KeyCap) store.KeyBudget {
	t.Helper()
	b, err := st.GetKeyBudget(context.Background(), c.KeyID, c.Period.Start(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKeyCapRefusesExactlyPastTheCap: a reservation that brings the key's spend plus its
// reservations to exactly the cap is granted, one micro-unit more is a 402 naming the key's cap,
// and a settlement counts the real cost, not the worst case, so the rest of the cap is usable.
func TestKeyCapRefusesExactlyPastTheCap(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 10_000_000)
	m := New(st, Options{})
	defer m.Close(ctx)
	c := newCappedKey(t, st, acct, 1000, store.CapPeriodDaily)

	r1, err := m.ReserveForKey(ctx, acct, "r1", 600, &c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReserveForKey(ctx, acct, "r2", 401, &c); !isKeyCap(err, 401, 400) {
		t.Fatalf("600 reserved of a 1000 cap, 401 more: %v; want a KeyCapError with 400 left", err)
	}
	r2, err := m.ReserveForKey(ctx, acct, "r2", 400, &c)
	if err != nil {
		t.Fatalf("600 reserved of a 1000 cap, 400 more: %v", err)
	}
	if b := budget(t, st, c); b.ReservedMicros != 1000 || b.SpentMicros != 0 {
		t.Fatalf("budget %+v, want 1000 reserved", b)
	}
	if got := r1.Settle(250, UsageRecord{KeyID: c.KeyID}); got != 250 {
		t.Fatalf("settled %d", got)
	}
	r2.Release()
	if b := budget(t, st, c); b.ReservedMicros != 0 || b.SpentMicros != 250 {
		t.Fatalf("after a settlement of 250 and a release: %+v", b)
	}
	if _, err := m.ReserveForKey(ctx, acct, "r3", 751, &c); !isKeyCap(err, 751, 750) {
		t.Fatalf("250 spent of 1000, 751 more: %v", err)
	}
	r3, err := m.ReserveForKey(ctx, acct, "r3", 750, &c)
	if err != nil {
		t.Fatalf("250 spent of 1000, 750 more: %v", err)
	}
	r3.Settle(750, UsageRecord{KeyID: c.KeyID})
	if _, err := m.ReserveForKey(ctx, acct, "r4", 1, &c); !isKeyCap(err, 1, 0) {
		t.Fatalf("the cap spent, 1 more: %v", err)
	}
	// Settling again counts nothing twice.
	r3.Settle(750, UsageRecord{KeyID: c.KeyID})
	if b := budget(t, st, c); b.SpentMicros != 1000 || b.ReservedMicros != 0 {
		t.Fatalf("budget %+v, want 1000 spent", b)
	}
	// The account's credit was reserved and returned with the key's: 1000 spent, in the ledger.
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if credit := checkRest(t, st, acct); credit.BalanceMicros != 10_000_000-1000 {
		t.Fatalf("balance %d", credit.BalanceMicros)
	}
}

func isKeyCap(err error, needed, available int64) bool {
	var kc *KeyCapError
	e := apierror.As(err)
	return errors.As(err, &kc) && kc.NeededMicros == needed && kc.AvailableMicros == available &&
		e != nil && e.Kind == apierror.KindInsufficientCredit
}

// TestKeyCapRaceAcrossMeters: 200 reservations at once against one capped key, through two
// meters (two gateway processes) on one database, each settling at its worst case: the key's
// spend never passes the cap, and exactly the granted ones are counted.
func TestKeyCapRaceAcrossMeters(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	st2 := openStore(t, cs)
	acct := newAccount(t, st, 100_000_000)
	meters := []*Meter{New(st, Options{Holder: "a"}), New(st2, Options{Holder: "b"})}
	c := newCappedKey(t, st, acct, 50_000, store.CapPeriodNone)
	var mu sync.Mutex
	granted, refused := 0, 0
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			r, err := meters[i%2].ReserveForKey(ctx, acct, fmt.Sprintf("race-%d", i), 700, &c)
			if err == nil {
				r.Settle(700, UsageRecord{KeyID: c.KeyID})
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				granted++
			case errors.As(err, new(*KeyCapError)):
				refused++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, m := range meters {
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	b := budget(t, st, c)
	if granted != 50_000/700 || refused != 200-granted || b.SpentMicros != int64(granted)*700 || b.ReservedMicros != 0 {
		t.Fatalf("granted %d, refused %d, budget %+v; want %d granted, all spent within the cap", granted, refused, b, 50_000/700)
	}
	_, usage, err := st.UsageTotals(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	if usage != b.SpentMicros {
		t.Fatalf("the usage records charge %d, the key's budget counts %d", usage, b.SpentMicros)
	}
	checkRest(t, st, acct)
}

// TestKilledKeyReservationReturnsAfterLease: a process that reserved against a key's cap and
// died (it never settles nor renews) holds that part of the cap only until its lease ends; then
// the next reservation of the key returns it. Were the process not dead after all, its late
// settlement still counts the cost (the budget keeps counting what the ledger charges).
func TestKilledKeyReservationReturnsAfterLease(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	acct := newAccount(t, st, 10_000_000)
	c := newCappedKey(t, st, acct, 1000, store.CapPeriodMonthly)
	dead := New(openStore(t, cs), Options{Holder: "dead", Lease: time.Second})
	lost, err := dead.ReserveForKey(ctx, acct, "lost", 900, &c)
	if err != nil {
		t.Fatal(err)
	}
	live := New(st, Options{Holder: "live"})
	defer live.Close(ctx)
	if _, err := live.ReserveForKey(ctx, acct, "next", 200, &c); !isKeyCap(err, 200, 100) {
		t.Fatalf("while the dead process's lease lasts: %v; want the cap refused", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var r *Reservation
	for {
		if r, err = live.ReserveForKey(ctx, acct, "next", 200, &c); err == nil {
			break
		}
		if !errors.As(err, new(*KeyCapError)) || time.Now().After(deadline) {
			t.Fatalf("after the lease: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if b := budget(t, st, c); b.ReservedMicros != 200 {
		t.Fatalf("budget %+v: want only the live reservation held", b)
	}
	r.Settle(150, UsageRecord{KeyID: c.KeyID})
	lost.Settle(300, UsageRecord{KeyID: c.KeyID})
	if b := budget(t, st, c); b.ReservedMicros != 0 || b.SpentMicros != 450 {
		t.Fatalf("budget %+v: want 450 spent (150 and the late 300), nothing reserved", b)
	}
	if err := dead.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := live.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, usage, err := st.UsageTotals(ctx, acct); err != nil || usage != 450 {
		t.Fatalf("usage %d (%v), want 450", usage, err)
	}
}

// TestKeyCapPeriods: daily and monthly periods start at UTC midnight and on the first of the
// month, whatever the zone of the time; none is one period for ever.
func TestKeyCapPeriods(t *testing.T) {
	zone := time.FixedZone("UTC+5", 5*3600)
	at := time.Date(2027, 3, 1, 2, 0, 0, 0, zone) // 2027-02-28 21:00 UTC
	if got, want := store.CapPeriodDaily.Start(at), time.Date(2027, 2, 28, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("daily: %v, want %v", got, want)
	}
	if got, want := store.CapPeriodMonthly.Start(at), time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("monthly: %v, want %v", got, want)
	}
	if got := store.CapPeriodNone.Start(at); !got.Equal(time.Unix(0, 0)) {
		t.Errorf("none: %v", got)
	}
}
