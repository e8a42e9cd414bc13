package main

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/store"
)

// TestAccountNameLimit (operator trial h1, item 5): an account name had no length limit, so
// `account create` took a name of any length (a pasted paragraph became an account that no
// table showed whole). A new name may have at most 64 characters, counted as characters, not
// bytes; a longer one is a usage error (exit status 2) that says the limit, and nothing is
// made. An account named longer before the limit keeps working by its name.
func TestAccountNameLimit(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	for _, name := range []string{strings.Repeat("a", 64), strings.Repeat("é", 64)} {
		if out := mustAdmin(t, "account create "+name); !strings.Contains(out, "account "+name+" created") {
			t.Errorf("account create with %d characters: %s", len([]rune(name)), out)
		}
	}
	long := strings.Repeat("b", 65)
	if _, err := adminRun(t, "account create "+long); exitStatus(err) != 2 || !strings.Contains(err.Error(), "65 characters: at most 64") {
		t.Errorf("account create with 65 characters: %v (exit status %d)", err, exitStatus(err))
	}
	if out := mustAdmin(t, "account list"); strings.Contains(out, long) {
		t.Errorf("the refused account was made:\n%s", out)
	}

	// Made before the limit (the store does not check names): it is found and used by its name.
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	old := strings.Repeat("legacy-", 12)
	if _, err := st.CreateAccount(ctx, old, "default"); err != nil {
		t.Fatal(err)
	}
	if out := mustAdmin(t, "credit grant "+old+" 1000"); !strings.Contains(out, "+1000 micros to "+old) {
		t.Errorf("credit grant to the account named before the limit: %s", out)
	}
	if key := strings.TrimSpace(mustAdmin(t, "key create "+old+" -quiet")); key == "" {
		t.Error("no key for the account named before the limit")
	}
}
