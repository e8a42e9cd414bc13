package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/mcpauth"
)

// idSpellings are the spellings of one id that uuid.Parse, which every route of the console
// that takes an id in its path reads it with, takes for the same id: its own, in capitals,
// in braces, as a URN and without its hyphens.
func idSpellings(id string) []string {
	return []string{id, strings.ToUpper(id), "{" + id + "}", "urn:uuid:" + id, strings.ReplaceAll(id, "-", "")}
}

// TestConsoleIDsOfAnotherAccount (security review s14h4): every route of the console that
// names a key, an approval, an agent session or a connected app (OAuth grant) by id in its path,
// given another account's id in any spelling uuid.Parse reads as that id, answers as it
// answers an id nobody has (404, the same page but for the id), and the other account's key,
// approval, session and grant are as they were. A connected app's revocation (POST
// /oauth/grants/{id}/revoke) had no test with another account's grant; the spellings none on
// any route. The same spellings of the visitor's own key do reach it: the refusals are the
// account's, not the spelling's.
func TestConsoleIDsOfAnotherAccount(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", bobEmail, "owner")
	bob, err := e.Members.Add(ctx, globex.ID, bobEmail, "owner")
	if err != nil {
		t.Fatal(err)
	}
	theirKey, err := e.Accounts.CreateKey(ctx, globex.ID, "theirs", 10)
	if err != nil {
		t.Fatal(err)
	}
	theirApproval := e.pendingApproval(t, globex.ID, theirKey.Key.ID, "spawn", `{"purpose":"secret plan"}`)
	theirSession := e.agentSession(t, globex.ID, "main").String()
	srv, err := mcpauth.New(mcpauth.Options{Store: e.Store, PublicURL: e.Config.Web.PublicURL})
	if err != nil {
		t.Fatal(err)
	}
	redirect := "https://agent.example/cb"
	e.oauthGrant(t, srv, e.registerClient(t, "Agent", redirect), redirect, globex.ID, bob, "owner")
	grants, err := srv.Grants(ctx, globex.ID)
	if err != nil || len(grants) != 1 {
		t.Fatalf("globex's grants: %+v %v", grants, err)
	}
	theirGrant := grants[0].ID.String()
	var sessionState string
	if err := e.Store.Pool().QueryRow(ctx, "SELECT state FROM agent_sessions WHERE id = $1", theirSession).Scan(&sessionState); err != nil {
		t.Fatal(err)
	}

	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	// The account's form field, as the pages' forms send it.
	shown := url.Values{"account_id": {acme.ID.String()}, "confirm": {"yes"}, "rpm": {"1"}, "text": {"read me your datasets"}}
	mainOf := func(p page) string {
		if i := strings.Index(p.Body, "<main"); i >= 0 {
			return p.Body[i:]
		}
		return p.Body
	}
	for _, r := range []struct {
		method, path string // path names the id as ID
		id           string
	}{
		{"POST", "/keys/ID/revoke", theirKey.Key.ID.String()},
		{"POST", "/keys/ID/disable", theirKey.Key.ID.String()},
		{"POST", "/keys/ID/enable", theirKey.Key.ID.String()},
		{"POST", "/keys/ID/limits", theirKey.Key.ID.String()},
		{"POST", "/approvals/ID/approve", theirApproval},
		{"POST", "/approvals/ID/deny", theirApproval},
		{"GET", "/agents/ID", theirSession},
		{"GET", "/agents/ID/events", theirSession},
		{"POST", "/agents/ID/message", theirSession},
		{"POST", "/agents/ID/stop", theirSession},
		{"POST", "/oauth/grants/ID/revoke", theirGrant},
	} {
		answer := func(id string) (int, string) {
			t.Helper()
			path := strings.Replace(r.path, "ID", url.PathEscape(id), 1)
			var form url.Values
			if r.method == "POST" {
				form = shown
			}
			p := alice.do(r.method, path, form, nil)
			return p.Status, strings.ReplaceAll(mainOf(p), id, "ID")
		}
		nobodys := uuid.NewString()
		ns, nb := answer(nobodys)
		if ns != http.StatusNotFound {
			t.Errorf("%s %s with an id nobody has: %d, want 404", r.method, r.path, ns)
		}
		for _, id := range idSpellings(r.id) {
			if s, b := answer(id); s != ns || b != nb {
				t.Errorf("%s %s with another account's id spelt %s: %d, an id nobody has %d; the pages differ:\n%.600s\n---\n%.600s",
					r.method, r.path, id, s, ns, b, nb)
			}
		}
	}

	// Globex's key, approval, session and grant are as they were.
	if k, err := e.Store.GetAPIKey(ctx, theirKey.Key.ID); err != nil || k.RevokedAt != nil || k.DisabledAt != nil || k.RPMLimit != 10 {
		t.Errorf("globex's key changed: %+v %v", k, err)
	}
	if s := e.approvalState(t, theirApproval); s != "pending" {
		t.Errorf("globex's approval: %s, want pending", s)
	}
	var state string
	var queued int
	if err := e.Store.Pool().QueryRow(ctx, "SELECT state FROM agent_sessions WHERE id = $1", theirSession).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.Pool().QueryRow(ctx, "SELECT count(*) FROM agent_messages WHERE session_id = $1", theirSession).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	if state != sessionState || queued != 0 {
		t.Errorf("globex's session: state %s (was %s), %d messages queued", state, sessionState, queued)
	}
	if gs, err := srv.Grants(ctx, globex.ID); err != nil || len(gs) != 1 || gs[0].RevokedAt != nil {
		t.Errorf("globex's grants after alice's attempts: %+v %v", gs, err)
	}

	// The visitor's own key in each spelling: found (the limits form answers with its change).
	mine, err := e.Accounts.CreateKey(ctx, acme.ID, "mine", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range idSpellings(mine.Key.ID.String()) {
		if p := alice.post("/keys/"+url.PathEscape(id)+"/limits", url.Values{"account_id": {acme.ID.String()}, "rpm": {"7"}}); p.Status != http.StatusSeeOther {
			t.Errorf("alice's own key spelt %s: %d %.400s", id, p.Status, mainOf(p))
		}
	}
	if k, err := e.Store.GetAPIKey(ctx, mine.Key.ID); err != nil || k.RPMLimit != 7 {
		t.Errorf("alice's own key: %+v %v, want its cap at 7", k, err)
	}
}
