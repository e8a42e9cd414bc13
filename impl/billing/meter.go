package billing

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usagespill"
)

// ErrClosed is returned by Reserve once the meter is closed.
var ErrClosed = errors.New("billing: the meter is closed")

// InsufficientError reports that an account cannot cover a reservation: the request needs up
// to NeededMicros and AvailableMicros could be reserved. It unwraps to the 402
// apierror.InsufficientCredit and to store.ErrInsufficientCredit, so the HTTP edge can map it
// with apierror.As and other callers can test it with errors.Is.
type InsufficientError struct {
	NeededMicros    int64
	AvailableMicros int64
}

// Error implements error.
func (e *InsufficientError) Error() string {
	return fmt.Sprintf("billing: insufficient credit: the request needs up to %d micro-units and %d are available",
		e.NeededMicros, e.AvailableMicros)
}

// Unwrap exposes the client-facing 402 and store.ErrInsufficientCredit.
func (e *InsufficientError) Unwrap() []error {
	return []error{apierror.InsufficientCredit(e.NeededMicros, e.AvailableMicros), store.ErrInsufficientCredit}
}

// Options tune a Meter; the zero value of each field means its default.
type Options struct {
	// Holder names this process in credit_holds; it must differ between the processes that
	// share a database. Default: host name, process id and a random suffix.
	Holder string
	// FlushInterval is the longest a settled usage record waits before it is written
	// (default 200 ms); BatchSize the most records written in one transaction, and the queue
	// length that triggers a write at once (default 512).
	FlushInterval time.Duration
	BatchSize     int
	// IdleRelease is how long a hold stays with no reservation before its credit is returned
	// to the account (default 5 s).
	IdleRelease time.Duration
	// ReleaseWait is how long a reservation that the account's balance would cover, were it
	// not for the holds of other processes, waits for them to release their idle holds before
	// it is refused (default DefaultReleaseWait, 500 ms; negative: it is refused at once, and
	// nobody is asked). See release.go.
	ReleaseWait time.Duration
	// Lease is how long a hold outlives its last renewal (default: 4/3 of Outage.Cover, at least
	// 30 s; 40 s with the default cover); the meter renews its holds every Lease/6 and uses a
	// hold only until Lease - Lease/20 after the last renewal was sent, so that after a renewal
	// a hold stays usable for at least Outage.Cover when the database goes away. ReapInterval
	// is how often the meter releases the expired holds of every process (default 10 s).
	Lease        time.Duration
	ReapInterval time.Duration
	// Outage is how the meter rides out a database outage: the size of the holds' outage
	// reserve, and what it does with the requests they do not cover.
	Outage OutagePolicy
	// CheckpointInterval is how often the meter writes the checkpoints of its streams in
	// flight (TrackStream), so that a stream survives a crash of the process in the books
	// (default DefaultCheckpointInterval, 2 s; negative: no checkpoints). See checkpoint.go.
	CheckpointInterval time.Duration
	// A hold is drawn in chunks of max(worst case, min(max(ChunkMultiplier × worst case, two
	// seconds of the account's recent reservations), ChunkCapMicros)) (defaults 10 and
	// 1,000,000 micro-units, 1 USD), never more than the account can cover nor, unless the
	// request needs it, more than half of what it has left.
	ChunkMultiplier int64
	ChunkCapMicros  int64
	// Spill keeps, on disk, the usage records the database does not take (a batch write failed)
	// until it does, and hands the records left there by an earlier process to this one: see
	// the package documentation. The meter does not close it. Without one (nil) those records
	// wait in memory, up to MaxBacklog records, and are lost with the process.
	Spill *usagespill.Spill
	// MaxBacklog bounds the records waiting in memory without a Spill (default 100,000).
	MaxBacklog int
	// WriteTimeout bounds one batch write, each grant of credit and each database call of the
	// maintenance of holds (default 5 s); RetryMax the wait between two attempts to write the backlog, which starts at
	// FlushInterval and doubles (default 5 s).
	WriteTimeout time.Duration
	RetryMax     time.Duration
	// DrainTimeout bounds the final flush and hold release when Run's context ends, and the
	// synchronous write of a settlement that arrives after Close (default 10 s). A grant drawn
	// ahead of need, or by a reservation, is bounded by WriteTimeout.
	DrainTimeout time.Duration
	// Now is the clock of the in-memory bookkeeping: idle times, the local view of leases and
	// the default times of usage records (default time.Now). Leases themselves are timed by
	// the database's clock, so Now must advance with real time outside tests.
	Now func() time.Time
	// Logger receives the errors of the background work, which has no caller to return them
	// to (default: discarded).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Holder == "" {
		host, _ := os.Hostname()
		o.Holder = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 200 * time.Millisecond
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 512
	}
	if o.IdleRelease <= 0 {
		o.IdleRelease = 5 * time.Second
	}
	if o.ReleaseWait == 0 {
		o.ReleaseWait = DefaultReleaseWait
	}
	if o.Outage.Cover == 0 {
		o.Outage.Cover = DefaultOutageCover
	}
	if o.Lease <= 0 {
		o.Lease = max(minLease, o.Outage.Cover*4/3)
	}
	if o.Outage.RiskMicros <= 0 {
		o.Outage.RiskMicros = DefaultRiskMicros
	}
	if o.ReapInterval <= 0 {
		o.ReapInterval = 10 * time.Second
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.ChunkMultiplier <= 0 {
		o.ChunkMultiplier = 10
	}
	if o.ChunkCapMicros <= 0 {
		o.ChunkCapMicros = 1_000_000
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 10 * time.Second
	}
	if o.MaxBacklog <= 0 {
		o.MaxBacklog = 100_000
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 5 * time.Second
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// shardCount is the number of independently locked parts of the account map.
const shardCount = 64

// maxTrips bounds the database round trips of one Reserve, and maxContendedTrips the trips it
// goes on making while the answers show that the account covers the request (the database's
// free credit and the hold's together), the credit having moved during each trip: other
// processes drew what the trip asked for while this process's settlements returned credit to
// its hold, or this process's other requests reserved the credit a grant brought.
const (
	maxTrips          = 3
	maxContendedTrips = 2 * maxTrips
)

// ErrContended is the cause of the 503 for a reservation refused after maxContendedTrips: the
// account covers it, but its credit moved during every round trip of the reservation. The
// request can be retried at once.
var ErrContended = errors.New("billing: the account's credit moved during every draw of the reservation")

// contendedRetryAfter is the Retry-After of a reservation refused with ErrContended.
const contendedRetryAfter = time.Second

// rateWindow is the time constant of the moving average of an account's reservations: the
// rate is the sum of the amounts reserved, each weighted by exp(-age/rateWindow), divided by
// rateWindow.
const rateWindow = time.Second

// chunkHorizon is how much of the account's recent spending a chunk covers, and refillLead how
// long the free credit of a hold must still last at that rate: below that (or below half a
// chunk) the meter draws the next chunk in the background, before a request needs it.
const (
	chunkHorizon = 2 * time.Second
	refillLead   = time.Second
)

// maxRequestID bounds request ids, which are indexed (usage_records, credit_ledger): a longer
// one could never be written and would hold up its whole batch.
const maxRequestID = 200

// Meter meters the requests of one gateway process. It is safe for concurrent use; the state
// of one account is guarded by that account's own mutex, so accounts never wait for each other.
type Meter struct {
	st   *store.Store
	opts Options
	// leaseMargin is taken off a lease in the local view of it, against clock drift.
	leaseMargin time.Duration

	shards [shardCount]shard

	// keys are the reservations against keys' credit caps (keycap.go).
	keys keyCaps

	// lastBalances holds, by account id, the last balance read from the database
	// (a lastBalance), for GET /v1/credits during an outage.
	lastBalances sync.Map

	// The usage writer (writer.go). Lock order: flushMu, replayMu, spillMu, qmu.
	qmu   sync.Mutex
	queue []store.UsageRecord
	kick  chan struct{}
	// flushMu serialises the moves of queued records to the database or the backlog.
	flushMu sync.Mutex
	// backlog keeps the records the database has not taken, in order: the spill file, or
	// memory. backlogged (guarded by spillMu) is set while new records must go behind them:
	// from the first failed write until the replayer has written the whole backlog.
	backlog    backlog
	spillMu    sync.Mutex
	backlogged bool
	// replayMu guards the replay cursor (the first record of the backlog not written yet) and
	// inherited (how many records at the head of the backlog an earlier process settled).
	replayMu  sync.Mutex
	cursor    usagespill.Cursor
	inherited int64
	wake      chan struct{}
	// full is set while the backlog cannot take records: Reserve refuses.
	full           atomic.Bool
	backlogRecords atomic.Int64
	writeFailures  atomic.Int64
	refused        atomic.Int64
	// setAside counts the usage records the database refused as data (setAside).
	setAside atomic.Int64
	// failingSince is when the writes began to fail (zero: the last write succeeded), for the
	// log lines of the writer's state changes.
	wmu          sync.Mutex
	failingSince time.Time
	failedWrites int64
	readFailing  bool

	// refillMu orders the start of a background grant against Close, which waits for the grants
	// in flight (refills) before it returns the holds.
	refillMu sync.Mutex
	refills  sync.WaitGroup
	// delayedReservations counts the reservations that waited for the database: they drew a
	// grant themselves or waited for one in flight.
	delayedReservations atomic.Int64

	closed   atomic.Bool
	running  atomic.Bool
	stop     chan struct{}
	stopOnce sync.Once
	loopDone chan struct{}
	drainMu  sync.Mutex

	// lastRenew and lastReap belong to the maintenance goroutine.
	lastRenew, lastReap time.Time

	// The database's state and the counters of credit through outages (credit.go).
	creditCounters

	// The checkpoints of the streams in flight (checkpoint.go).
	checkpoints

	// The requests to release idle holds across processes (release.go): this process's asks
	// in flight, the releases it runs for the others, and how many of each it made;
	// releaseListening is set while its listener is subscribed.
	asks             releaseAsks
	releasers        sync.WaitGroup
	releaseAsks      atomic.Int64
	releasedOnAsk    atomic.Int64
	releaseListening atomic.Bool

	// beforeDraw, when set (by tests), runs in Reserve before each database round trip that
	// draws credit, while the trip's amounts are decided and the account's lock is not held.
	beforeDraw func()
}

type shard struct {
	mu       sync.RWMutex
	accounts map[uuid.UUID]*account
}

// account is the process's view of one account's credit. The hold of this process on the
// account had dbAmount when last reported by the database (at dbVersion); outstanding is
// reserved by open reservations, pending is settled but not yet written. free() is never more
// than what the hold really has unreserved, whatever order the answers of concurrent database
// calls arrive in: each answer carries the hold's version, an older answer never overwrites a
// newer one, and a pending cost is only forgotten once the write that billed it (or found it
// already billed) is acknowledged together with the hold's amount after it.
type account struct {
	id uuid.UUID

	mu             sync.Mutex
	hasHold        bool
	dbAmount       int64
	dbVersion      int64
	outstanding    int64
	pending        int64
	pendingRecords int
	open           int
	// leaseUntil is the local clock's bound before which the hold is certainly alive; the zero
	// time sends the next reservation to the database.
	leaseUntil time.Time
	lastUsed   time.Time
	// busy is closed when the database call in flight for this account (a grant, drawn by a
	// reservation or ahead of need, or a release) returns; nil when there is none.
	busy      chan struct{}
	releasing bool
	evicted   bool
	// releaseWanted is set while this process tries to release its hold because another
	// process asked it to (release.go).
	releaseWanted bool
	// releaseAskedAgain is set when another ask arrives while that release runs: it then
	// goes on for ReleaseWait from the new ask.
	releaseAskedAgain bool
	// recentReserved is the moving sum of the amounts reserved, as of recentAt (see rateWindow).
	recentReserved float64
	recentAt       time.Time
	// accountLeft is what the account had available (balance - held) after the last grant
	// this process asked for, when knowsLeft.
	accountLeft int64
	knowsLeft   bool
	// recentSpent is the moving sum of the costs settled, as of spentAt (see spendWindow), since
	// spendSince: the account's spend rate, which sizes the outage reserve.
	recentSpent float64
	spentAt     time.Time
	spendSince  time.Time
	// credit is what requests served on credit (FailureContinue) hold: the worst cases of those
	// in flight (creditOpen) and the costs settled but not yet written (creditRecords).
	credit        int64
	creditOpen    int
	creditRecords int
}

// idle reports, with a.mu held, whether nothing of the account is in flight or waits to be
// written.
func (a *account) idle() bool {
	return a.busy == nil && a.open == 0 && a.pendingRecords == 0 && a.creditOpen == 0 && a.creditRecords == 0
}

func (a *account) free() int64 { return a.dbAmount - a.outstanding - a.pending }

// noteReservation adds a reservation of amount at now to the moving average of reservations.
func (a *account) noteReservation(now time.Time, amount int64) {
	a.decayRecent(now)
	a.recentReserved += float64(amount)
}

// reserveRate is the account's recent rate of reservations, in micro-units per second.
func (a *account) reserveRate(now time.Time) float64 {
	a.decayRecent(now)
	return a.recentReserved / rateWindow.Seconds()
}

func (a *account) decayRecent(now time.Time) {
	if age := now.Sub(a.recentAt); age > 0 {
		a.recentReserved *= math.Exp(-age.Seconds() / rateWindow.Seconds())
		a.recentAt = now
	} else if a.recentAt.IsZero() {
		a.recentAt = now
	}
}

func (a *account) usable(now time.Time) bool { return a.hasHold && now.Before(a.leaseUntil) }

// observe applies the database's report of the hold at version, unless a newer one is known.
func (a *account) observe(exists bool, amount, version int64) bool {
	if version <= a.dbVersion {
		return false
	}
	a.dbVersion, a.hasHold, a.dbAmount = version, exists, amount
	if !exists {
		a.dbAmount = 0
	}
	return true
}

// New returns a meter drawing credit from and writing usage to st. It starts nothing: call Run
// for the background work (writing usage, renewing and returning holds, reaping the holds of
// dead processes), and Close (or end Run's context) to drain. Records that an earlier process
// left in opts.Spill are written first, once Run runs.
func New(st *store.Store, opts Options) *Meter {
	m := &Meter{
		st:       st,
		opts:     opts.withDefaults(),
		kick:     make(chan struct{}, 1),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	m.leaseMargin = m.opts.Lease / 20
	for i := range m.shards {
		m.shards[i].accounts = make(map[uuid.UUID]*account)
	}
	m.openBacklog()
	return m
}

// Holder is the name of this meter's process in credit_holds.
func (m *Meter) Holder() string { return m.opts.Holder }

func (m *Meter) now() time.Time { return m.opts.Now() }

func shardOf(id uuid.UUID) int {
	return int((binary.LittleEndian.Uint64(id[:8]) ^ binary.LittleEndian.Uint64(id[8:])) % shardCount)
}

// account returns the state of the account, creating it when create is set (else nil).
func (m *Meter) account(id uuid.UUID, create bool) *account {
	s := &m.shards[shardOf(id)]
	s.mu.RLock()
	a := s.accounts[id]
	s.mu.RUnlock()
	if a != nil || !create {
		return a
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if a = s.accounts[id]; a == nil {
		a = &account{id: id}
		s.accounts[id] = a
	}
	return a
}

// accounts returns every account state.
func (m *Meter) accounts() []*account {
	var out []*account
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		for _, a := range s.accounts {
			out = append(out, a)
		}
		s.mu.RUnlock()
	}
	return out
}

// chunk is how much credit to draw for a request whose worst case is worst, on an account with
// no recent reservations.
func (m *Meter) chunk(worst int64) int64 {
	return m.chunkAtRate(worst, 0)
}

// chunkAtRate is how much credit to draw for a request whose worst case is worst, on an account
// reserving rate micro-units per second: enough for ChunkMultiplier worst cases or chunkHorizon
// of reservations, whichever is more, but no more than ChunkCapMicros unless the request needs
// it.
func (m *Meter) chunkAtRate(worst int64, rate float64) int64 {
	want := max(saturatingMul(worst, m.opts.ChunkMultiplier), microsOver(rate, chunkHorizon))
	return max(worst, min(want, m.opts.ChunkCapMicros))
}

// microsOver is what rate micro-units per second add up to over d, saturating.
func microsOver(rate float64, d time.Duration) int64 {
	v := rate * d.Seconds()
	if !(v < math.MaxInt64) { // also NaN
		return math.MaxInt64
	}
	return int64(max(v, 0))
}

// lowWater is the free credit below which the meter draws the account's next chunk in the
// background: what would last refillLead at rate, or half the chunk, whichever is more, but
// never more than the chunk.
func lowWater(chunk int64, rate float64) int64 {
	return min(max(microsOver(rate, refillLead), chunk/2), chunk)
}

// planRefill decides, with a.mu held, right after a reservation of worst at now, whether to draw
// credit for the account in the background. It does when the meter is running, the database is
// not known to be down, no database call is in flight for the account and the hold is usable,
// and either the hold's free credit is below the low water mark (it draws the next chunk),
// unless the account had too little left at the last grant for half of it to cover one more
// such request, or it is below the low water mark plus the outage reserve (see reserveTopUp)
// and that grant would cover at least one such request. It then marks the grant in flight
// (a.busy) and returns the channel to close and the amount to ask for; the caller starts refill
// once it has released a.mu.
func (m *Meter) planRefill(a *account, now time.Time, worst int64) (done chan struct{}, want int64) {
	if !m.running.Load() || a.busy != nil || a.releasing || a.releaseWanted || !a.usable(now) || m.dbDown() {
		// (While another process asks for the account's credit, this one draws only what its
		// requests need: a grant ahead of need would take back what it just gave.)
		return nil, 0
	}
	rate := a.reserveRate(now)
	chunk := m.chunkAtRate(worst, rate)
	low := lowWater(chunk, rate)
	free := a.free()
	// A grant ahead of need takes at most half of what the account has left; when that would
	// not cover one more request, the rest is better left to whichever process needs it.
	if free < low && !(a.knowsLeft && a.accountLeft/2 < worst) {
		want = chunk
	}
	if top := m.reserveTopUp(a, now, free, low, chunk); top > want && top >= worst {
		want = top
	}
	if want <= 0 {
		return nil, 0
	}
	m.refillMu.Lock()
	defer m.refillMu.Unlock()
	if m.closed.Load() {
		return nil, 0
	}
	m.refills.Add(1)
	done = make(chan struct{})
	a.busy = done
	return done, want
}

// refill grows the process's hold on the account by up to want in the background, and by no
// more than half of what the account has left: no request needs this credit yet, so it must not
// strand the last credit of the account in this process while another refuses requests. done
// is the account's busy channel, closed once the answer is applied.
func (m *Meter) refill(a *account, done chan struct{}, want int64) {
	defer m.refills.Done()
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.WriteTimeout)
	defer cancel()
	sent := m.now()
	g, err := m.st.TakeCreditHold(ctx, store.HoldRequest{
		AccountID: a.id, Holder: m.opts.Holder, NeedMicros: 0, WantMicros: want, Lease: m.opts.Lease,
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	a.busy = nil
	close(done)
	if err != nil {
		// Had the grant committed after all, the hold holds more than this process believes,
		// which is safe; the next grant's answer corrects it.
		if !m.noteDBError(err) {
			m.opts.Logger.Error("billing: draw credit ahead of need (a reservation will draw it)", "account", a.id, "err", err)
		}
		return
	}
	m.noteDBUp()
	m.applyGrant(a, g, sent)
}

// applyGrant applies, with a.mu held, the answer to a grant sent at sent.
func (m *Meter) applyGrant(a *account, g store.HoldGrant, sent time.Time) {
	m.noteBalance(a.id, g.BalanceMicros, sent)
	a.knowsLeft = true
	a.accountLeft = g.AvailableMicros
	if g.Granted {
		a.accountLeft = g.AvailableMicros - g.GrantedMicros
	}
	m.noteAvailable(a, sent)
	if !g.Granted {
		return
	}
	a.observe(true, g.Hold.AmountMicros, g.Hold.Version)
	if until := sent.Add(m.opts.Lease - m.leaseMargin); a.hasHold && until.After(a.leaseUntil) {
		// The grant renewed the lease even when a newer answer already set the amount.
		a.leaseUntil = until
	}
}

// Reservation is credit set aside for one request until it is settled or released.
type Reservation struct {
	m         *Meter
	acct      *account
	accountID uuid.UUID
	requestID string
	amount    int64
	startedAt time.Time
	// onCredit marks a reservation served on credit (FailureContinue) during a database
	// outage: it holds none of the hold's credit but the account's risk bound.
	onCredit bool
	done     atomic.Bool
	// key is the part held against the key's credit cap (ReserveForKey), or nil.
	key *keyHold
	// keyID is the capped key the reservation was made for (ReserveForKey: held against its
	// cap, key, or counted already, keyCounted), or uuid.Nil. The request's usage record names
	// it, whatever the caller's UsageRecord.KeyID says: the record's writer finds the key's
	// reservation through it (store.UsageRecord.SettleKey).
	keyID uuid.UUID
	// keyCounted says that the request id was counted against its key's cap already (a retry
	// of a request settled against the key, ReserveForKey): nothing is held against the cap,
	// and the record still makes the key count what the ledger bills for the request id.
	keyCounted bool
	// stream is the progress of a stream in flight that TrackStream registered for
	// checkpoints (checkpoint.go), or nil.
	stream *streamState
}

// Amount is the credit reserved, in micro-units.
func (r *Reservation) Amount() int64 { return r.amount }

// OnCredit reports whether the request is served on credit: beyond the process's hold, while
// the database could not be reached (FailureContinue).
func (r *Reservation) OnCredit() bool { return r.onCredit }

// RequestID is the request the reservation is for.
func (r *Reservation) RequestID() string { return r.requestID }

// AccountID is the account the credit is reserved on.
func (r *Reservation) AccountID() uuid.UUID { return r.accountID }

// Reserve sets aside worstCaseMicros of the account's credit for the request. In the common case
// the process's hold on the account covers it and Reserve touches no database; when that leaves
// the hold low, the meter (while Run runs) draws the next chunk in the background. Otherwise
// Reserve waits for the grant in flight or draws a larger hold in one round trip. When the
// account cannot cover the amount the error is an *InsufficientError (a 402 through
// apierror.As); an unknown account is store.ErrNotFound. Every reservation must end in exactly
// one Settle or Release. While the usage backlog is full (the database has not taken usage for
// long; see the package documentation), Reserve refuses every request with a 503 (an
// apierror.Unavailable wrapping ErrBacklogFull) rather than serve it unbilled. While the
// database cannot be reached, a request that the hold does not cover goes to the failure
// handling: a 503 (an apierror.Unavailable wrapping ErrHoldSpent), or under FailureContinue a
// reservation on credit (OnCredit) while the account's risk bound allows.
func (m *Meter) Reserve(ctx context.Context, accountID uuid.UUID, requestID string, worstCaseMicros int64) (*Reservation, error) {
	if requestID == "" || len(requestID) > maxRequestID {
		return nil, fmt.Errorf("billing: a reservation needs a request id of 1 to %d bytes", maxRequestID)
	}
	if m.closed.Load() {
		return nil, ErrClosed
	}
	if m.full.Load() {
		// The request's usage could be recorded nowhere: it is not served.
		m.refused.Add(1)
		return nil, apierror.Unavailable("the database", ErrBacklogFull)
	}
	worst := max(worstCaseMicros, 0)
	delayed, asks := false, 0
	// budget is the round trips this reservation may make: maxTrips, raised by one (up to
	// maxContendedTrips) whenever a trip's answer shows the account covers the request.
	budget := maxTrips
	for trips := 0; ; {
		a := m.account(accountID, true)
		a.mu.Lock()
		if a.evicted {
			a.mu.Unlock()
			continue
		}
		now := m.now()
		if worst == 0 || a.covers(now, worst) {
			return m.reserveLocked(a, accountID, requestID, worst, now), nil
		}
		if !delayed {
			delayed = true
			m.delayedReservations.Add(1)
		}
		if wait := a.busy; wait != nil {
			if m.dbDown() {
				// The call in flight is the one reservation at a time that asks a database
				// known down for credit (it may hang for WriteTimeout): the others go to the
				// failure handling at once rather than wait for it, and then each become the
				// next one to ask (trial h17: ten requests of one account were answered 5 s
				// apart while PostgreSQL hung).
				return m.onOutage(a, accountID, requestID, worst, now, errDatabaseDown)
			}
			// A grant (or a release) is in flight: wait for it rather than draw twice.
			a.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		free := a.free()
		if trips == budget {
			// Only reached after maxContendedTrips, the last of which was granted: the
			// account had the credit, this process's other requests reserved it first.
			a.mu.Unlock()
			return nil, contended(accountID, worst)
		}
		// While the database is down one reservation at a time asks it for credit (it tells
		// when the database is back as soon as it is); the others go to the failure handling
		// at once rather than each wait for a database that may hang.
		probe := m.dbDown()
		if probe && !m.probing.CompareAndSwap(false, true) {
			return m.onOutage(a, accountID, requestID, worst, now, errDatabaseDown)
		}
		trips++
		// The hold must grow by what it lacks; outstanding and pending costs stay covered.
		need := worst
		if free < 0 {
			need = saturatingAdd(worst, -free)
		} else {
			need = max(worst-free, 0)
		}
		want := max(need, m.chunkAtRate(worst, a.reserveRate(now)))
		if a.releaseWanted {
			want = need
		}
		wait := make(chan struct{})
		a.busy = wait
		a.mu.Unlock()

		if m.beforeDraw != nil {
			m.beforeDraw()
		}
		sent := m.now()
		gctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
		g, err := m.st.TakeCreditHold(gctx, store.HoldRequest{
			AccountID: accountID, Holder: m.opts.Holder, NeedMicros: need, WantMicros: want, Lease: m.opts.Lease,
		})
		cancel()
		if probe {
			m.probing.Store(false)
		}

		a.mu.Lock()
		a.busy = nil
		close(wait)
		if err != nil {
			// Had the grant committed after all, the hold holds more than this process
			// believes, which is safe; the next grant's answer corrects it.
			if ctx.Err() == nil && m.noteDBError(err) {
				return m.onOutage(a, accountID, requestID, worst, m.now(), err)
			}
			a.mu.Unlock()
			return nil, fmt.Errorf("billing: draw credit: %w", err)
		}
		m.noteDBUp()
		m.applyGrant(a, g, sent)
		if now := m.now(); a.covers(now, worst) {
			// The grant, or settlements that returned credit to the hold during the round
			// trip, cover the request: it is reserved before the account's lock is let go,
			// so that the requests that waited for this trip cannot take it first.
			return m.reserveLocked(a, accountID, requestID, worst, now), nil
		}
		if g.Granted {
			// This process's other requests reserved, during the trip, the credit the grant
			// was to add to: the account had it, so the trip made progress.
			a.mu.Unlock()
			if trips == budget && budget < maxContendedTrips {
				budget++
			}
			continue
		}
		local := int64(0)
		if a.usable(m.now()) && !a.releasing {
			local = max(a.free(), 0)
		}
		available := saturatingAdd(g.AvailableMicros, local)
		// What the other processes hold of the account (as far as this process knows its
		// own hold): the credit they might give back.
		othersHeld := g.BalanceMicros - g.AvailableMicros
		if a.hasHold {
			othersHeld -= a.dbAmount
		}
		a.mu.Unlock()
		if available >= worst {
			// The hold and the account's free credit together cover it (the credit moved
			// during the trip): draw again, for what the hold lacks now.
			if trips < budget {
				continue
			}
			if budget < maxContendedTrips {
				budget++
				continue
			}
			return nil, contended(accountID, worst)
		}
		if asks < maxReleaseAsks && m.opts.ReleaseWait > 0 && othersHeld > 0 && saturatingAdd(available, othersHeld) >= worst {
			// The balance would cover the request but for other processes' holds: ask them
			// to release the idle ones, wait a little, and draw once more.
			asks++
			if m.askRelease(ctx, accountID, worst-available, asks > 1) == 0 {
				asks = maxReleaseAsks // nobody gave anything back: no use asking again
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			trips = min(trips, budget-1)
			continue
		}
		return nil, &InsufficientError{NeededMicros: worst, AvailableMicros: available}
	}
}

// covers reports, with a.mu held, whether the process's hold on the account covers a
// reservation of worst at now without a database round trip.
func (a *account) covers(now time.Time, worst int64) bool {
	return !a.releasing && a.usable(now) && a.free() >= worst
}

// reserveLocked reserves worst of the account's hold, with a.mu held, and lets a.mu go; it starts
// the background draw of the next chunk when that leaves the hold low.
func (m *Meter) reserveLocked(a *account, accountID uuid.UUID, requestID string, worst int64, now time.Time) *Reservation {
	a.outstanding += worst
	a.open++
	a.lastUsed = now
	var refillDone chan struct{}
	var refillWant int64
	if worst > 0 {
		a.noteReservation(now, worst)
		refillDone, refillWant = m.planRefill(a, now, worst)
	}
	a.mu.Unlock()
	if refillDone != nil {
		go m.refill(a, refillDone, refillWant)
	}
	return &Reservation{m: m, acct: a, accountID: accountID, requestID: requestID, amount: worst, startedAt: now}
}

// contended is the error of a reservation of worst refused after maxContendedTrips although the
// account covered it: a 503 to retry, since the credit is there.
func contended(accountID uuid.UUID, worst int64) error {
	return &contendedError{client: &apierror.Error{Kind: apierror.KindUnavailable, RetryAfter: contendedRetryAfter, Message: fmt.Sprintf(
		"the account's credit is being drawn by many requests at once: this request (up to %s) was not served; retry in %d seconds",
		apierror.USD(worst), apierror.Seconds(contendedRetryAfter))}, account: accountID}
}

// contendedError carries the client's 503 and ErrContended, with the account for the logs.
type contendedError struct {
	client  *apierror.Error
	account uuid.UUID
}

// Error implements error.
func (e *contendedError) Error() string {
	return fmt.Sprintf("%v (account %s)", ErrContended, e.account)
}

// Unwrap exposes the client's 503 and ErrContended.
func (e *contendedError) Unwrap() []error { return []error{e.client, ErrContended} }

// UsageRecord is what the caller knows of a finished request; the meter adds the account, the
// request id and the cost.
type UsageRecord struct {
	// KeyID is the API key the request came with (uuid.Nil for none). A request reserved
	// against its key's cap (ReserveForKey) is recorded against that key whatever KeyID says:
	// left empty it is filled in, and naming another key is logged as a bug.
	KeyID uuid.UUID
	// Model is the gateway model asked for; Route the API route (e.g. "/v1/chat/completions").
	Model string
	Route string
	// Provider and UpstreamModel name the upstream that served the request: for a fusion
	// model, the expert the router chose.
	Provider      string
	UpstreamModel string
	// InputTokens and OutputTokens are the counts of a record settled by amount alone (Price
	// nil). A priced record has its counts per kind in Tokens instead, and Price is the price
	// they are billed at: Settle records each kind's cost, what caching saved, and the part of
	// the cost it did not bill.
	InputTokens  int64
	OutputTokens int64
	Tokens       price.Tokens
	Price        *price.Price
	// ServiceTier is the service tier the upstream reported ("" when it did not say).
	ServiceTier string
	// HostedCalls are the billed calls of tools the provider ran and bills per call (a web
	// search), by llm.HostedTool; HostedMicros their part of the cost.
	HostedCalls  llm.HostedCalls
	HostedMicros int64
	// Status is how the request ended (default "completed").
	Status string
	// StartedAt defaults to the time of the reservation, FinishedAt to the time of Settle.
	StartedAt  time.Time
	FinishedAt time.Time
	// AgentSessionID tags the model call of an agent session (uuid.Nil: none).
	AgentSessionID uuid.UUID
	// CeilingMicros is the most an agent session's call may be charged in all: what was left of
	// the session's max_spend (and of its key's cap) when the call was made, which its
	// reservation fitted. A call that costs beyond its reservation is charged the excess within
	// it (0: none is, the reservation bounds the charge).
	CeilingMicros int64
	// TraceID is the W3C trace id of the request's trace (all zero: not traced); the usage
	// record keeps it, so that a request in the usage log leads to its trace.
	TraceID [16]byte
	// FittedOutputTokens is the output bound a request without one was fitted to, its
	// caller's credit not covering the model's whole bound (0: not fitted; the exchange's
	// reserveFitted).
	FittedOutputTokens int64
	// RequestID, when set, is the id the record is written under instead of the reservation's:
	// an attempt that delivered nothing, of a call whose id must stay free for the attempt that
	// delivers (the ledger bills an id once, and an agent's retried step reuses its call's id).
	RequestID string
}

// Settle ends the reservation with the request's real cost: actualMicros is charged and what
// the reservation does not use returns to the process's hold at once. A priced record
// (usage.Price set) is never charged more than its tokens and hosted calls cost at its price;
// what it costs beyond its reservation (the input estimate passed by text made to be dense) is
// charged out of the hold's free credit as far as that covers it (beyondReservation: never on
// credit; for a key with a credit cap as far as the cap has it free too, and for an agent
// session's call within its ceiling, usage.CeilingMicros), so the balance never goes below
// zero, nor a key's spend above its cap, nor a session's above its max_spend. Its record keeps the cost of each token
// kind and, as waived, the part of that cost not charged. An unpriced record is charged at
// most its reservation. The usage record
// and its ledger entry are written by the batching writer within the flush interval. It returns the amount charged.
// Settling again, or after Release, does nothing and returns 0; a request id whose usage is
// already in the ledger is not billed again (the writer skips it and the credit returns).
// After Close, Settle writes the record (or, when the database does not take it, keeps it in
// the backlog) before it returns.
func (r *Reservation) Settle(actualMicros int64, usage UsageRecord) int64 {
	if r == nil || !r.done.CompareAndSwap(false, true) {
		return 0
	}
	m, a := r.m, r.acct
	r.untrackStream()
	now := m.now()
	rec := r.usageRecord(actualMicros, usage, now)
	if usage.KeyID != uuid.Nil && usage.KeyID != rec.APIKeyID {
		m.opts.Logger.Error("billing: bug: the usage record names another key than the one its request was reserved for; recorded against the reservation's",
			"request_id", r.requestID, "record_key_id", usage.KeyID, "reservation_key_id", rec.APIKeyID)
	}
	cost, extra := rec.CostMicros, int64(0)
	a.mu.Lock()
	if r.onCredit {
		a.credit -= r.amount - cost
		a.creditOpen--
		a.creditRecords++
	} else {
		a.outstanding -= r.amount
		a.open--
		// The hold's part beyond the reservation is taken now; a capped key's is given back
		// below for what its cap does not cover.
		extra = r.beyondReservation(a, actualMicros, usage.CeilingMicros, &rec, now)
		cost += extra
		a.pending += cost
		a.pendingRecords++
	}
	a.noteSpend(now, cost)
	a.lastUsed = now
	a.mu.Unlock()
	if r.onCredit {
		m.atRisk.Add(cost - r.amount)
		m.onCreditRequests.Add(1)
		m.onCreditMicros.Add(cost)
	}
	if r.key != nil {
		// An attempt billed nothing under the request's id (its record goes under an id of its
		// own) counts nothing: the id stays free for the retry the ledger bills, and the key's
		// budget must count that retry (its row is released, not marked as counted).
		base := cost - extra
		charged := m.settleKey(r, base, extra, cost == 0 && rec.RequestID != r.requestID)
		if back := extra - charged; back > 0 {
			r.giveBack(&rec, back)
			cost, extra = cost-back, charged
		}
	}
	if extra > 0 {
		m.beyondRequests.Add(1)
		m.beyondMicros.Add(extra)
	}
	if short := shortOf(actualMicros, &rec); short > 0 {
		m.waivedRequests.Add(1)
		m.waivedMicros.Add(short)
	}
	// The writer deletes the stream's checkpoint with the record, if one may have been written.
	rec.Checkpointed = r.checkpointed()
	m.enqueue(rec)
	if m.closed.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), m.opts.DrainTimeout)
		defer cancel()
		if err := m.flushAll(ctx); err != nil {
			m.opts.Logger.Error("billing: write usage after close", "request_id", r.requestID, "err", err)
		}
	}
	return cost
}

// beyondReservation charges, with a.mu held, what a priced record cost beyond the reservation
// out of the hold's free credit: the reservation's input is an estimate (three bytes a token),
// which text made to be dense passes, and the provider bills the count, so the part of the bill
// the hold still covers is charged rather than waived. The hold is credit the database has set
// aside for this process, so the charge never takes the balance below zero, and it costs no
// database call. It moves rec's waived amount to its cost and returns the amount moved. An
// agent session's call is charged within its ceiling (what was left of its max_spend, which
// its reservation fitted); a capped key's request is charged here as far as the hold covers
// it, and Settle gives back what the key's cap does not have free (settleKey). It charges
// nothing beyond the reservation of a request served on credit, of an agent session's call
// without a ceiling, nothing the caller chose not to bill (actualMicros below the record's
// cost), and nothing when the hold is not certainly alive.
func (r *Reservation) beyondReservation(a *account, actualMicros, ceiling int64, rec *store.UsageRecord, now time.Time) int64 {
	if r.onCredit || (rec.AgentSessionID != uuid.Nil && ceiling <= 0) {
		return 0
	}
	if a.releasing || !a.usable(now) {
		return 0
	}
	// The reservation is back in the hold's free credit (Settle took it out of outstanding) and
	// the record's cost is not yet pending: both come out of what the hold can still give.
	extra := min(shortOf(actualMicros, rec), a.free()-rec.CostMicros)
	if rec.AgentSessionID != uuid.Nil {
		extra = min(extra, ceiling-rec.CostMicros)
	}
	if extra <= 0 {
		return 0
	}
	rec.CostMicros += extra
	rec.WaivedMicros -= extra
	return extra
}

// giveBack returns back of what beyondReservation charged a capped key's request out of the
// hold, the part its key's cap did not have free: rec waives it again and the hold has it free.
func (r *Reservation) giveBack(rec *store.UsageRecord, back int64) {
	rec.CostMicros -= back
	rec.WaivedMicros += back
	a := r.acct
	a.mu.Lock()
	a.pending -= back
	a.mu.Unlock()
}

// shortOf is what a priced record's cost falls short of the bill its caller settled it at
// (actualMicros, at most what its tokens and hosted calls cost): the part waived because the
// reservation, or the hold beyond it, did not cover it. A part the caller chose not to bill (an
// answer the client never got, settled at 0) is not short.
func shortOf(actualMicros int64, rec *store.UsageRecord) int64 {
	if rec.Price == nil || rec.WaivedMicros <= 0 {
		return 0
	}
	return max(min(max(actualMicros, 0), rec.CostMicros+rec.WaivedMicros)-rec.CostMicros, 0)
}

// usageRecord is the usage record of the reservation's request for usage at actualMicros,
// finished at now unless usage says when: the one Settle queues, and a stream's checkpoint
// (the record it would be settled with if it were cut now). The cost is actualMicros clamped
// to the reservation and, for a priced record, to what its tokens and hosted calls cost at its
// price. It changes no state.
func (r *Reservation) usageRecord(actualMicros int64, usage UsageRecord, now time.Time) store.UsageRecord {
	cost := min(max(actualMicros, 0), r.amount)
	var costs price.Breakdown
	var hosted, full int64
	if usage.Price != nil {
		// A priced record is never billed more than its tokens and hosted calls cost.
		costs = price.Cost(usage.Tokens, *usage.Price)
		hosted = max(usage.HostedMicros, 0)
		full = price.SaturatingAdd(costs.Total(), hosted)
		cost = min(cost, full)
	}
	rec := store.UsageRecord{
		AccountID: r.accountID, RequestID: r.requestID, APIKeyID: r.recordKeyID(usage),
		Model: usage.Model, Route: usage.Route, Provider: usage.Provider, UpstreamModel: usage.UpstreamModel,
		InputTokens: usage.InputTokens, OutputTokens: usage.OutputTokens, CostMicros: cost,
		Status: usage.Status, StartedAt: usage.StartedAt, FinishedAt: usage.FinishedAt,
		HostedCalls: hostedCallsByName(usage.HostedCalls), HostedMicros: min(usage.HostedMicros, cost),
		OnCredit: r.onCredit, AgentSessionID: usage.AgentSessionID, TraceID: usage.TraceID,
		FittedOutputTokens: usage.FittedOutputTokens,
	}
	if usage.Price != nil {
		t := usage.Tokens
		rec.InputTokens, rec.OutputTokens = t.Input(), t.Output
		rec.CacheReadTokens, rec.CacheWrite5mTokens, rec.CacheWrite1hTokens = t.CacheRead, t.CacheWrite5m, t.CacheWrite1h
		rec.ReasoningTokens = t.Reasoning
		rec.Price, rec.Costs = usage.Price, costs
		rec.CacheSavingsMicros = price.CacheSavings(t, *usage.Price, costs)
		rec.HostedMicros, rec.WaivedMicros = hosted, full-cost
	}
	rec.ServiceTier = usage.ServiceTier
	if usage.RequestID != "" {
		rec.RequestID = usage.RequestID
	}
	if rec.Status == "" {
		rec.Status = "completed"
	}
	if rec.StartedAt.IsZero() {
		rec.StartedAt = r.startedAt
	}
	if rec.FinishedAt.IsZero() {
		rec.FinishedAt = now
	}
	if r.key != nil && r.key.kind.Start(rec.StartedAt) != r.key.period {
		// The key's spend in a period is read from the records that started in it.
		rec.StartedAt = r.startedAt
	}
	if r.key != nil || r.keyCounted {
		// The record settles the key's reservation too, when it is written, if the settlement
		// of its own (settleKey) never reached the database: it waits in memory during an
		// outage, and is lost with the process, while the record waits in the spill file. And
		// it makes the key count what the ledger billed for the request id, which may be
		// another attempt's record than the one the key's settlement counted: a retry's,
		// billed while the first attempt's record waited in a dead process's spill file.
		rec.SettleKey = true
	}
	return rec
}

// recordKeyID is the key the request's usage record names: the capped key the reservation was
// made for, when it was (keyID), else the caller's usage.KeyID. A caller that leaves KeyID empty
// or names another key cannot leave a capped key counting other than the ledger's bill.
func (r *Reservation) recordKeyID(usage UsageRecord) uuid.UUID {
	if r.keyID != uuid.Nil {
		return r.keyID
	}
	return usage.KeyID
}

// SettleUsage settles a priced record (usage.Price set) at what its tokens and hosted calls
// cost at its price, never more than the reservation: the caller does not compute the cost,
// Settle does, once.
func (r *Reservation) SettleUsage(usage UsageRecord) int64 {
	return r.Settle(math.MaxInt64, usage)
}

// Release ends a reservation whose request never reached an upstream: the whole amount returns
// to the hold and no usage is recorded; a capped key's reservation returns to its budget, and a
// retry with the request id is counted against the cap. Releasing again, or after Settle, does
// nothing.
func (r *Reservation) Release() {
	if r == nil || !r.done.CompareAndSwap(false, true) {
		return
	}
	r.untrackStream()
	a := r.acct
	now := r.m.now()
	a.mu.Lock()
	if r.onCredit {
		a.credit -= r.amount
		a.creditOpen--
	} else {
		a.outstanding -= r.amount
		a.open--
	}
	a.lastUsed = now
	a.mu.Unlock()
	if r.onCredit {
		r.m.atRisk.Add(-r.amount)
	}
	if r.key != nil {
		r.m.settleKey(r, 0, 0, true)
	}
}

// Balance is the account's balance for GET /v1/credits: the settled balance in the database,
// which shows every settlement within the flush interval. Reservations of requests in flight
// are not subtracted: they are worst cases, often many times the real cost, and would make the
// shown balance drop and bounce back with every request; the credit that processes hold is not
// spent either. An unknown account is store.ErrNotFound.
func (m *Meter) Balance(ctx context.Context, accountID uuid.UUID) (int64, error) {
	return m.st.Balance(ctx, accountID)
}

// BalanceReading is an account's balance as GET /v1/credits shows it.
type BalanceReading struct {
	Micros int64
	// Stale is set when the database could not be read and Micros is the last balance this
	// process read (by GET /v1/credits or with a credit grant), at AsOf.
	Stale bool
	AsOf  time.Time
}

// lastBalance is a balance read from the database and when.
type lastBalance struct {
	micros int64
	at     time.Time
}

// noteBalance remembers micros as the account's balance read at at, unless a later one is known.
func (m *Meter) noteBalance(id uuid.UUID, micros int64, at time.Time) {
	for {
		old, loaded := m.lastBalances.LoadOrStore(id, lastBalance{micros, at})
		if !loaded {
			return
		}
		if prev := old.(lastBalance); !at.After(prev.at) || m.lastBalances.CompareAndSwap(id, prev, lastBalance{micros, at}) {
			return
		}
	}
}

// BalanceOrLastKnown is Balance, and during a database outage (an error for which
// store.Unavailable holds) the last balance this process read for the account, marked stale,
// when it read one; without one the outage's error is returned.
func (m *Meter) BalanceOrLastKnown(ctx context.Context, accountID uuid.UUID) (BalanceReading, error) {
	at := m.now()
	micros, err := m.st.Balance(ctx, accountID)
	if err == nil {
		m.noteBalance(accountID, micros, at)
		return BalanceReading{Micros: micros, AsOf: at}, nil
	}
	if store.Unavailable(err) {
		if v, ok := m.lastBalances.Load(accountID); ok {
			last := v.(lastBalance)
			return BalanceReading{Micros: last.micros, Stale: true, AsOf: last.at}, nil
		}
	}
	return BalanceReading{}, err
}

// Run does the meter's background work until ctx ends or Close is called: it writes settled
// usage every FlushInterval (at once when BatchSize records wait), keeps what the database
// refuses in the backlog and writes it back with backoff (see the package documentation),
// renews the process's holds, returns idle holds, and reaps the expired holds of dead
// processes. When ctx ends it drains (writes everything, or keeps it in the spill file, and
// releases every hold; bounded by DrainTimeout) and returns the drain's error. Run may be
// called once.
func (m *Meter) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("billing: Run called twice")
	}
	// Five goroutines: this one moves settled records every tick; the replayer writes the
	// backlog; the maintenance renews, returns and reaps holds; the checkpointer writes the
	// checkpoints of the streams in flight; the release listener returns idle holds that other
	// processes ask for (release.go). A database that hangs holds up neither the ticks
	// nor the replayer for longer than WriteTimeout.
	bg, stopBackground := context.WithCancel(ctx)
	replayDone, maintainDone, checkpointDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	releaseDone := make(chan struct{})
	go func() {
		defer close(releaseDone)
		m.listenForReleases(bg)
	}()
	go func() {
		defer close(checkpointDone)
		m.checkpointLoop(bg)
	}()
	go func() {
		defer close(replayDone)
		m.replayLoop(bg)
	}()
	go func() {
		defer close(maintainDone)
		m.maintainLoop(bg)
	}()
	m.wakeReplayer()
	m.loop(ctx)
	stopBackground()
	<-replayDone
	<-maintainDone
	<-checkpointDone
	<-releaseDone
	close(m.loopDone)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.DrainTimeout)
	defer cancel()
	return m.Close(dctx)
}

