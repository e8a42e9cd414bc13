package main

import (
	"strings"
	"testing"
)

// TestAdminAuditList (operator trial h1): `tollgate admin audit list ACCOUNT` prints the
// account's audit log, newest first, -n of them, each with its actor, action, target and the
// thing as it was and as it is, and nothing of another account's. Before, the CLI wrote the
// audit log (key and dataset changes, approvals, members) but had no command to read it: an
// operator needed a member's sign-in to the console or SQL.
func TestAdminAuditList(t *testing.T) {
	t.Setenv("DATABASE_URL", migratedDatabase(t))
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	mustAdmin(t, "account create other -plan demo")
	id := strings.Fields(mustAdmin(t, "key create acme -name ci -rpm 10"))[1]
	mustAdmin(t, "key revoke "+id+" -yes")
	mustAdmin(t, "key create other -name theirs")

	lines := strings.Split(strings.TrimSpace(mustAdmin(t, "audit list acme")), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") {
		t.Fatalf("audit list acme: want a header and two entries:\n%s", strings.Join(lines, "\n"))
	}
	for i, want := range []string{"key.revoked", "key.created"} { // newest first
		f := strings.Fields(lines[i+1])
		if len(f) < 7 || f[2] != "operator" || f[3] != want || f[4]+" "+f[5] != "key "+id {
			t.Errorf("entry %d: want operator %s key %s: %s", i+1, want, id, lines[i+1])
		}
	}
	if !strings.Contains(lines[1], `"status":"active"`) || !strings.Contains(lines[1], `"status":"revoked"`) {
		t.Errorf("the revocation does not show the key as it was and as it is: %s", lines[1])
	}
	if !strings.Contains(lines[2], " - ") || !strings.Contains(lines[2], `"rpm_limit":10`) {
		t.Errorf("the creation does not show no key before and the key after: %s", lines[2])
	}
	if out := mustAdmin(t, "audit list acme -n 1"); strings.Count(strings.TrimSpace(out), "\n") != 1 || !strings.Contains(out, "key.revoked") {
		t.Errorf("audit list acme -n 1:\n%s", out)
	}
	if out := mustAdmin(t, "audit list other"); strings.Contains(out, id) || strings.Count(out, "key.created") != 1 {
		t.Errorf("audit list other shows what is not its own:\n%s", out)
	}
	if _, err := adminRun(t, "audit list nobody"); err == nil {
		t.Error("audit list of an unknown account succeeded")
	}
}
