package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
)

var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// TestAdminAgentCommands drives the operator's slot, ticket and approval commands on a real
// database: slots are per account and assigned once; tickets open, list and close once; an
// approval requested through the agent service (as agent_spawn does) is listed with its exact
// action and arguments, approved exactly once (a second approve and a deny are refused naming
// its state), and a denied one is listed as denied.
func TestAdminAgentCommands(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	mustAdmin(t, "account create other -plan demo")

	// Slots.
	if out := mustAdmin(t, "slot assign acme main"); !strings.Contains(out, "account acme has agent slot 'main'") {
		t.Fatalf("slot assign: %s", out)
	}
	mustAdmin(t, "slot assign other main") // names are per account
	if _, err := adminRun(t, "slot assign acme main"); err == nil || !strings.Contains(err.Error(), "already has slot 'main'") {
		t.Fatalf("assigning a slot twice: %v", err)
	}
	if _, err := adminRun(t, "slot assign nobody main"); err == nil {
		t.Fatal("a slot for an unknown account must fail")
	}
	all := mustAdmin(t, "slot list")
	if !strings.Contains(all, "acme") || !strings.Contains(all, "other") {
		t.Fatalf("slot list: %s", all)
	}
	if out := mustAdmin(t, "slot list acme"); !strings.Contains(out, "main") || strings.Contains(out, "other") {
		t.Fatalf("slot list acme: %s", out)
	}

	// Tickets.
	out := mustAdmin(t, "ticket open acme Disk-full -body disk-is-full")
	ticket := uuidPattern.FindString(out)
	if ticket == "" || !strings.Contains(out, "opened for acme: Disk-full") {
		t.Fatalf("ticket open: %s", out)
	}
	if out := mustAdmin(t, "ticket list acme"); !strings.Contains(out, ticket) || !strings.Contains(out, "open") || !strings.Contains(out, "operator") {
		t.Fatalf("ticket list: %s", out)
	}
	if out := mustAdmin(t, "ticket list other"); strings.Contains(out, ticket) {
		t.Fatalf("another account's ticket list shows acme's ticket: %s", out)
	}
	if out := mustAdmin(t, "ticket close "+ticket); !strings.Contains(out, "closed") {
		t.Fatalf("ticket close: %s", out)
	}
	if _, err := adminRun(t, "ticket close "+ticket); err == nil || !strings.Contains(err.Error(), "already closed") {
		t.Fatalf("closing twice: %v", err)
	}
	if out := mustAdmin(t, "ticket list acme"); strings.Contains(out, ticket) {
		t.Fatalf("a closed ticket among the open ones: %s", out)
	}
	if out := mustAdmin(t, "ticket list -state closed acme"); !strings.Contains(out, ticket) {
		t.Fatalf("ticket list -state closed: %s", out)
	}
	if _, err := adminRun(t, "ticket list acme -state nonsense"); err == nil {
		t.Fatal("an unknown ticket state must fail")
	}

	// Approvals, requested as the MCP tools do.
	ctx := context.Background()
	st, acct := openAccount(t, url, "acme")
	svc, err := agent.New(agent.Options{Store: st, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	p := auth.Principal{AccountID: acct.ID}
	turns := 3
	spawn, err := svc.RequestSpawn(ctx, p, agent.SpawnAction{Purpose: "count the sales", MaxTurns: &turns})
	if err != nil {
		t.Fatal(err)
	}
	other, err := svc.RequestSpawn(ctx, p, agent.SpawnAction{Purpose: "something else"})
	if err != nil {
		t.Fatal(err)
	}
	out = mustAdmin(t, "approval list acme")
	for _, want := range []string{spawn.ID, other.ID, "agent_spawn", `"purpose": "count the sales"`, `"max_turns": 3`, spawn.ArgumentsHash, "pending"} {
		if !strings.Contains(out, want) {
			t.Errorf("approval list lacks %q:\n%s", want, out)
		}
	}
	if out := mustAdmin(t, "approval list other"); strings.Contains(out, spawn.ID) {
		t.Errorf("another account's approvals show acme's: %s", out)
	}
	if out := mustAdmin(t, "approval approve "+spawn.ID); !strings.Contains(out, "approved") {
		t.Fatalf("approve: %s", out)
	}
	for _, verb := range []string{"approve", "deny"} {
		if _, err := adminRun(t, "approval "+verb+" "+spawn.ID); err == nil || !strings.Contains(err.Error(), "already approved") {
			t.Errorf("%s after approve: %v", verb, err)
		}
	}
	if out := mustAdmin(t, "approval deny "+other.ID); !strings.Contains(out, "denied") || !strings.Contains(out, "never run") {
		t.Fatalf("deny: %s", out)
	}
	if _, err := adminRun(t, "approval approve "+other.ID); err == nil || !strings.Contains(err.Error(), "already denied") {
		t.Errorf("approve after deny: %v", err)
	}
	if _, err := adminRun(t, "approval approve 00000000-0000-0000-0000-000000000000"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("approve an unknown id: %v", err)
	}
	if out := mustAdmin(t, "approval list acme"); strings.Contains(out, spawn.ID) || strings.Contains(out, other.ID) {
		t.Errorf("resolved approvals among the pending ones: %s", out)
	}
	out = mustAdmin(t, "approval list acme -state all")
	if !strings.Contains(out, spawn.ID) || !strings.Contains(out, other.ID) || !strings.Contains(out, "by operator") || !strings.Contains(out, "denied") {
		t.Errorf("approval list -state all: %s", out)
	}

	// Unassigning the slot takes it from the account only.
	mustAdmin(t, "slot unassign acme main -yes")
	if out := mustAdmin(t, "slot list acme"); strings.Contains(out, "main") {
		t.Errorf("slot list after unassign: %s", out)
	}
	if out := mustAdmin(t, "slot list other"); !strings.Contains(out, "main") {
		t.Errorf("unassigning acme's slot took other's: %s", out)
	}
	if _, err := adminRun(t, "slot unassign acme main -yes"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("unassigning twice: %v", err)
	}
}
