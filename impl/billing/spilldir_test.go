package billing

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/usagespill"
)

// TestScaleInDuringOutageBillsEveryProcessesSpill: two processes share a spill directory (two
// replicas on one host, as tollgate serve's default $TOLLGATE_DATA_DIR/usage-spill lets them),
// both settle requests while the database is away and both stop during the outage, their
// records in their spill files. One process starts again on the directory (a scale-in from two
// to one): it writes the records of both, each once. Before, it took one file and left the
// other's records for a second process to start, which after a scale-in none did: they were
// never billed.
func TestScaleInDuringOutageBillsEveryProcessesSpill(t *testing.T) {
	ctx := context.Background()
	cs, st0 := newDB(t)
	const granted = 10_000_000
	accts := []uuid.UUID{newAccount(t, st0, granted), newAccount(t, st0, granted)}
	relay := newRelay(t, cs)
	dir := filepath.Join(t.TempDir(), "usage-spill")
	var books settled

	openDir := func() *usagespill.Spill {
		sp, err := usagespill.OpenDir(dir, usagespill.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sp.Close() })
		return sp
	}
	var meters []*Meter
	var spills []*usagespill.Spill
	for range 2 {
		sp := openDir()
		m := New(openStore(t, relay.ConnString()), Options{Logger: (&logSink{}).logger(), Spill: sp, ChunkMultiplier: 1000, DrainTimeout: time.Second})
		meters, spills = append(meters, m), append(spills, sp)
		for i, acct := range accts {
			if !books.serve(ctx, m, acct, fmt.Sprintf("%s-before-%d", m.Holder(), i), 1_000, 10) {
				t.Fatal("reserve")
			}
		}
		if err := m.flushAll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stC := openStore(t, relay.ConnString())
	relay.Cut()
	for p, m := range meters {
		for i := range 20 {
			if !books.serve(ctx, m, accts[i%2], fmt.Sprintf("p%d-during-%d", p, i), 1_000, int64(100+10*p+i)) {
				t.Fatal("a reservation within the hold failed during the outage")
			}
		}
		if err := m.Close(ctx); err == nil {
			t.Fatal("the drain reached the database during the outage")
		}
		if got := spills[p].Records(); got != 20 {
			t.Fatalf("process %d left %d records in its spill file, want 20", p, got)
		}
		spills[p].Close()
	}
	relay.Restore()

	// One process starts again on the directory.
	sp := openDir()
	var logs logSink
	c := New(stC, Options{Logger: logs.logger(), Spill: sp, FlushInterval: 20 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(runCtx) }()
	waitFor(t, "the backlog to be written", func() bool {
		s := c.WriterStats()
		return s.Backlog == 0 && s.Queued == 0 && sp.Records() == 0
	})
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	for _, m := range meters {
		if _, err := st0.ReleaseCreditHolds(ctx, m.Holder(), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, acct := range accts {
		checkBilledOnce(t, st0, acct, granted, books.costs[acct])
	}
	if logs.count("took the records of a usage spill file that no process holds") != 1 {
		t.Errorf("the new process's log does not say it took the other file's records:\n%s", strings.Join(logs.all(), "\n"))
	}
}
