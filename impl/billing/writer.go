package billing

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/backoff"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usagespill"
)

// ErrBacklogFull is the cause of Reserve's refusals while the usage backlog is full: the
// database has not taken usage for so long that the spill file (or, without one, the memory
// bound) is full, and a request served now could not be billed.
var ErrBacklogFull = errors.New("billing: the usage backlog is full")

// spillRoomShare is the part of the spill file's bound (one part in this many, an eighth) kept
// for the records of the requests in flight once the rest is full: Reserve refuses new requests
// from then on, and the requests it had let through settle into that room, durably, where
// without it their records waited in memory, lost with the process however it stopped.
const spillRoomShare = 8

// errNearlyFull is what noteAppend is told when the spill file took every record but reached
// the room kept for the requests in flight (spillRoomShare).
var errNearlyFull = fmt.Errorf("%w but for the room kept for the requests in flight", ErrBacklogFull)

// backlog keeps, in settlement order, the usage records that the database has not taken:
// a *usagespill.Spill, or memBacklog without one.
type backlog interface {
	Append(entries []usagespill.Entry) (int, error)
	Read(from usagespill.Cursor, limit int) ([]usagespill.Entry, []usagespill.Cursor, error)
	Start() usagespill.Cursor
	End() usagespill.Cursor
	Reset() error
	Size() int64
}

// memBacklog is the backlog of a meter without a spill file: in memory, up to max records.
type memBacklog struct {
	mu      sync.Mutex
	entries []usagespill.Entry
	max     int
}

func (b *memBacklog) Append(entries []usagespill.Entry) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := max(min(len(entries), b.max-len(b.entries)), 0)
	b.entries = append(b.entries, entries[:n]...)
	if n < len(entries) {
		return n, usagespill.ErrFull
	}
	return n, nil
}

func (b *memBacklog) Read(from usagespill.Cursor, limit int) ([]usagespill.Entry, []usagespill.Cursor, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := int(from.Index)
	if i < 0 || i > len(b.entries) {
		return nil, nil, fmt.Errorf("billing: backlog cursor %d outside %d records", i, len(b.entries))
	}
	j := min(len(b.entries), i+limit)
	after := make([]usagespill.Cursor, 0, j-i)
	for k := i + 1; k <= j; k++ {
		after = append(after, usagespill.Cursor{Offset: int64(k), Index: int64(k)})
	}
	return slices.Clone(b.entries[i:j]), after, nil
}

func (b *memBacklog) Start() usagespill.Cursor { return usagespill.Cursor{} }

func (b *memBacklog) End() usagespill.Cursor {
	b.mu.Lock()
	defer b.mu.Unlock()
	return usagespill.Cursor{Offset: int64(len(b.entries)), Index: int64(len(b.entries))}
}

func (b *memBacklog) Reset() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entries = nil
	return nil
}

func (b *memBacklog) Size() int64 { return 0 }

// openBacklog sets up the backlog at New: the spill file, with the records an earlier process
// left in it to be written first, or memory.
func (m *Meter) openBacklog() {
	sp := m.opts.Spill
	if sp == nil {
		m.backlog = &memBacklog{max: m.opts.MaxBacklog}
		return
	}
	m.backlog = sp
	m.cursor = sp.Start()
	r := sp.Report()
	m.noteSpillReport(r)
	for _, taken := range r.Taken {
		m.noteSpillReport(taken)
		m.opts.Logger.Info("billing: took the records of a usage spill file that no process holds (its process is gone) into this process's; they go to the database first",
			"path", sp.Path(), "from", taken.Path, "records", taken.Records)
	}
	for _, left := range r.Left {
		m.opts.Logger.Error("billing: a usage spill file that no process holds could not be taken into this process's; its records wait for another process to start on the directory",
			"path", sp.Path(), "left", left.Path, "records", left.Records, "err", left.Err)
	}
	if n := sp.End().Index; n > 0 {
		m.inherited = n
		m.backlogged = true
		m.backlogRecords.Store(n)
		m.opts.Logger.Info("billing: the usage spill file holds records an earlier process could not write; they go to the database first",
			"path", sp.Path(), "records", n)
	}
}

