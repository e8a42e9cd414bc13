package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/web/audit"
)

// TestAdminAccountChangesAudited (operator trial h1): the operator's grants of credit and of
// models, a model's withdrawal, an agent slot given or taken away and a ticket opened or
// closed are in the account's audit log beside the key and dataset changes (actor operator):
// a credit grant with its ledger entry, amount, note and key; a model granted or withdrawn; a
// slot assigned or unassigned; a ticket opened or closed (task h4) with its title and state,
// which `admin audit list` shows too. What changes nothing adds nothing: a grant repeated
// under its idempotency key, a model granted again, a slot assigned twice, a ticket closed
// twice. Before, none of them was recorded.
func TestAdminAccountChangesAudited(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	mustAdmin(t, "model revoke acme service-sonnet")
	mustAdmin(t, "model grant acme service-sonnet")
	mustAdmin(t, "model grant acme service-sonnet")
	entry := strings.Fields(mustAdmin(t, "credit grant acme 5000000 -note invoice-42 -idempotency-key inv-42"))[2]
	mustAdmin(t, "credit grant acme 5000000 -note invoice-42 -idempotency-key inv-42")
	mustAdmin(t, "slot assign acme main")
	if _, err := adminRun(t, "slot assign acme main"); err == nil {
		t.Fatal("a slot was assigned twice")
	}
	mustAdmin(t, "slot unassign acme main -yes")
	ticket := strings.Fields(mustAdmin(t, "ticket open acme quota-review -body spend-doubled"))[1]
	mustAdmin(t, "ticket close "+ticket)
	if _, err := adminRun(t, "ticket close "+ticket); err == nil {
		t.Fatal("a ticket was closed twice")
	}

	st, acct := openAccount(t, url, "acme")
	entries, err := (&audit.Log{Store: st}).List(context.Background(), acct.ID, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := len(entries) - 1; i >= 0; i-- { // oldest first
		e := entries[i]
		if e.Actor != "operator" {
			t.Errorf("audit entry by %q: %+v", e.Actor, e)
		}
		got = append(got, fmt.Sprintf("%s %s: %s -> %s", e.Action, e.Target, auditState(e.Before), auditState(e.After)))
	}
	want := []string{
		`model.revoked model service-sonnet: {"model":"service-sonnet"} -> -`,
		`model.granted model service-sonnet: - -> {"model":"service-sonnet"}`,
		`credit.granted ledger entry ` + strings.TrimSuffix(entry, ":") + `: - -> {"amount_micros":5000000,"balance_after_micros":15000000,"idempotency_key":"inv-42","note":"invoice-42"}`,
		`slot.assigned slot main: - -> {"slot":"main"}`,
		`slot.unassigned slot main: {"slot":"main"} -> -`,
		`ticket.opened ticket ` + ticket + `: - -> {"state":"open","title":"quota-review"}`,
		`ticket.closed ticket ` + ticket + `: {"state":"open","title":"quota-review"} -> {"state":"closed","title":"quota-review"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The operator reads them back with `admin audit list`, newest first.
	listed := strings.Split(strings.TrimSpace(mustAdmin(t, "audit list acme -n 2")), "\n")
	for i, action := range []string{"ticket.closed", "ticket.opened"} {
		if f := strings.Fields(listed[min(i+1, len(listed)-1)]); len(f) < 6 || fmt.Sprint(f[2:6]) != fmt.Sprint([]string{"operator", action, "ticket", ticket}) {
			t.Errorf("admin audit list does not show %s of ticket %s by operator:\n%s", action, ticket, strings.Join(listed, "\n"))
		}
	}
}
