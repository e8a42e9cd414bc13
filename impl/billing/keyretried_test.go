package billing

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usagespill"
)

// The environment that makes TestRetriedRequestFirstAttemptChildProcess the child process of
// the tests below, and what it tells the child.
const (
	firstAttemptDB       = "TOLLGATE_TEST_FIRSTATTEMPT_DB"
	firstAttemptAccount  = "TOLLGATE_TEST_FIRSTATTEMPT_ACCOUNT"
	firstAttemptKey      = "TOLLGATE_TEST_FIRSTATTEMPT_KEY"
	firstAttemptCap      = "TOLLGATE_TEST_FIRSTATTEMPT_CAP"
	firstAttemptSpill    = "TOLLGATE_TEST_FIRSTATTEMPT_SPILL"
	firstAttemptHolder   = "TOLLGATE_TEST_FIRSTATTEMPT_HOLDER"
	firstAttemptScenario = "TOLLGATE_TEST_FIRSTATTEMPT_SCENARIO"
	// firstAttemptReady is the line the child prints once its record is in the spill file.
	firstAttemptReady = "FIRSTATTEMPT-READY"
)

// The retried request: its id, its worst case, what its first attempt (in the killed process)
// and its retry (in another process) cost, and the key's cap.
const (
	retriedRequest   = "retried"
	retriedWorst     = 1_000
	firstAttemptCost = 300
	retryCost        = 700
	retriedCap       = 1_000_000
	retriedGranted   = 10_000_000
)

// The first attempt's key settlement: made before the database is cut off ("settled"), or
// refused because it is ("refused").
const (
	keySettledThenSpilled = "settled"
	keyRefusedAndSpilled  = "refused"
)

// killedFirstAttempt runs the first attempt of the retried request in a child process (a
// gateway process) with its own relay to the database at cs: it reserves against the key, the
// key's settlement is made or refused as scenario says, the usage record goes to the spill file
// at path (the database cut off), and the process is killed with SIGKILL, its key reservation
// held by holder.
func killedFirstAttempt(t *testing.T, cs string, acct uuid.UUID, capped KeyCap, path, holder, scenario string) {
	t.Helper()
	killChildWhenReady(t, "TestRetriedRequestFirstAttemptChildProcess", []string{
		firstAttemptDB + "=" + cs, firstAttemptAccount + "=" + acct.String(), firstAttemptKey + "=" + capped.KeyID.String(),
		firstAttemptCap + "=" + strconv.FormatInt(capped.CapMicros, 10), firstAttemptSpill + "=" + path,
		firstAttemptHolder + "=" + holder, firstAttemptScenario + "=" + scenario},
		firstAttemptReady, "its record was spilled")
}

