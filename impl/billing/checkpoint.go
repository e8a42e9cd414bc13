package billing

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/store"
)

// DefaultCheckpointInterval is how often, unless Options.CheckpointInterval says otherwise, the
// meter writes the checkpoints of its streams in flight: a process killed without a drain
// loses from the books at most about this much of each stream's output (see the package
// documentation, "Leases and crashes").
const DefaultCheckpointInterval = 2 * time.Second

// StatusProcessLost is the status of the usage record of a stream whose gateway process was
// lost (killed, crashed) while it ran: a reaper billed it from the stream's last checkpoint.
const StatusProcessLost = "process_lost"

// maxLostRounds bounds the batches (of BatchSize checkpoints each) that one reap bills; the
// rest waits for the next reap.
const maxLostRounds = 16

// CheckpointFunc turns a stream's progress, as the stream last gave it to Progress (the usage
// the upstream reported so far and a count of what was produced, opaque to the meter), into the
// usage record the stream would be settled with if it were cut now: the record the caller
// settles a stream cut short with (SettleUsage prices it). It returns false when such a stream
// would be billed nothing (nothing reached the client yet). The meter calls it from its own
// goroutine, at most once per checkpoint interval: it must read nothing that the stream
// changes while it runs, except its arguments.
type CheckpointFunc func(usage llm.Usage, produced int) (UsageRecord, bool)

// streamState is a stream's progress as its goroutine last gave it (Progress), and how to
// turn it into a usage record. mu is the stream's own: the stream takes it once per event, the
// checkpointer once per interval, and no other stream ever does.
type streamState struct {
	build CheckpointFunc

	mu       sync.Mutex
	usage    llm.Usage
	produced int

	// written is set once a statement that may write the stream's checkpoint has been sent:
	// from then on the stream's usage record deletes the checkpoint when it is written.
	written atomic.Bool
}

// streamShard is one part of the meter's set of streams in flight, locked apart from the others.
type streamShard struct {
	mu   sync.Mutex
	live map[*Reservation]struct{}
}

// checkpoints is the meter's state of stream checkpoints: the streams in flight that
// TrackStream registered (sharded like the accounts), and the checkpointer's own state.
type checkpoints struct {
	streams [shardCount]streamShard

	// ckMu serialises the checkpoint writes; ckLeft says that the last one wrote or deleted
	// rows (the next one runs even with no stream in flight, to clean up), ckFailing that it
	// failed (its error was logged), and ckEver that this process has written checkpoints
	// (Close deletes them).
	ckMu      sync.Mutex
	ckLeft    bool
	ckFailing bool
	ckEver    atomic.Bool
	// ckScratch is the checkpointer's list of the streams in flight, reused between writes.
	ckScratch []*Reservation
}

// TrackStream registers the reservation's request as a stream in flight whose progress the
// meter checkpoints: every CheckpointInterval, the meter builds with build the usage record of
// every such stream from its latest Progress, and writes them all in one statement
// (stream_checkpoints), so that if this process dies (SIGKILL, a crash) another process bills
// each stream from its last checkpoint when it reaps the dead process's hold, instead of
// losing it. Settle and Release end the tracking; the stream's usage record deletes its
// checkpoint when it is written. Call it once, from the stream's goroutine, before its first
// Progress; it costs one lock of one of 64 shards (and again at Settle), never per event. It
// does nothing on a nil reservation, when checkpoints are off (a negative CheckpointInterval),
// or after the reservation ended.
func (r *Reservation) TrackStream(build CheckpointFunc) {
	if r == nil || build == nil || r.stream != nil || r.m.opts.CheckpointInterval < 0 || r.done.Load() {
		return
	}
	r.stream = &streamState{build: build}
	sh := &r.m.checkpoints.streams[shardOf(r.accountID)]
	sh.mu.Lock()
	if sh.live == nil {
		sh.live = make(map[*Reservation]struct{})
	}
	sh.live[r] = struct{}{}
	sh.mu.Unlock()
}

// Progress records a tracked stream's progress: the usage its upstream reported so far and
// how much it produced (passed back to the stream's CheckpointFunc). The stream's goroutine
// calls it after each event it sends; it takes only the stream's own lock (uncontended but
// once per checkpoint interval) and allocates nothing. It does nothing for a reservation that
// TrackStream did not register.
func (r *Reservation) Progress(usage llm.Usage, produced int) {
	if r == nil || r.stream == nil {
		return
	}
	s := r.stream
	s.mu.Lock()
	s.usage, s.produced = usage, produced
	s.mu.Unlock()
}

// untrackStream takes a stream that ended (settled or released) out of the set of streams in
// flight.
func (r *Reservation) untrackStream() {
	if r.stream == nil {
		return
	}
	sh := &r.m.checkpoints.streams[shardOf(r.accountID)]
	sh.mu.Lock()
	delete(sh.live, r)
	sh.mu.Unlock()
}

// checkpointed reports whether a checkpoint of the reservation's stream may have been written.
func (r *Reservation) checkpointed() bool {
	return r.stream != nil && r.stream.written.Load()
}

