package store

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
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
	versions, err := knownMigrations()
	if err != nil {
		return nil, err
	}
	var applied []string
	for _, version := range versions {
		script, err := fs.ReadFile(queries.Migrations, "migrations/"+version+".sql")
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
	pending, _, err := s.MigrationStatus(ctx)
	return pending, err
}

// MigrationStatus returns what PendingMigrations and UnknownMigrations return, reading the
// database's migrations once: for a command that refuses a schema behind it and warns of one
// ahead of it.
func (s *Store) MigrationStatus(ctx context.Context) (pending, unknown []string, err error) {
	pending, unknown, err = s.migrationsApart(ctx)
	if err != nil {
		return nil, nil, err
	}
	river, err := s.pendingRiver(ctx)
	return append(pending, river...), unknown, err
}

// UnknownMigrations returns the versions the database records as applied that this binary does
// not have: its schema is newer than the binary (a gateway rolled back after a newer one
// migrated, or an admin command older than the gateways). Such a binary may write rows the
// newer schema refuses or reads differently; the caller warns.
func (s *Store) UnknownMigrations(ctx context.Context) ([]string, error) {
	_, unknown, err := s.migrationsApart(ctx)
	return unknown, err
}

// migrationsApart compares this binary's migrations with those the database records as
// applied: pending are the binary's the database lacks, in the order Migrate applies them;
// unknown the database's the binary lacks.
func (s *Store) migrationsApart(ctx context.Context) (pending, unknown []string, err error) {
	known, err := knownMigrations()
	if err != nil {
		return nil, nil, err
	}
	applied, err := s.appliedMigrations(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, version := range known {
		if !slices.Contains(applied, version) {
			pending = append(pending, version)
		}
	}
	for _, version := range applied {
		if _, found := slices.BinarySearch(known, version); !found {
			unknown = append(unknown, version)
		}
	}
	return pending, unknown, nil
}

// knownMigrations returns the versions of the embedded migrations, in the order Migrate
// applies them.
func knownMigrations() ([]string, error) {
	files, err := fs.Glob(queries.Migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	versions := make([]string, 0, len(files))
	for _, file := range files {
		versions = append(versions, strings.TrimSuffix(strings.TrimPrefix(file, "migrations/"), ".sql"))
	}
	sort.Strings(versions)
	return versions, nil
}

// appliedMigrations returns the versions the database records as applied (none before the
// first migration made schema_migrations).
func (s *Store) appliedMigrations(ctx context.Context) ([]string, error) {
	present, err := s.q.SchemaMigrationsTableExists(ctx)
	if err != nil || !present {
		return nil, err
	}
	return s.q.ListAppliedMigrations(ctx)
}
