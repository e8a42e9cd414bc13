package main

import (
	"context"
	"strings"
	"testing"
)

// TestAdminKeyRevokeTwice (operator trial h10): revoking a key that is revoked already said
// "revoke key …: not found (unknown or already revoked)", though the key was found: the
// operator could not tell a mistyped id from a key that is stopped. The second revoke is still
// refused (status 1, nothing added to the audit log, TestAdminKeyChangesAudited) but says that
// the key was revoked and when; an unknown key is still "not found".
func TestAdminKeyRevokeTwice(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	mustAdmin(t, "key create acme -name ci -quiet")
	st, acct := openAccount(t, url, "acme")
	keys, err := st.ListAPIKeys(context.Background(), acct.ID)
	if err != nil || len(keys) != 1 {
		t.Fatalf("the account's keys: %v %v", keys, err)
	}
	id := keys[0].ID.String()
	if out := mustAdmin(t, "key revoke "+id+" -yes"); !strings.Contains(out, "revoked at") {
		t.Fatalf("key revoke: %s", out)
	}
	if _, err := adminRun(t, "key revoke "+id+" -yes"); exitStatus(err) != 1 || !strings.Contains(err.Error(), "was revoked already, at ") ||
		strings.Contains(err.Error(), "not found") {
		t.Errorf("revoking the key again: %v (exit status %d)", err, exitStatus(err))
	}
	if n := strings.Count(mustAdmin(t, "audit list acme"), "key.revoked"); n != 1 {
		t.Errorf("the audit log has %d key.revoked entries, want 1", n)
	}
	if _, err := adminRun(t, "key revoke 00000000-0000-0000-0000-000000000000 -yes"); exitStatus(err) != 1 || !strings.Contains(err.Error(), "not found") {
		t.Errorf("revoking an unknown key: %v (exit status %d)", err, exitStatus(err))
	}
}
