package billing

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usagespill"
)

// TestDatabaseFreezeStopRestart plays the outages of a real PostgreSQL under steady traffic:
// first the server freezes (nothing answers, nothing closes: each write gives up after
// WriteTimeout), then, after it thaws, it is stopped (a fast shutdown closes every connection;
// new ones are refused). During the stop the gateway process itself restarts: the first meter
// drains into its spill file and goes; a second one opens the same file, and writes what the
// first one left, before its own records, once PostgreSQL is started again. Nothing is lost,
// nothing is billed twice, the ledger sums to the balance.
func TestDatabaseFreezeStopRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster of its own")
	}
	ctx := context.Background()
	pg := pgtest.NewOutage(t)
	st0 := openStore(t, pg.ConnString())
	const granted = 100_000_000
	accts := []uuid.UUID{newAccount(t, st0, granted), newAccount(t, st0, granted)}
	// Each process has its pool; the second one's is opened while the database is up (store.Open
	// wants it).
	stA, stB := openStore(t, pg.ConnString()), openStore(t, pg.ConnString())
	path := filepath.Join(t.TempDir(), "usage.spill")
	opts := func(logs *logSink, sp *usagespill.Spill) Options {
		return Options{Logger: logs.logger(), Spill: sp, FlushInterval: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond,
			WriteTimeout: 300 * time.Millisecond, DrainTimeout: time.Second, BatchSize: 32,
			ChunkMultiplier: 100_000, ChunkCapMicros: 50_000_000}
	}

	var books settled
	var seq atomic.Int64
	// traffic serves requests through *m until stopped, a few hundred a second; reservations
	// that need the database while it is away fail, and are not counted. (Flat out, on a busy
	// CI host, the replay of a backlog could take longer than a minute to outpace the records
	// appended behind it.)
	traffic := func(m *Meter) (stop func()) {
		done := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					n := seq.Add(1)
					books.serve(ctx, m, accts[g%2], fmt.Sprintf("req-%d", n), 1_000, 100+n%50)
					time.Sleep(3 * time.Millisecond)
				}
			})
		}
		return func() { close(done); wg.Wait() }
	}

	spA := openSpill(t, path, usagespill.Options{})
	var logsA logSink
	a := New(stA, opts(&logsA, spA))
	ctxA, stopA := context.WithCancel(ctx)
	ranA := make(chan error, 1)
	go func() { ranA <- a.Run(ctxA) }()
	for i, acct := range accts {
		books.serveUntil(t, a, acct, fmt.Sprintf("first-%d", i), 1_000, 100)
	}
	stopTraffic := traffic(a)
	waitFor(t, "traffic", func() bool { return books.count() >= 50 })

	// The database freezes: writes time out.
	pg.Freeze()
	waitFor(t, "writes to time out", func() bool { return a.WriterStats().WriteFailures >= 2 })
	waitFor(t, "the spill file to take records", func() bool { return spA.Records() > 0 })
	pg.Thaw()
	waitFor(t, "the backlog of the freeze to be written", func() bool {
		s := a.WriterStats()
		return s.Backlog == 0 && spA.Records() == 0
	})
	frozen := a.WriterStats().WriteFailures

	// The database stops.
	pg.Stop()
	waitFor(t, "writes to fail", func() bool { return a.WriterStats().WriteFailures >= frozen+3 })
	stopTraffic()
	// The process restarts: its drain cannot reach the database, so it keeps everything in its
	// spill file.
	stopA()
	if err := <-ranA; err == nil || !strings.Contains(err.Error(), "wait in the spill file") {
		t.Fatalf("the drain during the outage: %v", err)
	}
	left := spA.Records()
	if left == 0 || a.WriterStats().Queued != 0 {
		t.Fatalf("the first process left %d records in its spill file, %d queued", left, a.WriterStats().Queued)
	}
	spA.Close()

	spB := openSpill(t, path, usagespill.Options{})
	if got := spB.Report().Records; got != left {
		t.Fatalf("the second process found %d records, the first left %d", got, left)
	}
	var logsB logSink
	b := New(stB, opts(&logsB, spB))
	ctxB, stopB := context.WithCancel(ctx)
	ranB := make(chan error, 1)
	go func() { ranB <- b.Run(ctxB) }()
	waitFor(t, "the replay to fail while the database is down", func() bool { return b.WriterStats().WriteFailures >= 2 })
	pg.Start()
	before := books.count()
	stopTraffic = traffic(b)
	waitFor(t, "the first process's records to be written", func() bool { return b.WriterStats().Backlog == 0 && spB.Records() == 0 })
	waitFor(t, "traffic through the second process", func() bool { return books.count() >= before+50 })
	stopTraffic()
	waitFor(t, "the last records to be written", func() bool {
		s := b.WriterStats()
		return s.Queued == 0 && s.Backlog == 0
	})
	stopB()
	if err := <-ranB; err != nil {
		t.Fatal(err)
	}
	// The first process's holds are reaped once their lease expires; here at once.
	st := openStore(t, pg.ConnString())
	if _, err := st.ReleaseCreditHolds(ctx, a.Holder(), nil); err != nil {
		t.Fatal(err)
	}
	for _, acct := range accts {
		checkBilledOnce(t, st, acct, granted, books.costs[acct])
	}
	t.Logf("%d requests billed; the first process left %d records in its spill file; failed writes: %d then %d",
		books.count(), left, a.WriterStats().WriteFailures, b.WriterStats().WriteFailures)
	// One line at the start and one at the end of each outage: the first process saw the
	// freeze end and the stop begin; the second the end of the stop (and perhaps a connection
	// of its pool that the stop had broken, found dead at its first use).
	if logsA.count(logFailing) != 2 || logsA.count(logWritten) != 1 || logsB.count(logFailing) < 1 || logsB.count(logFailing) != logsB.count(logWritten) {
		t.Errorf("outages logged: first process\n%s\nsecond process\n%s", strings.Join(logsA.all(), "\n"), strings.Join(logsB.all(), "\n"))
	}
}

