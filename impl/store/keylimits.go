package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate/tollgate/gen/db"
)

// CapPeriod is how often a key's credit cap starts again: never, every UTC day or every UTC
// calendar month.
type CapPeriod string

// The cap periods.
const (
	CapPeriodNone    CapPeriod = "none"
	CapPeriodDaily   CapPeriod = "daily"
	CapPeriodMonthly CapPeriod = "monthly"
)

// ParseCapPeriod reads a cap period ("" is none).
func ParseCapPeriod(s string) (CapPeriod, error) {
	switch p := CapPeriod(s); p {
	case "", CapPeriodNone:
		return CapPeriodNone, nil
	case CapPeriodDaily, CapPeriodMonthly:
		return p, nil
	}
	return "", fmt.Errorf("cap period %q: want none, daily or monthly", s)
}

// Start is the start of the period that holds t: the UTC day or month of t, or the Unix epoch
// for the period none (one period for ever). The database computes the same start when it
// lists keys with their spend.
func (p CapPeriod) Start(t time.Time) time.Time {
	t = t.UTC()
	switch p {
	case CapPeriodDaily:
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	case CapPeriodMonthly:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Unix(0, 0).UTC()
}

// KeyLimits are the limits of a key that SetAPIKeyLimits sets, all at once.
type KeyLimits struct {
	RPMLimit        int
	ExpiresAt       *time.Time
	CreditCapMicros *int64
	CapPeriod       CapPeriod
	Models          []string
}

// KeyWithSpend is a key with what it spent in its current cap period and when it was last used,
// both read from the usage records.
type KeyWithSpend struct {
	APIKey
	// PeriodStart is the start of the key's current cap period (the epoch for none).
	PeriodStart time.Time
	// PeriodSpentMicros is the sum of the costs of the key's usage records that started in the
	// period (the period none: ever).
	PeriodSpentMicros int64
	// LastRequestAt is the start of the key's newest usage record (nil: none yet).
	LastRequestAt *time.Time
}

// GetAccountAPIKey returns the account's key with id, revoked or not; another account's key is
// ErrNotFound.
func (s *Store) GetAccountAPIKey(ctx context.Context, accountID, id uuid.UUID) (APIKey, error) {
	row, err := s.q.GetAccountAPIKey(ctx, db.GetAccountAPIKeyParams{ID: id, AccountID: accountID})
	if err != nil {
		return APIKey{}, notFound(err)
	}
	return keyFromRow(row), nil
}

// ListAPIKeysWithSpend returns the account's keys, oldest first, revoked ones included, each with
// its spend in the cap period that holds now and its last use.
func (s *Store) ListAPIKeysWithSpend(ctx context.Context, accountID uuid.UUID, now time.Time) ([]KeyWithSpend, error) {
	rows, err := s.q.ListAPIKeysWithSpend(ctx, db.ListAPIKeysWithSpendParams{Now: now, AccountID: accountID})
	if err != nil {
		return nil, err
	}
	out := make([]KeyWithSpend, len(rows))
	for i, r := range rows {
		out[i] = KeyWithSpend{
			APIKey:      keyFromRow(r.ApiKey),
			PeriodStart: r.PeriodStart, PeriodSpentMicros: r.PeriodSpentMicros,
		}
		if r.LastRequestAt.Unix() > 0 {
			at := r.LastRequestAt
			out[i].LastRequestAt = &at
		}
	}
	return out, nil
}

// KeysRevoked runs in the transaction that revokes or disables keys of the account, after the
// change, with their ids (the agents end the sessions started with them); its error undoes it.
// The agents' callbacks never undo a revocation: their ending runs in a savepoint and a
// failure of it is left to their sweep (agent.Service.endOrLeave), so they return an error only
// when the transaction itself cannot go on.
// Every store function that revokes or disables keys takes one (impl/store's
// TestEveryRevocationTakesACallback).
type KeysRevoked func(tx *AgentTx, keys []uuid.UUID) error

// RevokeAccountAPIKey revokes the account's key with id, for ever; every gateway process is
// told at once. Another account's key, or one revoked already, is ErrNotFound. then (nil:
// nothing) runs in the same transaction after the revocation, with the key's id (the agents end
// the sessions started with it); its error undoes the revocation.
func (s *Store) RevokeAccountAPIKey(ctx context.Context, accountID, id uuid.UUID, then KeysRevoked) (APIKey, error) {
	var k APIKey
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		row, err := s.q.WithTx(tx).RevokeAccountAPIKey(ctx, db.RevokeAccountAPIKeyParams{ID: id, AccountID: accountID})
		if err != nil {
			return notFound(err)
		}
		k = keyFromRow(row)
		return afterRevoke(tx, s.q, []APIKey{k}, then)
	})
	if err != nil {
		return APIKey{}, err
	}
	return k, nil
}

