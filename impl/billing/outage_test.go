package billing

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usagespill"
)

// waitFor polls cond until it holds, failing the test after a generous minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openSpill opens the spill file at path, closed when the test ends.
func openSpill(t *testing.T, path string, o usagespill.Options) *usagespill.Spill {
	t.Helper()
	sp, err := usagespill.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return sp
}

// settled is what a test settled: cost by request id, per account.
type settled struct {
	mu    sync.Mutex
	costs map[uuid.UUID]map[string]int64
}

func (s *settled) add(acct uuid.UUID, id string, cost int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.costs == nil {
		s.costs = make(map[uuid.UUID]map[string]int64)
	}
	if s.costs[acct] == nil {
		s.costs[acct] = make(map[string]int64)
	}
	s.costs[acct][id] = cost
}

func (s *settled) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.costs {
		n += len(c)
	}
	return n
}

// serve reserves and settles one request; it reports false when the reservation failed.
func (s *settled) serve(ctx context.Context, m *Meter, acct uuid.UUID, id string, worst, cost int64) bool {
	r, err := m.Reserve(ctx, acct, id, worst)
	if err != nil {
		return false
	}
	if got := r.Settle(cost, UsageRecord{Model: "service-flint", Route: "/v1/chat/completions", InputTokens: 10, OutputTokens: 5}); got != cost {
		panic(fmt.Sprintf("settled %d, want %d", got, cost))
	}
	s.add(acct, id, cost)
	return true
}