// checkpointLoop writes the checkpoints of the streams in flight every CheckpointInterval,
// until ctx ends.
func (m *Meter) checkpointLoop(ctx context.Context) {
	if m.opts.CheckpointInterval < 0 {
		return
	}
	tick := time.NewTicker(m.opts.CheckpointInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
		err := m.writeCheckpoints(cctx)
		cancel()
		m.ckMu.Lock()
		switch {
		case err == nil:
			if m.ckFailing {
				m.ckFailing = false
				m.opts.Logger.Info("billing: stream checkpoints are written again")
			}
		case ctx.Err() != nil, m.noteDBError(err):
			// Stopping, or a database outage (logged once by the meter): streams are served
			// on, unchecked; the loss bound of a crash is then the outage's start.
		case !m.ckFailing:
			m.ckFailing = true
			m.opts.Logger.Error("billing: write stream checkpoints (streams are served on; a crash now loses what they delivered since the last checkpoint)", "err", err)
		}
		m.ckMu.Unlock()
	}
}

// writeCheckpoints writes the checkpoint of every stream in flight that has delivered
// something, in one statement: the usage record its CheckpointFunc builds from its latest
// progress, priced and costed as Settle would (usageRecord), with the status
// StatusProcessLost. While the database is known to be down it writes nothing.
func (m *Meter) writeCheckpoints(ctx context.Context) error {
	m.ckMu.Lock()
	defer m.ckMu.Unlock()
	if m.dbDown() {
		return nil
	}
	live := m.ckScratch[:0]
	for i := range m.checkpoints.streams {
		sh := &m.checkpoints.streams[i]
		sh.mu.Lock()
		for r := range sh.live {
			live = append(live, r)
		}
		sh.mu.Unlock()
	}
	now := m.now()
	var records []store.UsageRecord
	var states []*streamState
	for _, r := range live {
		if r.done.Load() {
			continue
		}
		s := r.stream
		s.mu.Lock()
		usage, produced := s.usage, s.produced
		s.mu.Unlock()
		rec, ok := s.build(usage, produced)
		if !ok {
			continue
		}
		rec.Status = StatusProcessLost
		records = append(records, r.usageRecord(math.MaxInt64, rec, now))
		states = append(states, s)
	}
	clear(live)
	m.ckScratch = live[:0]
	if len(records) == 0 && !m.ckLeft {
		return nil
	}
	// Marked before the statement is sent: a stream that settles from now on deletes whatever
	// checkpoint of it the statement writes.
	for _, s := range states {
		s.written.Store(true)
	}
	if len(records) > 0 {
		m.ckEver.Store(true)
	}
	saved, cleaned, err := m.st.SaveStreamCheckpoints(ctx, m.opts.Holder, m.opts.Lease, records)
	if err != nil {
		m.ckLeft = true
		return err
	}
	m.noteDBUp()
	m.ckLeft = saved > 0 || cleaned > 0
	return nil
}

// billLostStreams bills the checkpoints of processes that are gone (LostStreamCheckpoints:
// those past their lease, of the holders in gone, or of holders whose credit hold expired) as
// usage records, through the writer's path for another holder's records (writeBatch, as the
// backlog replay writes what an earlier process left): each from its holder's hold while that
// is there, else from the account's free credit, never below zero; the transaction that writes
// them deletes the checkpoints and settles their key reservations. The unique index of usage
// records bills a request once, so concurrent reapers, and a checkpoint whose stream's record
// was written already, bill nothing twice.
func (m *Meter) billLostStreams(ctx context.Context, gone []string) error {
	for range maxLostRounds {
		lost, err := m.st.LostStreamCheckpoints(ctx, m.opts.Holder, gone, m.opts.BatchSize)
		if err != nil {
			return err
		}
		for i := 0; i < len(lost); {
			holder := lost[i].Holder
			j := i
			batch := make([]store.UsageRecord, 0, len(lost)-i)
			for ; j < len(lost) && lost[j].Holder == holder; j++ {
				rec := lost[j].Record
				rec.Checkpointed, rec.SettleKey = true, true
				batch = append(batch, rec)
			}
			if _, err := m.writeBatch(ctx, holder, false, batch); err != nil {
				return err
			}
			m.opts.Logger.Info("billing: the streams of a lost process were billed from their last checkpoints",
				"holder", holder, "streams", len(batch))
			i = j
		}
		if len(lost) < m.opts.BatchSize {
			return nil
		}
	}
	return nil
}

// dropCheckpoints deletes this process's checkpoints once its usage records are written (at
// Close): a process that drained leaves none to be billed.
func (m *Meter) dropCheckpoints(ctx context.Context) error {
	if !m.ckEver.Load() {
		return nil
	}
	if _, err := m.st.DeleteHolderStreamCheckpoints(ctx, m.opts.Holder); err != nil {
		return err
	}
	m.ckMu.Lock()
	m.ckLeft = false
	m.ckMu.Unlock()
	return nil
}