// RevokeAccountAPIKeys revokes every key of the account that is not revoked yet and returns
// them. then (nil: nothing) runs in the same transaction after the revocation, with the
// revoked keys' ids; its error undoes the revocation.
func (s *Store) RevokeAccountAPIKeys(ctx context.Context, accountID uuid.UUID, then KeysRevoked) ([]APIKey, error) {
	var out []APIKey
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := s.q.WithTx(tx).RevokeAccountAPIKeys(ctx, accountID)
		if err != nil {
			return err
		}
		out = make([]APIKey, len(rows))
		for i, r := range rows {
			out[i] = keyFromRow(r)
		}
		return afterRevoke(tx, s.q, out, then)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// afterRevoke runs then (when set and keys were revoked or disabled) in tx with the keys' ids.
func afterRevoke(tx pgx.Tx, q *db.Queries, keys []APIKey, then KeysRevoked) error {
	if then == nil || len(keys) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return then(newAgentTx(q, tx), ids)
}

// SetAPIKeyDisabled disables or enables the account's key with id (reversible, unlike
// revocation); every gateway process is told at once. Another account's key, or a revoked one,
// is ErrNotFound. then (nil: nothing) runs in the same transaction after the change, with the
// key's id (the agents end the sessions started with a key disabled); its error undoes it.
func (s *Store) SetAPIKeyDisabled(ctx context.Context, accountID, id uuid.UUID, disabled bool, then KeysRevoked) (APIKey, error) {
	var k APIKey
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		row, err := s.q.WithTx(tx).SetAPIKeyDisabled(ctx, db.SetAPIKeyDisabledParams{Disabled: disabled, ID: id, AccountID: accountID})
		if err != nil {
			return notFound(err)
		}
		k = keyFromRow(row)
		return afterRevoke(tx, s.q, []APIKey{k}, then)
	})
	if err != nil {
		return APIKey{}, err
	}
	return k, nil
}

// SetAPIKeyLimits sets every limit of the account's key with id; every gateway process is told
// at once. Another account's key, or a revoked one, is ErrNotFound.
//
// A credit cap counts what the key spent in the period that holds now, whenever the cap was
// set: in the same transaction, the budget of that period is raised to the cost of the key's
// usage records that started in it (trial h12 D1: a cap put on a key that had spent, or a
// daily cap made monthly, started the period's budget at 0 and let the key spend past it).
func (s *Store) SetAPIKeyLimits(ctx context.Context, accountID, id uuid.UUID, l KeyLimits) (APIKey, error) {
	if l.CapPeriod == "" {
		l.CapPeriod = CapPeriodNone
	}
	var row db.ApiKey
	err := s.inTx(ctx, func(q *db.Queries) error {
		var err error
		row, err = q.SetAPIKeyLimits(ctx, db.SetAPIKeyLimitsParams{
			RpmLimit: int32(l.RPMLimit), ExpiresAt: l.ExpiresAt, CreditCapMicros: l.CreditCapMicros,
			CapPeriod: string(l.CapPeriod), Models: l.Models, ID: id, AccountID: accountID,
		})
		if err != nil || l.CreditCapMicros == nil {
			return err
		}
		return q.SeedKeyBudgetSpend(ctx, db.SeedKeyBudgetSpendParams{KeyID: id, PeriodStart: l.CapPeriod.Start(time.Now())})
	})
	if err != nil {
		return APIKey{}, notFound(err)
	}
	return keyFromRow(row), nil
}

// KeyReservationRequest asks to reserve AmountMicros of a capped key's budget in the period
// that starts at PeriodStart, for one request, held by Holder for Lease.
type KeyReservationRequest struct {
	KeyID        uuid.UUID
	PeriodStart  time.Time
	CapMicros    int64
	AmountMicros int64
	RequestID    string
	Holder       string
	Lease        time.Duration
}

