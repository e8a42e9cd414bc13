package billing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/store"
)

// KeyCap is an API key's credit cap: the most the key may spend in each Period.
type KeyCap struct {
	KeyID     uuid.UUID
	CapMicros int64
	Period    store.CapPeriod
}

// ErrKeyCapUnavailable is wrapped by the 503 of a capped key's reservation while the database
// cannot be reached: a key's cap is kept only in the database.
var ErrKeyCapUnavailable = errors.New("billing: a capped key's budget is kept in the database, which cannot be reached")

// KeyCapError reports that a request would take its key past the key's credit cap: the request
// needs up to NeededMicros and AvailableMicros are left of the cap in the period (what the key
// spent and what its requests in flight reserved are taken off). It unwraps to a 402
// (apierror.KindInsufficientCredit), so the HTTP edge answers it in the route's envelope.
type KeyCapError struct {
	NeededMicros, AvailableMicros, CapMicros int64
	Period                                   store.CapPeriod
}

// Error implements error.
func (e *KeyCapError) Error() string {
	return fmt.Sprintf("billing: the key's credit cap: the request needs up to %d micro-units and %d of the cap are left",
		e.NeededMicros, e.AvailableMicros)
}

// Unwrap exposes the client-facing 402.
func (e *KeyCapError) Unwrap() error {
	period := ""
	switch e.Period {
	case store.CapPeriodDaily:
		period = " a day (UTC)"
	case store.CapPeriodMonthly:
		period = " a month (UTC)"
	}
	return &apierror.Error{Kind: apierror.KindInsufficientCredit, Message: fmt.Sprintf(
		"not enough of the API key's credit cap is left for this request: it needs up to %d micro-units (%s) and %d (%s) of the key's cap of %d (%s)%s are left. %s",
		e.NeededMicros, apierror.USD(e.NeededMicros), e.AvailableMicros, apierror.USD(e.AvailableMicros),
		e.CapMicros, apierror.USD(e.CapMicros), period, apierror.WorstCaseNote)}
}

// keyHold is the part of a Reservation held against its key's cap: a row of key_reservations.
type keyHold struct {
	id     uuid.UUID
	period time.Time
	kind   store.CapPeriod
	// capMicros is the key's cap when the reservation was made: a bill beyond the reservation
	// is charged within what it has free (keySettlement.extra).
	capMicros int64
}

// keyCaps is the meter's state of key reservations: how many of this process's are in the
// database (the maintenance renews their leases while there are any), and the settlements the
// database did not take, retried by the maintenance.
type keyCaps struct {
	live atomic.Int64

	mu      sync.Mutex
	pending []keySettlement

	// lastRenew and lastReap belong to the maintenance goroutine.
	lastRenew, lastReap time.Time
}

type keySettlement struct {
	keyID     uuid.UUID
	requestID string
	cost      int64
	// extra is what the request cost beyond its reservation and its account's hold covers:
	// the settlement adds as much of it to the key's spend as the cap has free
	// (store.SettleKeyReservationBeyond), and capMicros is that cap.
	extra, capMicros int64
	// release: the request is billed nothing under its request id (Release, or a record
	// written under an id of its own): its row is released (store.ReleaseKeyReservation), not
	// marked as a request id counted, so that a retry with the id is counted.
	release bool
}

// write writes the settlement to the database and returns the part of its extra added to the
// key's spend.
func (s keySettlement) write(ctx context.Context, st *store.Store) (int64, error) {
	var err error
	switch {
	case s.release:
		_, err = st.ReleaseKeyReservation(ctx, s.keyID, s.requestID)
	case s.extra > 0:
		return st.SettleKeyReservationBeyond(ctx, s.keyID, s.requestID, s.cost, s.extra, s.capMicros)
	default:
		_, err = st.SettleKeyReservation(ctx, s.keyID, s.requestID, s.cost)
	}
	return 0, err
}

