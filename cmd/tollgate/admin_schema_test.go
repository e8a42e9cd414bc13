package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// migratedDatabase is a fresh test database with every migration applied, as `tollgate
// migrate` leaves it: the admin commands refuse one that lacks some.
func migratedDatabase(t *testing.T) string {
	t.Helper()
	url := pgtest.ConnString(t)
	migrateDatabase(t, url)
	return url
}

// migrateDatabase applies every migration to the database at url, as `tollgate migrate` does.
func migrateDatabase(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAdminLeavesTheSchemaAlone: an admin command against a database that lacks migrations
// (here all of them, as a binary newer than the gateways finds the one migration it adds)
// changes nothing, applies none and says to run `tollgate migrate`; once it has, the command
// works.
func TestAdminLeavesTheSchemaAlone(t *testing.T) {
	url := pgtest.ConnString(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	all, err := st.PendingMigrations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := adminRun(t, "account create acme")
	if err == nil || !strings.Contains(err.Error(), "run `tollgate migrate`") || !strings.Contains(err.Error(), all[0]) || out != "" {
		t.Fatalf("account create on an unmigrated database: %v\n%s", err, out)
	}
	if pending, err := st.PendingMigrations(ctx); err != nil || len(pending) != len(all) {
		t.Fatalf("after the refusal %d migrations are pending, want all %d (%v)", len(pending), len(all), err)
	}

	// The database one migration behind: the command names it alone.
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, "DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)"); err != nil {
		t.Fatal(err)
	}
	pending, err := st.PendingMigrations(ctx)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending after forgetting the newest migration: %v, %v", pending, err)
	}
	if _, err := adminRun(t, "account list"); err == nil || !strings.Contains(err.Error(), "lacks 1 schema migration(s) this tollgate has ("+pending[0]+")") {
		t.Fatalf("account list one migration behind: %v", err)
	}
	if _, err := st.Pool().Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", pending[0]); err != nil {
		t.Fatal(err)
	}
	if out := mustAdmin(t, "account create acme"); !strings.Contains(out, "account acme created") {
		t.Fatalf("account create once migrated: %s", out)
	}
}

// TestOlderBinaryWarnsOfANewerSchema: a database that records a migration this binary does not
// have (a newer tollgate applied it; this one is a rollback, or an admin older than the
// gateways) is said so, with the version: on the admin command's stderr (the command still
// runs, its stdout unchanged) and in the log of a process that opens the database to serve
// (serve, dev, migrate). Before, nothing told the operator.
func TestOlderBinaryWarnsOfANewerSchema(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if unknown, err := st.UnknownMigrations(ctx); err != nil || len(unknown) != 0 {
		t.Fatalf("a database this binary migrated has unknown migrations %v (%v)", unknown, err)
	}
	const future = "9999_from_a_newer_tollgate"
	if _, err := st.Pool().Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", future); err != nil {
		t.Fatal(err)
	}
	out, notes, err := adminRunIO(t, "account create acme", "")
	if err != nil || !strings.Contains(out, "account acme created") {
		t.Fatalf("account create on a newer schema: %v\n%s", err, out)
	}
	if !strings.Contains(notes, "schema is newer than this tollgate") || !strings.Contains(notes, future) {
		t.Errorf("the admin command did not warn of the newer schema on stderr: %q", notes)
	}

	var log bytes.Buffer
	d, err := openDatabase(ctx, false, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), future) {
		t.Errorf("opening the database to serve did not warn of the newer schema: %s", log.String())
	}
}
