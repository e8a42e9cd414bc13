package billing

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
)

// manualClock is a clock that moves only when the test moves it.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newManualClock() *manualClock { return &manualClock{now: time.Now()} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// runMeter runs m until the test ends, then checks that Run drained without error. It returns
// once Run has begun.
func runMeter(t *testing.T, m *Meter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	// Wait until Run has begun: before, the meter draws nothing ahead of need, and a test that
	// counts the reservations that waited for the database would count those of a goroutine
	// not yet scheduled (a busy CI host: TestRefillAheadOfNeed's "2 reservations waited").
	for deadline := time.Now().Add(10 * time.Second); !m.running.Load(); {
		if time.Now().After(deadline) {
			t.Fatal("the meter's Run did not begin within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// stopMeter ends Run (through Close) before the test checks the books.
func stopMeter(t *testing.T, m *Meter) {
	t.Helper()
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// awaitGrant waits until no database call is in flight for the account: the grant that the
// last reservation started in the background, if any, has been answered and applied.
func awaitGrant(m *Meter, accountID uuid.UUID) {
	a := m.account(accountID, false)
	if a == nil {
		return
	}
	a.mu.Lock()
	busy := a.busy
	a.mu.Unlock()
	if busy != nil {
		<-busy
	}
}

// countGrants opens a store on cs that counts the TakeCreditHold statements it sends.
func countGrants(t *testing.T, cs string) (*store.Store, *atomic.Int64) {
	t.Helper()
	var grants atomic.Int64
	st, err := store.OpenObserved(context.Background(), cs, func(sql string) {
		if strings.HasPrefix(sql, "-- name: TakeCreditHold ") {
			grants.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st, &grants
}

func TestChunkAtRate(t *testing.T) {
	m := New(nil, Options{ChunkMultiplier: 10, ChunkCapMicros: 1_000_000})
	for _, c := range []struct {
		worst     int64
		rate      float64
		chunk     int64
		lowWaterM int64
	}{
		{1_000, 0, 10_000, 5_000},                    // no recent reservations: 10 worst cases
		{1_000, 4_000, 10_000, 5_000},                // 2 s of the rate is less than 10 worst cases
		{1_000, 100_000, 200_000, 100_000},           // 2 s of the rate; 1 s is half the chunk
		{1_000, 800_000, 1_000_000, 800_000},         // capped; 1 s of the rate is more than half
		{1_000, 5_000_000, 1_000_000, 1_000_000},     // capped; the mark is never above the chunk
		{2_000_000, 5_000_000, 2_000_000, 2_000_000}, // a request above the cap gets what it needs
		{1_000, math.Inf(1), 1_000_000, 1_000_000},   // saturates
		{math.MaxInt64, 1, math.MaxInt64, math.MaxInt64 / 2},
	} {
		chunk := m.chunkAtRate(c.worst, c.rate)
		if chunk != c.chunk {
			t.Errorf("chunkAtRate(%d, %g) = %d, want %d", c.worst, c.rate, chunk, c.chunk)
		}
		if got := lowWater(chunk, c.rate); got != c.lowWaterM {
			t.Errorf("lowWater(%d, %g) = %d, want %d", chunk, c.rate, got, c.lowWaterM)
		}
	}
}

func TestReserveRate(t *testing.T) {
	start := time.Now()
	a := &account{}
	if r := a.reserveRate(start); r != 0 {
		t.Fatalf("rate %g before any reservation", r)
	}
	// 1,000 micro-units every millisecond for 5 s: 1,000,000 per second.
	now := start
	for range 5_000 {
		now = now.Add(time.Millisecond)
		a.noteReservation(now, 1_000)
	}
	if r := a.reserveRate(now); math.Abs(r-1_000_000) > 10_000 {
		t.Errorf("rate %g after a steady 1,000,000 per second", r)
	}
	// Ten idle seconds later the rate has all but gone.
	if r := a.reserveRate(now.Add(10 * time.Second)); r > 100 {
		t.Errorf("rate %g after 10 idle seconds", r)
	}
	// A clock that steps back changes nothing.
	if r := a.reserveRate(start); r > 100 {
		t.Errorf("rate %g when the clock stepped back", r)
	}
}

// TestRefillAheadOfNeed: under a steady stream of reservations (one per millisecond of the
// meter's clock), the meter draws credit in the background before the hold runs out, so that
// after the first reservation no reservation waits for the database, and it sizes the chunks
// from the rate: far fewer grants than chunks of ten worst cases would take. The test waits for
// each background grant before the next reservation, as a grant's round trip is much shorter
// than the second of reservations that the low-water mark leaves.
func TestRefillAheadOfNeed(t *testing.T) {
	cs, st := newDB(t)
	const (
		balance  = 1_000_000_000
		worst    = 1_000
		cost     = 100
		requests = 5_000
	)
	acct := newAccount(t, st, balance)
	counted, grants := countGrants(t, cs)
	clock := newManualClock()
	var logs logSink
	m := New(counted, Options{Now: clock.Now, ChunkMultiplier: 10, Logger: logs.logger()})
	runMeter(t, m)

	ctx := context.Background()
	for i := range requests {
		clock.advance(time.Millisecond)
		r, err := m.Reserve(ctx, acct, fmt.Sprintf("steady-%d", i), worst)
		if err != nil {
			t.Fatalf("reservation %d: %v", i, err)
		}
		r.Settle(cost, UsageRecord{})
		awaitGrant(m, acct)
	}
	if d := m.delayedReservations.Load(); d != 1 {
		t.Errorf("%d reservations waited for the database, want only the first", d)
	}
	background := grants.Load() - 1
	if background < 1 {
		t.Fatalf("%d grants in all: nothing was drawn ahead of need", grants.Load())
	}
	// Chunks of ten worst cases would have taken a grant for every 10,000 micro-units spent.
	if worstCaseGrants := int64(requests * cost / (10 * worst)); grants.Load() >= worstCaseGrants/2 {
		t.Errorf("%d grants for %d micro-units of usage: the chunks did not grow with the rate", grants.Load(), requests*cost)
	}
	t.Logf("%d grants, %d of them ahead of need", grants.Load(), background)

	stopMeter(t, m)
	if c := checkRest(t, st, acct); c.BalanceMicros != balance-requests*cost {
		t.Errorf("balance %d, want %d", c.BalanceMicros, balance-requests*cost)
	}
	if l := logs.all(); len(l) > 0 {
		t.Errorf("the meter logged:\n%s", strings.Join(l, "\n"))
	}
}

// TestRefillNeverStrandsTheLastCredit: a process that draws credit ahead of need never takes
// more than half of what the account has left, and stops drawing ahead when half of it would
// not cover one more request, so that another process can still serve a request from the rest.
func TestRefillNeverStrandsTheLastCredit(t *testing.T) {
	cs, st := newDB(t)
	const (
		balance = 10_000
		worst   = 1_000
	)
	acct := newAccount(t, st, balance)
	counted, grants := countGrants(t, cs)
	clock := newManualClock()
	busy := New(counted, Options{Now: clock.Now, ChunkMultiplier: 4, Holder: "busy-process"})
	runMeter(t, busy)
	other := New(openStore(t, cs), Options{Holder: "other-process"})

	ctx := context.Background()
	available := func() int64 {
		t.Helper()
		c, err := st.AccountCredit(ctx, acct)
		if err != nil {
			t.Fatal(err)
		}
		return c.BalanceMicros - c.HeldMicros
	}
	freeOf := func(m *Meter) int64 {
		a := m.account(acct, false)
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.free()
	}

	// The busy process keeps its reservations open, one per millisecond, for as long as its
	// hold covers them: only grants drawn ahead of need change what the account has left.
	var open []*Reservation
	before := int64(balance)
	for i := 0; i == 0 || freeOf(busy) >= worst; i++ {
		if i > 100 {
			t.Fatal("the busy process never ran out of free credit")
		}
		clock.advance(time.Millisecond)
		r, err := busy.Reserve(ctx, acct, fmt.Sprintf("busy-%d", i), worst)
		if err != nil {
			t.Fatalf("reservation %d: %v", i, err)
		}
		open = append(open, r)
		awaitGrant(busy, acct)
		after := available()
		if i > 0 && after < before/2 {
			t.Errorf("a grant ahead of need left %d of %d: more than half was taken", after, before)
		}
		before = after
	}
	if g := grants.Load(); g < 3 {
		t.Fatalf("%d grants: the test wants the first and at least two drawn ahead of need", g)
	}
	if d := busy.delayedReservations.Load(); d != 1 {
		t.Errorf("%d reservations of the busy process waited for the database, want only the first", d)
	}
	left := available()
	if left < worst {
		t.Fatalf("the busy process's grants ahead of need left the account %d, less than one request", left)
	}
	r, err := other.Reserve(ctx, acct, "other", worst)
	if err != nil {
		t.Fatalf("the other process was refused the last credit (%d left): %v", left, err)
	}
	t.Logf("%d grants; %d left for the other process", grants.Load(), left)

	r.Settle(worst, UsageRecord{})
	for _, r := range open {
		r.Settle(worst/2, UsageRecord{})
	}
	stopMeter(t, busy)
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c := checkRest(t, st, acct); c.BalanceMicros != balance-worst-int64(len(open))*worst/2 {
		t.Errorf("balance %d after %d requests", c.BalanceMicros, len(open)+1)
	}
}