// noteSpillReport logs and counts what opening a spill file found of a crash or of damage.
func (m *Meter) noteSpillReport(r usagespill.Report) {
	switch {
	case r.ResyncGaveUp:
		// Not a crash's torn write: damage, after which the search for the next whole record
		// reached its bound, so the rest of the file went aside with whatever whole records it
		// held, unbilled. Counted as one with the records set aside, which operators alert on.
		m.setAside.Add(1)
		m.opts.Logger.Error("billing: the usage spill file held damage past which no whole record was found within the search's bound; the rest of the file, which may hold whole records, was set aside, not billed",
			"path", r.Path, "offset", r.TornOffset, "bytes", r.TornBytes, "checksummed", r.ResyncHashed, "saved_to", r.TornSaved, "save_err", r.SaveErr)
	case r.TornBytes > 0:
		m.opts.Logger.Warn("billing: the usage spill file ended in a torn record (a crash in the middle of a write); the bytes after the last whole record were dropped from it",
			"path", r.Path, "offset", r.TornOffset, "bytes", r.TornBytes, "saved_to", r.TornSaved, "save_err", r.SaveErr)
	}
	if r.DamagedRegions > 0 {
		// Storage damage, not a crash: each damaged region held at least one record, which
		// is lost to the books. Counted with the records set aside, which operators alert on;
		// the whole records after it are kept.
		m.setAside.Add(int64(r.DamagedRegions))
		m.opts.Logger.Error("billing: the usage spill file held damaged records (a bad checksum or length in the middle of the file: storage damage); they were set aside and the whole records after them kept",
			"path", r.Path, "regions", r.DamagedRegions, "bytes", r.DamagedBytes, "saved_to", r.DamagedSaved, "save_err", r.DamagedSaveErr)
	}
}

// backlogName says where the backlog is, for the logs.
func (m *Meter) backlogName() string {
	if m.opts.Spill != nil {
		return "the spill file " + m.opts.Spill.Path()
	}
	return "memory"
}

