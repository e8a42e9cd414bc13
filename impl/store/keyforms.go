package store

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
)

// The web console's new-key forms (impl/web) carry a random id each; the request that creates
// a form's key claims the form here first, so that of any number of posts of one form (a
// reload, a double click), on any gateway process, exactly one creates a key (web_key_forms,
// migration 0026).

// ClaimKeyForm claims the new-key form formID of account for the calling request: true when
// this request has it, false when another one claimed it first. The account's claims older
// than a week are deleted on the way.
func (s *Store) ClaimKeyForm(ctx context.Context, account uuid.UUID, formID string) (bool, error) {
	n, err := s.q.ClaimKeyForm(ctx, db.ClaimKeyFormParams{AccountID: account, FormID: formID})
	return n == 1, err
}

// KeyFormKey returns the key that the claimed form formID of account created: claimed is false
// when no request holds the form, and key is uuid.Nil while its key is being created.
func (s *Store) KeyFormKey(ctx context.Context, account uuid.UUID, formID string) (key uuid.UUID, claimed bool, err error) {
	k, err := s.q.GetKeyFormKey(ctx, db.GetKeyFormKeyParams{AccountID: account, FormID: formID})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return uuid.Nil, false, nil
	case err != nil:
		return uuid.Nil, false, err
	case k.Valid:
		return k.Bytes, true, nil
	}
	return uuid.Nil, true, nil
}

// SetKeyFormKey records the key that the claimed form formID of account created.
func (s *Store) SetKeyFormKey(ctx context.Context, account uuid.UUID, formID string, key uuid.UUID) error {
	return s.q.SetKeyFormKey(ctx, db.SetKeyFormKeyParams{AccountID: account, FormID: formID, KeyID: pgtype.UUID{Bytes: key, Valid: true}})
}

// ReleaseKeyForm gives back the claim of the form formID of account when it created no key, so
// that the form, corrected, can be sent again.
func (s *Store) ReleaseKeyForm(ctx context.Context, account uuid.UUID, formID string) error {
	return s.q.ReleaseKeyForm(ctx, db.ReleaseKeyFormParams{AccountID: account, FormID: formID})
}