// loop moves the settled records to the database (or the backlog) every FlushInterval, and at
// once when BatchSize records wait, until ctx ends or Close is called.
func (m *Meter) loop(ctx context.Context) {
	flush := time.NewTicker(m.opts.FlushInterval)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.stop:
			return
		case <-flush.C:
			_ = m.flushQueued(ctx)
		case <-m.kick:
			_ = m.flushQueued(ctx)
		}
	}
}

// maintainLoop renews the process's holds, returns the idle ones and reaps the expired holds of
// every process, until ctx ends.
func (m *Meter) maintainLoop(ctx context.Context) {
	every := min(time.Second, m.opts.IdleRelease/4, m.opts.Lease/12, m.opts.ReapInterval)
	tick := time.NewTicker(max(every, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			m.maintain(ctx)
		}
	}
}

// maintain does what is due of the maintenance, each database call bounded by WriteTimeout.
// While the database is known to be down it only asks whether it is back. Once it is, the
// holds are renewed at once (a hold whose local lease ran out during the outage is usable
// again if nobody reaped it), and this process reaps nobody's hold for a reap interval: the
// other processes, back too, renew theirs first.
func (m *Meter) maintain(ctx context.Context) {
	if m.dbDown() {
		cctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
		err := m.st.Ping(cctx)
		cancel()
		if err != nil {
			return
		}
		m.noteDBUp()
	}
	now := m.now()
	if m.recovered.Swap(false) {
		m.lastRenew = time.Time{}
		m.lastReap = now
	}
	if now.Sub(m.lastRenew) >= m.opts.Lease/6 {
		m.lastRenew = now
		cctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
		m.renew(cctx)
		cancel()
	}
	if now.Sub(m.lastReap) >= m.opts.ReapInterval && !m.dbDown() {
		m.lastReap = now
		cctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
		if _, err := m.ReapExpiredHolds(cctx); err != nil && ctx.Err() == nil && !m.noteDBError(err) {
			m.opts.Logger.Error("billing: reap expired credit holds", "err", err)
		}
		cancel()
	}
	if !m.dbDown() {
		cctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
		m.releaseIdle(cctx, now)
		cancel()
		m.maintainKeys(ctx, now)
	}
}

