package web_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/web/audit"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestAuditNamesAgents: an entry an agent recorded (a ticket it opened, whose actor is
// "agent:<session>") shows the agent by its slot and a short session id, linking to the
// session's page, the recorded actor in the title; an agent of another account's session is
// named by its short id alone, with no slot and no link. The page showed the raw
// "agent:<uuid>" before.
func TestAuditNamesAgents(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, members.RoleOwner)
	globex := e.account(t, "globex", bobEmail, members.RoleOwner)
	mine := e.agentSession(t, acme.ID, "triage")
	theirs := e.agentSession(t, globex.ID, "secret-slot")
	log := &audit.Log{Store: e.Store}
	for _, s := range []string{mine.String(), theirs.String()} {
		after, _ := json.Marshal(map[string]string{"title": "disk full", "state": "open", "session": s})
		if err := log.Record(ctx, audit.Entry{AccountID: acme.ID, Actor: "agent:" + s, Action: audit.ActionTicketOpened,
			Target: "ticket 7f1c0a52-0000-4000-8000-000000000001", After: json.RawMessage(after)}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	p := b.get("/audit")
	if p.Status != http.StatusOK {
		t.Fatalf("GET /audit: %d %.500s", p.Status, p.Body)
	}
	body := html.UnescapeString(p.Body)
	for _, want := range []string{
		`<td title="agent:` + mine.String() + `"><a href="/agents/` + mine.String() + `">agent in slot triage (session ` + mine.String()[:8] + `)</a></td>`,
		`<td title="agent:` + theirs.String() + `">agent (session ` + theirs.String()[:8] + `)</td>`,
		`Opened a ticket <code class="help">ticket.opened</code>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the audit log lacks %q: %.4000s", want, body)
		}
	}
	if strings.Contains(body, "secret-slot") || strings.Contains(body, `href="/agents/`+theirs.String()) {
		t.Errorf("the audit log shows another account's slot or session page: %.4000s", body)
	}
	// The session page it links to is the agent's.
	if p := b.get("/agents/" + mine.String()); p.Status != http.StatusOK || !strings.Contains(p.Body, "triage") {
		t.Errorf("the linked session page: %d %.500s", p.Status, p.Body)
	}
}
