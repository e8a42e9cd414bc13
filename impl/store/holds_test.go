package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func openStore(t *testing.T) *store.Store {
	t.Helper()
	return openStoreAt(t, pgtest.ConnString(t))
}

// openStoreAt opens a store on the database at url and migrates it; the test's cleanup closes
// it.
func openStoreAt(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

func fundedAccount(t *testing.T, st *store.Store, micros int64) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	a, err := st.CreateAccount(ctx, "acct-"+uuid.NewString()[:8], "default")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Append(ctx, store.LedgerChange{AccountID: a.ID, AmountMicros: micros, Reason: store.ReasonGrant, IdempotencyKey: "grant"}); err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// checkHeld checks that held_micros is the sum of the holds and within the balance, and that
// the ledger sums to the balance.
func checkHeld(t *testing.T, st *store.Store, acct uuid.UUID) store.Credit {
	t.Helper()
	ctx := context.Background()
	c, err := st.AccountCredit(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	holds, err := st.CreditHolds(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, h := range holds {
		sum += h.AmountMicros
	}
	if sum != c.HeldMicros || c.HeldMicros < 0 || c.HeldMicros > c.BalanceMicros {
		t.Errorf("balance %d, held %d, holds sum to %d", c.BalanceMicros, c.HeldMicros, sum)
	}
	ledger, err := st.LedgerSum(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	if ledger != c.BalanceMicros {
		t.Errorf("ledger sums to %d, balance %d", ledger, c.BalanceMicros)
	}
	return c
}

func TestTakeCreditHold(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	acct := fundedAccount(t, st, 100)
	take := func(holder string, need, want int64) store.HoldGrant {
		t.Helper()
		g, err := st.TakeCreditHold(ctx, store.HoldRequest{AccountID: acct, Holder: holder, NeedMicros: need, WantMicros: want, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// Never more than half of what is left unless the request needs more.
	if g := take("a", 10, 1000); !g.Granted || g.GrantedMicros != 50 || g.Hold.AmountMicros != 50 || g.AvailableMicros != 100 {
		t.Errorf("first grant: %+v", g)
	}
	if g := take("b", 40, 40); !g.Granted || g.GrantedMicros != 40 {
		t.Errorf("second grant: %+v", g)
	}
	if g := take("a", 20, 20); g.Granted || g.AvailableMicros != 10 {
		t.Errorf("a grant beyond what is left: %+v", g)
	}
	g := take("a", 10, 10)
	if !g.Granted || g.Hold.AmountMicros != 60 {
		t.Errorf("growing a hold: %+v", g)
	}
	if c := checkHeld(t, st, acct); c.HeldMicros != 100 {
		t.Errorf("held %d", c.HeldMicros)
	}
	// Held credit cannot be debited by anybody else.
	if _, _, err := st.Append(ctx, store.LedgerChange{AccountID: acct, AmountMicros: -1, Reason: store.ReasonAdjustment, IdempotencyKey: "adj"}); err == nil {
		t.Error("a debit of held credit succeeded")
	}
	released, err := st.ReleaseCreditHolds(ctx, "a", nil)
	if err != nil || len(released) != 1 || released[0].AmountMicros != 60 {
		t.Fatalf("release: %+v, %v", released, err)
	}
	if c := checkHeld(t, st, acct); c.HeldMicros != 40 {
		t.Errorf("held %d after the release", c.HeldMicros)
	}
	if _, err := st.TakeCreditHold(ctx, store.HoldRequest{AccountID: uuid.New(), Holder: "a", NeedMicros: 1, Lease: time.Minute}); err != store.ErrNotFound {
		t.Errorf("unknown account: %v", err)
	}
}

func TestWriteUsageTwiceBillsOnce(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	acct := fundedAccount(t, st, 10_000)
	if _, err := st.TakeCreditHold(ctx, store.HoldRequest{AccountID: acct, Holder: "p", NeedMicros: 5_000, WantMicros: 5_000, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	batch := []store.UsageRecord{
		{AccountID: acct, RequestID: "r1", Model: "m", Route: "/v1/chat/completions", CostMicros: 1_000, Status: "completed", StartedAt: now, FinishedAt: now},
		{AccountID: acct, RequestID: "r2", Model: "m\x00", Route: "/v1/messages", CostMicros: 2_000, InputTokens: -1, StartedAt: now, FinishedAt: now},
		{AccountID: acct, RequestID: "r1", CostMicros: 9_999, StartedAt: now, FinishedAt: now},   // repeated in the batch
		{AccountID: uuid.New(), RequestID: "r3", CostMicros: 1, StartedAt: now, FinishedAt: now}, // no such account
	}
	res, err := st.WriteUsage(ctx, "p", batch)
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 2 || res.Skipped != 1 || res.Dropped != 1 || len(res.Charges) != 1 {
		t.Fatalf("first write: %+v", res)
	}
	ch := res.Charges[0]
	if ch.TotalMicros != 3_000 || ch.BilledMicros != 3_000 || !ch.HasHold || ch.HoldMicros != 2_000 {
		t.Errorf("charge: %+v", ch)
	}
	again, err := st.WriteUsage(ctx, "p", batch)
	if err != nil {
		t.Fatal(err)
	}
	if again.Written != 0 || again.Skipped != 3 || again.Charges[0].BilledMicros != 0 || again.Charges[0].HoldMicros != 2_000 ||
		again.Charges[0].HoldVersion <= ch.HoldVersion {
		t.Errorf("second write: %+v", again)
	}
	c := checkHeld(t, st, acct)
	if c.BalanceMicros != 7_000 || c.HeldMicros != 2_000 {
		t.Errorf("credit %+v", c)
	}
	n, cost, err := st.UsageTotals(ctx, acct)
	if err != nil || n != 2 || cost != 3_000 {
		t.Errorf("usage records: %d costing %d (%v)", n, cost, err)
	}
	recs, err := st.UsageRecords(ctx, acct, 10)
	if err != nil || len(recs) != 2 || recs[0].Model != "m" || recs[0].Status != "unknown" || recs[0].InputTokens != 0 {
		t.Errorf("records %+v (%v)", recs, err)
	}
}

// TestHoldsUnderConcurrency drives many holders at one account at once - grants, usage writes,
// releases, reaps and top-ups - and checks that PostgreSQL keeps every invariant.
func TestHoldsUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	acct := fundedAccount(t, st, 1_000_000)
	const holders, rounds = 8, 60
	var billed, granted atomic.Int64
	var seq atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, holders)
	for h := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			holder := fmt.Sprintf("holder-%d", h)
			lease := time.Minute
			if h%4 == 0 {
				lease = 30 * time.Millisecond // these holders "crash" often
			}
			for range rounds {
				var err error
				op := rand.IntN(5)
				switch op {
				case 0, 1:
					need := rand.Int64N(20_000)
					_, err = st.TakeCreditHold(ctx, store.HoldRequest{AccountID: acct, Holder: holder, NeedMicros: need, WantMicros: need * 5, Lease: lease})
				case 2:
					var batch []store.UsageRecord
					for range 1 + rand.IntN(5) {
						batch = append(batch, store.UsageRecord{
							AccountID: acct, RequestID: fmt.Sprintf("r%d", seq.Add(1)), CostMicros: rand.Int64N(3_000),
							Status: "completed", StartedAt: time.Now(), FinishedAt: time.Now(),
						})
					}
					var res store.UsageBatch
					res, err = st.WriteUsage(ctx, holder, batch)
					for _, c := range res.Charges {
						billed.Add(c.BilledMicros)
					}
				case 3:
					if rand.IntN(2) == 0 {
						_, err = st.ReleaseCreditHolds(ctx, holder, []uuid.UUID{acct})
					} else {
						_, err = st.ReapExpiredCreditHolds(ctx)
					}
				case 4:
					_, _, err = st.Append(ctx, store.LedgerChange{AccountID: acct, AmountMicros: 1_000, Reason: store.ReasonGrant, IdempotencyKey: uuid.NewString()})
					if err == nil {
						granted.Add(1_000)
					}
				}
				if err != nil {
					errs <- fmt.Errorf("%s op %d: %w", holder, op, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c := checkHeld(t, st, acct)
	if want := 1_000_000 + granted.Load() - billed.Load(); c.BalanceMicros != want {
		t.Errorf("balance %d, want %d", c.BalanceMicros, want)
	}
	for h := range holders {
		if _, err := st.ReleaseCreditHolds(ctx, fmt.Sprintf("holder-%d", h), nil); err != nil {
			t.Fatal(err)
		}
	}
	if c := checkHeld(t, st, acct); c.HeldMicros != 0 {
		t.Errorf("held %d after every release", c.HeldMicros)
	}
}