// renew extends the leases of the process's holds. A hold that is gone (reaped while this
// process could not renew it) sends the account's next reservation to the database.
func (m *Meter) renew(ctx context.Context) {
	accts := m.accounts()
	anyHold := false
	for _, a := range accts {
		a.mu.Lock()
		anyHold = anyHold || a.hasHold
		a.mu.Unlock()
	}
	if !anyHold {
		return
	}
	sent := m.now()
	holds, err := m.st.RenewCreditHolds(ctx, m.opts.Holder, m.opts.Lease)
	if err != nil {
		if !errors.Is(ctx.Err(), context.Canceled) && !m.noteDBError(err) {
			m.opts.Logger.Error("billing: renew credit holds", "err", err)
		}
		return
	}
	m.noteDBUp()
	m.countHolders(ctx)
	alive := make(map[uuid.UUID]bool, len(holds))
	for _, h := range holds {
		alive[h.AccountID] = true
	}
	until := sent.Add(m.opts.Lease - m.leaseMargin)
	for _, a := range accts {
		a.mu.Lock()
		if a.hasHold {
			if alive[a.id] {
				if until.After(a.leaseUntil) {
					a.leaseUntil = until
				}
			} else {
				a.leaseUntil = time.Time{}
			}
		}
		a.mu.Unlock()
	}
}