// checkBilledOnce checks that every request settled on the account has exactly one usage
// record and one usage ledger entry, of its cost, and no other request has either, and that
// the balance is what the grant less those costs leaves (with checkRest: the ledger sums to it,
// nothing is held).
func checkBilledOnce(t *testing.T, st *store.Store, acct uuid.UUID, granted int64, costs map[string]int64) {
	t.Helper()
	ctx := context.Background()
	records, err := st.UsageRecords(ctx, acct, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	for _, r := range records {
		want, ok := costs[r.RequestID]
		switch {
		case !ok:
			t.Errorf("usage record of request %s, which was never settled", r.RequestID)
		case seen[r.RequestID]:
			t.Errorf("two usage records of request %s", r.RequestID)
		case r.CostMicros != want:
			t.Errorf("request %s: usage record of %d, settled at %d", r.RequestID, r.CostMicros, want)
		}
		seen[r.RequestID] = true
	}
	ledger := usageLedger(t, st, acct)
	var total int64
	for id, cost := range costs {
		total += cost
		if !seen[id] {
			t.Errorf("request %s (cost %d) has no usage record", id, cost)
		}
		e, ok := ledger[store.UsageLedgerKey(id)]
		if !ok {
			t.Errorf("request %s has no usage ledger entry", id)
		} else if e.AmountMicros != -cost {
			t.Errorf("request %s: ledger entry of %d, cost %d (%s)", id, e.AmountMicros, cost, e.Note)
		}
	}
	if len(ledger) != len(costs) {
		t.Errorf("%d usage ledger entries for %d settled requests", len(ledger), len(costs))
	}
	credit := checkRest(t, st, acct)
	if credit.BalanceMicros != granted-total {
		t.Errorf("balance %d, want %d granted less %d billed", credit.BalanceMicros, granted, total)
	}
}

// count counts the log records containing s.
func (s *logSink) count(sub string) int {
	n := 0
	for _, r := range s.all() {
		if strings.Contains(r, sub) {
			n++
		}
	}
	return n
}

const (
	logFailing = "the database does not take usage records"
	logWritten = "usage backlog written to the database"
)

// flushUntil writes everything, retrying while the pool finds the connections that broke in
// an outage (pgx learns that a pooled connection is dead by using it).
func flushUntil(t *testing.T, m *Meter) {
	t.Helper()
	var err error
	for range 20 {
		if err = m.flushAll(context.Background()); err == nil {
			return
		}
	}
	t.Fatal(err)
}

// serveUntil serves one request, retrying likewise.
func (s *settled) serveUntil(t *testing.T, m *Meter, acct uuid.UUID, id string, worst, cost int64) {
	t.Helper()
	for range 20 {
		if s.serve(context.Background(), m, acct, id, worst, cost) {
			return
		}
	}
	t.Fatalf("request %s refused", id)
}

// TestOutageLosesNothing: the database goes away (a real cut of every connection, new ones
// refused) under steady traffic, for several failed batch writes, and comes back. Every
// request served before, during and after the outage is billed exactly once, the ledger sums
// to the balance, and the writer logs the outage once, not every retry. With a spill file the
// records of the outage go to disk at every tick; without one they wait in memory.
func TestOutageLosesNothing(t *testing.T) {
	for _, mode := range []string{"spill", "memory"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			cs, st0 := newDB(t)
			const granted = 100_000_000
			accts := []uuid.UUID{newAccount(t, st0, granted), newAccount(t, st0, granted)}
			relay := newRelay(t, cs)
			st := openStore(t, relay.ConnString())
			var logs logSink
			opts := Options{Logger: logs.logger(), FlushInterval: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond,
				BatchSize: 16, ChunkMultiplier: 100_000, ChunkCapMicros: 50_000_000}
			var sp *usagespill.Spill
			if mode == "spill" {
				sp = openSpill(t, filepath.Join(t.TempDir(), "usage.spill"), usagespill.Options{})
				opts.Spill = sp
			}
			m := New(st, opts)
			runCtx, stop := context.WithCancel(ctx)
			ran := make(chan error, 1)
			go func() { ran <- m.Run(runCtx) }()

			var books settled
			var seq atomic.Int64
			serve := func(acct uuid.UUID) bool {
				n := seq.Add(1)
				return books.serve(ctx, m, acct, fmt.Sprintf("req-%d", n), 1_000, 100+n%50)
			}
			for i := range 40 {
				if !serve(accts[i%2]) {
					t.Fatal("a reservation failed with the database up")
				}
			}
			waitFor(t, "the first records to be written", func() bool {
				s := m.WriterStats()
				return s.Queued == 0 && s.Backlog == 0
			})

			// The outage: traffic goes on from the holds while the writes fail.
			relay.Cut()
			var wg sync.WaitGroup
			done := make(chan struct{})
			for g := range 4 {
				wg.Go(func() {
					for {
						select {
						case <-done:
							return
						default:
						}
						serve(accts[g%2])
						time.Sleep(time.Millisecond)
					}
				})
			}
			waitFor(t, "several failed writes", func() bool { return m.WriterStats().WriteFailures >= 5 })
			during := m.WriterStats()
			if during.Backlog == 0 {
				t.Errorf("no record in the backlog during the outage: %+v", during)
			}
			if sp != nil && sp.Records() == 0 {
				t.Error("nothing in the spill file during the outage")
			}
			relay.Restore()
			close(done)
			wg.Wait()
			for i := range 40 {
				serve(accts[i%2])
			}
			// The spill file is emptied once the database has every record in it.
			waitFor(t, "the backlog to be written", func() bool {
				s := m.WriterStats()
				return s.Queued == 0 && s.Backlog == 0 && (sp == nil || sp.Records() == 0)
			})
			if sp != nil && sp.Size() != sp.Start().Offset {
				t.Errorf("the spill file was not emptied: %d bytes", sp.Size())
			}
			stop()
			if err := <-ran; err != nil {
				t.Fatal(err)
			}
			for _, acct := range accts {
				checkBilledOnce(t, st0, acct, granted, books.costs[acct])
			}
			s := m.WriterStats()
			failing, written := logs.count(logFailing), logs.count(logWritten)
			t.Logf("%d requests billed; during the outage: %d records in the backlog (%d bytes); %d failed writes",
				books.count(), during.Backlog, during.BacklogBytes, s.WriteFailures)
			if failing != 1 || written != 1 {
				t.Errorf("logged %d outage starts and %d ends for %d failed writes: want one of each, not one per retry:\n%s",
					failing, written, s.WriteFailures, strings.Join(logs.all(), "\n"))
			}
		})
	}
}

