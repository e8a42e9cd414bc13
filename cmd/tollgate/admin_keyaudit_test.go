package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/web/audit"
)

// TestAdminKeyChangesAudited (security review): every key change the operator makes with the
// CLI (key create, set-rpm, set-cap, disable, enable, revoke, revoke-all) is in the key's
// account's audit log, as the Keys page's changes are: actor operator, the key as it was and
// as it is; a refused change (revoking a revoked key) adds nothing.
func TestAdminKeyChangesAudited(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	created := func(out string) string {
		t.Helper()
		f := strings.Fields(out)
		if len(f) < 2 || f[0] != "key" {
			t.Fatalf("key create: %s", out)
		}
		return f[1]
	}
	one := created(mustAdmin(t, "key create acme -name one -rpm 10"))
	two := created(mustAdmin(t, "key create acme -name two -rpm 60"))
	mustAdmin(t, "key set-rpm "+one+" 25")
	mustAdmin(t, "key set-cap "+one+" 5000 -cap-period daily")
	mustAdmin(t, "key disable "+one)
	mustAdmin(t, "key enable "+one)
	mustAdmin(t, "key revoke "+one+" -yes")
	if _, err := adminRun(t, "key revoke "+one+" -yes"); err == nil {
		t.Fatal("revoking a revoked key was accepted")
	}
	mustAdmin(t, "key revoke-all acme -yes")

	ctx := context.Background()
	st, acct := openAccount(t, url, "acme")
	entries, err := (&audit.Log{Store: st}).List(ctx, acct.ID, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	state := func(v any) string {
		var m map[string]any
		switch raw := v.(type) {
		case []byte:
			_ = json.Unmarshal(raw, &m)
		case json.RawMessage:
			_ = json.Unmarshal(raw, &m)
		}
		if m == nil {
			return "-"
		}
		s := fmt.Sprintf("%v rpm=%v", m["status"], m["rpm_limit"])
		if c, ok := m["credit_cap_micros"]; ok {
			s += fmt.Sprintf(" cap=%v/%v", c, m["cap_period"])
		}
		return s
	}
	var got []string
	for i := len(entries) - 1; i >= 0; i-- { // oldest first
		e := entries[i]
		if e.Actor != "operator" {
			t.Errorf("audit entry by %q: %+v", e.Actor, e)
		}
		got = append(got, fmt.Sprintf("%s %s: %s -> %s", e.Action, e.Target, state(e.Before), state(e.After)))
	}
	want := []string{
		"key.created key " + one + ": - -> active rpm=10",
		"key.created key " + two + ": - -> active rpm=60",
		"limits.changed key " + one + ": active rpm=10 -> active rpm=25",
		"limits.changed key " + one + ": active rpm=25 -> active rpm=25 cap=5000/daily",
		"key.changed key " + one + ": active rpm=25 cap=5000/daily -> disabled rpm=25 cap=5000/daily",
		"key.changed key " + one + ": disabled rpm=25 cap=5000/daily -> active rpm=25 cap=5000/daily",
		"key.revoked key " + one + ": active rpm=25 cap=5000/daily -> revoked rpm=25 cap=5000/daily",
		"key.revoked key " + two + " (revoke all): active rpm=60 -> revoked rpm=60",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