func (m *Meter) enqueue(rec store.UsageRecord) {
	m.qmu.Lock()
	m.queue = append(m.queue, rec)
	n := len(m.queue)
	m.qmu.Unlock()
	if n >= m.opts.BatchSize {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
}

// takeQueued removes up to n records from the head of the queue (all of them when n < 0).
func (m *Meter) takeQueued(n int) []store.UsageRecord {
	m.qmu.Lock()
	defer m.qmu.Unlock()
	if n < 0 || n > len(m.queue) {
		n = len(m.queue)
	}
	batch := m.queue[:n:n]
	m.queue = m.queue[n:]
	if len(m.queue) == 0 {
		m.queue = nil
	}
	return batch
}

// requeue puts records back at the head of the queue.
func (m *Meter) requeue(batch []store.UsageRecord) {
	if len(batch) == 0 {
		return
	}
	m.qmu.Lock()
	m.queue = append(batch, m.queue...)
	m.qmu.Unlock()
}

func (m *Meter) wakeReplayer() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// flushAll writes everything to the database: the backlog, then every queued record (those
// queued meanwhile too). What the database does not take is kept in the backlog (in memory
// what the backlog cannot take either), and the error says so.
func (m *Meter) flushAll(ctx context.Context) error {
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	var errs []error
	if err := m.replay(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := m.flushLocked(ctx, -1); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil
	}
	if err := m.keepQueuedLocked(); err != nil {
		errs = append(errs, err)
	}
	m.qmu.Lock()
	queued := len(m.queue)
	m.qmu.Unlock()
	return fmt.Errorf("billing: %d usage records wait in %s and %d in the queue: %w",
		m.backlogRecords.Load(), m.backlogName(), queued, errors.Join(errs...))
}

// keepQueuedLocked moves every record still queued to the backlog (the spill file), behind
// what it holds, with flushMu held: the drain, and a settlement after it, call it when the
// database did not take everything, whether it refused or hung past their deadline. A write
// cut short by that deadline puts its batch back in the queue, which nobody writes after the
// drain: the process's exit would lose it (trial h2: a drain shorter than a write's timeout,
// against a hung database). In the backlog the records wait as an outage's do, and the next
// process writes them. Records the backlog cannot take (it is full) stay queued, and the error
// says so.
func (m *Meter) keepQueuedLocked() error {
	m.spillMu.Lock()
	defer m.spillMu.Unlock()
	batch := m.takeQueued(-1)
	if len(batch) == 0 {
		return nil
	}
	m.backlogged = true
	k, err := m.toBacklog(batch)
	if k < len(batch) {
		m.requeue(batch[k:])
		return fmt.Errorf("billing: %d usage records not kept in %s: %w", len(batch)-k, m.backlogName(), err)
	}
	return nil
}

// flushQueued moves the records queued when it is called (in batches; see flush). Records
// settled while it writes wait for the next tick: with a steady stream of settlements, chasing
// them would turn one batch per interval into a chain of tiny batches, each a statement and a
// commit in PostgreSQL.
func (m *Meter) flushQueued(ctx context.Context) error {
	m.qmu.Lock()
	n := len(m.queue)
	m.qmu.Unlock()
	if n == 0 {
		return nil
	}
	return m.flush(ctx, n)
}

// flush moves up to limit queued records (all of them, new ones included, when limit < 0).
func (m *Meter) flush(ctx context.Context, limit int) error {
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	return m.flushLocked(ctx, limit)
}

// flushLocked moves up to limit queued records (all of them when limit < 0) out of the queue,
// with flushMu held: to the database in batches of BatchSize while the backlog is empty, and
// otherwise behind the backlog, all in one group (one fsync). A batch the database refuses
// goes to the backlog, and so does everything after it until the replayer has written the
// backlog. Records the backlog cannot take (it is full) stay at the head of the queue, and
// Reserve refuses requests until it can. The error is the last write's or append's failure.
func (m *Meter) flushLocked(ctx context.Context, limit int) error {
	var failure error
	for moved := 0; limit < 0 || moved < limit; {
		rest := -1
		if limit >= 0 {
			rest = limit - moved
		}
		m.spillMu.Lock()
		if m.backlogged {
			batch := m.takeQueued(rest)
			if len(batch) == 0 {
				m.spillMu.Unlock()
				return failure
			}
			k, err := m.toBacklog(batch)
			m.spillMu.Unlock()
			if k < len(batch) {
				m.requeue(batch[k:])
				return err
			}
			moved += k
			continue
		}
		m.spillMu.Unlock()
		// Only this function (under flushMu) sets backlogged: it stays clear during the write.
		n := m.opts.BatchSize
		if rest >= 0 {
			n = min(n, rest)
		}
		batch := m.takeQueued(n)
		if len(batch) == 0 {
			return failure
		}
		written, err := m.writeBatch(ctx, m.opts.Holder, true, batch)
		if err == nil {
			if since, failed, was := m.clearFailing(); was {
				m.opts.Logger.Info("billing: the database takes usage records again",
					"after", m.now().Sub(since).Round(time.Millisecond).String(), "failed_writes", failed)
			}
			moved += len(batch)
			continue
		}
		// What was written (the first parts of a batch written in parts) is billed and
		// accounted for: only the rest waits.
		moved += written
		left := batch[written:]
		if ctx.Err() != nil {
			// The meter is stopping: the drain writes the batch, or keeps it in the backlog.
			m.requeue(left)
			return err
		}
		m.noteWriteFailed(err)
		failure = err
		m.spillMu.Lock()
		m.backlogged = true
		k, aerr := m.toBacklog(left)
		m.spillMu.Unlock()
		m.wakeReplayer()
		if k < len(left) {
			m.requeue(left[k:])
			return errors.Join(err, aerr)
		}
		moved += k
	}
	return failure
}

// toBacklog appends a batch of this process's records to the backlog, with spillMu held, and
// returns how many it took.
func (m *Meter) toBacklog(batch []store.UsageRecord) (int, error) {
	entries := make([]usagespill.Entry, len(batch))
	for i, r := range batch {
		entries[i] = usagespill.Entry{Holder: m.opts.Holder, Record: r}
	}
	k, err := m.backlog.Append(entries)
	m.backlogRecords.Add(int64(k))
	if err == nil && m.spillNearlyFull() {
		m.noteAppend(errNearlyFull)
	} else {
		m.noteAppend(err)
	}
	return k, err
}

// spillNearlyFull reports that the spill file has reached the room kept for the records of the
// requests in flight (spillRoomShare) while the database does not take usage: new requests are
// refused, as when it is full. While the database takes usage (a process that starts with a
// file an outage left nearly full, and replays it) the backlog is on its way out, and requests
// are served until the file is full.
func (m *Meter) spillNearlyFull() bool {
	sp := m.opts.Spill
	return sp != nil && sp.Size() > sp.MaxBytes()-sp.MaxBytes()/spillRoomShare && m.failing()
}

// replayLoop writes the backlog whenever it is woken (the database refused a write, or an
// earlier process left records), retrying with exponential backoff from FlushInterval up to
// RetryMax while the database does not take it, until ctx ends.
func (m *Meter) replayLoop(ctx context.Context) {
	var retry *time.Timer
	var retryC <-chan time.Time
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		case <-retryC:
		}
		if retry != nil {
			retry.Stop()
			retry, retryC = nil, nil
		}
		err := m.replay(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			failures = 0
			continue
		}
		wait := backoff.Exponential(m.opts.FlushInterval, m.opts.RetryMax, failures, rand.Float64())
		failures++
		m.opts.Logger.Debug("billing: usage backlog not written yet; retrying", "in", wait, "err", err)
		retry = time.NewTimer(wait)
		retryC = retry.C
	}
}

