package billing

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tollgate/tollgate/impl/apierror"
)

// drawRace is what happens, during one of a reservation's database round trips, in the other
// requests of the account: another process draws credit (otherDraws micro-units, leaving the
// account less than this trip asks for) and a request of this process settles (settleAt of
// its 100 000 reserved), returning the rest to the hold.
type drawRace struct {
	otherDraws int64
	settleAt   int64
}

// raceDraws reserves worst through a meter whose every database round trip races with the
// steps (one per trip, in order), on an account of balance micro-units. The meter holds
// len(steps) reservations of 100 000 before it starts (one for each step to settle); a second
// meter on the same database draws what the steps say. Once the reservation is decided, both
// meters settle what they hold and stop, and the test checks the account at rest. It returns the
// reservation's error (nil: it was reserved, and settled at its worst case).
func raceDraws(t *testing.T, balance, worst int64, steps []drawRace) error {
	t.Helper()
	ctx := context.Background()
	cs, st1 := newDB(t)
	st2 := openStore(t, cs)
	acct := newAccount(t, st1, balance)
	// Holds grow by exactly what a request lacks (ChunkCapMicros 1), no process is asked to
	// release (ReleaseWait -1), and nothing runs in the background until the end: each trip
	// sees only what the steps do.
	opts := Options{ChunkCapMicros: 1, ReleaseWait: -1}
	m1, m2 := New(st1, opts), New(st2, opts)

	var held []*Reservation
	for i := range steps {
		r, err := m1.Reserve(ctx, acct, fmt.Sprintf("held-%d", i), 100_000)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	var others []*Reservation
	var charged int64
	trips := 0
	m1.beforeDraw = func() {
		if trips >= len(steps) {
			return
		}
		s := steps[trips]
		trips++
		r, err := m2.Reserve(ctx, acct, fmt.Sprintf("other-%d", trips), s.otherDraws)
		if err != nil {
			t.Errorf("trip %d: the other process's draw: %v", trips, err)
			return
		}
		others = append(others, r)
		charged += held[trips-1].Settle(s.settleAt, UsageRecord{Model: "m", Route: "/v1/chat/completions"})
	}
	r, reserveErr := m1.Reserve(ctx, acct, "subject", worst)
	m1.beforeDraw = nil
	if trips != len(steps) {
		t.Errorf("the reservation made %d round trips that raced, want %d", trips, len(steps))
	}
	if reserveErr == nil {
		charged += r.Settle(worst, UsageRecord{Model: "m", Route: "/v1/chat/completions"})
	}
	for _, o := range others {
		o.Release()
	}
	for _, h := range held[trips:] {
		h.Release()
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 2)
	for _, m := range []*Meter{m1, m2} {
		go func() { done <- m.Run(runCtx) }()
	}
	stop()
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	if credit := checkRest(t, st1, acct); credit.BalanceMicros != balance-charged {
		t.Errorf("balance %d, want %d - %d charged", credit.BalanceMicros, balance, charged)
	}
	return reserveErr
}

// TestReserveDrawsAgainWhileTheAccountCovers: a reservation whose every round trip loses the
// race (another process draws the account's free credit below what the trip asks for, while
// settlements of this process return credit to its hold) is not refused as insufficient while
// the database's free credit and the hold's together cover it: on its third trip the account
// still has 10 000 free and the hold 95 000 for a need of 100 000, and a fourth trip draws the
// 5 000 it lacks. Before, it was refused with a 402 saying 105 000 were available.
func TestReserveDrawsAgainWhileTheAccountCovers(t *testing.T) {
	// The account: 1 000 000. Three requests hold 300 000; the subject needs 100 000.
	// Trip 1 asks for 100 000: the other process leaves 80 000, the hold gets 40 000 back.
	// Trip 2 asks for 60 000: 50 000 left, the hold has 80 000 free.
	// Trip 3 asks for 20 000: 10 000 left, the hold has 95 000 free.
	err := raceDraws(t, 1_000_000, 100_000, []drawRace{
		{otherDraws: 620_000, settleAt: 60_000},
		{otherDraws: 30_000, settleAt: 60_000},
		{otherDraws: 40_000, settleAt: 85_000},
	})
	if err != nil {
		t.Fatalf("the reservation was refused: %v", err)
	}
}

// TestReserveUnderEndlessContention: a reservation that loses the race on every round trip
// while the account covers it is refused after maxContendedTrips with a 503 to retry, not a
// 402: the account has the credit.
func TestReserveUnderEndlessContention(t *testing.T) {
	// The hold's free credit climbs 40 000, 60 000, 75 000, 85 000, 91 000, 95 000 while the
	// account's falls to 80 000, 50 000, 30 000, 20 000, 12 000, 6 000: after every trip the
	// two together cover the 100 000, and every trip asks for more than the account has left.
	steps := []drawRace{
		{otherDraws: 320_000, settleAt: 60_000},
		{otherDraws: 30_000, settleAt: 80_000},
		{otherDraws: 20_000, settleAt: 85_000},
		{otherDraws: 10_000, settleAt: 90_000},
		{otherDraws: 8_000, settleAt: 94_000},
		{otherDraws: 6_000, settleAt: 96_000},
	}
	if len(steps) != maxContendedTrips {
		t.Fatalf("the steps race %d trips, maxContendedTrips is %d", len(steps), maxContendedTrips)
	}
	err := raceDraws(t, 1_000_000, 100_000, steps)
	var ie *InsufficientError
	if errors.As(err, &ie) {
		t.Fatalf("refused as insufficient while the account covers the request: %v", err)
	}
	e := apierror.As(err)
	if !errors.Is(err, ErrContended) || e == nil || e.Kind != apierror.KindUnavailable || e.RetryAfter <= 0 {
		t.Fatalf("got %v (client error %+v), want ErrContended as a 503 with Retry-After", err, e)
	}
}
