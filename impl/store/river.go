package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// migrateRiver applies the migrations of River (github.com/riverqueue/river), the job queue
// the agents run on (impl/agent), in one transaction under the lock that serialises our own
// migrators, and returns the versions it applied as "river-<n>".
func (s *Store) migrateRiver(ctx context.Context) ([]string, error) {
	m, err := rivermigrate.New(riverpgxv5.New(s.pool), nil)
	if err != nil {
		return nil, err
	}
	var applied []string
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.q.WithTx(tx).LockMigrations(ctx); err != nil {
			return err
		}
		res, err := m.MigrateTx(ctx, tx, rivermigrate.DirectionUp, nil)
		if err != nil {
			return err
		}
		for _, v := range res.Versions {
			applied = append(applied, fmt.Sprintf("river-%03d", v.Version))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	return applied, nil
}
