package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

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
			APIKey: keyFromRow(db.ApiKey{
				ID: r.ID, AccountID: r.AccountID, Name: r.Name, KeyHash: r.KeyHash, DisplayPrefix: r.DisplayPrefix,
				DisplaySuffix: r.DisplaySuffix, RpmLimit: r.RpmLimit, CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt,
				ExpiresAt: r.ExpiresAt, DisabledAt: r.DisabledAt, CreditCapMicros: r.CreditCapMicros,
				CapPeriod: r.CapPeriod, Models: r.Models, CreatedBy: r.CreatedBy,
			}),
			PeriodStart: r.PeriodStart, PeriodSpentMicros: r.PeriodSpentMicros,
		}
		if r.LastRequestAt.Unix() > 0 {
			at := r.LastRequestAt
			out[i].LastRequestAt = &at
		}
	}
	return out, nil
}

// RevokeAccountAPIKey revokes the account's key with id, for ever; every gateway process is
// told at once. Another account's key, or one revoked already, is ErrNotFound.
func (s *Store) RevokeAccountAPIKey(ctx context.Context, accountID, id uuid.UUID) (APIKey, error) {
	row, err := s.q.RevokeAccountAPIKey(ctx, db.RevokeAccountAPIKeyParams{ID: id, AccountID: accountID})
	if err != nil {
		return APIKey{}, notFound(err)
	}
	return keyFromRow(row), nil
}

// RevokeAccountAPIKeys revokes every key of the account that is not revoked yet and returns
// them.
func (s *Store) RevokeAccountAPIKeys(ctx context.Context, accountID uuid.UUID) ([]APIKey, error) {
	rows, err := s.q.RevokeAccountAPIKeys(ctx, accountID)
	if err != nil {
		return nil, err
	}
	out := make([]APIKey, len(rows))
	for i, r := range rows {
		out[i] = keyFromRow(r)
	}
	return out, nil
}

// SetAPIKeyDisabled disables or enables the account's key with id (reversible, unlike
// revocation); every gateway process is told at once. Another account's key, or a revoked one,
// is ErrNotFound.
func (s *Store) SetAPIKeyDisabled(ctx context.Context, accountID, id uuid.UUID, disabled bool) (APIKey, error) {
	row, err := s.q.SetAPIKeyDisabled(ctx, db.SetAPIKeyDisabledParams{Disabled: disabled, ID: id, AccountID: accountID})
	if err != nil {
		return APIKey{}, notFound(err)
	}
	return keyFromRow(row), nil
}

// SetAPIKeyLimits sets every limit of the account's key with id; every gateway process is told
// at once. Another account's key, or a revoked one, is ErrNotFound.
func (s *Store) SetAPIKeyLimits(ctx context.Context, accountID, id uuid.UUID, l KeyLimits) (APIKey, error) {
	if l.CapPeriod == "" {
		l.CapPeriod = CapPeriodNone
	}
	row, err := s.q.SetAPIKeyLimits(ctx, db.SetAPIKeyLimitsParams{
		RpmLimit: int32(l.RPMLimit), ExpiresAt: l.ExpiresAt, CreditCapMicros: l.CreditCapMicros,
		CapPeriod: string(l.CapPeriod), Models: l.Models, ID: id, AccountID: accountID,
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
}

// ReserveKeyBudget reserves a request's worst case against its key's cap, in one statement that
// refuses (Reserved false) when the key's spend in the period plus its reservations plus the
// amount would pass the cap. Concurrent reservations, from any process, never pass it together.
func (s *Store) ReserveKeyBudget(ctx context.Context, r KeyReservationRequest) (KeyReservation, error) {
	row, err := s.q.ReserveKeyBudget(ctx, db.ReserveKeyBudgetParams{
		KeyID: r.KeyID, PeriodStart: r.PeriodStart, AmountMicros: r.AmountMicros, CapMicros: r.CapMicros,
		RequestID: r.RequestID, Holder: r.Holder, LeaseMillis: leaseMillis(r.Lease),
	})
	if err != nil {
		return KeyReservation{}, err
	}
	return KeyReservation{Reserved: row.Reserved, SpentMicros: row.SpentMicros, HeldMicros: row.HeldMicros}, nil
}

// SettleKeyReservation ends a key reservation: what it held (nothing if it was reaped) leaves the
// budget and costMicros (0 for a release) is added to the budget's spend. It reports whether the
// reservation was still there: settling twice counts once.
func (s *Store) SettleKeyReservation(ctx context.Context, keyID uuid.UUID, requestID string, costMicros int64) (bool, error) {
	n, err := s.q.SettleKeyReservation(ctx, db.SettleKeyReservationParams{KeyID: keyID, RequestID: requestID, CostMicros: costMicros})
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

// DeleteStaleKeyReservations deletes the reaped key reservations whose process has been gone for
// a day.
func (s *Store) DeleteStaleKeyReservations(ctx context.Context) (int64, error) {
	return s.q.DeleteStaleKeyReservations(ctx)
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