// catchUpBatches bounds, in batches of BatchSize, what a replay writes while the flusher waits
// to append: once no more than this is left behind the cursor, the replay holds spillMu and
// writes the rest (new records wait in the queue, in memory, meanwhile), and the backlog is
// emptied. Without it, under steady traffic the replay chases the appends, and ends only when
// one of its reads happens to find nothing new (a CI run gave up after a minute).
const catchUpBatches = 4

// replay writes the backlog to the database, in order, from the replay cursor on, in batches
// of one holder, until a write fails (it returns the error) or the backlog is written: then it
// empties the backlog and lets new records go straight to the database again. The records an
// earlier process left are billed to that process's hold (while its lease lasts) or else to
// the account's free credit, and change nothing in this process's view of its holds.
func (m *Meter) replay(ctx context.Context) error {
	m.replayMu.Lock()
	defer m.replayMu.Unlock()
	catchUp := int64(catchUpBatches * m.opts.BatchSize)
	wrote := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		m.spillMu.Lock()
		backlogged := m.backlogged
		behind := m.backlog.End().Index - m.cursor.Index
		m.spillMu.Unlock()
		if !backlogged {
			return nil
		}
		if behind > catchUp {
			if err := m.replayBatch(ctx); err != nil {
				return err
			}
			wrote = true
			continue
		}
		if behind == 0 && !wrote && m.failing() {
			// Nothing this pass wrote says the database is back (the backlog could take
			// nothing since it refused a write): ask it before sending records to it.
			pctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
			err := m.st.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
			m.noteDBUp()
		}
		m.spillMu.Lock()
		if m.backlog.End().Index-m.cursor.Index > catchUp {
			// Many were appended meanwhile: write them without holding up the flusher.
			m.spillMu.Unlock()
			continue
		}
		if err := m.replayRest(ctx); err != nil {
			m.spillMu.Unlock()
			return err
		}
		written := m.cursor.Index
		if err := m.backlog.Reset(); err != nil {
			m.spillMu.Unlock()
			return err
		}
		m.cursor = m.backlog.Start()
		m.inherited = 0
		m.backlogged = false
		m.backlogRecords.Store(0)
		m.spillMu.Unlock()
		m.noteAppend(nil)
		attrs := []any{"records", written, "backlog", m.backlogName()}
		if since, failed, was := m.clearFailing(); was {
			attrs = append(attrs, "outage", m.now().Sub(since).Round(time.Millisecond).String(), "failed_writes", failed)
		}
		m.opts.Logger.Info("billing: usage backlog written to the database; new records go straight to it again", attrs...)
		return nil
	}
}

