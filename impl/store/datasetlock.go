package store

import (
	"context"

	"github.com/google/uuid"
)

// LockDatasetUploads takes the lock of the account's dataset uploads, in a transaction of its
// own that unlock ends: the uploads of one account, from any gateway process, check what is
// stored (a name taken, the account's quota) and store their file one at a time. unlock is
// safe to call once the request's context is done.
func (s *Store) LockDatasetUploads(ctx context.Context, account uuid.UUID) (unlock func(), err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.q.WithTx(tx).LockDatasetUploads(ctx, "dataset-uploads:"+account.String()); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }, nil
}
