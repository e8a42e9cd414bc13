package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// ModelGrant says that an account may use a configured model since GrantedAt.
type ModelGrant struct {
	ModelID   string
	GrantedAt time.Time
}

// GrantModel lets the account use the model (idempotent).
func (s *Store) GrantModel(ctx context.Context, accountID uuid.UUID, modelID string) error {
	return notFound(s.q.GrantModel(ctx, db.GrantModelParams{AccountID: accountID, ModelID: modelID}))
}

// RevokeModel withdraws the model from the account; ErrNotFound when it was not granted.
func (s *Store) RevokeModel(ctx context.Context, accountID uuid.UUID, modelID string) error {
	n, err := s.q.RevokeModel(ctx, db.RevokeModelParams{AccountID: accountID, ModelID: modelID})
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// AccountModels lists the models granted to the account, by id.
func (s *Store) AccountModels(ctx context.Context, accountID uuid.UUID) ([]ModelGrant, error) {
	rows, err := s.q.ListAccountModels(ctx, accountID)
	if err != nil {
		return nil, err
	}
	out := make([]ModelGrant, len(rows))
	for i, r := range rows {
		out[i] = ModelGrant{ModelID: r.ModelID, GrantedAt: r.GrantedAt}
	}
	return out, nil
}

// AccountModel returns the account's grant of one model, or ErrNotFound.
func (s *Store) AccountModel(ctx context.Context, accountID uuid.UUID, modelID string) (ModelGrant, error) {
	r, err := s.q.GetAccountModel(ctx, db.GetAccountModelParams{AccountID: accountID, ModelID: modelID})
	if err != nil {
		return ModelGrant{}, notFound(err)
	}
	return ModelGrant{ModelID: r.ModelID, GrantedAt: r.GrantedAt}, nil
}
