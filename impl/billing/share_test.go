package billing

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
)

// TestShareRidesOutLongOutage: three processes (meters) serve one account and lose the database
// together for five minutes of their clock, a request every 100 ms each. Under FailureShare each
// serves from its hold while its own view of the lease lasts, then on credit up to a third of
// what the account had available at its last grant. A well-funded account is served through the
// whole outage by every process, and once the database is back every request is billed exactly
// once and in full. A short account is served until the processes' shares are spent, then
// refused; once the database is back every request served has its usage record and ledger
// entry, the balance ends at or above zero, and what goes unbilled is within the documented
// bound: a process's view of the available credit is that of its last grant, so the holds the
// others drew after it, divided by the replica count, may be served twice (here the second
// process's hold for the first, the third's for both). (Under FailureRefuse,
// TestOutageFailureHandling, an account is refused as soon as its hold is spent.) Without a
// configured replica count ("learned"), each process divides by the number of processes it saw
// holding credit in the database at its last renewal: the same bounds hold (on the code before,
// each process served on credit up to the account's whole available credit).
func TestShareRidesOutLongOutage(t *testing.T) {
	const (
		worst    = 1_000
		cost     = 700
		replicas = 3
		outage   = 5 * time.Minute
		step     = 100 * time.Millisecond
		steps    = int(outage / step)
	)
	for _, c := range []struct {
		name    string
		balance int64
		// all: every request of the outage is served.
		all bool
		// learned: no replica count is configured; the meters renew their holds before the
		// outage, which counts the processes holding credit.
		learned bool
	}{
		// 3,000 requests of 700 per process: 2.1 M, within a third of about 9 M.
		{"funded", 9_000_000, true, false},
		// A third of about 1.5 M covers about 700 requests per process.
		{"short", 1_500_000, false, false},
		{"short, the count learned from the database", 1_500_000, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cs, st := newDB(t)
			acct := newAccount(t, st, c.balance)
			relay := newRelay(t, cs)
			clock := newManualClock()
			policy := OutagePolicy{Cover: -1, FailureHandling: FailureShare, Replicas: func() int { return replicas }}
			if c.learned {
				policy.Replicas = nil
			}
			var meters []*Meter
			for range replicas {
				meters = append(meters, New(openStore(t, relay.ConnString()),
					Options{Now: clock.Now, ChunkMultiplier: 10, Outage: policy}))
			}
			var books settled
			var unbilledBound int64
			for i, m := range meters {
				if !books.serve(ctx, m, acct, fmt.Sprintf("before-%d", i), worst, cost) {
					t.Fatalf("process %d refused before the outage", i)
				}
				flushUntil(t, m)
				// The processes before this one did not see its hold.
				a := m.account(acct, false)
				a.mu.Lock()
				unbilledBound += int64(i) * (a.dbAmount + cost) / replicas
				a.mu.Unlock()
			}

			if c.learned {
				for i, m := range meters {
					m.renew(ctx)
					if got := m.shareDivisor(); got != replicas {
						t.Fatalf("process %d divides by %d, want the %d processes holding credit", i, got, replicas)
					}
				}
			}
			relay.Cut()
			served, refused, onCredit := 0, 0, 0
			for s := range steps {
				clock.advance(step)
				for i, m := range meters {
					id := fmt.Sprintf("during-%d-%d", i, s)
					r, err := m.Reserve(ctx, acct, id, worst)
					if err != nil {
						if !isOutageRefusal(err) {
							t.Fatalf("request %s: %v", id, err)
						}
						refused++
						continue
					}
					if r.OnCredit() {
						onCredit++
					}
					r.Settle(cost, UsageRecord{})
					books.add(acct, id, cost)
					served++
				}
			}
			t.Logf("%s: %d served (%d on credit), %d refused over %v", c.name, served, onCredit, refused, outage)
			if onCredit == 0 {
				t.Error("nothing served on credit: the outage never outlasted the holds")
			}
			if c.all && refused > 0 {
				t.Errorf("%d requests of a funded account refused during a %v outage", refused, outage)
			}
			if !c.all && refused == 0 {
				t.Error("a short account served beyond what it had")
			}
			if total := int64(served+replicas) * cost; total > c.balance+unbilledBound {
				t.Errorf("%d served in all, beyond the balance of %d and the bound of %d", total, c.balance, unbilledBound)
			}

			relay.Restore()
			for _, m := range meters {
				flushUntil(t, m)
				stopMeter(t, m)
			}
			if c.all {
				checkBilledOnce(t, st, acct, c.balance, books.costs[acct])
			}
			checkRest(t, st, acct)
			ledger := usageLedger(t, st, acct)
			var unbilled int64
			for id, cost := range books.costs[acct] {
				e, ok := ledger[store.UsageLedgerKey(id)]
				if !ok {
					t.Errorf("request %s has no usage ledger entry", id)
					continue
				}
				if -e.AmountMicros < cost {
					unbilled += cost + e.AmountMicros
					if c.all || !strings.Contains(e.Note, "not billed") {
						t.Errorf("request %s billed %d of %d: %q", id, -e.AmountMicros, cost, e.Note)
					}
				}
			}
			if unbilled > unbilledBound {
				t.Errorf("%d micro-units not billed, beyond the bound of %d", unbilled, unbilledBound)
			}
			t.Logf("%d micro-units not billed (bound %d)", unbilled, unbilledBound)
		})
	}
}

// TestShareForgetsNothingWithinMaxAge: an account whose state the meter forgot (its hold was
// returned after idling) is still served on its share during an outage when the meter drew
// credit for it within maxAvailableAge before the outage, and refused when it did so earlier.
func TestShareForgetsNothingWithinMaxAge(t *testing.T) {
	m := New(nil, Options{Outage: OutagePolicy{FailureHandling: FailureShare, Replicas: func() int { return 2 }}})
	now := time.Now()
	id := uuid.New()
	a := &account{id: id, accountLeft: 10_000, knowsLeft: true}
	m.noteAvailable(a, now.Add(-time.Minute))
	forgotten := &account{id: id}
	m.downSince.Store(now.UnixNano())
	if left, ok := m.lastAvailable(forgotten); !ok || left != 10_000 {
		t.Errorf("a grant a minute before the outage: %d, %v", left, ok)
	}
	m.noteAvailable(a, now.Add(-maxAvailableAge-time.Second))
	if _, ok := m.lastAvailable(forgotten); ok {
		t.Error("a grant read before maxAvailableAge is still trusted")
	}
	forgotten.mu.Lock()
	r, err := m.onOutage(forgotten, id, "r", 1, now, errDatabaseDown)
	if err == nil || r != nil || !isOutageRefusal(err) {
		t.Errorf("served on an unknown account: %v, %v", r, err)
	}
}