// KeyReservation is the answer of ReserveKeyBudget: whether the amount was reserved, and the
// budget's spent and reserved amounts as the statement saw them (before the reservation).
type KeyReservation struct {
	Reserved                bool
	SpentMicros, HeldMicros int64
	// Settled says that the request id was settled for the key already (a retry of a request
	// counted once): Reserved is true, nothing was reserved, and the request needs no settlement.
	Settled bool
}

// keyReservationAttempts bounds the rounds of ReserveKeyBudget between its fast path and the
// takeover (a row that comes and goes between them, a deadlock PostgreSQL broke).
const keyReservationAttempts = 3

// errKeyCapRefused rolls a takeover that the cap refuses back.
var errKeyCapRefused = errors.New("store: the key's cap refuses the takeover")

// ReserveKeyBudget reserves a request's worst case against its key's cap, in one statement that
// refuses (Reserved false) when the key's spend in the period plus its reservations plus the
// amount would pass the cap. Concurrent reservations, from any process, never pass it together.
//
// A key's budget counts a request id once, as the ledger does: a request id that has a
// reservation row of the key already (a retry of the request, from this process or another)
// takes that row over, in one transaction that locks it: a live or reaped reservation becomes
// the holder's, with a fresh lease, the new amount (within the cap, its old amount no longer
// counting) and the new period; a settled one reserves nothing (Settled).
func (s *Store) ReserveKeyBudget(ctx context.Context, r KeyReservationRequest) (KeyReservation, error) {
	for attempt := 1; ; attempt++ {
		row, err := s.q.ReserveKeyBudget(ctx, db.ReserveKeyBudgetParams{
			KeyID: r.KeyID, PeriodStart: r.PeriodStart, AmountMicros: r.AmountMicros, CapMicros: r.CapMicros,
			RequestID: r.RequestID, Holder: r.Holder, LeaseMillis: leaseMillis(r.Lease),
		})
		switch {
		case err == nil && !row.Existing:
			return KeyReservation{Reserved: row.Reserved, SpentMicros: row.SpentMicros, HeldMicros: row.HeldMicros}, nil
		case err == nil, isUniqueViolation(err):
			// The request id has a row: take it over.
			kr, found, err := s.takeOverKeyReservation(ctx, r)
			if err == nil && found {
				return kr, nil
			}
			if err != nil && (!isDeadlock(err) || attempt >= keyReservationAttempts) {
				return KeyReservation{}, err
			}
		case !isDeadlock(err):
			return KeyReservation{}, err
		}
		if attempt >= keyReservationAttempts {
			if err == nil {
				err = errors.New("the reservation row keeps changing")
			}
			return KeyReservation{}, fmt.Errorf("store: reserve against the key's cap: %w", err)
		}
	}
}

// takeOverKeyReservation is ReserveKeyBudget for a request id that has a row of the key: found
// is false when the row is gone (the caller tries the fast path again).
func (s *Store) takeOverKeyReservation(ctx context.Context, r KeyReservationRequest) (kr KeyReservation, found bool, err error) {
	err = s.inTx(ctx, func(q *db.Queries) error {
		kr, found = KeyReservation{}, false
		row, err := q.LockKeyReservation(ctx, db.LockKeyReservationParams{KeyID: r.KeyID, RequestID: r.RequestID})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		if row.SettledAt != nil {
			kr = KeyReservation{Reserved: true, Settled: true}
			return nil
		}
		// The row's amount (0 once reaped) is in its period's reserved_micros: it is replaced by
		// the new amount, or taken out there when the retry counts in another period.
		old := row.AmountMicros
		if !row.PeriodStart.Equal(r.PeriodStart) {
			if old > 0 {
				if err := q.ReturnKeyBudgetReservation(ctx, db.ReturnKeyBudgetReservationParams{
					AmountMicros: old, KeyID: r.KeyID, PeriodStart: row.PeriodStart}); err != nil {
					return err
				}
			}
			old = 0
		}
		n, err := q.AdjustKeyBudgetReservation(ctx, db.AdjustKeyBudgetReservationParams{
			KeyID: r.KeyID, PeriodStart: r.PeriodStart, NewMicros: r.AmountMicros, CapMicros: r.CapMicros, OldMicros: old})
		if err != nil {
			return err
		}
		if n == 0 {
			b, err := q.GetKeyBudget(ctx, db.GetKeyBudgetParams{KeyID: r.KeyID, PeriodStart: r.PeriodStart})
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			// What the request's own reservation holds is not in the way of its retry.
			kr = KeyReservation{SpentMicros: b.SpentMicros, HeldMicros: max(b.ReservedMicros-old, 0)}
			return errKeyCapRefused
		}
		kr = KeyReservation{Reserved: true}
		return q.TakeOverKeyReservation(ctx, db.TakeOverKeyReservationParams{
			PeriodStart: r.PeriodStart, AmountMicros: r.AmountMicros, Holder: r.Holder, LeaseMillis: leaseMillis(r.Lease),
			KeyID: r.KeyID, RequestID: r.RequestID})
	})
	if errors.Is(err, errKeyCapRefused) {
		return kr, true, nil
	}
	if err != nil {
		return KeyReservation{}, false, err
	}
	return kr, found, nil
}