// TestLostCommitAckBillsOnce: the connection breaks after the server committed a batch and
// before the meter heard of it. The meter keeps the batch and writes it again; the unique
// (account, request id) of usage records skips it, so it is billed once, and the meter's view
// of its hold ends exactly the database's.
func TestLostCommitAckBillsOnce(t *testing.T) {
	ctx := context.Background()
	cs, st0 := newDB(t)
	const granted = 10_000_000
	acct := newAccount(t, st0, granted)
	relay := newRelay(t, cs)
	st := openStore(t, relay.ConnString())
	sp := openSpill(t, filepath.Join(t.TempDir(), "usage.spill"), usagespill.Options{})
	var logs logSink
	m := New(st, Options{Logger: logs.logger(), Spill: sp})
	var books settled
	for i := range 5 {
		if !books.serve(ctx, m, acct, fmt.Sprintf("ack-%d", i), 1_000, int64(100*(i+1))) {
			t.Fatal("reserve")
		}
	}
	relay.LoseCommitAck()
	if err := m.flushAll(ctx); err == nil {
		t.Fatal("the write whose answer was lost succeeded")
	}
	if relay.LostAcks() != 1 {
		t.Fatalf("%d commit answers lost", relay.LostAcks())
	}
	if n, _, err := st0.UsageTotals(ctx, acct); err != nil || n != 5 {
		t.Fatalf("the server has %d records (%v): the batch should have committed", n, err)
	}
	if got := m.WriterStats().Backlog; got != 5 || sp.Records() != 5 {
		t.Fatalf("backlog %d, spill %d: the meter should keep the batch", got, sp.Records())
	}
	flushUntil(t, m)
	if sp.Records() != 0 {
		t.Fatalf("spill not emptied: %d", sp.Records())
	}
	a := m.account(acct, false)
	holds, err := st0.CreditHolds(ctx, acct)
	if err != nil || len(holds) != 1 {
		t.Fatalf("holds %+v, %v", holds, err)
	}
	a.mu.Lock()
	if a.dbAmount != holds[0].AmountMicros || a.pending != 0 || a.pendingRecords != 0 {
		t.Errorf("meter: hold %d, pending %d (%d records); database: hold %d", a.dbAmount, a.pending, a.pendingRecords, holds[0].AmountMicros)
	}
	a.mu.Unlock()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st0, acct, granted, books.costs[acct])
}

