package billing

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
)

// checkpointPrice is the price the test streams are billed at: $3 per million input tokens,
// $15 per million output tokens.
var checkpointPrice = price.Price{Rates: price.Rates{Input: 3_000_000, Output: 15_000_000}}

// testStream is a CheckpointFunc as the HTTP edge's: a stream whose produced count is its
// output tokens, billed at checkpointPrice, and nothing while it has produced nothing.
func testStream(key uuid.UUID) CheckpointFunc {
	p := checkpointPrice
	return func(u llm.Usage, produced int) (UsageRecord, bool) {
		if produced == 0 && u.OutputTokens == 0 {
			return UsageRecord{}, false
		}
		return UsageRecord{KeyID: key, Model: "service-sonnet", Route: "/v1/messages", Provider: "sim", UpstreamModel: "sim-sonnet",
			Tokens: price.Tokens{Uncached: u.InputTokens, Output: int64(produced)}, Price: &p, Status: "client_disconnected"}, true
	}
}

// streamCost is what a stream of input and output tokens costs at checkpointPrice: the price
// arithmetic, computed apart from the meter.
func streamCost(input, output int64) int64 {
	return price.Cost(price.Tokens{Uncached: input, Output: output}, checkpointPrice).Total()
}

// checkpointsOf returns the account's checkpoints by request id.
func checkpointsOf(t *testing.T, st *store.Store, acct uuid.UUID) map[string]store.StreamCheckpoint {
	t.Helper()
	cks, err := st.StreamCheckpoints(context.Background(), acct)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]store.StreamCheckpoint, len(cks))
	for _, c := range cks {
		out[c.Record.RequestID] = c
	}
	return out
}