// countHolders reads how many processes hold credit in the database now, for FailureShare's
// divisor (shareDivisor), and logs when it first exceeds the configured replica count.
func (m *Meter) countHolders(ctx context.Context) {
	n, err := m.st.LiveCreditHolders(ctx)
	if err != nil {
		if !errors.Is(ctx.Err(), context.Canceled) && !m.noteDBError(err) {
			m.opts.Logger.Error("billing: count the processes holding credit", "err", err)
		}
		return
	}
	was := m.liveHolders.Swap(int64(n))
	if configured := m.opts.Outage.replicas(); m.opts.Outage.FailureHandling == FailureShare && int64(n) > configured && was <= configured {
		m.opts.Logger.Warn("billing: more gateway processes hold credit in the database than the replica count says; during a database outage each serves on credit its share of an account's available credit by the larger count",
			"processes", n, "replicas", configured)
	}
}

// releaseIdle returns the holds that no reservation has used for IdleRelease, in one
// transaction, and forgets accounts with nothing left to track.
func (m *Meter) releaseIdle(ctx context.Context, now time.Time) {
	var idle []*account
	for _, a := range m.accounts() {
		a.mu.Lock()
		if a.hasHold && a.idle() && now.Sub(a.lastUsed) >= m.opts.IdleRelease {
			a.busy = make(chan struct{})
			a.releasing = true
			idle = append(idle, a)
		}
		a.mu.Unlock()
	}
	if len(idle) > 0 {
		m.releaseHolds(ctx, idle)
	}
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for id, a := range s.accounts {
			a.mu.Lock()
			if !a.hasHold && a.idle() && now.Sub(a.lastUsed) >= m.opts.IdleRelease {
				a.evicted = true
				delete(s.accounts, id)
			}
			a.mu.Unlock()
		}
		s.mu.Unlock()
	}
}

