package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

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

// TestKeyReservationCountsWhatTheLedgerBilled: a capped key's reservation ends counting the
// bill of the usage record the ledger holds for its request id, whichever attempt settled it.
// A settlement beyond the reservation whose outcome was unknown committed 300,000; the ledger
// then bills another attempt's record of the request id (a retry served by another process)
// at 250,000, and the writer moves the reservation to that bill. The first settlement's retry,
// from the process that made it, comes after and leaves it there: before, it brought the
// reservation down to its own 100,000, which nothing billed. A record refused as a duplicate
// leaves the bill of the record written first; a request id billed to another key counts
// nothing against this one.
func TestKeyReservationCountsWhatTheLedgerBilled(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	acct := fundedAccount(t, st, 10_000_000)
	key := cappedKey(t, st, acct, 5_000_000)
	other := cappedKey(t, st, acct, 5_000_000)
	period := store.CapPeriodMonthly.Start(time.Now())
	spent := func() int64 {
		t.Helper()
		b, err := st.GetKeyBudget(ctx, key, period)
		if err != nil {
			t.Fatal(err)
		}
		if b.ReservedMicros != 0 {
			t.Fatalf("budget %+v: want nothing reserved", b)
		}
		return b.SpentMicros
	}
	write := func(request string, apiKey uuid.UUID, cost int64) {
		t.Helper()
		now := time.Now()
		if _, err := st.WriteUsage(ctx, "", []store.UsageRecord{{AccountID: acct, RequestID: request, APIKeyID: apiKey,
			Model: "m", Route: "/v1/messages", CostMicros: cost, Status: "completed", StartedAt: now, FinishedAt: now,
			SettleKey: true}}); err != nil {
			t.Fatal(err)
		}
	}
	if kr, err := st.ReserveKeyBudget(ctx, store.KeyReservationRequest{KeyID: key, PeriodStart: period, CapMicros: 5_000_000,
		AmountMicros: 100_000, RequestID: "retried", Holder: "me", Lease: time.Minute}); err != nil || !kr.Reserved {
		t.Fatalf("reserve: %+v %v", kr, err)
	}
	if charged, err := st.SettleKeyReservationBeyond(ctx, key, "retried", 100_000, 200_000, 5_000_000); err != nil || charged != 200_000 {
		t.Fatalf("settle beyond: %d, %v", charged, err)
	}
	write("retried", key, 250_000)
	if got := spent(); got != 250_000 {
		t.Fatalf("the key counts %d once the retry's record is billed, want its 250,000", got)
	}
	if changed, err := st.ResettleKeyReservationBeyond(ctx, key, "retried", "me", 100_000, 200_000); err != nil || changed {
		t.Fatalf("the first settlement's retry changed %v (%v): the reservation counts what the ledger billed", changed, err)
	}
	if got := spent(); got != 250_000 {
		t.Fatalf("the key counts %d after the first settlement's retry, want the 250,000 billed", got)
	}
	write("retried", key, 100_000) // the first attempt's record, a duplicate
	if got := spent(); got != 250_000 {
		t.Fatalf("the key counts %d after the duplicate, want the 250,000 billed", got)
	}

	// Billed to another key: this key's reservation of the request id counts nothing.
	if kr, err := st.ReserveKeyBudget(ctx, store.KeyReservationRequest{KeyID: key, PeriodStart: period, CapMicros: 5_000_000,
		AmountMicros: 100_000, RequestID: "other-key", Holder: "me", Lease: time.Minute}); err != nil || !kr.Reserved {
		t.Fatalf("reserve: %+v %v", kr, err)
	}
	write("other-key", other, 40_000)
	write("other-key", key, 60_000) // refused as a duplicate
	if got := spent(); got != 250_000 {
		t.Fatalf("the key counts %d, want 250,000: the request id was billed to another key", got)
	}
}
