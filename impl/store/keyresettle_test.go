package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/store"
)

// TestKeyResettleAfterAnUnknownOutcome: ResettleKeyReservationBeyond, the retry of a
// settlement beyond its reservation whose COMMIT went unanswered, leaves the key counting what
// the request was billed (its cost, the excess waived) whichever way the first write went: a
// reservation the first write never settled is settled at the cost; one it settled with the
// excess (it committed) is brought down to the cost, the budget's spend with it; running it
// again changes nothing. A reservation settled by another holder (a retry of the request id
// that took it over), or at more than the first write could have added, is left as it is.
func TestKeyResettleAfterAnUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	acct := fundedAccount(t, st, 10_000_000)
	key := cappedKey(t, st, acct, 5_000_000)
	period := store.CapPeriodMonthly.Start(time.Now())
	reserve := func(request, holder string) {
		t.Helper()
		kr, err := st.ReserveKeyBudget(ctx, store.KeyReservationRequest{KeyID: key, PeriodStart: period, CapMicros: 5_000_000,
			AmountMicros: 100_000, RequestID: request, Holder: holder, Lease: time.Minute})
		if err != nil || !kr.Reserved {
			t.Fatalf("reserve %s: %+v %v", request, kr, err)
		}
	}
	spent := int64(0)
	check := func(step string) {
		t.Helper()
		b, err := st.GetKeyBudget(ctx, key, period)
		if err != nil {
			t.Fatal(err)
		}
		if b.SpentMicros != spent || b.ReservedMicros != 0 {
			t.Fatalf("%s: budget %+v, want %d spent and nothing reserved", step, b, spent)
		}
	}
	resettle := func(request string, want bool) {
		t.Helper()
		changed, err := st.ResettleKeyReservationBeyond(ctx, key, request, "me", 100_000, 200_000)
		if err != nil || changed != want {
			t.Fatalf("resettle %s: changed %v (%v), want %v", request, changed, err, want)
		}
	}

	// The first write did not commit: the retry settles at the cost.
	reserve("not-committed", "me")
	resettle("not-committed", true)
	spent += 100_000
	check("not committed")
	resettle("not-committed", false)
	check("not committed, again")

	// It committed, with 150,000 of the excess: the retry takes that back.
	reserve("committed", "me")
	if charged, err := st.SettleKeyReservationBeyond(ctx, key, "committed", 100_000, 200_000, 5_000_000); err != nil || charged != 200_000 {
		t.Fatalf("settle beyond: %d, %v", charged, err)
	}
	spent += 300_000
	check("committed")
	resettle("committed", true)
	spent -= 200_000
	check("committed, retried")
	resettle("committed", false)
	check("committed, retried again")

	// Settled by another process that took the reservation over, at 250,000: not this retry's.
	reserve("taken-over", "me")
	reserve("taken-over", "other")
	if ok, err := st.SettleKeyReservation(ctx, key, "taken-over", 250_000); err != nil || !ok {
		t.Fatalf("settle: %v %v", ok, err)
	}
	spent += 250_000
	resettle("taken-over", false)
	check("taken over")

	// Settled by this holder at more than the first write could have added (400,000 > cost +
	// excess): not the first write's.
	reserve("dearer", "me")
	if ok, err := st.SettleKeyReservation(ctx, key, "dearer", 400_000); err != nil || !ok {
		t.Fatalf("settle: %v %v", ok, err)
	}
	spent += 400_000
	resettle("dearer", false)
	check("dearer")
}