// keySettledRetention is how long an ended key reservation's row is kept: a settled one as the
// marker that its request id was counted, longer than any retry of a request id can come, and
// a reaped one for the usage record, replayed from a spill file, that settles it
// (store.KeyReservationRetention).
const keySettledRetention = store.KeyReservationRetention

// ReserveForKey is Reserve for a request made with a key that has a credit cap (nil: none, and
// it is Reserve): the worst case is reserved against the account's credit as Reserve does and,
// in one more database round trip, against the key's budget in the cap period that holds now.
// When the key's spend in the period, the reservations of its requests in flight (from every
// process) and the worst case would pass the cap, nothing is reserved and the error is a
// *KeyCapError (a 402). Settle adds the real cost to the key's spend and Release returns the
// worst case, each in a round trip; a reservation whose process dies returns to the budget when
// its lease expires. While the database cannot be reached a capped key's request is refused with
// a 503 (apierror.Unavailable wrapping ErrKeyCapUnavailable).
//
// The key's budget counts a request id once, as the ledger does: a retry with the request id of
// a request in flight or of one whose process died takes its reservation over (the amount is
// reserved anew within the cap, the old one no longer counting), and a retry of a request
// settled already reserves nothing against the key and adds nothing to its spend.
func (m *Meter) ReserveForKey(ctx context.Context, accountID uuid.UUID, requestID string, worstCaseMicros int64, cap *KeyCap) (*Reservation, error) {
	if cap == nil {
		return m.Reserve(ctx, accountID, requestID, worstCaseMicros)
	}
	if m.dbDown() {
		return nil, apierror.Unavailable("the database", ErrKeyCapUnavailable)
	}
	r, err := m.Reserve(ctx, accountID, requestID, worstCaseMicros)
	if err != nil || r.amount == 0 {
		// A request that can cost nothing needs nothing of the cap.
		return r, err
	}
	if r.onCredit {
		// Served on credit: the database is away, and so is the key's budget.
		r.Release()
		return nil, apierror.Unavailable("the database", ErrKeyCapUnavailable)
	}
	h := &keyHold{id: cap.KeyID, period: cap.Period.Start(r.startedAt), kind: cap.Period, capMicros: cap.CapMicros}
	req := store.KeyReservationRequest{KeyID: cap.KeyID, PeriodStart: h.period, CapMicros: cap.CapMicros,
		AmountMicros: r.amount, RequestID: requestID, Holder: m.opts.Holder, Lease: m.opts.Lease}
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
		kr, err := m.st.ReserveKeyBudget(cctx, req)
		cancel()
		if err != nil {
			r.Release()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if m.noteDBError(err) {
				return nil, apierror.Unavailable("the database", errors.Join(ErrKeyCapUnavailable, err))
			}
			return nil, fmt.Errorf("billing: reserve against the key's cap: %w", err)
		}
		m.noteDBUp()
		if kr.Settled {
			// A retry of a request whose cost the key's budget counted already (the ledger
			// bills it once too): nothing is reserved and there is nothing to settle. Its
			// record, if the ledger bills it rather than the first attempt's (waiting in a
			// dead process's spill file), makes the key count it instead (SettleKey).
			r.keyCounted, r.keyID = true, cap.KeyID
			return r, nil
		}
		if kr.Reserved {
			m.keys.live.Add(1)
			r.key, r.keyID = h, cap.KeyID
			return r, nil
		}
		if attempt == 0 {
			// Reservations of a process that is gone may hold the rest of the cap: return the
			// expired ones of this key, and try once more if there were any.
			cctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
			n, err := m.st.ReapKeyReservations(cctx, cap.KeyID)
			cancel()
			if err == nil && n > 0 {
				continue
			}
		}
		r.Release()
		return nil, &KeyCapError{NeededMicros: r.amount, AvailableMicros: max(cap.CapMicros-kr.SpentMicros-kr.HeldMicros, 0),
			CapMicros: cap.CapMicros, Period: cap.Period}
	}
}

