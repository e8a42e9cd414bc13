// Package accounts holds the operations that manage tenants: creating accounts on a plan,
// minting and revoking API keys, granting credit and model access. The operator's CLI and the
// web application call it; request handling never does.
package accounts

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apikey"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
)

// Service manages accounts over the store, with the configured models and plans.
type Service struct {
	Store  *store.Store
	Config *config.Config
}

// NewKey is a freshly minted key: Plain is shown once and never stored.
type NewKey struct {
	Plain string
	Key   store.APIKey
}

// CreateAccount creates an account on plan, grants the plan's models and its starting credit.
func (s *Service) CreateAccount(ctx context.Context, name, plan string) (store.Account, error) {
	p, ok := s.Config.Plan(plan)
	if !ok {
		return store.Account{}, fmt.Errorf("unknown plan %q", plan)
	}
	acct, err := s.Store.CreateAccount(ctx, name, plan)
	if err != nil {
		return store.Account{}, err
	}
	for _, m := range p.Models {
		if err := s.Store.GrantModel(ctx, acct.ID, m); err != nil {
			return acct, err
		}
	}
	if p.StartingCreditMicros > 0 {
		if _, _, err := s.GrantCredit(ctx, acct.ID, p.StartingCreditMicros, "starting-credit", "starting credit of plan "+plan); err != nil {
			return acct, err
		}
	}
	return s.Store.GetAccount(ctx, acct.ID)
}

// CreateKey mints a key for the account. rpm < 0 means the plan's default cap.
func (s *Service) CreateKey(ctx context.Context, accountID uuid.UUID, name string, rpm int) (NewKey, error) {
	acct, err := s.Store.GetAccount(ctx, accountID)
	if err != nil {
		return NewKey{}, err
	}
	if rpm < 0 {
		rpm = 0
		if p, ok := s.Config.Plan(acct.Plan); ok {
			rpm = p.DefaultRPM
		}
	}
	g, err := apikey.Generate()
	if err != nil {
		return NewKey{}, err
	}
	k, err := s.Store.CreateAPIKey(ctx, store.NewAPIKey{
		AccountID: accountID, Name: name, Hash: g.Hash[:], DisplayPrefix: g.DisplayPrefix, RPMLimit: rpm,
	})
	if err != nil {
		return NewKey{}, err
	}
	return NewKey{Plain: g.Plain, Key: k}, nil
}

// GrantCredit adds micros to the account's balance as a ledger entry, once per idempotency key:
// created is false (and nothing is granted) when the key was used before.
func (s *Service) GrantCredit(ctx context.Context, accountID uuid.UUID, micros int64, idempotencyKey, note string) (e store.LedgerEntry, created bool, err error) {
	if micros <= 0 {
		return store.LedgerEntry{}, false, fmt.Errorf("a grant must be positive, got %d", micros)
	}
	if idempotencyKey == "" {
		idempotencyKey = "grant-" + uuid.NewString()
	}
	return s.Store.Append(ctx, store.LedgerChange{
		AccountID: accountID, AmountMicros: micros, Reason: store.ReasonGrant, IdempotencyKey: idempotencyKey, Note: note,
	})
}

// GrantModel lets the account use a configured model.
func (s *Service) GrantModel(ctx context.Context, accountID uuid.UUID, modelID string) error {
	if _, ok := s.Config.Model(modelID); !ok {
		return fmt.Errorf("model %q is not in the configuration", modelID)
	}
	if _, err := s.Store.GetAccount(ctx, accountID); err != nil {
		return err
	}
	return s.Store.GrantModel(ctx, accountID, modelID)
}

// RevokeModel withdraws a model from the account.
func (s *Service) RevokeModel(ctx context.Context, accountID uuid.UUID, modelID string) error {
	return s.Store.RevokeModel(ctx, accountID, modelID)
}

// ResolveAccount finds an account by id or by name.
func (s *Service) ResolveAccount(ctx context.Context, ref string) (store.Account, error) {
	if id, err := uuid.Parse(ref); err == nil {
		return s.Store.GetAccount(ctx, id)
	}
	return s.Store.GetAccountByName(ctx, ref)
}