// releaseHolds returns the process's holds of accts, in one transaction, and returns the
// amounts released by account. The caller has marked each account, with its a.mu held and the
// account idle, as releasing with a database call in flight (a.busy), so that no reservation
// uses the hold meanwhile; releaseHolds ends both. When the outcome is unknown (the call
// failed) the next reservation of each account asks the database.
func (m *Meter) releaseHolds(ctx context.Context, accts []*account) map[uuid.UUID]int64 {
	ids := make([]uuid.UUID, len(accts))
	for i, a := range accts {
		ids[i] = a.id
	}
	released, err := m.st.ReleaseCreditHolds(ctx, m.opts.Holder, ids)
	if err != nil && !errors.Is(ctx.Err(), context.Canceled) && !m.noteDBError(err) {
		m.opts.Logger.Error("billing: release idle credit holds", "err", err)
	}
	versions := make(map[uuid.UUID]int64, len(released))
	amounts := make(map[uuid.UUID]int64, len(released))
	for _, h := range released {
		versions[h.AccountID] = h.Version
		amounts[h.AccountID] = h.AmountMicros
	}
	for _, a := range accts {
		a.mu.Lock()
		if err != nil {
			// The release may or may not have happened: ask the database next time.
			a.leaseUntil = time.Time{}
		} else {
			a.hasHold, a.dbAmount = false, 0
			a.dbVersion = max(a.dbVersion, versions[a.id])
		}
		a.releasing = false
		close(a.busy)
		a.busy = nil
		a.mu.Unlock()
	}
	if err != nil {
		return nil
	}
	return amounts
}