// TestRestartDuringOutage: a process settles requests while the database is away, and stops
// (its drain cannot reach the database: the records stay in its spill file, its holds in the
// database). A new process on the same spill file starts while the database is still away,
// serves once it is back, and writes the records the first one left, before its own, exactly
// once: billed to the first process's hold while that still exists, else to the account's free
// credit. The spill file is emptied only then.
func TestRestartDuringOutage(t *testing.T) {
	ctx := context.Background()
	cs, st0 := newDB(t)
	const granted = 10_000_000
	accts := []uuid.UUID{newAccount(t, st0, granted), newAccount(t, st0, granted)}
	relay := newRelay(t, cs)
	path := filepath.Join(t.TempDir(), "usage.spill")
	var books settled

	// The first process draws its holds, then loses the database. (The second process's pool is
	// opened now: store.Open wants to reach the database.)
	stA := openStore(t, relay.ConnString())
	stB := openStore(t, relay.ConnString())
	spA := openSpill(t, path, usagespill.Options{})
	var logsA logSink
	a := New(stA, Options{Logger: logsA.logger(), Spill: spA, ChunkMultiplier: 1000, DrainTimeout: 2 * time.Second})
	for i, acct := range accts {
		if !books.serve(ctx, a, acct, fmt.Sprintf("a-before-%d", i), 1_000, 10) {
			t.Fatal("reserve")
		}
	}
	if err := a.flushAll(ctx); err != nil {
		t.Fatal(err)
	}
	relay.Cut()
	for i := range 30 {
		if !books.serve(ctx, a, accts[i%2], fmt.Sprintf("a-during-%d", i), 1_000, int64(200+i)) {
			t.Fatal("a reservation within the hold failed during the outage")
		}
	}
	if err := a.flushQueued(ctx); err == nil {
		t.Fatal("a write succeeded during the outage")
	}
	if got := spA.Records(); got != 30 {
		t.Fatalf("%d records in the spill file after one tick of the outage, want 30", got)
	}
	// More requests settle, then the process stops (SIGTERM): its drain keeps them too.
	for i := range 10 {
		books.serve(ctx, a, accts[i%2], fmt.Sprintf("a-last-%d", i), 1_000, 300)
	}
	if err := a.Close(ctx); err == nil {
		t.Fatal("the drain reached the database during the outage")
	}
	if got := spA.Records(); got != 40 {
		t.Fatalf("%d records in the spill file after the drain, want 40", got)
	}
	spA.Close()

	// The new process starts during the outage.
	spB := openSpill(t, path, usagespill.Options{})
	if r := spB.Report(); r.Records != 40 || r.TornBytes != 0 {
		t.Fatalf("reopened spill: %+v", r)
	}
	var logsB logSink
	b := New(stB, Options{Logger: logsB.logger(), Spill: spB, FlushInterval: 20 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	if b.Holder() == a.Holder() {
		t.Fatal("both processes have one holder name")
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- b.Run(runCtx) }()
	waitFor(t, "failed replays", func() bool { return b.WriterStats().WriteFailures >= 2 })
	if got := b.WriterStats().Backlog; got != 40 {
		t.Fatalf("backlog %d during the outage, want 40", got)
	}
	// The first process's hold on the second account has expired and been reaped by the time
	// the database is back (as any process's reaper does once the lease is over); its hold on
	// the first account is still there. (st0 reaches the database without the relay.)
	holdOfA := func() int64 {
		holds, err := st0.CreditHolds(ctx, accts[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range holds {
			if h.Holder == a.Holder() {
				return h.AmountMicros
			}
		}
		t.Fatal("the first process's hold on the first account is gone")
		return 0
	}
	heldBefore := holdOfA()
	if _, err := st0.ReleaseCreditHolds(ctx, a.Holder(), []uuid.UUID{accts[1]}); err != nil {
		t.Fatal(err)
	}
	relay.Restore()
	for i := range 10 {
		books.serveUntil(t, b, accts[i%2], fmt.Sprintf("b-%d", i), 1_000, 50)
	}
	waitFor(t, "the backlog to be written", func() bool {
		s := b.WriterStats()
		return s.Backlog == 0 && s.Queued == 0 && spB.Records() == 0
	})
	// The first process's records on the first account were billed to its hold there.
	var spilledOnFirst int64
	for id, cost := range books.costs[accts[0]] {
		if strings.HasPrefix(id, "a-during-") || strings.HasPrefix(id, "a-last-") {
			spilledOnFirst += cost
		}
	}
	if got := heldBefore - holdOfA(); got != spilledOnFirst {
		t.Errorf("the first process's hold on the first account went down by %d; its spilled records there cost %d", got, spilledOnFirst)
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	// The first process's last hold is reaped in its turn.
	if _, err := st0.ReleaseCreditHolds(ctx, a.Holder(), nil); err != nil {
		t.Fatal(err)
	}
	for _, acct := range accts {
		checkBilledOnce(t, st0, acct, granted, books.costs[acct])
	}
	for _, l := range logsB.all() {
		if strings.Contains(l, "not billed in full") {
			t.Errorf("a replayed record was not billed in full: %s", l)
		}
	}
	if logsB.count("holds records an earlier process could not write") != 1 || logsB.count(logFailing) != 1 || logsB.count(logWritten) != 1 {
		t.Errorf("the new process's log:\n%s", strings.Join(logsB.all(), "\n"))
	}
}

// TestTornSpillTail: a process was killed in the middle of a write to its spill file. The next
// one drops the torn last record (it had never been acknowledged, so it is one of the records
// a SIGKILL loses), says so in its log, and writes every whole record exactly once.
func TestTornSpillTail(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	const granted = 1_000_000
	acct := newAccount(t, st, granted)
	path := filepath.Join(t.TempDir(), "usage.spill")
	sp, err := usagespill.Open(path, usagespill.Options{})
	if err != nil {
		t.Fatal(err)
	}
	costs, entries := goneProcessEntries(acct, 6)
	if _, err := sp.Append(entries[:5]); err != nil {
		t.Fatal(err)
	}
	whole := sp.Size()
	if _, err := sp.Append(entries[5:]); err != nil {
		t.Fatal(err)
	}
	sp.Close()
	// The last write was torn: half of its record reached the disk.
	if err := os.Truncate(path, whole+(sp.Size()-whole)/2); err != nil {
		t.Fatal(err)
	}
	delete(costs, "gone-5")

	sp = openSpill(t, path, usagespill.Options{})
	var logs logSink
	m := New(st, Options{Logger: logs.logger(), Spill: sp})
	if logs.count("torn record") != 1 {
		t.Errorf("the torn tail was not reported:\n%s", strings.Join(logs.all(), "\n"))
	}
	if err := m.flushAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st, acct, granted, costs)
}

// TestSpillResyncGaveUpIsAnError: damage in the spill file past which Open's search for the
// next whole record reaches its bound (a file crafted with a plausible frame head every few
// bytes) sets the rest of the file aside, whole records after it too. The meter logged that
// only as a torn last write ("a crash in the middle of a write", at warning level) and counted
// nothing, so an operator took records lost to damage for the one unacknowledged write a crash
// loses. It is now an error that says the rest may hold whole records, counted with the
// records set aside; the records before the damage are billed once.
func TestSpillResyncGaveUpIsAnError(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	const granted = 1_000_000
	acct := newAccount(t, st, granted)
	path := filepath.Join(t.TempDir(), "usage.spill")
	sp, err := usagespill.Open(path, usagespill.Options{})
	if err != nil {
		t.Fatal(err)
	}
	costs, entries := goneProcessEntries(acct, 3)
	if _, err := sp.Append(entries[:2]); err != nil {
		t.Fatal(err)
	}
	good := sp.Size()
	if _, err := sp.Append(entries[2:]); err != nil {
		t.Fatal(err)
	}
	sp.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// 2 MiB of frame heads whose length fits and whose payload looks like JSON ('{' to '}'),
	// each failing its checksum, in front of the third record.
	const l = 64<<10 - 8
	var unit [16]byte
	binary.LittleEndian.PutUint32(unit[:4], l)
	copy(unit[4:8], []byte{0xff, 0xff, 0xff, 0xff})
	copy(unit[8:], "{aaaaaa}")
	crafted := bytes.Repeat(unit[:], (2<<20)/len(unit))
	copy(crafted[:4], []byte{0xee, 0xee, 0xee, 0xee}) // the first frame's length is too long
	file := append(append(bytes.Clone(data[:good]), crafted...), data[good:]...)
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	delete(costs, "gone-2")

	sp = openSpill(t, path, usagespill.Options{})
	if r := sp.Report(); !r.ResyncGaveUp {
		t.Fatalf("report %+v: the search did not reach its bound", r)
	}
	var logs logSink
	m := New(st, Options{Logger: logs.logger(), Spill: sp})
	if n := logs.count("ERROR billing: the usage spill file held damage past which no whole record was found"); n != 1 {
		t.Errorf("the search's give-up logged %d times as an error, want once:\n%s", n, strings.Join(logs.all(), "\n"))
	}
	if n := logs.count("torn record"); n != 0 {
		t.Errorf("the search's give-up taken for a torn write:\n%s", strings.Join(logs.all(), "\n"))
	}
	if s := m.WriterStats(); s.SetAside != 1 {
		t.Errorf("writer %+v: want 1 set aside", s)
	}
	if err := m.flushAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st, acct, granted, costs)
}

// TestBacklogFullRefuses: when the database has been away so long that the backlog is full,
// Reserve refuses new requests with a 503 that asks the client to retry (Retry-After) and says
// nothing of the inside, rather than serve them unbilled; the records settled meanwhile wait
// in memory. Once the database takes the backlog, requests are served again, and everything
// is billed once.
func TestBacklogFullRefuses(t *testing.T) {
	for _, mode := range []string{"spill", "memory"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			cs, st0 := newDB(t)
			const granted = 10_000_000
			acct := newAccount(t, st0, granted)
			relay := newRelay(t, cs)
			st := openStore(t, relay.ConnString())
			var logs logSink
			opts := Options{Logger: logs.logger(), MaxBacklog: 4}
			var sp *usagespill.Spill
			if mode == "spill" {
				// Room for four records of this test.
				probe := openSpill(t, filepath.Join(t.TempDir(), "probe"), usagespill.Options{})
				if _, err := probe.Append([]usagespill.Entry{{Holder: New(nil, Options{}).Holder(), Record: store.UsageRecord{
					AccountID: acct, RequestID: "full-00", Model: "service-flint", Route: "/v1/chat/completions",
					InputTokens: 10, OutputTokens: 5, CostMicros: 100, Status: "completed", StartedAt: time.Now(), FinishedAt: time.Now(),
				}}}); err != nil {
					t.Fatal(err)
				}
				one := probe.Size() - probe.Start().Offset
				sp = openSpill(t, filepath.Join(t.TempDir(), "usage.spill"), usagespill.Options{MaxBytes: probe.Start().Offset + 4*one + one/2})
				opts.Spill = sp
			}
			m := New(st, opts)
			var books settled
			if !books.serve(ctx, m, acct, "full-00", 1_000, 100) {
				t.Fatal("reserve")
			}
			if err := m.flushAll(ctx); err != nil {
				t.Fatal(err)
			}
			relay.Cut()
			for i := 1; i <= 6; i++ {
				if !books.serve(ctx, m, acct, fmt.Sprintf("full-%02d", i), 1_000, 100) {
					t.Fatalf("request %d refused before the backlog filled", i)
				}
			}
			_ = m.flushQueued(ctx) // four go to the backlog, two stay queued
			if s := m.WriterStats(); !s.Full || s.Backlog != 4 || s.Queued != 2 {
				t.Fatalf("writer %+v: want full with 4 in the backlog and 2 queued", s)
			}
			_, err := m.Reserve(ctx, acct, "refused", 1_000)
			e := apierror.As(err)
			if !errors.Is(err, ErrBacklogFull) || e.Kind.Status() != http.StatusServiceUnavailable || e.RetryAfter <= 0 {
				t.Fatalf("reserve with the backlog full: %v (status %d, retry after %v)", err, e.Kind.Status(), e.RetryAfter)
			}
			if strings.Contains(e.Message, "backlog") || strings.Contains(e.Message, "spill") {
				t.Errorf("the client's message tells of the inside: %q", e.Message)
			}
			if logs.count("the usage backlog is full") != 1 {
				t.Errorf("the full backlog was not logged once:\n%s", strings.Join(logs.all(), "\n"))
			}
			_ = m.flushQueued(ctx) // still full: nothing changes, nothing more is logged
			if logs.count("the usage backlog is full") != 1 || m.WriterStats().Refused != 1 {
				t.Errorf("log %v, stats %+v", logs.all(), m.WriterStats())
			}

			relay.Restore()
			flushUntil(t, m)
			if s := m.WriterStats(); s.Full || s.Backlog != 0 || s.Queued != 0 {
				t.Fatalf("writer after the outage: %+v", s)
			}
			books.serveUntil(t, m, acct, "after", 1_000, 100)
			if err := m.Close(ctx); err != nil {
				t.Fatal(err)
			}
			checkBilledOnce(t, st0, acct, granted, books.costs[acct])
			if logs.count("the usage backlog takes records again") != 1 {
				t.Errorf("the end of the refusals was not logged:\n%s", strings.Join(logs.all(), "\n"))
			}
		})
	}
}

// TestBacklogFullKeepsTheRequestsInFlight: a database outage outlasts the spill file's bound
// while requests are in flight, then the process stops (SIGTERM) before the database is back.
// Reserve refused new requests only once an append had failed for want of room, so the
// requests already let through (a stream started before, and the request whose record did not
// fit) settled into memory, where the drain could keep them nowhere: they were served and never
// billed, and a SIGKILL would lose them likewise. The last eighth of the bound is now kept for
// them: Reserve refuses from the moment the file reaches it, and the records of the requests
// in flight go to the spill file, so the next process bills every request served, once.
func TestBacklogFullKeepsTheRequestsInFlight(t *testing.T) {
	ctx := context.Background()
	cs, st0 := newDB(t)
	const granted = 10_000_000
	acct := newAccount(t, st0, granted)
	relay := newRelay(t, cs)
	stA, stB := openStore(t, relay.ConnString()), openStore(t, relay.ConnString())
	record := func(id string) store.UsageRecord {
		return store.UsageRecord{AccountID: acct, RequestID: id, Model: "service-flint", Route: "/v1/chat/completions",
			InputTokens: 10, OutputTokens: 5, CostMicros: 100, Status: "completed", StartedAt: time.Now(), FinishedAt: time.Now()}
	}
	// Room for forty records and a half of this test.
	probe := openSpill(t, filepath.Join(t.TempDir(), "probe"), usagespill.Options{})
	if _, err := probe.Append([]usagespill.Entry{{Holder: New(nil, Options{}).Holder(), Record: record("out-000")}}); err != nil {
		t.Fatal(err)
	}
	one := probe.Size() - probe.Start().Offset
	path := filepath.Join(t.TempDir(), "usage.spill")
	spA := openSpill(t, path, usagespill.Options{MaxBytes: probe.Start().Offset + 40*one + one/2})
	var logs logSink
	a := New(stA, Options{Logger: logs.logger(), Spill: spA, ChunkMultiplier: 1000, DrainTimeout: 2 * time.Second})
	var books settled
	books.serveUntil(t, a, acct, "before", 1_000, 100)
	flushUntil(t, a)
	relay.Cut()

	// Three requests start (streams, say) and stay in flight while the outage fills the file.
	var inFlight []*Reservation
	for i := range 3 {
		r, err := a.Reserve(ctx, acct, fmt.Sprintf("in-%03d", i), 1_000)
		if err != nil {
			t.Fatal(err)
		}
		inFlight = append(inFlight, r)
	}
	refused := false
	for i := 1; i <= 60 && !refused; i++ {
		refused = !books.serve(ctx, a, acct, fmt.Sprintf("out-%03d", i), 1_000, 100)
		_ = a.flushQueued(ctx)
	}
	if !refused {
		t.Fatal("no request refused while the spill file filled")
	}
	for i, r := range inFlight {
		id := fmt.Sprintf("in-%03d", i)
		r.Settle(100, UsageRecord{Model: "service-flint", Route: "/v1/chat/completions", InputTokens: 10, OutputTokens: 5})
		books.add(acct, id, 100)
	}
	_ = a.flushQueued(ctx)
	if s := a.WriterStats(); s.Queued != 0 || !s.Full {
		t.Errorf("writer %+v: want every record in the spill file, none queued, new requests refused", s)
	}
	// SIGTERM while the database is still away: the drain keeps what it cannot write.
	if err := a.Close(ctx); err == nil {
		t.Fatal("the drain reached the database during the outage")
	}
	spA.Close()

	relay.Restore()
	spB := openSpill(t, path, usagespill.Options{MaxBytes: spA.MaxBytes()})
	b := New(stB, Options{Spill: spB})
	flushUntil(t, b)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The first process's hold is reaped, as another process's reaper does after its lease.
	if _, err := st0.ReleaseCreditHolds(ctx, a.Holder(), nil); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st0, acct, granted, books.costs[acct])
	if logs.count("the usage backlog is full") != 1 {
		t.Errorf("the full backlog was not logged once:\n%s", strings.Join(logs.all(), "\n"))
	}
}

