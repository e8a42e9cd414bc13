package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// UpstreamKey is an account's own upstream key for one configured provider, as stored: sealed
// (impl/upstreamkeys opens it), with the hint the operator tells keys apart by, who set it and
// when.
type UpstreamKey struct {
	AccountID uuid.UUID
	Provider  string
	Sealed    []byte
	Hint      string
	SetBy     string
	SetAt     time.Time
}

// SetUpstreamKey stores the account's own key for the provider, replacing the one it had.
// The gateways drop the account's cached keys at once (the change notifies the account's
// model access channel).
func (s *Store) SetUpstreamKey(ctx context.Context, k UpstreamKey) error {
	return s.q.SetAccountUpstreamKey(ctx, db.SetAccountUpstreamKeyParams{
		AccountID: k.AccountID, Provider: k.Provider, Sealed: k.Sealed, Hint: k.Hint, SetBy: k.SetBy})
}

// UpstreamKeys lists the account's own upstream keys, by provider.
func (s *Store) UpstreamKeys(ctx context.Context, account uuid.UUID) ([]UpstreamKey, error) {
	rows, err := s.q.ListAccountUpstreamKeys(ctx, account)
	if err != nil {
		return nil, err
	}
	out := make([]UpstreamKey, len(rows))
	for i, r := range rows {
		out[i] = UpstreamKey{AccountID: r.AccountID, Provider: r.Provider, Sealed: r.Sealed, Hint: r.Hint, SetBy: r.SetBy, SetAt: r.SetAt}
	}
	return out, nil
}

// RemoveUpstreamKey removes the account's own key for the provider; ErrNotFound when it had
// none.
func (s *Store) RemoveUpstreamKey(ctx context.Context, account uuid.UUID, provider string) error {
	n, err := s.q.RemoveAccountUpstreamKey(ctx, db.RemoveAccountUpstreamKeyParams{AccountID: account, Provider: provider})
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}
