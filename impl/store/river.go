package store

import (
	"context"
	"fmt"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/tollgate/tollgate/gen/db"
)

// migrateRiver applies the migrations of River (github.com/riverqueue/river), the job queue
// the agents run on (impl/agent), each in a transaction of its own (one of them adds an enum
// value that the next statements use), under the lock that serialises our own migrators, held
// for the session of one connection; it returns the versions it applied as "river-<n>".
func (s *Store) migrateRiver(ctx context.Context) ([]string, error) {
	m, err := rivermigrate.New(riverpgxv5.New(s.pool), nil)
	if err != nil {
		return nil, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	q := db.New(conn)
	if err := q.LockMigrationsSession(ctx); err != nil {
		return nil, err
	}
	// The lock goes with the session: unlocked here, or closed with the connection when the
	// unlock fails.
	defer func() {
		if err := q.UnlockMigrationsSession(context.WithoutCancel(ctx)); err != nil {
			_ = conn.Conn().Close(context.Background())
		}
	}()
	res, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	var applied []string
	for _, v := range res.Versions {
		applied = append(applied, fmt.Sprintf("river-%03d", v.Version))
	}
	return applied, nil
}

// pendingRiver returns the versions of River's migrations that migrateRiver would apply, named
// as it names them.
func (s *Store) pendingRiver(ctx context.Context) ([]string, error) {
	m, err := rivermigrate.New(riverpgxv5.New(s.pool), nil)
	if err != nil {
		return nil, err
	}
	existing, err := m.ExistingVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	done := map[int]bool{}
	for _, v := range existing {
		done[v.Version] = true
	}
	var pending []string
	for _, v := range m.AllVersions() {
		if !done[v.Version] {
			pending = append(pending, fmt.Sprintf("river-%03d", v.Version))
		}
	}
	return pending, nil
}