// ReapExpiredHolds releases the holds, of any process, whose lease has expired: their process
// is gone (it crashed, or lost the database for longer than a lease), so their unspent credit
// returns to the accounts. Run calls it every ReapInterval; every process runs it, and
// concurrent reapers are harmless. It returns how many holds it released.
//
// Before the holds go, the streams that such a process had in flight are billed from their
// last checkpoints (billLostStreams), from the dead hold while it is there; then again for the
// holders of the holds reaped, should a concurrent reaper have taken their holds first.
//
// Usage that a crashed process had settled but not yet written is lost with it and never
// billed: in the customer's favour, and bounded by what one process settles in a flush
// interval.
func (m *Meter) ReapExpiredHolds(ctx context.Context) (int, error) {
	lostErr := m.billLostStreams(ctx, nil)
	holds, err := m.st.ReapExpiredCreditHolds(ctx)
	if len(holds) > 0 {
		var gone []string
		for _, h := range holds {
			if h.Holder != m.opts.Holder && !slices.Contains(gone, h.Holder) {
				gone = append(gone, h.Holder)
			}
		}
		if len(gone) > 0 {
			lostErr = errors.Join(lostErr, m.billLostStreams(ctx, gone))
		}
	}
	for _, h := range holds {
		if h.Holder != m.opts.Holder {
			continue
		}
		if a := m.account(h.AccountID, false); a != nil {
			a.mu.Lock()
			a.observe(false, 0, h.Version)
			a.leaseUntil = time.Time{}
			a.mu.Unlock()
		}
	}
	return len(holds), errors.Join(err, lostErr)
}

