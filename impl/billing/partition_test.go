package billing

import (
	"context"
	"testing"
	"time"
)

// TestPartitionInASettlementFreesTheKeyWithinTheIdleBound: a capped key's settlement beyond its
// reservation (the dense text) on replica A has locked the key's reservation and budget rows
// when the network between A and PostgreSQL goes silent (the relay drops A's COMMIT and
// forwards nothing more either way, closing no socket: a partition). A gives up at its
// WriteTimeout and keeps the settlement in memory at the reservation's part; the server, told
// nothing, keeps A's backend idle in its transaction. Replica B (a meter on a pool of its own,
// not through the relay) reserves against the same key meanwhile: its statement waits on the
// budget row's lock. The pool's idle_in_transaction_session_timeout ends A's orphaned session
// within its bound (10 s), the locks go and B's reservation is granted before B's own timeout;
// before the pools set it, the locks stayed until the kernel's keepalive gave up on the peer
// (about two hours) and B's reservation timed out, as every request of the key on every
// replica did. Once the network heals, A's retry and its usage record leave the key counting
// what the ledger billed: the key's spend is what its usage records charge, which is the
// account's balance change and its ledger.
func TestPartitionInASettlementFreesTheKeyWithinTheIdleBound(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the server's idle-in-transaction bound")
	}
	ctx := context.Background()
	const (
		capMicros = 1_500_000
		balance   = 100_000_000 // beyondSettlement's account
		idleBound = 10 * time.Second
		// bWriteTimeout is replica B's bound on each database call: longer than the idle
		// bound, so that B outwaits it when the bound holds.
		bWriteTimeout = 2*idleBound + 5*time.Second
		bCost         = 200_000
	)
	b := beyondSettlement(t, "partitioned", capMicros)
	m, st0, acct, relay, capped, r, rec := b.m, b.st0, b.acct, b.relay, b.capped, b.r, b.rec

	relay.PartitionAtCommit()
	settled := make(chan int64, 1)
	go func() { settled <- r.SettleUsage(rec) }()
	for deadline := time.Now().Add(10 * time.Second); !relay.Partitioned(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the settlement sent no COMMIT")
		}
	}
	partitionedAt := time.Now()
	// The server holds A's transaction, its locks taken, waiting for a COMMIT that never comes.
	time.Sleep(200 * time.Millisecond)
	var idle int
	if err := st0.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state = 'idle in transaction'`).Scan(&idle); err != nil {
		t.Fatal(err)
	}
	if idle != 1 {
		t.Fatalf("%d sessions idle in a transaction, want A's settlement", idle)
	}

	// Replica B reserves against the same key, on a pool of its own.
	mB := New(st0, Options{ChunkCapMicros: 10_000_000, WriteTimeout: bWriteTimeout})
	rB, err := mB.ReserveForKey(ctx, acct, "replica-b", bCost, &capped)
	waited := time.Since(partitionedAt)
	if err != nil {
		t.Fatalf("replica B's reservation on the key, %v after the partition: %v (A's orphaned transaction "+
			"still held the key's budget row)", waited.Round(time.Millisecond), err)
	}
	if waited > idleBound+4*time.Second {
		t.Errorf("replica B's reservation waited %v, beyond the idle bound %v", waited.Round(time.Millisecond), idleBound)
	}
	t.Logf("replica B's reservation waited %v after the partition", waited.Round(time.Millisecond))

	charged := <-settled
	if charged != denseReserved {
		t.Fatalf("charged %d: a settlement cut off should charge the reservation %d alone", charged, denseReserved)
	}
	if len(m.keys.pending) != 1 || m.keys.pending[0].cost != denseReserved {
		t.Fatalf("pending settlements %+v: want one at the reservation %d", m.keys.pending, denseReserved)
	}
	// The server rolled A's transaction back: nothing of it counts.
	if kb := budget(t, st0, capped); kb.SpentMicros != 0 || kb.ReservedMicros != denseReserved+bCost {
		t.Fatalf("the key's budget %+v after A's session ended: want A's and B's reservations alone", kb)
	}
	rB.Settle(bCost, UsageRecord{KeyID: capped.KeyID})
	if err := mB.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The network heals: A's connections are reset, its retry and its record go through.
	relay.Heal()
	for deadline := time.Now().Add(10 * time.Second); len(m.keys.pending) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d key settlements of A still wait after the network healed", len(m.keys.pending))
		}
		m.maintainKeys(ctx, time.Now())
	}
	billed := settledRecord(t, m, st0, acct, "partitioned")
	if billed.CostMicros != charged || billed.CostMicros+billed.WaivedMicros != denseBill {
		t.Fatalf("A's record: cost %d waived %d; want %d charged and the rest of %d waived", billed.CostMicros, billed.WaivedMicros, charged, denseBill)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ledger := usageLedger(t, st0, acct)
	if e := ledger["usage:partitioned"]; -e.AmountMicros != billed.CostMicros {
		t.Errorf("A's ledger entry %+v, want %d billed", e, billed.CostMicros)
	}
	if e := ledger["usage:replica-b"]; -e.AmountMicros != bCost {
		t.Errorf("B's ledger entry %+v, want %d billed", e, bCost)
	}
	records, usage, err := st0.UsageTotals(ctx, acct)
	if err != nil || records != 2 || usage != billed.CostMicros+bCost {
		t.Errorf("usage: %d records costing %d (%v), want A's %d and B's %d", records, usage, err, billed.CostMicros, bCost)
	}
	if kb := budget(t, st0, capped); kb.SpentMicros != usage || kb.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v: its spend should be what its records charge, %d, nothing reserved", kb, usage)
	}
	credit := checkRest(t, st0, acct)
	if credit.BalanceMicros != balance-usage {
		t.Errorf("balance %d: want %d less the records' %d", credit.BalanceMicros, balance, usage)
	}
}