// replayRest writes the backlog from the cursor to its end, with spillMu held (nothing is
// appended meanwhile).
func (m *Meter) replayRest(ctx context.Context) error {
	for m.cursor != m.backlog.End() {
		if err := m.replayBatch(ctx); err != nil {
			return err
		}
	}
	return nil
}

// replayBatch reads the next BatchSize records of the backlog from the cursor, which must be
// short of its end, and writes them in batches of one holder, moving the cursor past each batch
// written.
func (m *Meter) replayBatch(ctx context.Context) error {
	entries, after, err := m.backlog.Read(m.cursor, m.opts.BatchSize)
	m.noteRead(err)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return fmt.Errorf("billing: the backlog ends at record %d, but reading it from record %d found nothing", m.backlog.End().Index, m.cursor.Index)
	}
	faults, err := m.replayFaults(ctx, entries, after)
	if err != nil {
		if ctx.Err() == nil {
			m.noteWriteFailed(err)
		}
		return err
	}
	for i := 0; i < len(entries); {
		if faults[i] != "" {
			// Not applied: kept aside, and passed over as if written.
			m.quarantine(entries[i], faults[i])
			m.cursor = after[i]
			m.backlogRecords.Add(-1)
			i++
			continue
		}
		own := after[i].Index-1 >= m.inherited
		holder := entries[i].Holder
		j := i + 1
		for j < len(entries) && faults[j] == "" && (after[j].Index-1 >= m.inherited) == own && entries[j].Holder == holder {
			j++
		}
		if own {
			holder = m.opts.Holder
		} else if holder == m.opts.Holder {
			// An earlier process of the same name: its hold is not this process's.
			holder = ""
		}
		batch := make([]store.UsageRecord, j-i)
		for k := range batch {
			batch[k] = entries[i+k].Record
		}
		written, err := m.writeBatch(ctx, holder, own, batch)
		if written > 0 {
			// The records written (all, or the first parts of a batch written in parts) are
			// not replayed again.
			m.cursor = after[i+written-1]
			m.backlogRecords.Add(-int64(written))
		}
		if err != nil {
			if ctx.Err() == nil {
				m.noteWriteFailed(err)
			}
			return err
		}
		i = j
	}
	return nil
}

// replayFaults checks the records an earlier process left in the backlog (replayFault); the
// process's own are the meter's and are not checked. It returns each entry's fault ("": it is
// applied).
func (m *Meter) replayFaults(ctx context.Context, entries []usagespill.Entry, after []usagespill.Cursor) ([]string, error) {
	faults := make([]string, len(entries))
	if after[0].Index-1 >= m.inherited {
		return faults, nil
	}
	wctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
	defer cancel()
	known := make(map[uuid.UUID]bool)
	for i, e := range entries {
		if after[i].Index-1 >= m.inherited {
			break
		}
		f, err := m.replayFault(wctx, e.Record, known)
		if err != nil {
			if ctx.Err() == nil {
				m.noteDBError(err)
			}
			return nil, err
		}
		faults[i] = f
	}
	return faults, nil
}

