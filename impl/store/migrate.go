package store

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/queries"
)

// Migrate applies every embedded migration that the database has not applied yet, each in its
// own transaction, in file-name order, then River's (see migrateRiver), and returns the
// versions it applied. Concurrent callers
// (several gateway processes starting together) are serialised by an advisory lock.
func (s *Store) Migrate(ctx context.Context) ([]string, error) {
	files, err := fs.Glob(queries.Migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var applied []string
	for _, file := range files {
		version := strings.TrimSuffix(strings.TrimPrefix(file, "migrations/"), ".sql")
		script, err := fs.ReadFile(queries.Migrations, file)
		if err != nil {
			return applied, err
		}
		did, err := s.applyMigration(ctx, version, string(script))
		if err != nil {
			return applied, fmt.Errorf("migration %s: %w", version, err)
		}
		if did {
			applied = append(applied, version)
		}
	}
	// River's tables (the agents' job queue) come with ours, so every process has them.
	river, err := s.migrateRiver(ctx)
	return append(applied, river...), err
}

// applyMigration runs one migration script unless it is recorded as applied, and records it.
// The script is a committed, embedded file, never a string built at run time.
func (s *Store) applyMigration(ctx context.Context, version, script string) (bool, error) {
	did := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.LockMigrations(ctx); err != nil {
			return err
		}
		present, err := q.SchemaMigrationsTableExists(ctx)
		if err != nil {
			return err
		}
		if present {
			versions, err := q.ListAppliedMigrations(ctx)
			if err != nil {
				return err
			}
			for _, v := range versions {
				if v == version {
					return nil
				}
			}
		}
		// A script of several statements needs the simple query protocol.
		if _, err := tx.Conn().PgConn().Exec(ctx, script).ReadAll(); err != nil {
			return err
		}
		did = true
		return q.RecordMigration(ctx, version)
	})
	return did, err
}

// PendingMigrations returns the versions Migrate would apply, ours and then River's, without
// applying any: a command that must not change the schema (the operator's CLI) refuses to run
// against a database that lacks some of them.
func (s *Store) PendingMigrations(ctx context.Context) ([]string, error) {
	files, err := fs.Glob(queries.Migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	applied := map[string]bool{}
	present, err := s.q.SchemaMigrationsTableExists(ctx)
	if err != nil {
		return nil, err
	}
	if present {
		versions, err := s.q.ListAppliedMigrations(ctx)
		if err != nil {
			return nil, err
		}
		for _, v := range versions {
			applied[v] = true
		}
	}
	var pending []string
	for _, file := range files {
		if version := strings.TrimSuffix(strings.TrimPrefix(file, "migrations/"), ".sql"); !applied[version] {
			pending = append(pending, version)
		}
	}
	river, err := s.pendingRiver(ctx)
	return append(pending, river...), err
}
