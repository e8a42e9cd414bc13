package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/web/audit"
)

// TestAdminApprovalDecisionsAudited: an approval the operator approves or denies with the CLI is
// in the account's audit log (the Audit log page), as one decided on the web page is: actor
// operator, the approval, its state before and after and the hash of its arguments; a refused
// second decision adds nothing.
func TestAdminApprovalDecisionsAudited(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	ctx := context.Background()
	st, acct := openAccount(t, url, "acme")
	svc, err := agent.New(agent.Options{Store: st, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	mustAdmin(t, "slot assign acme main") // a spawn approval needs a slot to run in
	p := auth.Principal{AccountID: acct.ID}
	approved, err := svc.RequestSpawn(ctx, p, agent.SpawnAction{Purpose: "count the sales"})
	if err != nil {
		t.Fatal(err)
	}
	denied, err := svc.RequestSpawn(ctx, p, agent.SpawnAction{Purpose: "something else"})
	if err != nil {
		t.Fatal(err)
	}
	mustAdmin(t, "approval approve "+approved.ID)
	mustAdmin(t, "approval deny "+denied.ID)
	if _, err := adminRun(t, "approval deny "+approved.ID); err == nil {
		t.Fatal("a second decision was accepted")
	}
	entries, err := (&audit.Log{Store: st}).List(ctx, acct.ID, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		if e.Action != audit.ActionApproval {
			continue
		}
		var after map[string]any
		switch raw := e.After.(type) {
		case []byte:
			_ = json.Unmarshal(raw, &after)
		case json.RawMessage:
			_ = json.Unmarshal(raw, &after)
		}
		if e.Actor != "operator" || after["arguments_hash"] == nil {
			t.Errorf("audit entry %+v", e)
		}
		if _, dup := got[e.Target]; dup {
			t.Errorf("%s audited twice", e.Target)
		}
		got[e.Target], _ = after["state"].(string)
	}
	if got["approval "+approved.ID] != "approved" || got["approval "+denied.ID] != "denied" || len(got) != 2 {
		t.Fatalf("the audit log's approval decisions: %v", got)
	}
}

// TestAdminShowsAgentTextSafely: a ticket title an agent wrote and an approval's arguments an
// API key holder wrote reach the operator's terminal with their control and format characters
// (ESC starting an escape sequence, a C1 CSI, a right-to-left override, a newline splitting the
// table's row) written as \u escapes.
func TestAdminShowsAgentTextSafely(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	ctx := context.Background()
	st, acct := openAccount(t, url, "acme")
	svc, err := agent.New(agent.Options{Store: st, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	hostile := "ok\x1b[2J\x1b]0;pwned\x07\u009b31m\u202eevil\nrow"
	if _, err := svc.OpenTicket(ctx, acct.ID, nil, "title "+hostile, "body", "agent:x"); err != nil {
		t.Fatal(err)
	}
	mustAdmin(t, "slot assign acme main") // a spawn approval needs a slot to run in
	if _, err := svc.RequestSpawn(ctx, auth.Principal{AccountID: acct.ID}, agent.SpawnAction{Purpose: "purpose " + hostile}); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"ticket list acme", "approval list acme"} {
		out := mustAdmin(t, cmd)
		for _, raw := range []string{"\x1b", "\x07", "\u009b", "\u202e", "evil\nrow"} {
			if strings.Contains(out, raw) {
				t.Errorf("%s prints %q raw:\n%s", cmd, raw, out)
			}
		}
		if !strings.Contains(out, `ok\u001b[2J`) || !strings.Contains(out, `\u202eevil`) {
			t.Errorf("%s does not show the escaped text:\n%s", cmd, out)
		}
	}
}