// TestRetriedRequestFirstAttemptChildProcess is the gateway process that killedFirstAttempt
// kills; run alone, it is skipped.
func TestRetriedRequestFirstAttemptChildProcess(t *testing.T) {
	cs := os.Getenv(firstAttemptDB)
	if cs == "" {
		t.Skip("the child process of the tests of retried request ids")
	}
	ctx := context.Background()
	acct := uuid.MustParse(os.Getenv(firstAttemptAccount))
	capMicros, err := strconv.ParseInt(os.Getenv(firstAttemptCap), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	capped := KeyCap{KeyID: uuid.MustParse(os.Getenv(firstAttemptKey)), CapMicros: capMicros, Period: store.CapPeriodNone}
	relay := newRelay(t, cs)
	sp := openSpill(t, os.Getenv(firstAttemptSpill), usagespill.Options{})
	m := New(openStore(t, relay.ConnString()), Options{Spill: sp, Holder: os.Getenv(firstAttemptHolder)})
	r, err := m.ReserveForKey(ctx, acct, retriedRequest, retriedWorst, &capped)
	if err != nil || r.key == nil {
		t.Fatalf("reserve against the key: %v", err)
	}
	scenario := os.Getenv(firstAttemptScenario)
	if scenario == keyRefusedAndSpilled {
		relay.Cut()
	}
	if got := r.Settle(firstAttemptCost, UsageRecord{KeyID: capped.KeyID, Model: "service-flint", Route: "/v1/chat/completions"}); got != firstAttemptCost {
		t.Fatalf("charged %d, want %d", got, firstAttemptCost)
	}
	if scenario == keySettledThenSpilled {
		relay.Cut()
	}
	if err := m.flushQueued(ctx); err == nil {
		t.Fatal("a write succeeded with the database cut off")
	}
	if n := sp.Records(); n != 1 {
		t.Fatalf("%d records in the spill file, want 1", n)
	}
	fmt.Println(firstAttemptReady)
	time.Sleep(time.Minute)
	t.Fatal("not killed within a minute")
}

// TestRetryBilledBeforeTheSpilledAttemptCountsTheRetry: a capped key's request is settled
// against the key (300 micro-units) by a process that then loses the database, spills the
// request's usage record and is killed. The client retries the request id on another process,
// which finds the request counted against the key (it reserves nothing of the cap) and bills
// it at 700: the ledger's record of the request id is the retry's. When the dead process's
// spill file is replayed, its record is refused as a duplicate. The key counts what the ledger
// billed, 700, from the retry's record on. Before, it counted the first attempt's 300 for ever,
// where the records charge 700.
func TestRetryBilledBeforeTheSpilledAttemptCountsTheRetry(t *testing.T) {
	ctx := context.Background()
	cs, st0 := newDB(t)
	acct := newAccount(t, st0, retriedGranted)
	capped := newCappedKey(t, st0, acct, retriedCap, store.CapPeriodNone)
	path := filepath.Join(t.TempDir(), "usage.spill")
	const holder = "killed-gateway"
	killedFirstAttempt(t, cs, acct, capped, path, holder, keySettledThenSpilled)
	if b := budget(t, st0, capped); b.SpentMicros != firstAttemptCost || b.ReservedMicros != 0 {
		t.Fatalf("the key's budget %+v after the kill: want the first attempt's settlement, %d, counted", b, firstAttemptCost)
	}

	retry := New(st0, Options{Holder: "retrying-gateway"})
	r, err := retry.ReserveForKey(ctx, acct, retriedRequest, retriedWorst, &capped)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Settle(retryCost, UsageRecord{KeyID: capped.KeyID, Model: "service-flint", Route: "/v1/chat/completions"}); got != retryCost {
		t.Fatalf("the retry charged %d, want %d", got, retryCost)
	}
	flushUntil(t, retry)
	if b := budget(t, st0, capped); b.SpentMicros != retryCost || b.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v once the retry's record is billed: want its %d", b, retryCost)
	}

	replay := New(st0, Options{Spill: openSpill(t, path, usagespill.Options{})})
	flushUntil(t, replay)
	for _, m := range []*Meter{retry, replay} {
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if b := budget(t, st0, capped); b.SpentMicros != retryCost || b.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v after the spill file's replay: want what the ledger billed, %d", b, retryCost)
	}
	// The killed process's hold is reaped once its lease expires; here at once.
	if _, err := st0.ReleaseCreditHolds(ctx, holder, nil); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st0, acct, retriedGranted, map[string]int64{retriedRequest: retryCost})
}

// TestSpilledAttemptBilledBeforeTheRetryCountsTheFirstAttempt: a capped key's request is
// settled (300 micro-units) by a process cut off from the database, so that its key
// settlement is refused and its record spilled, and the process is killed. Its reservation is
// reaped, and the client's retry of the request id on another process takes it over and
// settles it against the key at 700, its record waiting for that process's next write. The
// dead process's spill file is replayed first: the ledger bills the first attempt's record,
// and the retry's record, written after it, is refused as a duplicate. The key counts what
// the ledger billed, 300. Before, it counted the retry's 700 (the record found the reservation
// settled and left it so).
func TestSpilledAttemptBilledBeforeTheRetryCountsTheFirstAttempt(t *testing.T) {
	ctx := context.Background()
	cs, st0 := newDB(t)
	acct := newAccount(t, st0, retriedGranted)
	capped := newCappedKey(t, st0, acct, retriedCap, store.CapPeriodNone)
	path := filepath.Join(t.TempDir(), "usage.spill")
	const holder = "killed-gateway"
	killedFirstAttempt(t, cs, acct, capped, path, holder, keyRefusedAndSpilled)
	expireAndReap(t, st0, holder, time.Second)

	retry := New(st0, Options{Holder: "retrying-gateway"})
	r, err := retry.ReserveForKey(ctx, acct, retriedRequest, retriedWorst, &capped)
	if err != nil || r.key == nil {
		t.Fatalf("the retry did not take the reaped reservation over: %v", err)
	}
	if got := r.Settle(retryCost, UsageRecord{KeyID: capped.KeyID, Model: "service-flint", Route: "/v1/chat/completions"}); got != retryCost {
		t.Fatalf("the retry charged %d, want %d", got, retryCost)
	}
	if b := budget(t, st0, capped); b.SpentMicros != retryCost {
		t.Fatalf("the key's budget %+v after the retry's settlement: want its %d", b, retryCost)
	}

	replay := New(st0, Options{Spill: openSpill(t, path, usagespill.Options{})})
	flushUntil(t, replay)
	if b := budget(t, st0, capped); b.SpentMicros != firstAttemptCost || b.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v once the first attempt's record is billed: want its %d", b, firstAttemptCost)
	}
	flushUntil(t, retry)
	for _, m := range []*Meter{retry, replay} {
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if b := budget(t, st0, capped); b.SpentMicros != firstAttemptCost || b.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v after the retry's duplicate: want what the ledger billed, %d", b, firstAttemptCost)
	}
	if _, err := st0.ReleaseCreditHolds(ctx, holder, nil); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st0, acct, retriedGranted, map[string]int64{retriedRequest: firstAttemptCost})
}