// settleKey ends the key part of a reservation, adding cost to the key's spend, and as much of
// extra (what the request cost beyond its reservation, which its account's hold covers) as the
// key's cap has free; it returns the part of extra added. release ends
// one whose request is billed nothing under its request id (Release, or an attempt whose record
// went under an id of its own, as an in-process call's undelivered attempt does), which counts
// nothing and leaves the request id free for a retry (store.ReleaseKeyReservation), as the
// ledger leaves it. A settlement the database does not take is kept and retried by the
// maintenance (the reservation's lease is renewed meanwhile) without its extra (the request is
// charged none of it), as a settlement at cost, which counts once: it settles a reservation
// the failed write left unsettled and leaves alone one it settled. A write whose COMMIT went
// unanswered may have settled it with part of the extra, which nobody was charged; the writer
// of the request's usage record, enqueued after this returns, takes that back: it makes the
// reservation count what the ledger billed for the request id (store.UsageRecord.SettleKey,
// store.SettleKeyReservationsAtBill) in the transaction that writes the record, and the
// reservation's row, locked by the settlement until its transaction ends, makes it wait for
// the settlement's outcome. The retries are kept in memory only: the usage record is what
// outlives the process, in the spill file (docs/billing.md). It never waits on the request's
// context: a client that went away is billed all the same.
func (m *Meter) settleKey(r *Reservation, cost, extra int64, release bool) int64 {
	s := keySettlement{keyID: r.key.id, requestID: r.requestID, cost: cost, release: release, extra: extra, capMicros: r.key.capMicros}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.WriteTimeout)
	charged, err := s.write(ctx, m.st)
	cancel()
	if err == nil {
		m.keys.live.Add(-1)
		return charged
	}
	m.noteDBError(err)
	s.extra = 0
	m.keys.mu.Lock()
	m.keys.pending = append(m.keys.pending, s)
	m.keys.mu.Unlock()
	return 0
}

// retryKeySettlements writes the key settlements the database did not take, in order, until
// one fails.
func (m *Meter) retryKeySettlements(ctx context.Context) error {
	m.keys.mu.Lock()
	defer m.keys.mu.Unlock()
	for len(m.keys.pending) > 0 {
		s := m.keys.pending[0]
		cctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
		_, err := s.write(cctx, m.st)
		cancel()
		if err != nil {
			m.noteDBError(err)
			return fmt.Errorf("billing: settle key reservations: %w (%d waiting)", err, len(m.keys.pending))
		}
		m.keys.pending = m.keys.pending[1:]
		m.keys.live.Add(-1)
	}
	m.keys.pending = nil
	return nil
}

// maintainKeys is the key reservations' part of the maintenance: it retries the settlements the
// database did not take, renews the leases of this process's reservations every Lease/6 while
// it has any, and every ReapInterval returns the expired reservations of every process (and
// deletes the rows that ended longer than keySettledRetention ago).
func (m *Meter) maintainKeys(ctx context.Context, now time.Time) {
	if err := m.retryKeySettlements(ctx); err != nil && ctx.Err() == nil {
		m.opts.Logger.Debug("billing: settle key reservations", "err", err)
	}
	if m.keys.live.Load() > 0 && now.Sub(m.keys.lastRenew) >= m.opts.Lease/6 {
		m.keys.lastRenew = now
		cctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
		_, err := m.st.RenewKeyReservations(cctx, m.opts.Holder, m.opts.Lease)
		cancel()
		if err != nil && ctx.Err() == nil && !m.noteDBError(err) {
			m.opts.Logger.Error("billing: renew key reservations", "err", err)
		}
	}
	if now.Sub(m.keys.lastReap) >= m.opts.ReapInterval {
		m.keys.lastReap = now
		cctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
		_, err := m.st.ReapKeyReservations(cctx, uuid.Nil)
		if err == nil {
			_, err = m.st.DeleteStaleKeyReservations(cctx, keySettledRetention)
		}
		cancel()
		if err != nil && ctx.Err() == nil && !m.noteDBError(err) {
			m.opts.Logger.Error("billing: reap key reservations", "err", err)
		}
	}
}

