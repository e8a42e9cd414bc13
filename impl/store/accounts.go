package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// Account is one tenant.
type Account struct {
	ID            uuid.UUID
	Name          string
	Plan          string
	BalanceMicros int64
	CreatedAt     time.Time
}

func accountFromRow(r db.Account) Account {
	return Account{ID: r.ID, Name: r.Name, Plan: r.Plan, BalanceMicros: r.BalanceMicros, CreatedAt: r.CreatedAt}
}

// CreateAccount creates an account on a plan. A second account with the same name, or with one
// that differs from it only in letter case, is ErrConflict.
func (s *Store) CreateAccount(ctx context.Context, name, plan string) (Account, error) {
	row, err := s.q.CreateAccount(ctx, db.CreateAccountParams{Name: name, Plan: plan})
	if isUniqueViolation(err) {
		return Account{}, ErrConflict
	}
	if err != nil {
		return Account{}, err
	}
	return accountFromRow(row), nil
}

// GetAccount returns the account with id, or ErrNotFound.
func (s *Store) GetAccount(ctx context.Context, id uuid.UUID) (Account, error) {
	row, err := s.q.GetAccount(ctx, id)
	if err != nil {
		return Account{}, notFound(err)
	}
	return accountFromRow(row), nil
}

// GetAccountByName returns the account called name, or ErrNotFound.
func (s *Store) GetAccountByName(ctx context.Context, name string) (Account, error) {
	row, err := s.q.GetAccountByName(ctx, name)
	if err != nil {
		return Account{}, notFound(err)
	}
	return accountFromRow(row), nil
}

// GetAccountByNameAnyCase returns the account whose name is name but for letter case (names
// are unique that way), or ErrNotFound.
func (s *Store) GetAccountByNameAnyCase(ctx context.Context, name string) (Account, error) {
	row, err := s.q.GetAccountByNameAnyCase(ctx, name)
	if err != nil {
		return Account{}, notFound(err)
	}
	return accountFromRow(row), nil
}

// ListAccounts returns every account, oldest first.
func (s *Store) ListAccounts(ctx context.Context) ([]Account, error) {
	rows, err := s.q.ListAccounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Account, len(rows))
	for i, r := range rows {
		out[i] = accountFromRow(r)
	}
	return out, nil
}

// Balance returns the account's balance in micro-units, or ErrNotFound.
func (s *Store) Balance(ctx context.Context, accountID uuid.UUID) (int64, error) {
	b, err := s.q.GetAccountBalance(ctx, accountID)
	if err != nil {
		return 0, notFound(err)
	}
	return b, nil
}
