package main

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

// TestAdminMembers: the operator adds members by e-mail (before they ever sign in), lists
// them with their roles, changes a role by adding again, and removes them; each change is in
// the account's audit log.
func TestAdminMembers(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.ConnString(t))
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	if out := mustAdmin(t, "member add acme alice@example.com -role owner"); !strings.Contains(out, "alice@example.com is an owner of account acme") {
		t.Fatalf("member add: %s", out)
	}
	mustAdmin(t, "member add acme Bob@Example.com")
	list := mustAdmin(t, "member list acme")
	if !strings.Contains(list, "alice@example.com  owner") || !strings.Contains(list, "Bob@Example.com    member") || !strings.Contains(list, "never") {
		t.Fatalf("member list:\n%s", list)
	}
	mustAdmin(t, "member add acme bob@example.com -role owner") // the same person, without case
	if list := mustAdmin(t, "member list acme"); strings.Count(list, "owner") != 2 || strings.Count(list, "\n") != 3 {
		t.Fatalf("after the role change:\n%s", list)
	}
	if _, err := adminRun(t, "member add acme carol@example.com -role admin"); err == nil {
		t.Fatal("role admin accepted")
	}
	if _, err := adminRun(t, "member add acme not-an-address"); err == nil {
		t.Fatal("a name without @ accepted")
	}
	if out := mustAdmin(t, "member remove acme alice@example.com"); !strings.Contains(out, "no longer a member") {
		t.Fatalf("member remove: %s", out)
	}
	if _, err := adminRun(t, "member remove acme alice@example.com"); err == nil || !strings.Contains(err.Error(), "not a member") {
		t.Fatalf("removing again: %v", err)
	}
	if list := mustAdmin(t, "member list acme"); strings.Contains(list, "alice") {
		t.Fatalf("alice still listed:\n%s", list)
	}
}