// isDeadlock reports whether err is PostgreSQL's deadlock_detected (the transaction was rolled
// back to break a deadlock; a retry succeeds).
func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

// SettleKeyReservation ends a key reservation: what it held (nothing if it was reaped) leaves the
// budget and costMicros is added to the budget's spend. The row stays, marked
// settled, until DeleteStaleKeyReservations. It reports whether the reservation was still
// unsettled: settling twice, or settling a retry of a request id counted already, counts once.
func (s *Store) SettleKeyReservation(ctx context.Context, keyID uuid.UUID, requestID string, costMicros int64) (bool, error) {
	n, err := s.q.SettleKeyReservation(ctx, db.SettleKeyReservationParams{KeyID: keyID, RequestID: requestID, CostMicros: costMicros})
	return n > 0, err
}

// SettleKeyReservationBeyond is SettleKeyReservation for a request whose bill passed its
// reservation (its input estimate passed by text made to be dense): costMicros, at most the
// reservation, is added to the spend with as much of extraMicros as the key's cap of capMicros
// still has free in the reservation's period: the cap less the budget's spend, less the other
// reservations in flight, less costMicros. The reservation and its budget are locked for the
// time of the read and the write, so concurrent settlements and reservations, from any
// process, never take the key past its cap together. It returns the part of extraMicros added
// (0 when the reservation was settled already, which counts nothing). A settlement whose
// COMMIT goes unanswered may hold the part of extraMicros it added while its caller charged
// none of it: the usage writer brings the reservation to what the ledger billed for the
// request id (SettleKeyReservationsAtBill), and the reservation's lock, held until this
// transaction ends, makes that write wait for the settlement's outcome.
func (s *Store) SettleKeyReservationBeyond(ctx context.Context, keyID uuid.UUID, requestID string, costMicros, extraMicros, capMicros int64) (int64, error) {
	var charged int64
	err := s.inTx(ctx, func(q *db.Queries) error {
		charged = 0
		row, err := q.LockKeyReservation(ctx, db.LockKeyReservationParams{KeyID: keyID, RequestID: requestID})
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && row.SettledAt != nil) {
			return nil
		}
		if err != nil {
			return err
		}
		b, err := q.LockKeyBudget(ctx, db.LockKeyBudgetParams{KeyID: keyID, PeriodStart: row.PeriodStart})
		switch {
		case err == nil:
			// The reservation's own amount (0 once reaped) is in reserved_micros: it is what
			// the settlement ends, not another request's.
			free := capMicros - b.SpentMicros - (b.ReservedMicros - row.AmountMicros) - costMicros
			charged = max(min(extraMicros, free), 0)
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		_, err = q.SettleKeyReservation(ctx, db.SettleKeyReservationParams{KeyID: keyID, RequestID: requestID, CostMicros: costMicros + charged})
		return err
	})
	if err != nil {
		return 0, err
	}
	return charged, nil
}

// ReleaseKeyReservation ends a key reservation whose request is billed nothing under its request
// id (it never reached an upstream, or its failed attempt's usage record went under an id of its
// own): what it held leaves the budget, nothing is added to the spend, and the row is left as a
// reaped one, not as the marker of a request id counted, so that a retry with the same request
// id (which the ledger bills) is reserved against the cap and counted. It reports whether the
// reservation was still unsettled.
func (s *Store) ReleaseKeyReservation(ctx context.Context, keyID uuid.UUID, requestID string) (bool, error) {
	n, err := s.q.ReleaseKeyReservation(ctx, db.ReleaseKeyReservationParams{KeyID: keyID, RequestID: requestID})
	return n > 0, err
}

