package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gen/db"
)

// CreditHold is credit that a gateway process (the holder) has drawn from an account to reserve
// requests against without a database round trip each. A hold is not a movement of the
// balance: the account's HeldMicros is the sum of its holds, and PostgreSQL keeps it between 0
// and the balance. AmountMicros is what is still held: drawn, and neither spent by flushed
// usage nor returned. Version grows with every change of the amount (across all holds), so a
// holder can tell which of two answers about its hold is the newer.
type CreditHold struct {
	AccountID    uuid.UUID
	Holder       string
	AmountMicros int64
	Version      int64
	CreatedAt    time.Time
	ExpiresAt    time.Time
}

// Credit is an account's balance and the part of it that gateway processes hold.
type Credit struct {
	BalanceMicros int64
	HeldMicros    int64
}

// HoldRequest asks TakeCreditHold for credit.
type HoldRequest struct {
	AccountID uuid.UUID
	Holder    string
	// NeedMicros is the least the hold must grow by; when the account's available credit
	// (balance - held) is less, nothing is drawn. Zero asks for credit that no request needs
	// yet: the hold grows by at most half of what the account has left (nothing when
	// WantMicros is zero too), and the lease is renewed.
	NeedMicros int64
	// WantMicros is the chunk the holder would like; it is raised to NeedMicros when smaller.
	WantMicros int64
	// Lease is how long the hold lives unless renewed.
	Lease time.Duration
}

// HoldGrant is the outcome of TakeCreditHold.
type HoldGrant struct {
	// Granted reports whether the account could cover NeedMicros.
	Granted bool
	// GrantedMicros is what the hold grew by.
	GrantedMicros int64
	// BalanceMicros and AvailableMicros (balance - held) are the account's, before the grant.
	BalanceMicros   int64
	AvailableMicros int64
	// Hold is the holder's hold after the grant (when Granted).
	Hold CreditHold
}

// TakeCreditHold grows the holder's hold on the account in one statement, never beyond what
// the account can cover: by min(WantMicros, max(NeedMicros, available/2)) when the available
// credit covers NeedMicros, and not at all otherwise (Granted false). It renews the hold's
// lease. An unknown account is ErrNotFound.
func (s *Store) TakeCreditHold(ctx context.Context, r HoldRequest) (HoldGrant, error) {
	need := max(r.NeedMicros, 0)
	want := max(r.WantMicros, need)
	row, err := s.q.TakeCreditHold(ctx, db.TakeCreditHoldParams{
		AccountID: r.AccountID, WantMicros: want, NeedMicros: need, Holder: r.Holder, LeaseMillis: leaseMillis(r.Lease),
	})
	if err != nil {
		return HoldGrant{}, notFound(err)
	}
	g := HoldGrant{
		Granted: row.Granted, BalanceMicros: row.BalanceMicros, AvailableMicros: row.AvailableMicros,
	}
	if row.Granted {
		g.GrantedMicros = row.GrantedMicros
		g.Hold = CreditHold{
			AccountID: r.AccountID, Holder: r.Holder, AmountMicros: row.HoldMicros, Version: row.HoldVersion, ExpiresAt: row.ExpiresAt,
		}
	}
	return g, nil
}

// RenewCreditHolds extends the lease of every hold of the holder by lease from now and returns
// the holds that are still there (AccountID, Holder and ExpiresAt only): a hold of the holder
// that is missing was released, by the holder or by a reaper.
func (s *Store) RenewCreditHolds(ctx context.Context, holder string, lease time.Duration) ([]CreditHold, error) {
	rows, err := s.q.RenewCreditHolds(ctx, db.RenewCreditHoldsParams{LeaseMillis: leaseMillis(lease), Holder: holder})
	if err != nil {
		return nil, err
	}
	out := make([]CreditHold, len(rows))
	for i, r := range rows {
		out[i] = CreditHold{AccountID: r.AccountID, Holder: holder, ExpiresAt: r.ExpiresAt}
	}
	return out, nil
}

// LiveCreditHolders counts the holders (gateway processes) with a live credit hold on any
// account.
func (s *Store) LiveCreditHolders(ctx context.Context) (int, error) {
	n, err := s.q.CountLiveCreditHolders(ctx)
	return int(n), err
}

