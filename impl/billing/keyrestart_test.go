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

// The environment that makes TestKeySettlementsChildProcess the child process of
// TestKilledWithPendingKeySettlementsCountsWhatWasBilled, and what it tells the child.
const (
	keyKillChildDB      = "TOLLGATE_TEST_KEYKILL_DB"
	keyKillChildAccount = "TOLLGATE_TEST_KEYKILL_ACCOUNT"
	keyKillChildKey     = "TOLLGATE_TEST_KEYKILL_KEY"
	keyKillChildCap     = "TOLLGATE_TEST_KEYKILL_CAP"
	keyKillChildSpill   = "TOLLGATE_TEST_KEYKILL_SPILL"
	keyKillChildHolder  = "TOLLGATE_TEST_KEYKILL_HOLDER"
	// keyKillReady is the line the child prints once its settlements are pending and its
	// records are where the kill leaves them.
	keyKillReady = "KEYKILL-READY"
)

// keyKillRefusedCost is what the request settled while the database is cut off costs.
const keyKillRefusedCost = 500

// TestKilledWithPendingKeySettlementsCountsWhatWasBilled: a gateway process (a child process
// of the test, killed with SIGKILL) settles three requests of a key capped at 3,000,000
// micro-units and dies before its maintenance retries any of their key settlements: two dense
// requests billed beyond their reservations, whose settlements' COMMIT the server carries out
// and whose answers a relay drops (the first one's usage record written to the database before
// the kill, the second's left in the spill file by a write during an outage), and one settled
// while the database is cut off (its key settlement refused, its record spilled). The killed
// process's leases end and its live reservation (the third's) is reaped; then the next process,
// with the database back, replays the spill file. The key's spend is then what the
// three usage records charge (the reservations of the dense requests, 666,676 each, and 500),
// with nothing reserved, and each request is billed once. Before, the pending settlements
// lived in the killed process's memory alone: the records found the dense requests'
// reservations settled with the excess the account was never charged, and the key counted
// 2,999,500 micro-units where the account was billed 1,333,852 (the third request, settled by
// its record, was counted right already: TestKilledDuringOutageSpillSettlesKeys).
func TestKilledWithPendingKeySettlementsCountsWhatWasBilled(t *testing.T) {
	ctx := context.Background()
	cs, st0 := newDB(t)
	const granted = 100_000_000
	const capMicros = 3_000_000
	acct := newAccount(t, st0, granted)
	capped := newCappedKey(t, st0, acct, capMicros, store.CapPeriodNone)
	path := filepath.Join(t.TempDir(), "usage.spill")
	const holder = "killed-gateway"

	killChildWhenReady(t, "TestKeySettlementsChildProcess", []string{
		keyKillChildDB + "=" + cs, keyKillChildAccount + "=" + acct.String(), keyKillChildKey + "=" + capped.KeyID.String(),
		keyKillChildCap + "=" + strconv.FormatInt(capMicros, 10), keyKillChildSpill + "=" + path, keyKillChildHolder + "=" + holder},
		keyKillReady, "its settlements were pending")

	// The killed process's lease on the refused request's reservation ends and a survivor's
	// maintenance reaps it before the spill file is replayed (here at once): the reservation
	// leaves the key's budget, and its row waits for the record, which still counts it. The
	// dense requests' reservations, settled by the lost answers' commits, are not reaped.
	if _, err := st0.Pool().Exec(ctx, `UPDATE key_reservations SET expires_at = now() - interval '1 second' WHERE holder = $1`, holder); err != nil {
		t.Fatal(err)
	}
	if _, err := st0.ReapKeyReservations(ctx, uuid.Nil); err != nil {
		t.Fatal(err)
	}
	if b := budget(t, st0, capped); b.ReservedMicros != 0 {
		t.Fatalf("the key's budget %+v after the reaping: want nothing reserved", b)
	}

	// The next process, on the same spill file.
	sp := openSpill(t, path, usagespill.Options{})
	if got := sp.Report().Records; got != 2 {
		t.Fatalf("the spill file holds %d records after the kill, want 2 (the second dense request's and the refused one's)", got)
	}
	m := New(st0, Options{Spill: sp})
	flushUntil(t, m)
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}

	costs := map[string]int64{"dense-written": denseReserved, "dense-spilled": denseReserved, "refused": keyKillRefusedCost}
	recs, err := st0.UsageRecords(ctx, acct, 10)
	if err != nil {
		t.Fatal(err)
	}
	var charged int64
	for _, r := range recs {
		charged += r.CostMicros
	}
	if b := budget(t, st0, capped); b.SpentMicros != charged || b.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v after the restart: want the %d micro-units the usage records charge, nothing reserved", b, charged)
	}
	// The killed process's hold is reaped once its lease expires; here at once.
	if _, err := st0.ReleaseCreditHolds(ctx, holder, nil); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st0, acct, granted, costs)
}