// expireAndReap ends the leases of holder's key reservations as if they had ended ago (the
// holder is gone) and reaps them, as a survivor's maintenance does.
func expireAndReap(t *testing.T, st *store.Store, holder string, ago time.Duration) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Pool().Exec(ctx, `UPDATE key_reservations SET expires_at = now() - $2::bigint * interval '1 millisecond' WHERE holder = $1`,
		holder, ago.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReapKeyReservations(ctx, uuid.Nil); err != nil {
		t.Fatal(err)
	}
}

// TestSpillReplayedDaysLaterCountsAgainstTheKey: a capped key's request is settled (300
// micro-units) by a process cut off from the database, so that its key settlement is refused
// and its record spilled, and the process is killed. A survivor reaps its reservation, and
// three days later (its lease ended three days ago) the maintenance deletes the stale rows;
// then a process starts on the dead one's spill directory and bills the record. The key
// counts it, as its records charge it: the reaped row is kept as long as a settled one
// (store.KeyReservationRetention, 7 days), and deleted after. Before, reaped rows were deleted
// a day after their lease, and the key counted 0 of the 300 billed.
func TestSpillReplayedDaysLaterCountsAgainstTheKey(t *testing.T) {
	ctx := context.Background()
	cs, st0 := newDB(t)
	acct := newAccount(t, st0, retriedGranted)
	capped := newCappedKey(t, st0, acct, retriedCap, store.CapPeriodNone)
	path := filepath.Join(t.TempDir(), "usage.spill")
	const holder = "killed-gateway"
	killedFirstAttempt(t, cs, acct, capped, path, holder, keyRefusedAndSpilled)
	expireAndReap(t, st0, holder, 3*24*time.Hour)
	if _, err := st0.DeleteStaleKeyReservations(ctx, keySettledRetention); err != nil {
		t.Fatal(err)
	}

	replay := New(st0, Options{Spill: openSpill(t, path, usagespill.Options{})})
	flushUntil(t, replay)
	if err := replay.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if b := budget(t, st0, capped); b.SpentMicros != firstAttemptCost || b.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v after the replay three days later: want the %d billed", b, firstAttemptCost)
	}
	if _, err := st0.ReleaseCreditHolds(ctx, holder, nil); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st0, acct, retriedGranted, map[string]int64{retriedRequest: firstAttemptCost})

	// A reaped row whose lease ended longer ago than the retention is deleted.
	if _, err := st0.ReserveKeyBudget(ctx, store.KeyReservationRequest{KeyID: capped.KeyID, PeriodStart: capped.Period.Start(time.Now()),
		CapMicros: retriedCap, AmountMicros: retriedWorst, RequestID: "gone-for-good", Holder: "another-killed-gateway", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	expireAndReap(t, st0, "another-killed-gateway", keySettledRetention+time.Hour)
	if n, err := st0.DeleteStaleKeyReservations(ctx, keySettledRetention); err != nil || n != 1 {
		t.Fatalf("deleted %d stale rows (%v), want the one reaped longer ago than the retention", n, err)
	}
}