// writeBatch writes one batch for holder, within WriteTimeout. For the process's own records
// (own) it applies the outcome to the accounts' states: their costs are no longer pending (or,
// for those served on credit, no longer at risk), and the database's report of the hold is
// observed.
//
// A batch the database refuses as data (store.RefusedData: a value out of range, a check that
// does not hold) would be refused on every retry, and every record behind it would wait
// forever (trial h7: one upstream's absurd token count stopped billing for every account). It
// is written in halves, down to the record the database refuses, which is set aside: logged
// whole at error level, counted (tollgate_usage_records_set_aside_total), kept in the spill's
// quarantine file when there is a spill (setAsideRecord), and not billed.
//
// It returns how many records of the batch, from its start, were written (or set aside) and
// accounted for: all of them, or none, unless a batch written in halves fails after its first
// parts (the database went away meanwhile). The caller keeps only the rest for another write:
// written again, the first parts would be skipped by the ledger but taken off the accounts'
// pending costs a second time, and their refused record set aside twice.
func (m *Meter) writeBatch(ctx context.Context, holder string, own bool, batch []store.UsageRecord) (int, error) {
	wctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
	defer cancel()
	res, err := m.st.WriteUsage(wctx, holder, batch)
	if err != nil && store.RefusedData(err) && ctx.Err() == nil {
		m.noteDBUp()
		if len(batch) > 1 {
			mid := len(batch) / 2
			if n, err := m.writeBatch(ctx, holder, own, batch[:mid]); err != nil {
				return n, err
			}
			n, err := m.writeBatch(ctx, holder, own, batch[mid:])
			return mid + n, err
		}
		m.setAsideRecord(holder, batch[0], err)
		res, err = store.UsageBatch{}, nil
	}
	if err != nil {
		if ctx.Err() == nil {
			m.noteDBError(err)
		}
		return 0, err
	}
	m.noteDBUp()
	for _, c := range res.Charges {
		switch {
		case c.BilledMicros >= c.TotalMicros:
		case c.CreditMicros > 0:
			m.opts.Logger.Warn("billing: usage not billed in full: served on credit during a database outage beyond the account's free credit, or the credit hold had been released",
				"account", c.AccountID, "cost_micros", c.TotalMicros, "billed_micros", c.BilledMicros, "on_credit_micros", c.CreditMicros, "holder", holder)
		default:
			m.opts.Logger.Warn("billing: usage not billed in full: the credit hold had been released",
				"account", c.AccountID, "cost_micros", c.TotalMicros, "billed_micros", c.BilledMicros, "holder", holder)
		}
	}
	if res.Dropped > 0 {
		m.opts.Logger.Warn("billing: usage of unknown accounts dropped", "records", res.Dropped)
	}
	if !own {
		return len(batch), nil
	}
	type sum struct {
		cost, credit int64
		n, nCredit   int
	}
	sums := make(map[uuid.UUID]*sum)
	var credit int64
	for _, r := range batch {
		s := sums[r.AccountID]
		if s == nil {
			s = &sum{}
			sums[r.AccountID] = s
		}
		if r.OnCredit {
			s.credit += r.CostMicros
			s.nCredit++
			credit += r.CostMicros
		} else {
			s.cost += r.CostMicros
			s.n++
		}
	}
	m.atRisk.Add(-credit)
	charges := make(map[uuid.UUID]store.UsageCharge, len(res.Charges))
	for _, c := range res.Charges {
		charges[c.AccountID] = c
	}
	for id, s := range sums {
		a := m.account(id, false)
		if a == nil {
			continue
		}
		a.mu.Lock()
		a.pending -= s.cost
		a.pendingRecords -= s.n
		a.credit -= s.credit
		a.creditRecords -= s.nCredit
		if c, ok := charges[id]; ok {
			a.observe(c.HasHold, c.HoldMicros, c.HoldVersion)
		}
		a.mu.Unlock()
	}
	return len(batch), nil
}

// setAsideRecord logs and counts a usage record of holder's that the database refused as data
// (see writeBatch), and, when the meter has a spill, keeps it in the spill's quarantine file
// with the database's reason, from which `tollgate admin usage import-spill` bills it once an
// operator has fixed the cause. Without a spill, or when the quarantine file cannot be
// written, the log line, which holds the whole record, is all that is left of it. A record the
// quarantine file holds already (a process set it aside, then died before it emptied its
// spill, and the next one replayed it) is not written there, counted or logged as an error
// again, as the replay's quarantine does.
func (m *Meter) setAsideRecord(holder string, r store.UsageRecord, err error) {
	saved, added, saveErr := "", true, error(nil)
	if m.opts.Spill != nil {
		saved, added, saveErr = m.opts.Spill.Quarantine(usagespill.Entry{Holder: holder, Record: r}, "refused by the database: "+err.Error())
	}
	if saveErr == nil && !added {
		m.opts.Logger.Info("billing: the database refuses a usage record that was set aside already; it is passed over",
			"err", err, "account", r.AccountID, "request_id", r.RequestID, "saved_to", saved)
		return
	}
	m.setAside.Add(1)
	m.opts.Logger.Error("billing: the database refuses a usage record as data; it is set aside, not billed",
		"err", err, "account", r.AccountID, "request_id", r.RequestID, "record", fmt.Sprintf("%+v", r),
		"saved_to", saved, "save_err", saveErr)
}