// TestKeySettlementsChildProcess is the gateway process that
// TestKilledWithPendingKeySettlementsCountsWhatWasBilled kills; run alone, it is skipped. It
// settles the test's three requests as that test says, with its meter's maintenance not
// running, prints keyKillReady and waits for the kill.
func TestKeySettlementsChildProcess(t *testing.T) {
	cs := os.Getenv(keyKillChildDB)
	if cs == "" {
		t.Skip("the child process of TestKilledWithPendingKeySettlementsCountsWhatWasBilled")
	}
	ctx := context.Background()
	acct := uuid.MustParse(os.Getenv(keyKillChildAccount))
	capMicros, err := strconv.ParseInt(os.Getenv(keyKillChildCap), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	capped := KeyCap{KeyID: uuid.MustParse(os.Getenv(keyKillChildKey)), CapMicros: capMicros, Period: store.CapPeriodNone}
	relay := newRelay(t, cs)
	sp := openSpill(t, os.Getenv(keyKillChildSpill), usagespill.Options{})
	m := New(openStore(t, relay.ConnString()), Options{Spill: sp, Holder: os.Getenv(keyKillChildHolder), ChunkCapMicros: 10_000_000})

	reserve := func(id string, worst int64) *Reservation {
		r, err := m.ReserveForKey(ctx, acct, id, worst, &capped)
		if err != nil || r.key == nil {
			t.Fatalf("reserve %s against the key: %v", id, err)
		}
		return r
	}
	written, spilled, refused := reserve("dense-written", denseReserved), reserve("dense-spilled", denseReserved), reserve("refused", 1_000)
	dense := func(r *Reservation) {
		relay.LoseCommitAck()
		rec := denseRecord()
		rec.KeyID = capped.KeyID
		if got := r.SettleUsage(rec); got != denseReserved {
			t.Fatalf("%s charged %d, want its reservation %d (the settlement's answer was lost)", r.requestID, got, denseReserved)
		}
	}
	dense(written)
	for i := 0; ; i++ {
		// The pool may first take the connection whose answer was lost.
		if err := m.flushAll(ctx); err == nil {
			break
		} else if i == 20 {
			t.Fatal(err)
		}
	}
	dense(spilled)
	if relay.LostAcks() != 2 {
		t.Fatalf("%d commit answers lost, want the two dense settlements'", relay.LostAcks())
	}
	relay.Cut()
	if got := refused.Settle(keyKillRefusedCost, UsageRecord{KeyID: capped.KeyID, Model: "service-flint", Route: "/v1/chat/completions"}); got != keyKillRefusedCost {
		t.Fatalf("refused charged %d, want %d", got, keyKillRefusedCost)
	}
	if err := m.flushQueued(ctx); err == nil {
		t.Fatal("a write succeeded with the database cut off")
	}
	if n := sp.Records(); n != 2 {
		t.Fatalf("%d records in the spill file, want 2", n)
	}
	m.keys.mu.Lock()
	pending := len(m.keys.pending)
	m.keys.mu.Unlock()
	if pending != 3 {
		t.Fatalf("%d key settlements pending, want 3", pending)
	}
	fmt.Println(keyKillReady)
	time.Sleep(time.Minute)
	t.Fatal("not killed within a minute")
}

// TestStoppedWithALostKeySettlementCountsWhatWasBilled: a capped key's dense request settles
// beyond its reservation in a transaction whose COMMIT the server carries out and whose answer
// a relay drops; the database is then cut off and the process stops (SIGTERM: Close), its
// drain reaching neither the database for the record (kept in the spill file) nor for the key
// settlement's retry. The next process replays the spill file with the database back: the key
// counts what the account was billed, its reservation (666,676), not the 1,500,000 the lost
// answer's settlement committed, which it counted before (the retry was lost with the stopped
// process's memory).
func TestStoppedWithALostKeySettlementCountsWhatWasBilled(t *testing.T) {
	ctx := context.Background()
	cs, st0 := newDB(t)
	const granted = 100_000_000
	const capMicros = 1_500_000
	acct := newAccount(t, st0, granted)
	capped := newCappedKey(t, st0, acct, capMicros, store.CapPeriodNone)
	relay := newRelay(t, cs)
	path := filepath.Join(t.TempDir(), "usage.spill")
	spA := openSpill(t, path, usagespill.Options{})
	a := New(openStore(t, relay.ConnString()), Options{Spill: spA, ChunkCapMicros: 10_000_000, DrainTimeout: 2 * time.Second})
	r, err := a.ReserveForKey(ctx, acct, "stopped", denseReserved, &capped)
	if err != nil {
		t.Fatal(err)
	}
	relay.LoseCommitAck()
	rec := denseRecord()
	rec.KeyID = capped.KeyID
	if got := r.SettleUsage(rec); got != denseReserved || relay.LostAcks() != 1 {
		t.Fatalf("charged %d with %d answers lost: want the reservation %d charged after one lost answer", got, relay.LostAcks(), denseReserved)
	}
	if b := budget(t, st0, capped); b.SpentMicros != capMicros {
		t.Fatalf("the key's budget %+v after the lost answer: the settlement should have committed %d", b, capMicros)
	}
	relay.Cut()
	if err := a.Close(ctx); err == nil {
		t.Fatal("the drain reached the database while it was cut off")
	}
	if n := spA.Records(); n != 1 {
		t.Fatalf("%d records in the spill file after the drain, want 1", n)
	}
	spA.Close()

	relay.Restore()
	b := New(st0, Options{Spill: openSpill(t, path, usagespill.Options{})})
	flushUntil(t, b)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := budget(t, st0, capped); got.SpentMicros != denseReserved || got.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v after the restart: want what the account was billed, %d, nothing reserved", got, denseReserved)
	}
	// The stopped process could not return its hold; it is reaped once its lease expires, here
	// at once.
	if _, err := st0.ReleaseCreditHolds(ctx, a.Holder(), nil); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st0, acct, granted, map[string]int64{"stopped": denseReserved})
}