// ReleaseCreditHolds returns the holder's holds on the given accounts, or on every account when
// accountIDs is nil, to the accounts (held_micros goes down by their amounts, the hold rows go)
// and returns the holds released, with their last amounts and versions.
func (s *Store) ReleaseCreditHolds(ctx context.Context, holder string, accountIDs []uuid.UUID) ([]CreditHold, error) {
	var out []CreditHold
	err := s.inTx(ctx, func(q *db.Queries) error {
		var ids []uuid.UUID
		var err error
		if accountIDs == nil {
			ids, err = q.LockAccountsWithHoldsOf(ctx, holder)
		} else {
			ids, err = q.LockAccounts(ctx, accountIDs)
		}
		if err != nil || len(ids) == 0 {
			return err
		}
		rows, err := q.DeleteHolderHolds(ctx, db.DeleteHolderHoldsParams{Holder: holder, AccountIds: ids})
		if err != nil {
			return err
		}
		out = make([]CreditHold, len(rows))
		for i, r := range rows {
			out[i] = CreditHold{AccountID: r.AccountID, Holder: r.Holder, AmountMicros: r.AmountMicros, Version: r.Version, ExpiresAt: r.ExpiresAt}
		}
		return nil
	})
	return out, err
}

// ShrinkCreditHold gives back amount micro-units of the holder's hold on the account, in one
// transaction that locks the account first (as every writer of its holds does): the hold and
// the account's held credit go down by amount. It returns the hold after it (amount and
// version) and true, or false when the holder has no hold of at least amount on the account,
// in which case nothing changed.
func (s *Store) ShrinkCreditHold(ctx context.Context, holder string, accountID uuid.UUID, amount int64) (CreditHold, bool, error) {
	var out CreditHold
	shrunk := false
	err := s.inTx(ctx, func(q *db.Queries) error {
		if _, err := q.LockAccounts(ctx, []uuid.UUID{accountID}); err != nil {
			return err
		}
		r, err := q.ShrinkHolderHold(ctx, db.ShrinkHolderHoldParams{AmountMicros: amount, AccountID: accountID, Holder: holder})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := q.ReturnHeldCredit(ctx, db.ReturnHeldCreditParams{AmountMicros: amount, AccountID: accountID}); err != nil {
			return err
		}
		out = CreditHold{AccountID: r.AccountID, Holder: r.Holder, AmountMicros: r.AmountMicros, Version: r.Version, ExpiresAt: r.ExpiresAt}
		shrunk = true
		return nil
	})
	if err != nil {
		return CreditHold{}, false, err
	}
	return out, shrunk, nil
}

// ReapExpiredCreditHolds releases every hold, of any holder, whose lease has expired (by the
// database's clock): its holder is gone, so the credit goes back to the account. It returns
// the holds released.
func (s *Store) ReapExpiredCreditHolds(ctx context.Context) ([]CreditHold, error) {
	var out []CreditHold
	err := s.inTx(ctx, func(q *db.Queries) error {
		ids, err := q.LockAccountsWithExpiredHolds(ctx)
		if err != nil || len(ids) == 0 {
			return err
		}
		rows, err := q.DeleteExpiredHolds(ctx, ids)
		if err != nil {
			return err
		}
		out = make([]CreditHold, len(rows))
		for i, r := range rows {
			out[i] = CreditHold{AccountID: r.AccountID, Holder: r.Holder, AmountMicros: r.AmountMicros, Version: r.Version, ExpiresAt: r.ExpiresAt}
		}
		return nil
	})
	return out, err
}

// CreditHolds lists the holds on the account, by holder.
func (s *Store) CreditHolds(ctx context.Context, accountID uuid.UUID) ([]CreditHold, error) {
	rows, err := s.q.ListCreditHolds(ctx, accountID)
	if err != nil {
		return nil, err
	}
	out := make([]CreditHold, len(rows))
	for i, r := range rows {
		out[i] = CreditHold{
			AccountID: r.AccountID, Holder: r.Holder, AmountMicros: r.AmountMicros, Version: r.Version,
			CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		}
	}
	return out, nil
}

// AccountCredit returns the account's balance and held credit, or ErrNotFound.
func (s *Store) AccountCredit(ctx context.Context, accountID uuid.UUID) (Credit, error) {
	row, err := s.q.GetAccountCredit(ctx, accountID)
	if err != nil {
		return Credit{}, notFound(err)
	}
	return Credit{BalanceMicros: row.BalanceMicros, HeldMicros: row.HeldMicros}, nil
}

// leaseMillis is a lease in whole milliseconds, at least one.
func leaseMillis(d time.Duration) int64 {
	return max(d.Milliseconds(), 1)
}
