package billing

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/usagespill"
)

// TestDrainKeepsWhatAHungDatabaseDoesNotTake: the database hangs (connections accepted, nothing
// answered, as a PostgreSQL stopped with SIGSTOP) before any write has failed, so the meter
// does not know it is down, and the process stops with a drain shorter than a write's timeout
// (a shutdown bounded in time). The drain cannot write the records settled, and keeps them in
// the spill file, as an outage keeps them, instead of leaving them in memory to be lost when
// the process exits; a record settled after the drain (a stream cut late, an agent's step) is
// kept there too. The drain returns within its bound, and the next process bills each record
// exactly once. Before, a write cut short by the drain's deadline put its batch back in the
// queue ("the drain writes the batch": it was the drain), where the exit lost it.
func TestDrainKeepsWhatAHungDatabaseDoesNotTake(t *testing.T) {
	ctx := context.Background()
	cs, st0 := newDB(t)
	const granted = 10_000_000
	acct := newAccount(t, st0, granted)
	relay := newRelay(t, cs)
	stA, stB := openStore(t, relay.ConnString()), openStore(t, relay.ConnString())
	path := filepath.Join(t.TempDir(), "usage.spill")
	spA := openSpill(t, path, usagespill.Options{})
	const drain = 500 * time.Millisecond
	a := New(stA, Options{Spill: spA, ChunkMultiplier: 1000, WriteTimeout: 5 * time.Second, DrainTimeout: drain})
	var books settled
	books.serveUntil(t, a, acct, "before", 1_000, 10)
	flushUntil(t, a)
	late, err := a.Reserve(ctx, acct, "late", 1_000)
	if err != nil {
		t.Fatal(err)
	}

	relay.Hang()
	defer relay.Unhang()
	for i := range 5 {
		if !books.serve(ctx, a, acct, fmt.Sprintf("hung-%d", i), 1_000, int64(100+i)) {
			t.Fatal("a reservation within the hold failed")
		}
	}
	// The process stops: Run's context ends, and its drain begins.
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- a.Run(runCtx) }()
	time.Sleep(100 * time.Millisecond)
	began := time.Now()
	stop()
	if err := <-ran; err == nil {
		t.Fatal("the drain reached a hung database")
	}
	if took := time.Since(began); took > 4*drain {
		t.Errorf("the drain took %s against a hung database; its bound is %s", took, drain)
	}
	if got := spA.Records(); got != 5 {
		t.Fatalf("%d records in the spill file after the drain, want the 5 settled during the hang", got)
	}
	began = time.Now()
	late.Settle(300, UsageRecord{Model: "service-flint", Route: "/v1/chat/completions", InputTokens: 10, OutputTokens: 5})
	books.add(acct, "late", 300)
	if took := time.Since(began); took > 4*drain {
		t.Errorf("a settlement after the drain took %s against a hung database; the drain's bound is %s", took, drain)
	}
	if got := spA.Records(); got != 6 {
		t.Fatalf("%d records in the spill file after a settlement that followed the drain, want 6", got)
	}
	spA.Close()

	// The next process, once the database answers, bills them from the spill file.
	relay.Unhang()
	spB := openSpill(t, path, usagespill.Options{})
	b := New(stB, Options{Spill: spB})
	flushUntil(t, b)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The stopped process's hold is reaped once its lease expires; here at once.
	if _, err := st0.ReleaseCreditHolds(ctx, a.Holder(), nil); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st0, acct, granted, books.costs[acct])
}