// RenewKeyReservations extends the lease of every live key reservation of the holder and says
// how many there were.
func (s *Store) RenewKeyReservations(ctx context.Context, holder string, lease time.Duration) (int64, error) {
	return s.q.RenewKeyReservations(ctx, db.RenewKeyReservationsParams{LeaseMillis: leaseMillis(lease), Holder: holder})
}

// ReapKeyReservations returns the key reservations whose lease expired to their budgets: of one
// key, or of every key when keyID is uuid.Nil. It says how many budgets it changed.
func (s *Store) ReapKeyReservations(ctx context.Context, keyID uuid.UUID) (int64, error) {
	return s.q.ReapKeyReservations(ctx, keyID)
}

// KeyReservationRetention is how long the row of an ended key reservation is kept (the
// maintenance passes it to DeleteStaleKeyReservations): a settled one, from its settlement, as
// the marker that its request id was counted, which a retry of the request id finds and the
// usage writer moves to what the ledger billed for it; a reaped one (its process gone, or a
// release), from the end of its lease, for the usage record that settles it when it is written
// or replayed from a spill file. A record replayed later than that is billed to its account
// and not counted against its key. A retry of a request id comes within it (an agent's step is
// retried within its session's max_duration, an hour by default, and a crashed step's job is
// rescued after agents.rescue_after, 10 minutes by default), and the usage writer looks for the
// record the ledger billed for a request id among the records that started within a day more
// of the one it writes.
const KeyReservationRetention = 7 * 24 * time.Hour

// billedAttemptWindow is how far apart two attempts of a request id may have started for the
// usage writer to find the one the ledger billed (SettleKeyReservationsAtBill): it bounds the
// partitions of usage_records the look-up reaches.
const billedAttemptWindow = KeyReservationRetention + 24*time.Hour

// DeleteStaleKeyReservations deletes the reaped key reservations whose lease ended longer than
// retention ago and the settled ones (the markers that their request ids were counted) settled
// longer than retention ago, by the database's clock (KeyReservationRetention). It says how
// many rows it deleted.
func (s *Store) DeleteStaleKeyReservations(ctx context.Context, retention time.Duration) (int64, error) {
	return s.q.DeleteStaleKeyReservations(ctx, leaseMillis(retention))
}

// KeyBudget is a key's budget in one cap period.
type KeyBudget struct {
	SpentMicros, ReservedMicros int64
}

// GetKeyBudget returns the key's budget in the period that starts at periodStart (zero when the
// key has none there).
func (s *Store) GetKeyBudget(ctx context.Context, keyID uuid.UUID, periodStart time.Time) (KeyBudget, error) {
	row, err := s.q.GetKeyBudget(ctx, db.GetKeyBudgetParams{KeyID: keyID, PeriodStart: periodStart})
	if err != nil {
		if err = notFound(err); err == ErrNotFound {
			return KeyBudget{}, nil
		}
		return KeyBudget{}, err
	}
	return KeyBudget{SpentMicros: row.SpentMicros, ReservedMicros: row.ReservedMicros}, nil
}

// GetKeyBudgets returns the budgets of several keys in one statement, each key in the period
// that starts at its periods entry, keyed by key id: zero for a key that has none there, as
// GetKeyBudget gives it.
func (s *Store) GetKeyBudgets(ctx context.Context, periods map[uuid.UUID]time.Time) (map[uuid.UUID]KeyBudget, error) {
	out := make(map[uuid.UUID]KeyBudget, len(periods))
	if len(periods) == 0 {
		return out, nil
	}
	p := db.GetKeyBudgetsParams{KeyIds: make([]uuid.UUID, 0, len(periods)), PeriodStarts: make([]time.Time, 0, len(periods))}
	for id, start := range periods {
		p.KeyIds, p.PeriodStarts = append(p.KeyIds, id), append(p.PeriodStarts, start)
		out[id] = KeyBudget{}
	}
	rows, err := s.q.GetKeyBudgets(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.KeyID] = KeyBudget{SpentMicros: r.SpentMicros, ReservedMicros: r.ReservedMicros}
	}
	return out, nil
}
