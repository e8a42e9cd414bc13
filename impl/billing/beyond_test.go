package billing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
)

// denseText is the case of docs/billing.md's "The estimate is cautious for natural text, not
// for text made to be dense": 1,000,000 bytes of digits and punctuation in turn, which
// o200k_base counts one token a byte, sent to gpt-4.1 ($2 input and $8 output a million
// tokens, OpenAI's pricing page) with max_tokens 1. The reservation estimates three bytes a
// token: 333,334 input tokens at $2 a million and one output token, 666,668 + 8 micro-units.
// The provider bills 1,000,000 input tokens and one output token: 2,000,008.
var (
	densePrice    = price.Price{Rates: price.Rates{Input: 2_000_000, Output: 8_000_000}}
	denseReserved = int64(666_676)
	denseTokens   = price.Tokens{Uncached: 1_000_000, Output: 1}
	denseBill     = int64(2_000_008)
)

// denseRecord is the usage record of the dense request.
func denseRecord() UsageRecord {
	p := densePrice
	return UsageRecord{Model: "gpt-4.1", Route: "/v1/chat/completions", Provider: "openai", UpstreamModel: "gpt-4.1", Tokens: denseTokens, Price: &p, Status: "ok"}
}

// settledRecord returns the account's usage record of requestID once the meter has written it.
func settledRecord(t *testing.T, m *Meter, st *store.Store, acct uuid.UUID, requestID string) store.UsageRecord {
	t.Helper()
	if err := m.flushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := st.UsageRecords(context.Background(), acct, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.RequestID == requestID {
			return r
		}
	}
	t.Fatalf("no usage record of %s", requestID)
	return store.UsageRecord{}
}

// TestSettleChargesBeyondTheReservationOutOfTheHold: a request that costs three times its
// reservation (the dense text above) is charged its whole bill when the process's hold has the
// free credit for it, and the record reproduces that bill with nothing waived; the balance
// takes the whole bill and stays above zero. Before, the bill was clamped to the reservation
// and 1,333,332 micro-units were waived on an account with $100.
func TestSettleChargesBeyondTheReservationOutOfTheHold(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 100_000_000)
	// Holds of up to $10, so that this one request's hold has room beyond its reservation (the
	// gateway's meter draws up to 100 worst cases).
	m := New(st, Options{ChunkCapMicros: 10_000_000})

	r, err := m.Reserve(ctx, acct, "dense", denseReserved)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.SettleUsage(denseRecord()); got != denseBill {
		t.Errorf("charged %d, want the whole bill %d (reserved %d)", got, denseBill, denseReserved)
	}
	rec := settledRecord(t, m, st, acct, "dense")
	if rec.CostMicros != denseBill || rec.WaivedMicros != 0 {
		t.Errorf("record: cost %d, waived %d; want %d and none", rec.CostMicros, rec.WaivedMicros, denseBill)
	}
	if again := price.Cost(rec.Tokens(), *rec.Price).Total() + rec.HostedMicros - rec.WaivedMicros; again != rec.CostMicros {
		t.Errorf("the record's bill from its row alone is %d, its cost %d", again, rec.CostMicros)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if bal, err := st.Balance(ctx, acct); err != nil || bal != 100_000_000-denseBill {
		t.Errorf("balance %d (%v), want %d", bal, err, 100_000_000-denseBill)
	}
	s := m.CreditStats()
	if s.BeyondReservationRequests != 1 || s.BeyondReservationMicros != denseBill-denseReserved || s.WaivedRequests != 0 || s.WaivedMicros != 0 {
		t.Errorf("stats %+v: want one request charged %d beyond its reservation, none waived", s, denseBill-denseReserved)
	}
}

// TestSettleBeyondTheHoldIsWaived: an account whose hold has no free credit beyond the
// reservation (it had $1, of which the request's worst case needed more than half, so the hold
// is the worst case alone) is charged what the hold covers and the rest is waived, counted: the
// balance never goes below zero.
func TestSettleBeyondTheHoldIsWaived(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 1_000_000)
	m := New(st, Options{})

	r, err := m.Reserve(ctx, acct, "dense", denseReserved)
	if err != nil {
		t.Fatal(err)
	}
	charged := r.SettleUsage(denseRecord())
	rec := settledRecord(t, m, st, acct, "dense")
	if charged < denseReserved || charged > 1_000_000 || rec.CostMicros != charged || rec.CostMicros+rec.WaivedMicros != denseBill {
		t.Errorf("charged %d, record cost %d waived %d; want between the reservation %d and the balance, and cost + waived = %d",
			charged, rec.CostMicros, rec.WaivedMicros, denseReserved, denseBill)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if bal, err := st.Balance(ctx, acct); err != nil || bal != 1_000_000-charged || bal < 0 {
		t.Errorf("balance %d (%v), want %d", bal, err, 1_000_000-charged)
	}
	if s := m.CreditStats(); s.WaivedRequests != 1 || s.WaivedMicros != rec.WaivedMicros {
		t.Errorf("stats %+v: want one request waived %d", s, rec.WaivedMicros)
	}
}

