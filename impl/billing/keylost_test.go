package billing

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
)

// TestLostCommitOfABeyondSettlementCountsWhatWasBilled: a capped key's request billed beyond
// its reservation (the dense text) settles against the key's budget in a transaction whose
// COMMIT the server carries out and whose answer the relay drops, closing the connection. The
// meter, told nothing, charges the account the reservation alone (the excess waived) and
// leaves a settlement at that cost to the maintenance; the database holds the settlement with
// the excess the cap had free. The maintenance's retry finds the reservation settled and
// leaves it; the writer of the usage record makes it count the record's bill, so the key's
// spend is what the account was billed (its usage record and its ledger entry), and the rest
// of the cap is usable. Before the writer did (and before the meter's own retry took the
// excess back, which it no longer does), the key counted 1,500,000 where the account was
// billed 666,676, and a request needing the difference was refused.
func TestLostCommitOfABeyondSettlementCountsWhatWasBilled(t *testing.T) {
	ctx := context.Background()
	const capMicros = 1_500_000
	b := beyondSettlement(t, "lost-commit", capMicros)
	m, st0, acct, relay, capped, r, rec := b.m, b.st0, b.acct, b.relay, b.capped, b.r, b.rec
	relay.LoseCommitAck()
	charged := r.SettleUsage(rec)
	if relay.LostAcks() != 1 {
		t.Fatalf("%d commit answers lost: the settlement's COMMIT should have lost its answer", relay.LostAcks())
	}
	if charged != denseReserved {
		t.Fatalf("charged %d: a settlement that failed should charge the reservation %d alone", charged, denseReserved)
	}
	if len(m.keys.pending) != 1 || m.keys.pending[0].cost != denseReserved || m.keys.pending[0].extra != 0 {
		t.Fatalf("pending settlements %+v: want one at the reservation %d, without the excess", m.keys.pending, denseReserved)
	}
	// The server committed the settlement, with the excess the cap had free.
	if b := budget(t, st0, capped); b.SpentMicros != capMicros || b.ReservedMicros != 0 {
		t.Fatalf("the key's budget after the lost answer %+v: the settlement should have committed %d", b, capMicros)
	}

	m.maintainKeys(ctx, time.Now())
	if n := len(m.keys.pending); n != 0 {
		t.Fatalf("%d key settlements still wait after the maintenance", n)
	}
	billed := settledRecord(t, m, st0, acct, "lost-commit")
	if billed.CostMicros != charged || billed.CostMicros+billed.WaivedMicros != denseBill {
		t.Fatalf("record: cost %d waived %d; want %d charged and the rest of %d waived", billed.CostMicros, billed.WaivedMicros, charged, denseBill)
	}
	if e, ok := usageLedger(t, st0, acct)["usage:lost-commit"]; !ok || -e.AmountMicros != billed.CostMicros {
		t.Fatalf("ledger entry %+v (found %v), want %d billed", e, ok, billed.CostMicros)
	}
	if b := budget(t, st0, capped); b.SpentMicros != billed.CostMicros || b.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v after the record was written: the key counts other than the account was billed (%d)", b, billed.CostMicros)
	}
	// The retry again (another maintenance, a duplicate) changes nothing.
	m.keys.pending = append(m.keys.pending, keySettlement{keyID: capped.KeyID, requestID: "lost-commit", cost: charged})
	m.keys.live.Add(1)
	m.maintainKeys(ctx, time.Now())
	if b := budget(t, st0, capped); b.SpentMicros != billed.CostMicros {
		t.Errorf("the key's budget %+v after a second retry, want %d spent", b, billed.CostMicros)
	}

	// What the account was not billed is free in the cap.
	rest := capMicros - billed.CostMicros
	r, err := m.ReserveForKey(ctx, acct, "after", rest, &capped)
	if err != nil {
		t.Fatalf("a request needing the %d left of the cap: %v", rest, err)
	}
	r.Settle(rest, UsageRecord{KeyID: capped.KeyID})
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if b := budget(t, st0, capped); b.SpentMicros != capMicros {
		t.Errorf("the key's budget %+v, want its cap %d spent", b, capMicros)
	}
	if _, usage, err := st0.UsageTotals(ctx, acct); err != nil || usage != capMicros {
		t.Errorf("usage %d (%v), want %d: the key's spend is what the records charge", usage, err, capMicros)
	}
	checkRest(t, st0, acct)
}

// TestRefusedBeyondSettlementIsRetriedAtWhatWasBilled: the same request's settlement with the
// database cut off (the connection reset before anything committed) is known not to have been
// carried out: the retry, once the database is back, settles the reservation at what the
// account was billed (the reservation), and the key counts that.
func TestRefusedBeyondSettlementIsRetriedAtWhatWasBilled(t *testing.T) {
	ctx := context.Background()
	b := beyondSettlement(t, "refused", 1_500_000)
	m, st0, acct, relay, capped, r, rec := b.m, b.st0, b.acct, b.relay, b.capped, b.r, b.rec
	relay.Cut()
	if charged := r.SettleUsage(rec); charged != denseReserved {
		t.Fatalf("charged %d: a settlement that failed should charge the reservation %d alone", charged, denseReserved)
	}
	if len(m.keys.pending) != 1 || m.keys.pending[0].cost != denseReserved || m.keys.pending[0].extra != 0 {
		t.Fatalf("pending settlements %+v: want one the database refused, at the reservation %d", m.keys.pending, denseReserved)
	}
	if b := budget(t, st0, capped); b.SpentMicros != 0 || b.ReservedMicros != denseReserved {
		t.Fatalf("the key's budget %+v: nothing should have been settled", b)
	}
	relay.Restore()
	// The pool's first tries may take connections the cut closed.
	for deadline := time.Now().Add(10 * time.Second); len(m.keys.pending) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d key settlements still wait after the maintenance", len(m.keys.pending))
		}
		m.maintainKeys(ctx, time.Now())
	}
	billed := settledRecord(t, m, st0, acct, "refused")
	if b := budget(t, st0, capped); b.SpentMicros != billed.CostMicros || b.SpentMicros != denseReserved || b.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v after the retry, want what the account was billed, %d", b, billed.CostMicros)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkRest(t, st0, acct)
}