// Close stops Run, writes every settled usage record (the backlog first), and returns every
// hold of this process to its account. Once every record is written it deletes this process's
// stream checkpoints (none is left to be billed again). What the database does not take
// (refused, or not answered before ctx ends: a hung database) goes to the backlog, and the
// error says how much: in the spill file it waits for the next process
// that opens the file (the checkpoints stay too, and whichever reaches the database first is
// billed); in memory it is lost with the process. Reserve fails with ErrClosed afterwards; a
// reservation still open settles by writing its record at once, billed from the account's
// free credit. Call it once requests have drained (after the HTTP server's Shutdown). Closing
// again does no harm.
func (m *Meter) Close(ctx context.Context) error {
	m.refillMu.Lock()
	m.closed.Store(true)
	m.refillMu.Unlock()
	m.stopOnce.Do(func() { close(m.stop) })
	if m.running.Load() {
		select {
		case <-m.loopDone:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.drainMu.Lock()
	defer m.drainMu.Unlock()
	// No grant starts ahead of need once closed is set (planRefill looks under refillMu); wait
	// for those in flight, so that none adds to a hold after the holds are returned.
	refilled := make(chan struct{})
	go func() {
		m.refills.Wait()
		close(refilled)
	}()
	select {
	case <-refilled:
	case <-ctx.Done():
		// The records settled are kept all the same, for the next process to write.
		m.flushMu.Lock()
		err := m.keepQueuedLocked()
		m.flushMu.Unlock()
		return errors.Join(ctx.Err(), err)
	}
	var errs []error
	if err := m.flushAll(ctx); err != nil {
		errs = append(errs, fmt.Errorf("billing: write usage: %w", err))
	} else if err := m.dropCheckpoints(ctx); err != nil {
		// Every record is written: the checkpoints of this process's streams are of no use.
		errs = append(errs, err)
	}
	if err := m.retryKeySettlements(ctx); err != nil {
		errs = append(errs, err)
	}
	released, err := m.st.ReleaseCreditHolds(ctx, m.opts.Holder, nil)
	if err != nil {
		errs = append(errs, fmt.Errorf("billing: release credit holds: %w", err))
	}
	versions := make(map[uuid.UUID]int64, len(released))
	for _, h := range released {
		versions[h.AccountID] = h.Version
	}
	for _, a := range m.accounts() {
		a.mu.Lock()
		if err == nil {
			a.hasHold, a.dbAmount = false, 0
			a.dbVersion = max(a.dbVersion, versions[a.id])
		}
		a.leaseUntil = time.Time{}
		a.mu.Unlock()
	}
	return errors.Join(errs...)
}

// saturatingAdd is a+b for non-negative a and b, or math.MaxInt64 when that overflows.
func saturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// hostedCallsByName is calls keyed by the tools' names, or nil when there are none.
func hostedCallsByName(calls llm.HostedCalls) map[string]int64 {
	if !calls.Any() {
		return nil
	}
	byName := make(map[string]int64)
	for t, n := range calls {
		if n > 0 {
			byName[llm.HostedTool(t).String()] = n
		}
	}
	return byName
}