// reapUntil runs m's reaper until it has reaped n holds in all, failing after 10 s.
func reapUntil(t *testing.T, m *Meter, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	reaped := 0
	for reaped < n {
		got, err := m.ReapExpiredHolds(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		reaped += got
		if time.Now().After(deadline) {
			t.Fatalf("reaped %d holds in 10 s, want %d", reaped, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKilledStreamBilledFromItsLastCheckpoint: a process streams an answer, its meter (running,
// with a checkpoint interval of 50 ms and a lease of 1 s) checkpoints the stream's progress, and
// the process dies without a drain: its connections go, its meter never writes or releases
// anything again. Another process's reaper, once the lease has expired, bills the stream from
// its last checkpoint, from the dead process's hold, exactly once: a usage record whose cost is
// the price arithmetic of its tokens, one ledger entry of that cost, the hold reaped, the ledger
// summing to the balance. Only what the stream delivered after its last checkpoint is lost. On
// the code before checkpoints the stream had no usage record at all: its credit came back with
// the hold.
func TestKilledStreamBilledFromItsLastCheckpoint(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	const granted = 10_000_000
	acct := newAccount(t, st, granted)
	const lease = time.Second

	stDead := openStore(t, cs)
	var logs logSink
	dead := New(stDead, Options{Holder: "killed-process", Lease: lease, CheckpointInterval: 50 * time.Millisecond,
		ReapInterval: time.Hour, Logger: logs.logger()})
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- dead.Run(runCtx) }()
	defer func() { stopRun(); <-ran }()

	r, err := dead.Reserve(ctx, acct, "stream-1", 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	r.TrackStream(testStream(uuid.Nil))
	r.Progress(llm.Usage{InputTokens: 1000}, 0)
	time.Sleep(200 * time.Millisecond)
	if cks := checkpointsOf(t, st, acct); len(cks) != 0 {
		t.Fatalf("a stream that delivered nothing has checkpoints: %+v", cks)
	}
	for _, produced := range []int{200, 500} {
		r.Progress(llm.Usage{InputTokens: 1000}, produced)
		waitFor(t, fmt.Sprintf("the checkpoint of %d tokens", produced), func() bool {
			c, ok := checkpointsOf(t, st, acct)["stream-1"]
			return ok && c.Record.OutputTokens == int64(produced)
		})
	}
	c := checkpointsOf(t, st, acct)["stream-1"]
	if c.Holder != "killed-process" || c.Record.Status != StatusProcessLost || c.Record.CostMicros != streamCost(1000, 500) {
		t.Errorf("checkpoint %+v: want the holder killed-process, status %s, cost %d", c, StatusProcessLost, streamCost(1000, 500))
	}

	// The process dies: nothing of it reaches the database any more. What its stream delivers
	// from now on is the part a crash loses.
	stDead.Close()
	r.Progress(llm.Usage{InputTokens: 1000}, 600)

	survivor := New(st, Options{Lease: lease})
	if n, err := survivor.ReapExpiredHolds(ctx); err != nil || n != 0 {
		t.Fatalf("reaped %d (%v) before the lease expired", n, err)
	}
	if recs, _ := st.UsageRecords(ctx, acct, 10); len(recs) != 0 {
		t.Fatalf("billed before the lease expired: %+v", recs)
	}
	reapUntil(t, survivor, 1)

	cost := streamCost(1000, 500)
	checkBilledOnce(t, st, acct, granted, map[string]int64{"stream-1": cost})
	recs, err := st.UsageRecords(ctx, acct, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("%d usage records", len(recs))
	}
	rec := recs[0]
	if rec.Status != StatusProcessLost || rec.InputTokens != 1000 || rec.OutputTokens != 500 || rec.Price == nil ||
		rec.Costs.Input != 3000 || rec.Costs.Output != 7500 || rec.WaivedMicros != 0 {
		t.Errorf("usage record %+v: want status %s, 1000 input and 500 output tokens at the stream's price", rec, StatusProcessLost)
	}
	if e := usageLedger(t, st, acct)[store.UsageLedgerKey("stream-1")]; e.Note != "" {
		t.Errorf("the ledger entry says %q: the dead process's hold should have covered it", e.Note)
	}
	if cks := checkpointsOf(t, st, acct); len(cks) != 0 {
		t.Errorf("checkpoints left after the reap: %+v", cks)
	}
	// Reaping again bills nothing more.
	if _, err := survivor.ReapExpiredHolds(ctx); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st, acct, granted, map[string]int64{"stream-1": cost})
	if err := survivor.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLostStreamsBilledOnceByRacingReapers: a process with streams on two accounts (one of them
// through a key with a credit cap) dies; two other processes reap at the same moment, again and
// again. Every stream that delivered something is billed exactly once from its checkpoint, the
// stream that delivered nothing is not billed, the stream that settled before the crash keeps its
// own record (its checkpoint went with it), the capped key's budget counts the lost stream's
// cost as spent and holds nothing, and no hold or checkpoint is left.
func TestLostStreamsBilledOnceByRacingReapers(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	const granted = 10_000_000
	accts := []uuid.UUID{newAccount(t, st, granted), newAccount(t, st, granted)}
	capped := newCappedKey(t, st, accts[1], 5_000_000, store.CapPeriodDaily)
	const lease = 300 * time.Millisecond
	dead := New(openStore(t, cs), Options{Holder: "dead-process", Lease: lease})

	want := map[uuid.UUID]map[string]int64{accts[0]: {}, accts[1]: {}}
	for a, acct := range accts {
		for i := range 4 {
			id := fmt.Sprintf("stream-%d-%d", a, i)
			var r *Reservation
			var err error
			key := uuid.Nil
			if a == 1 && i == 0 {
				key = capped.KeyID
				r, err = dead.ReserveForKey(ctx, acct, id, 200_000, &capped)
			} else {
				r, err = dead.Reserve(ctx, acct, id, 200_000)
			}
			if err != nil {
				t.Fatal(err)
			}
			r.TrackStream(testStream(key))
			output := 100 * (i + 1)
			if i == 3 {
				output = 0 // delivered nothing yet
			} else {
				want[acct][id] = streamCost(500, int64(output))
			}
			r.Progress(llm.Usage{InputTokens: 500}, output)
		}
	}
	// One more stream settles normally after a checkpoint: its record deletes the checkpoint.
	done, err := dead.Reserve(ctx, accts[0], "settled", 200_000)
	if err != nil {
		t.Fatal(err)
	}
	done.TrackStream(testStream(uuid.Nil))
	done.Progress(llm.Usage{InputTokens: 500}, 50)
	if err := dead.writeCheckpoints(ctx); err != nil {
		t.Fatal(err)
	}
	for _, acct := range accts {
		if n := len(checkpointsOf(t, st, acct)); n != 4-1+btoi(acct == accts[0]) {
			t.Fatalf("%d checkpoints of account %s", n, acct)
		}
	}
	u := llm.Usage{InputTokens: 500}
	rec, _ := testStream(uuid.Nil)(u, 80)
	rec.Status = "ok"
	want[accts[0]]["settled"] = done.SettleUsage(rec)
	if want[accts[0]]["settled"] != streamCost(500, 80) {
		t.Fatalf("settled at %d, want %d", want[accts[0]]["settled"], streamCost(500, 80))
	}
	if err := dead.flushAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := checkpointsOf(t, st, accts[0])["settled"]; ok {
		t.Fatal("the settled stream's checkpoint outlived its usage record")
	}
	if b := budget(t, st, capped); b.ReservedMicros != 200_000 || b.SpentMicros != 0 {
		t.Fatalf("the capped key's budget before the crash: %+v", b)
	}
	// The process dies here: no Close.

	reapers := []*Meter{New(openStore(t, cs), Options{Lease: lease}), New(openStore(t, cs), Options{Lease: lease})}
	time.Sleep(lease + 100*time.Millisecond)
	var wg sync.WaitGroup
	start := make(chan struct{})
	reaped := make([]int, len(reapers))
	for i, m := range reapers {
		wg.Go(func() {
			<-start
			for range 5 {
				n, err := m.ReapExpiredHolds(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				reaped[i] += n
			}
		})
	}
	close(start)
	wg.Wait()
	if reaped[0]+reaped[1] != 2 {
		t.Errorf("the reapers reaped %v holds, want 2 in all", reaped)
	}

	for _, acct := range accts {
		checkBilledOnce(t, st, acct, granted, want[acct])
		if cks := checkpointsOf(t, st, acct); len(cks) != 0 {
			t.Errorf("checkpoints left: %+v", cks)
		}
		recs, err := st.UsageRecords(ctx, acct, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if wantStatus := StatusProcessLost; r.RequestID == "settled" {
				if r.Status != "ok" {
					t.Errorf("the settled stream's record has status %q", r.Status)
				}
			} else if r.Status != wantStatus || r.Price == nil || r.CostMicros != price.Cost(r.Tokens(), *r.Price).Total() {
				t.Errorf("record %s: status %q, cost %d for %+v", r.RequestID, r.Status, r.CostMicros, r.Tokens())
			}
		}
	}
	if b := budget(t, st, capped); b.ReservedMicros != 0 || b.SpentMicros != want[accts[1]]["stream-1-0"] {
		t.Errorf("the capped key's budget after the reap: %+v, want %d spent and nothing reserved", b, want[accts[1]]["stream-1-0"])
	}
	// The key reservations' own reaper finds nothing left to return.
	if _, err := reapers[0].ReapExpiredKeyReservations(ctx); err != nil {
		t.Fatal(err)
	}
	if b := budget(t, st, capped); b.ReservedMicros != 0 || b.SpentMicros != want[accts[1]]["stream-1-0"] {
		t.Errorf("the capped key's budget after its reservations' reap: %+v", b)
	}
	for _, m := range reapers {
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDrainedStreamsLeaveNoCheckpoint: a process that drains (Close) leaves no checkpoint behind,
// so that a reaper never bills one of its streams a second time: a stream checkpointed and then
// settled is billed once, at its settlement, and a stream still open at Close (its checkpoint
// deleted by Close) settles afterwards, written at once. A reaper run afterwards bills nothing.
func TestDrainedStreamsLeaveNoCheckpoint(t *testing.T) {
	ctx := context.Background()
	cs, st := newDB(t)
	const granted = 10_000_000
	acct := newAccount(t, st, granted)
	m := New(openStore(t, cs), Options{Holder: "drained-process", Lease: 200 * time.Millisecond})
	first, err := m.Reserve(ctx, acct, "first", 100_000)
	if err != nil {
		t.Fatal(err)
	}
	late, err := m.Reserve(ctx, acct, "late", 100_000)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Reservation{first, late} {
		r.TrackStream(testStream(uuid.Nil))
		r.Progress(llm.Usage{InputTokens: 100}, 40)
	}
	if err := m.writeCheckpoints(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(checkpointsOf(t, st, acct)); n != 2 {
		t.Fatalf("%d checkpoints, want 2", n)
	}
	rec, _ := testStream(uuid.Nil)(llm.Usage{InputTokens: 100}, 60)
	rec.Status = "ok"
	costs := map[string]int64{"first": first.SettleUsage(rec)}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if cks := checkpointsOf(t, st, acct); len(cks) != 0 {
		t.Fatalf("checkpoints after Close: %+v", cks)
	}
	costs["late"] = late.SettleUsage(rec)

	reaper := New(st, Options{})
	time.Sleep(300 * time.Millisecond)
	if _, err := reaper.ReapExpiredHolds(ctx); err != nil {
		t.Fatal(err)
	}
	if err := reaper.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st, acct, granted, costs)
	for id, cost := range costs {
		if cost != streamCost(100, 60) {
			t.Errorf("%s settled at %d, want %d", id, cost, streamCost(100, 60))
		}
	}
}

// TestCheckpointsOffTrackNothing: with a negative CheckpointInterval nothing is tracked and the
// writer's batches stay as they were.
func TestCheckpointsOffTrackNothing(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 1_000_000)
	m := New(st, Options{CheckpointInterval: -1})
	r, err := m.Reserve(ctx, acct, "s", 1000)
	if err != nil {
		t.Fatal(err)
	}
	r.TrackStream(testStream(uuid.Nil))
	r.Progress(llm.Usage{InputTokens: 10}, 10)
	if err := m.writeCheckpoints(ctx); err != nil {
		t.Fatal(err)
	}
	if cks := checkpointsOf(t, st, acct); len(cks) != 0 || r.stream != nil {
		t.Fatalf("checkpoints with checkpoints off: %+v", cks)
	}
	r.Release()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestProgressCostsNoAllocation: what a stream does per event (Progress) allocates nothing, and
// a reservation that is not a stream (or before TrackStream) pays one nil check.
func TestProgressCostsNoAllocation(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	acct := newAccount(t, st, 1_000_000)
	m := New(st, Options{})
	r, err := m.Reserve(ctx, acct, "s", 1000)
	if err != nil {
		t.Fatal(err)
	}
	u := llm.Usage{InputTokens: 10, ServiceTier: "standard"}
	n := 0
	if a := testing.AllocsPerRun(1000, func() { n++; r.Progress(u, n) }); a != 0 {
		t.Errorf("Progress before TrackStream: %v allocations", a)
	}
	r.TrackStream(testStream(uuid.Nil))
	if a := testing.AllocsPerRun(1000, func() { n++; r.Progress(u, n) }); a != 0 {
		t.Errorf("Progress: %v allocations per event", a)
	}
	r.Release()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