// TestSettleBeyondTheReservationRespectsBounds: a key with a credit cap is charged beyond the
// reservation only what its cap has free (the rest waived, counted), an agent session's call
// only within its ceiling (what was left of its max_spend), one without a ceiling nothing
// beyond its reservation, and nothing is charged when the caller settles at less than the bill
// (an answer the client never got, settled at 0, is not a shortfall). The hold has the room in
// each case. Before, the capped key's request and the call with a ceiling were charged their
// reservation, 666,676, and 1,333,332 micro-units were waived each.
func TestSettleBeyondTheReservationRespectsBounds(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 100_000_000)
	m := New(st, Options{ChunkCapMicros: 10_000_000})

	capped := newCappedKey(t, st, acct, 1_000_000, store.CapPeriodNone)
	r, err := m.ReserveForKey(ctx, acct, "capped", denseReserved, &capped)
	if err != nil {
		t.Fatal(err)
	}
	rec := denseRecord()
	rec.KeyID = capped.KeyID
	if got := r.SettleUsage(rec); got != capped.CapMicros {
		t.Errorf("a capped key's request charged %d, want its whole cap %d (reserved %d)", got, capped.CapMicros, denseReserved)
	}
	if b := budget(t, st, capped); b.SpentMicros != capped.CapMicros || b.ReservedMicros != 0 {
		t.Errorf("the capped key's budget %+v, want %d spent", b, capped.CapMicros)
	}
	if w := settledRecord(t, m, st, acct, "capped"); w.CostMicros != capped.CapMicros || w.WaivedMicros != denseBill-capped.CapMicros {
		t.Errorf("the capped key's record: cost %d waived %d, want %d and %d", w.CostMicros, w.WaivedMicros, capped.CapMicros, denseBill-capped.CapMicros)
	}

	r, err = m.Reserve(ctx, acct, "undelivered", denseReserved)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Settle(0, denseRecord()); got != 0 {
		t.Errorf("an answer settled at 0 charged %d", got)
	}
	want := denseBill - capped.CapMicros
	if s := m.CreditStats(); s.BeyondReservationRequests != 1 || s.BeyondReservationMicros != capped.CapMicros-denseReserved ||
		s.WaivedRequests != 1 || s.WaivedMicros != want {
		t.Errorf("stats %+v: want the capped key's request charged %d beyond its reservation and %d waived, nothing else",
			s, capped.CapMicros-denseReserved, want)
	}

	// An agent session's call, within what its session had left (its ceiling), and one that
	// names no ceiling.
	const ceiling = 1_500_000
	r, err = m.Reserve(ctx, acct, "agent-step", denseReserved)
	if err != nil {
		t.Fatal(err)
	}
	rec = denseRecord()
	rec.AgentSessionID, rec.CeilingMicros = uuid.New(), ceiling
	if got := r.SettleUsage(rec); got != ceiling {
		t.Errorf("an agent session's call charged %d, want its ceiling %d", got, ceiling)
	}
	r, err = m.Reserve(ctx, acct, "agent-step-unbounded", denseReserved)
	if err != nil {
		t.Fatal(err)
	}
	rec.CeilingMicros = 0
	if got := r.SettleUsage(rec); got != denseReserved {
		t.Errorf("an agent session's call without a ceiling charged %d, want its reservation %d", got, denseReserved)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCappedKeyBeyondReservationsNeverPassTheCap: requests of one capped key, from two meters
// (two gateway processes) at once, each billed three times its reservation (the dense text),
// are charged beyond their reservations out of the cap's free part, and together never take
// the key past its cap: the budget's spend is what the records charge, at most the cap.
func TestCappedKeyBeyondReservationsNeverPassTheCap(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 100_000_000)
	meters := []*Meter{New(st, Options{ChunkCapMicros: 20_000_000}), New(st, Options{ChunkCapMicros: 20_000_000})}
	const capMicros = 5_000_000
	capped := newCappedKey(t, st, acct, capMicros, store.CapPeriodNone)

	var mu sync.Mutex
	var charged, beyond int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := meters[g%2]
			for i := range 6 {
				id := fmt.Sprintf("dense-%d-%d", g, i)
				r, err := m.ReserveForKey(ctx, acct, id, denseReserved, &capped)
				var kc *KeyCapError
				if errors.As(err, &kc) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				rec := denseRecord()
				rec.KeyID = capped.KeyID
				got := r.SettleUsage(rec)
				mu.Lock()
				charged += got
				beyond += max(got-denseReserved, 0)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, m := range meters {
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	b := budget(t, st, capped)
	if b.SpentMicros > capMicros || b.SpentMicros != charged || b.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v after requests charged %d in all; want that spend, at most the cap %d", b, charged, capMicros)
	}
	if beyond == 0 {
		t.Errorf("no request was charged beyond its reservation (%d charged in all)", charged)
	}
	recs, err := st.UsageRecords(ctx, acct, 100)
	if err != nil {
		t.Fatal(err)
	}
	var recorded int64
	for _, r := range recs {
		recorded += r.CostMicros
	}
	if recorded != charged {
		t.Errorf("the records charge %d, the settlements said %d", recorded, charged)
	}
}