// TestNearlyFullSpillAtStartServes: a process that starts, the database up, with a spill file
// an outage left in the room kept for the requests in flight (its last eighth) serves requests
// while it writes the file: the room is kept only while the database does not take usage, and
// the backlog is on its way out. The first version of that room refused them until the whole
// file was written.
func TestNearlyFullSpillAtStartServes(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	const granted = 10_000_000
	acct := newAccount(t, st, granted)
	path := filepath.Join(t.TempDir(), "usage.spill")
	sp, err := usagespill.Open(path, usagespill.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var books settled
	var entries []usagespill.Entry
	for i := range 15 {
		id := fmt.Sprintf("gone-%02d", i)
		books.add(acct, id, 100)
		entries = append(entries, usagespill.Entry{Holder: "a-process-that-is-gone", Record: store.UsageRecord{
			AccountID: acct, RequestID: id, Model: "service-flint", Route: "/v1/chat/completions",
			InputTokens: 10, OutputTokens: 5, CostMicros: 100, Status: "completed", StartedAt: time.Now(), FinishedAt: time.Now(),
		}})
	}
	if _, err := sp.Append(entries); err != nil {
		t.Fatal(err)
	}
	size := sp.Size()
	sp.Close()

	// Fifteen sixteenths of the bound hold the records an earlier process left.
	sp = openSpill(t, path, usagespill.Options{MaxBytes: size * 16 / 15})
	m := New(st, Options{Spill: sp})
	if !books.serve(ctx, m, acct, "after-start", 1_000, 100) {
		t.Fatalf("a request refused at start with the database up: %+v", m.WriterStats())
	}
	flushUntil(t, m)
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st, acct, granted, books.costs[acct])
}