// TestStreamSettledAfterItsProcessWasReaped: trial h2's D2, with a real PostgreSQL outage. A
// stream's checkpoint (200 of its output tokens) is written; PostgreSQL stops; the stream goes on
// and settles (500 output tokens) and the process is stopped gracefully, its record kept in its
// spill file. PostgreSQL comes back, another process reaps the stopped one (its lease expired)
// and bills the checkpoint (process_lost); then the stopped process starts again and replays its
// spill file. The request is billed what its own record says, once: the checkpoint's record and a
// second one, stream-1_rest, of the 300 tokens beyond it. On the code before, the replayed record
// was skipped and the stream stayed billed at its checkpoint.
func TestStreamSettledAfterItsProcessWasReaped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster of its own")
	}
	ctx := context.Background()
	pg := pgtest.NewOutage(t)
	st := openStore(t, pg.ConnString())
	const granted = 10_000_000
	acct := newAccount(t, st, granted)
	path := filepath.Join(t.TempDir(), "usage.spill")
	const lease = time.Second
	opts := func(holder string, logs *logSink, sp *usagespill.Spill) Options {
		return Options{Holder: holder, Logger: logs.logger(), Spill: sp, Lease: lease, CheckpointInterval: 50 * time.Millisecond,
			ReapInterval: time.Hour, FlushInterval: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond,
			WriteTimeout: 300 * time.Millisecond, DrainTimeout: 500 * time.Millisecond}
	}

	spA := openSpill(t, path, usagespill.Options{})
	var logsA logSink
	a := New(openStore(t, pg.ConnString()), opts("stopping", &logsA, spA))
	ctxA, stopA := context.WithCancel(ctx)
	ranA := make(chan error, 1)
	go func() { ranA <- a.Run(ctxA) }()
	r, err := a.Reserve(ctx, acct, "stream-1", 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	r.TrackStream(testStream(uuid.Nil))
	r.Progress(llm.Usage{InputTokens: 1000}, 200)
	waitFor(t, "the checkpoint of 200 tokens", func() bool {
		c, ok := checkpointsOf(t, st, acct)["stream-1"]
		return ok && c.Record.OutputTokens == 200
	})

	pg.Stop()
	r.Progress(llm.Usage{InputTokens: 1000}, 500)
	p := checkpointPrice
	r.SettleUsage(UsageRecord{Model: "service-sonnet", Route: "/v1/messages", Provider: "sim", UpstreamModel: "sim-sonnet",
		Tokens: price.Tokens{Uncached: 1000, Output: 500}, Price: &p, Status: "ok"})
	stopA()
	if err := <-ranA; err == nil || !strings.Contains(err.Error(), "wait in the spill file") {
		t.Fatalf("the drain during the outage: %v", err)
	}
	if spA.Records() != 1 {
		t.Fatalf("the spill file holds %d records, want the stream's", spA.Records())
	}
	spA.Close()

	pg.Start()
	st = openStore(t, pg.ConnString()) // the first pool's connections went with the server
	reaper := New(openStore(t, pg.ConnString()), Options{Lease: lease})
	reapUntil(t, reaper, 1)
	if recs, err := st.UsageRecords(ctx, acct, 10); err != nil || len(recs) != 1 || recs[0].Status != StatusProcessLost {
		t.Fatalf("after the reap: %+v %v: want the checkpoint billed", recs, err)
	}

	spB := openSpill(t, path, usagespill.Options{})
	var logsB logSink
	b := New(openStore(t, pg.ConnString()), opts("restarted", &logsB, spB))
	ctxB, stopB := context.WithCancel(ctx)
	ranB := make(chan error, 1)
	go func() { ranB <- b.Run(ctxB) }()
	waitFor(t, "the spill file to be written", func() bool { return b.WriterStats().Backlog == 0 && spB.Records() == 0 })
	stopB()
	if err := <-ranB; err != nil {
		t.Fatal(err)
	}
	if err := reaper.Close(ctx); err != nil {
		t.Fatal(err)
	}

	checkBilledOnce(t, st, acct, granted, map[string]int64{
		"stream-1":                    streamCost(1000, 200),
		"stream-1" + store.RestSuffix: streamCost(0, 300),
	})
	if streamCost(1000, 200)+streamCost(0, 300) != streamCost(1000, 500) {
		t.Fatalf("the test's prices round: pick others")
	}
	recs, err := st.UsageRecords(ctx, acct, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.RequestID == "stream-1"+store.RestSuffix && (rec.Status != "ok" || rec.OutputTokens != 300 || rec.InputTokens != 0) {
			t.Errorf("rest record %+v: want status ok, 300 output tokens", rec)
		}
	}
}
