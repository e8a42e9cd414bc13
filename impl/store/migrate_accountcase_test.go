package store

import (
	"context"
	"strings"
	"testing"
)

// TestAccountNameCaseMigration: migration 0025 (account names unique without regard to letter
// case) on a database that already holds names differing only in case fails before changing
// anything, naming each such account with its id and saying what to do; once they are renamed
// it applies, and the database then refuses a name that differs from another's only in case.
func TestAccountNameCaseMigration(t *testing.T) {
	ctx := context.Background()
	s := migratedBefore(t, "0025")
	ids := map[string]string{}
	for _, name := range []string{"acme", "Acme", "globex", "GLOBEX", "initech"} {
		var id string
		if err := s.pool.QueryRow(ctx, `INSERT INTO accounts (name) VALUES ($1) RETURNING id`, name).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	_, err := s.Migrate(ctx)
	if err == nil {
		t.Fatal("the migration applied over accounts whose names differ only in case")
	}
	msg := err.Error()
	t.Logf("the failure: %s", msg)
	for _, name := range []string{"acme", "Acme", "globex", "GLOBEX"} {
		if !strings.Contains(msg, "'"+name+"' (id "+ids[name]+")") {
			t.Errorf("the failure does not name %s (id %s): %s", name, ids[name], msg)
		}
	}
	if strings.Contains(msg, "initech") || !strings.Contains(msg, "migration 0025_account_name_case") ||
		!strings.Contains(msg, "Rename all but one of each group") {
		t.Errorf("the failure: %s", msg)
	}
	var applied bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version LIKE '0025%')`).Scan(&applied); err != nil || applied {
		t.Fatalf("0025 recorded as applied after failing: %v %v", applied, err)
	}

	// Renamed, as the failure says: the migration applies, and the index holds from then on.
	for name, to := range map[string]string{"Acme": "acme-2", "GLOBEX": "globex-2"} {
		if _, err := s.pool.Exec(ctx, `UPDATE accounts SET name = $1 WHERE id = $2`, to, ids[name]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatalf("after the renames: %v", err)
	}
	if _, err := s.CreateAccount(ctx, "INITECH", "default"); err != ErrConflict {
		t.Errorf("INITECH beside initech: %v", err)
	}
}