// TestKillLosesOnlyTheLastTick: a process killed without a drain (SIGKILL) during an outage
// loses only what it settled after its last flush tick: every tick puts the records settled
// before it into the spill file, durably (fsync), so the next process writes them; the records
// of the last tick were only in memory and are never billed (in the customer's favour).
func TestKillLosesOnlyTheLastTick(t *testing.T) {
	ctx := context.Background()
	cs, st0 := newDB(t)
	const granted = 10_000_000
	acct := newAccount(t, st0, granted)
	relay := newRelay(t, cs)
	stA, stB := openStore(t, relay.ConnString()), openStore(t, relay.ConnString())
	path := filepath.Join(t.TempDir(), "usage.spill")
	spA := openSpill(t, path, usagespill.Options{})
	a := New(stA, Options{Spill: spA, ChunkMultiplier: 1000})
	var kept, lost settled
	kept.serveUntil(t, a, acct, "before", 1_000, 10)
	flushUntil(t, a)
	relay.Cut()
	// Two ticks of the outage go to the spill file; the third tick never comes.
	for tick := range 2 {
		for i := range 10 {
			if !kept.serve(ctx, a, acct, fmt.Sprintf("tick-%d-%d", tick, i), 1_000, int64(100+i)) {
				t.Fatal("reserve from the hold")
			}
		}
		_ = a.flushQueued(ctx)
	}
	for i := range 7 {
		if !lost.serve(ctx, a, acct, fmt.Sprintf("last-tick-%d", i), 1_000, 500) {
			t.Fatal("reserve from the hold")
		}
	}
	// SIGKILL: no drain; the kernel closes the file and drops its lock.
	spA.Close()
	if got := spA.Records(); got != 20 {
		t.Fatalf("%d records in the spill file at the kill, want 20", got)
	}

	relay.Restore()
	spB := openSpill(t, path, usagespill.Options{})
	b := New(stB, Options{Spill: spB})
	flushUntil(t, b)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The killed process's hold is reaped once its lease expires; here at once.
	if _, err := st0.ReleaseCreditHolds(ctx, a.Holder(), nil); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st0, acct, granted, kept.costs[acct])
	t.Logf("billed the %d records settled before the last tick; lost the %d of the last tick", kept.count(), lost.count())
}

