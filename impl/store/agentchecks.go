package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gen/db"
)

// What the agents read of the rest of the gateway's data, in their own transaction when they
// have one (AgentQueries): the key or connected app a session or an approval acts for, the
// account's models, a key's budget and a turn's ledger entry.

// GetAccountAPIKey reads the account's API key with id (revoked, disabled or expired ones
// too).
func (a *AgentQueries) GetAccountAPIKey(ctx context.Context, account, id uuid.UUID) (APIKey, error) {
	k, err := a.q.GetAccountAPIKey(ctx, db.GetAccountAPIKeyParams{ID: id, AccountID: account})
	if err != nil {
		return APIKey{}, err
	}
	return keyFromRow(k), nil
}

// OAuthGrantActive reports whether the OAuth grant with id still works: not revoked, within
// its absolute lifetime, and its member still in the account (false, too, for a grant that
// does not exist).
func (a *AgentQueries) OAuthGrantActive(ctx context.Context, id uuid.UUID) (bool, error) {
	_, err := a.q.OAuthGrantActive(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// StarterRole returns the role in the account of the member who started a session on the
// console at started, "" when they are no longer in it or their membership began after started
// (removed and added back since).
func (a *AgentQueries) StarterRole(ctx context.Context, account, user uuid.UUID, started time.Time) (string, error) {
	role, err := a.q.AgentStarterRole(ctx, db.AgentStarterRoleParams{AccountID: account, UserID: user, SessionStarted: started})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return role, err
}

// AccountHasModel reports whether the account may use the model.
func (a *AgentQueries) AccountHasModel(ctx context.Context, account uuid.UUID, model string) (bool, error) {
	_, err := a.q.GetAccountModel(ctx, db.GetAccountModelParams{AccountID: account, ModelID: model})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// GetKeyBudget reads the key's budget in the cap period that starts at periodStart (no row
// when the key has none there).
func (a *AgentQueries) GetKeyBudget(ctx context.Context, key uuid.UUID, periodStart time.Time) (KeyBudget, error) {
	b, err := a.q.GetKeyBudget(ctx, db.GetKeyBudgetParams{KeyID: key, PeriodStart: periodStart})
	if err != nil {
		return KeyBudget{}, err
	}
	return KeyBudget{SpentMicros: b.SpentMicros, ReservedMicros: b.ReservedMicros}, nil
}

// LedgerAmountByKey is the amount (micro-units; a charge is negative) of the account's ledger
// entry with the idempotency key (no row when there is none).
func (a *AgentQueries) LedgerAmountByKey(ctx context.Context, account uuid.UUID, key string) (int64, error) {
	e, err := a.q.GetLedgerEntryByKey(ctx, db.GetLedgerEntryByKeyParams{AccountID: account, IdempotencyKey: key})
	if err != nil {
		return 0, err
	}
	return e.AmountMicros, nil
}