// ReapExpiredKeyReservations returns the key reservations, of any process, whose lease has
// expired to their keys' budgets (the maintenance does it every ReapInterval).
func (m *Meter) ReapExpiredKeyReservations(ctx context.Context) (int64, error) {
	return m.st.ReapKeyReservations(ctx, uuid.Nil)
}

// KeyBudgetReading is where a capped key stands in the cap period that holds now.
type KeyBudgetReading struct {
	// PeriodStart is the start of the period (the Unix epoch for the period none); PeriodEnd
	// is when the next one starts (zero for none).
	PeriodStart, PeriodEnd time.Time
	// SpentMicros is what the key's settled requests cost in the period; ReservedMicros is
	// what its requests in flight, from every process, hold of the cap.
	SpentMicros, ReservedMicros int64
	// RemainingMicros is what the cap leaves (at least 0): a request whose worst case is more
	// is refused with a *KeyCapError, whose AvailableMicros is the same figure.
	RemainingMicros int64
}

// KeyBudget reads the key's budget in the cap period that holds now, by the meter's clock, as
// ReserveForKey reads it: the cap less the key's spend and its reservations in the period. While
// the database cannot be reached it is a 503 (apierror.Unavailable wrapping
// ErrKeyCapUnavailable), as a capped key's request is.
func (m *Meter) KeyBudget(ctx context.Context, cap KeyCap) (KeyBudgetReading, error) {
	start := cap.Period.Start(m.now())
	b, err := m.st.GetKeyBudget(ctx, cap.KeyID, start)
	if err != nil {
		return KeyBudgetReading{}, keyBudgetError(err)
	}
	return budgetReading(cap, start, b), nil
}

// KeyBudgets is KeyBudget for several keys (the Keys page's), read in one statement, keyed by
// key id: each reading is the one KeyBudget gives its key.
func (m *Meter) KeyBudgets(ctx context.Context, caps []KeyCap) (map[uuid.UUID]KeyBudgetReading, error) {
	now := m.now()
	periods := make(map[uuid.UUID]time.Time, len(caps))
	for _, c := range caps {
		periods[c.KeyID] = c.Period.Start(now)
	}
	budgets, err := m.st.GetKeyBudgets(ctx, periods)
	if err != nil {
		return nil, keyBudgetError(err)
	}
	out := make(map[uuid.UUID]KeyBudgetReading, len(caps))
	for _, c := range caps {
		out[c.KeyID] = budgetReading(c, periods[c.KeyID], budgets[c.KeyID])
	}
	return out, nil
}

// keyBudgetError is the error of a failed read of key budgets: a 503 while the database cannot
// be reached (apierror.Unavailable wrapping ErrKeyCapUnavailable), else the error said.
func keyBudgetError(err error) error {
	if store.Unavailable(err) {
		return apierror.Unavailable("the database", errors.Join(ErrKeyCapUnavailable, err))
	}
	return fmt.Errorf("billing: read the key's budget: %w", err)
}

// budgetReading is where the capped key stands in the period that starts at start, where its
// budget is b.
func budgetReading(cap KeyCap, start time.Time, b store.KeyBudget) KeyBudgetReading {
	return KeyBudgetReading{PeriodStart: start, PeriodEnd: periodEnd(cap.Period, start),
		SpentMicros: b.SpentMicros, ReservedMicros: b.ReservedMicros,
		RemainingMicros: max(cap.CapMicros-b.SpentMicros-b.ReservedMicros, 0)}
}

// periodEnd is the start of the cap period after the one that starts at start (zero for the
// period none, which never ends).
func periodEnd(p store.CapPeriod, start time.Time) time.Time {
	switch p {
	case store.CapPeriodDaily:
		return start.AddDate(0, 0, 1)
	case store.CapPeriodMonthly:
		return start.AddDate(0, 1, 0)
	}
	return time.Time{}
}