// TestKilledDuringOutageSpillSettlesKeys: a capped key's requests settle around a database
// outage in a process that is then killed (SIGKILL, no drain): the first settled while the
// database was there (its key settlement reached it, its usage record was still queued), the
// second during the outage (its key settlement waited in the process's memory, lost with it).
// Both records went to the spill file at the outage's tick, through the real meter and usage
// writer. The next process, with the database back, writes them from the spill file: each
// usage row has its request's trace id, and the key's spend counts each request exactly once
// (the lost settlement is made with the record, the one made already is not made again),
// nothing of the key's cap left reserved. On the spill file before f9f5768, which dropped the
// trace id and SettleKey, the rows had no trace id and the second request was never counted
// against the key's cap (its reservation held until reaped, then returned).
func TestKilledDuringOutageSpillSettlesKeys(t *testing.T) {
	ctx := context.Background()
	cs, st0 := newDB(t)
	const granted = 10_000_000
	acct := newAccount(t, st0, granted)
	capped := newCappedKey(t, st0, acct, 5_000_000, store.CapPeriodMonthly)
	relay := newRelay(t, cs)
	stA, stB := openStore(t, relay.ConnString()), openStore(t, relay.ConnString())
	path := filepath.Join(t.TempDir(), "usage.spill")
	spA := openSpill(t, path, usagespill.Options{})
	a := New(stA, Options{Spill: spA, ChunkMultiplier: 1000})
	reqs := []struct {
		id    string
		cost  int64
		trace [16]byte
	}{
		{"settled-before", 300, [16]byte{0x4b, 0xf9, 0x2f, 0x35, 1}},
		{"settled-during", 400, [16]byte{0x0a, 0xf7, 0x65, 0x19, 2}},
	}
	var rs []*Reservation
	for _, q := range reqs {
		r, err := a.ReserveForKey(ctx, acct, q.id, 1_000, &capped)
		if err != nil {
			t.Fatalf("reserve %s: %v", q.id, err)
		}
		rs = append(rs, r)
	}
	settle := func(i int) {
		q := reqs[i]
		usage := UsageRecord{KeyID: capped.KeyID, Model: "service-flint", Route: "/v1/chat/completions",
			InputTokens: 10, OutputTokens: 5, TraceID: q.trace}
		if got := rs[i].Settle(q.cost, usage); got != q.cost {
			t.Fatalf("%s settled at %d, want %d", q.id, got, q.cost)
		}
	}
	settle(0)
	if b := budget(t, st0, capped); b.SpentMicros != reqs[0].cost || b.ReservedMicros != 1_000 {
		t.Fatalf("budget %+v before the outage: want the first settlement in the database", b)
	}
	relay.Cut()
	settle(1)
	if err := a.flushQueued(ctx); err == nil {
		t.Fatal("a write succeeded during the outage")
	}
	// SIGKILL: no drain; the key settlement waiting in memory is lost, the kernel closes the
	// spill file.
	spA.Close()
	if got := spA.Records(); got != 2 {
		t.Fatalf("%d records in the spill file at the kill, want 2", got)
	}

	relay.Restore()
	spB := openSpill(t, path, usagespill.Options{})
	b := New(stB, Options{Spill: spB})
	flushUntil(t, b)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	recs := make(map[string]store.UsageRecord)
	all, err := st0.UsageRecords(ctx, acct, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		recs[r.RequestID] = r
	}
	costs := make(map[string]int64)
	var spent int64
	for _, q := range reqs {
		costs[q.id] = q.cost
		spent += q.cost
		if r, ok := recs[q.id]; !ok || r.TraceID != q.trace || r.APIKeyID != capped.KeyID {
			t.Errorf("%s: usage row found %v, trace id %x, key %s; want the trace id %x and the key %s", q.id, ok, r.TraceID, r.APIKeyID, q.trace, capped.KeyID)
		}
	}
	if got := budget(t, st0, capped); got.SpentMicros != spent || got.ReservedMicros != 0 {
		t.Errorf("the key's budget %+v: want %d spent (each request once) and nothing reserved", got, spent)
	}
	// The killed process's hold is reaped once its lease expires; here at once.
	if _, err := st0.ReleaseCreditHolds(ctx, a.Holder(), nil); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st0, acct, granted, costs)
}
