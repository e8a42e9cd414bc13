package store

import (
	"context"
	"io/fs"
	"sort"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/queries"
)

// migratedBefore opens a store on a new database with every migration older than version
// applied, and none from it on: the database a migration's test finds before it runs.
func migratedBefore(t *testing.T, version string) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, pgtest.ConnString(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	files, err := fs.Glob(queries.Migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, file := range files {
		v := strings.TrimSuffix(strings.TrimPrefix(file, "migrations/"), ".sql")
		if v >= version {
			break
		}
		script, _ := fs.ReadFile(queries.Migrations, file)
		if _, err := s.applyMigration(ctx, v, string(script)); err != nil {
			t.Fatalf("migration %s: %v", v, err)
		}
	}
	return s
}
