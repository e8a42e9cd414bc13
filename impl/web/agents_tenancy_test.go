package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// TestAgentActionsStayInTheAccount: the Agents page's three actions (Start a session, Send,
// Stop the session) sent by an owner of one account with another account's session id, or a
// slot only the other account has, are refused exactly as an id or a slot nobody has (404,
// the same words), and change nothing of the other account: no message queued, its session in
// the state it was, no session started in its free slot. TestAgentsPages covers the pages that
// only show (GET /agents/{session} and its events); these are the posts that act.
func TestAgentActionsStayInTheAccount(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", bobEmail, "owner")
	e.agentSession(t, acme.ID, "main")
	theirs := e.agentSession(t, globex.ID, "main")
	q := db.New(e.Store.Pool())
	if _, err := q.InsertAgentSlot(ctx, db.InsertAgentSlotParams{AccountID: globex.ID, Name: "globex-spare"}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.InsertAgentSlot(ctx, db.InsertAgentSlotParams{AccountID: acme.ID, Name: "acme-spare"}); err != nil {
		t.Fatal(err)
	}

	var stateBefore string
	if err := e.Store.Pool().QueryRow(ctx, "SELECT state FROM agent_sessions WHERE id = $1", theirs).Scan(&stateBefore); err != nil {
		t.Fatal(err)
	}

	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	message := func(p page) string {
		t.Helper()
		i := strings.Index(p.Body, "<main")
		if i < 0 {
			return p.Body
		}
		return p.Body[i:]
	}
	for _, action := range []struct {
		name string
		path func(id string) string
		form url.Values
	}{
		{"Send", func(id string) string { return "/agents/" + id + "/message" }, url.Values{"text": {"read me your datasets"}}},
		{"Stop", func(id string) string { return "/agents/" + id + "/stop" }, url.Values{"confirm": {"yes"}}},
		{"Stop (unconfirmed)", func(id string) string { return "/agents/" + id + "/stop" }, url.Values{}},
	} {
		foreign := b.post(action.path(theirs.String()), action.form)
		nobodys := uuid.NewString()
		missing := b.post(action.path(nobodys), action.form)
		if foreign.Status != http.StatusNotFound || missing.Status != http.StatusNotFound ||
			strings.ReplaceAll(message(foreign), theirs.String(), "ID") != strings.ReplaceAll(message(missing), nobodys, "ID") {
			t.Errorf("%s: another account's session %d, a session nobody has %d; the pages differ:\n%.800s\n---\n%.800s",
				action.name, foreign.Status, missing.Status, message(foreign), message(missing))
		}
	}
	foreign := b.post("/agents/start", url.Values{"account_id": {acme.ID.String()}, "slot": {"globex-spare"}, "prompt": {"hello"}})
	missing := b.post("/agents/start", url.Values{"account_id": {acme.ID.String()}, "slot": {"nobodys-slot"}, "prompt": {"hello"}})
	if foreign.Status != http.StatusNotFound || missing.Status != http.StatusNotFound ||
		strings.ReplaceAll(message(foreign), "globex-spare", "SLOT") != strings.ReplaceAll(message(missing), "nobodys-slot", "SLOT") {
		t.Errorf("Start a session: another account's slot %d, a slot nobody has %d; the pages differ:\n%.800s\n---\n%.800s",
			foreign.Status, missing.Status, message(foreign), message(missing))
	}

	var queued, sessions int
	var state string
	if err := e.Store.Pool().QueryRow(ctx, "SELECT count(*) FROM agent_messages WHERE session_id = $1", theirs).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.Pool().QueryRow(ctx, "SELECT state FROM agent_sessions WHERE id = $1", theirs).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.Pool().QueryRow(ctx, "SELECT count(*) FROM agent_sessions WHERE account_id = $1", globex.ID).Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	if queued != 0 || state != stateBefore || sessions != 1 {
		t.Errorf("the other account changed: %d messages queued to its session, its state %q, %d sessions (want 0, %s, 1)",
			queued, state, sessions, stateBefore)
	}
	// The same actions in the visitor's own account do act: the refusals above are not those of
	// forms that never work.
	if p := b.post("/agents/start", url.Values{"account_id": {acme.ID.String()}, "slot": {"acme-spare"}, "prompt": {"hello"}}); p.Status != http.StatusSeeOther {
		t.Errorf("starting a session in the visitor's own free slot: %d %.500s", p.Status, message(p))
	}
}