// noteWriteFailed counts a failed write and logs the start of an outage: the first failure
// since the writer last had nothing left to write (not every retry).
func (m *Meter) noteWriteFailed(err error) {
	m.writeFailures.Add(1)
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.failedWrites++
	if m.failingSince.IsZero() {
		m.failingSince = m.now()
		m.failedWrites = 1
		m.opts.Logger.Error("billing: the database does not take usage records; they wait in "+m.backlogName()+
			" and are written, in order, once it does", "err", err)
	}
}

// clearFailing ends an outage: once the backlog is written, or a write straight to the
// database succeeds. It returns when the outage began and how many writes failed, and whether
// there was one, for the caller's log line.
func (m *Meter) clearFailing() (since time.Time, failed int64, was bool) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	since, failed, was = m.failingSince, m.failedWrites, !m.failingSince.IsZero()
	m.failingSince, m.failedWrites = time.Time{}, 0
	return since, failed, was
}

// noteRead logs the first failure to read the backlog, and the first success after it.
func (m *Meter) noteRead(err error) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	switch {
	case err != nil && !m.readFailing:
		m.readFailing = true
		m.opts.Logger.Error("billing: the usage backlog cannot be read; retrying", "backlog", m.backlogName(), "err", err)
	case err == nil && m.readFailing:
		m.readFailing = false
		m.opts.Logger.Info("billing: the usage backlog can be read again", "backlog", m.backlogName())
	}
}

func (m *Meter) failing() bool {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	return !m.failingSince.IsZero()
}

// noteAppend records the outcome of an append to the backlog (nil: it took everything, or it
// was emptied): the backlog is full, and Reserve refuses, from a failed append until one
// succeeds. The changes are logged.
func (m *Meter) noteAppend(err error) {
	if err == nil {
		if m.full.CompareAndSwap(true, false) {
			m.opts.Logger.Info("billing: the usage backlog takes records again; requests are served", "backlog", m.backlogName())
		}
		return
	}
	if !m.full.CompareAndSwap(false, true) {
		return
	}
	switch {
	case errors.Is(err, errNearlyFull):
		m.opts.Logger.Error("billing: the usage backlog is full but for the room kept for the requests in flight; new requests are refused (503) until the database takes it",
			"backlog", m.backlogName(), "records", m.backlogRecords.Load(), "bytes", m.backlog.Size())
	case errors.Is(err, usagespill.ErrFull):
		m.opts.Logger.Error("billing: the usage backlog is full; new requests are refused (503) until the database takes it",
			"backlog", m.backlogName(), "records", m.backlogRecords.Load(), "bytes", m.backlog.Size())
	default:
		m.opts.Logger.Error("billing: the usage spill file cannot take records; new requests are refused (503) until it can or the database takes the backlog",
			"backlog", m.backlogName(), "err", err)
	}
}

// WriterStats is the state of the usage writer, for the metrics.
type WriterStats struct {
	// Queued counts the settled records waiting in memory for the next write.
	Queued int64
	// Backlog counts the records the database has not taken yet, kept in the spill file (or in
	// memory without one), and BacklogBytes is the spill file's size.
	Backlog      int64
	BacklogBytes int64
	// WriteFailures counts the batch writes that failed; Refused the reservations refused
	// because the backlog was full.
	WriteFailures int64
	Refused       int64
	// Full reports that the backlog is full: Reserve refuses every request.
	Full bool
	// SetAside counts the usage records the database refused as data, written nowhere but
	// the log (see writeBatch).
	SetAside int64
}

// WriterStats reports the state of the usage writer.
func (m *Meter) WriterStats() WriterStats {
	m.qmu.Lock()
	queued := len(m.queue)
	m.qmu.Unlock()
	return WriterStats{
		Queued: int64(queued), Backlog: m.backlogRecords.Load(), BacklogBytes: m.backlog.Size(),
		WriteFailures: m.writeFailures.Load(), Refused: m.refused.Load(), Full: m.full.Load(),
		SetAside: m.setAside.Load(),
	}
}