// beyondSettlementCase is a capped key's request reserved and ready to settle beyond its
// reservation (the dense text), its meter talking to the database through a relay that can
// cut the connection or lose a COMMIT's answer.
type beyondSettlementCase struct {
	m      *Meter
	st0    *store.Store // the database, not through the relay
	acct   uuid.UUID
	relay  *dbRelay
	capped KeyCap
	r      *Reservation
	rec    UsageRecord
}

// beyondSettlement reserves request, on an account with $100, for a key capped at capMicros
// (no period).
func beyondSettlement(t *testing.T, request string, capMicros int64) beyondSettlementCase {
	t.Helper()
	cs, st0 := newDB(t)
	acct := newAccount(t, st0, 100_000_000)
	relay := newRelay(t, cs)
	m := New(openStore(t, relay.ConnString()), Options{ChunkCapMicros: 10_000_000})
	capped := newCappedKey(t, st0, acct, capMicros, store.CapPeriodNone)
	r, err := m.ReserveForKey(context.Background(), acct, request, denseReserved, &capped)
	if err != nil {
		t.Fatal(err)
	}
	rec := denseRecord()
	rec.KeyID = capped.KeyID
	return beyondSettlementCase{m: m, st0: st0, acct: acct, relay: relay, capped: capped, r: r, rec: rec}
}

// TestLostCommitWithoutTheRecordsKeyID: the request of TestLostCommitOfABeyondSettlementCountsWhatWasBilled
// settled with a record whose KeyID its caller left empty. The record's key is the one the
// meter reserved against (ReserveForKey), whatever the caller said: the written record names
// the key, and its writer finds the key's reservation, so the key still counts what the account
// was billed. Before, the record's key was the caller's KeyID alone: the record named no key,
// the writer left the reservation as the lost COMMIT settled it, and the key counted 1,500,000
// where the account was billed 666,676.
func TestLostCommitWithoutTheRecordsKeyID(t *testing.T) {
	ctx := context.Background()
	b := beyondSettlement(t, "no-key-id", 1_500_000)
	m, st0, acct, relay, capped, r, rec := b.m, b.st0, b.acct, b.relay, b.capped, b.r, b.rec
	rec.KeyID = uuid.Nil
	relay.LoseCommitAck()
	charged := r.SettleUsage(rec)
	if relay.LostAcks() != 1 || charged != denseReserved {
		t.Fatalf("%d commit answers lost, charged %d: want the settlement's COMMIT answer lost and the reservation %d charged", relay.LostAcks(), charged, denseReserved)
	}
	m.maintainKeys(ctx, time.Now())
	billed := settledRecord(t, m, st0, acct, "no-key-id")
	if billed.APIKeyID != capped.KeyID {
		t.Errorf("the record names key %s, want the reservation's %s", billed.APIKeyID, capped.KeyID)
	}
	if b := budget(t, st0, capped); b.SpentMicros != billed.CostMicros || b.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v after the record was written: the key counts other than the account was billed (%d)", b, billed.CostMicros)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkRest(t, st0, acct)
}

// TestRecordNamingAnotherKeyThanItsReservation: a capped key's request settled with a record
// whose KeyID names another key (a caller's bug) is recorded against the key its reservation
// was made for, and the meter logs the mismatch as a bug.
func TestRecordNamingAnotherKeyThanItsReservation(t *testing.T) {
	ctx := context.Background()
	cs, st0 := newDB(t)
	acct := newAccount(t, st0, 100_000_000)
	var logs logSink
	m := New(openStore(t, cs), Options{Logger: logs.logger()})
	capped := newCappedKey(t, st0, acct, 1_000_000, store.CapPeriodNone)
	r, err := m.ReserveForKey(ctx, acct, "other-key", 10_000, &capped)
	if err != nil {
		t.Fatal(err)
	}
	other := uuid.New()
	r.Settle(4_000, UsageRecord{KeyID: other})
	billed := settledRecord(t, m, st0, acct, "other-key")
	if billed.APIKeyID != capped.KeyID {
		t.Errorf("the record names key %s, want the reservation's %s", billed.APIKeyID, capped.KeyID)
	}
	if b := budget(t, st0, capped); b.SpentMicros != 4_000 || b.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v, want 4000 spent", b)
	}
	var mismatches int
	for _, l := range logs.all() {
		if strings.Contains(l, other.String()) && strings.Contains(l, capped.KeyID.String()) {
			mismatches++
		}
	}
	if mismatches != 1 {
		t.Errorf("%d log lines name both keys, want one: %q", mismatches, logs.all())
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkRest(t, st0, acct)
}
