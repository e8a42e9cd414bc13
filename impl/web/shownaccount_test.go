package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// TestCreationFormsBindTheShownAccount: a member of two accounts opens the new-key form in
// one, switches to the other in another tab, then sends the form: it is refused (409, a page
// saying so) and no key is created in either account (before, the key was created in the
// account switched to, which the form never named: trial h3 of 2026-12-06). Sent again from a
// page shown in the current account, it creates the key there. A form without the field (a
// page shown before it was added) is taken as before.
func TestCreationFormsBindTheShownAccount(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	if r := b.post("/signin/account", url.Values{"account_id": {acme.ID.String()}}); r.Status != http.StatusSeeOther {
		t.Fatalf("choose acme: %d", r.Status)
	}
	fields := regexp.MustCompile(`name="(form_id|account_id)" value="([^"]+)"`)
	shown := func() url.Values {
		v := url.Values{}
		for _, m := range fields.FindAllStringSubmatch(b.get("/keys/new").Body, -1) {
			v.Set(m[1], m[2])
		}
		return v
	}
	form := shown()
	if form.Get("account_id") != acme.ID.String() || form.Get("form_id") == "" {
		t.Fatalf("the new-key form's fields %v, want its form_id and acme's id", form)
	}
	// The other tab: the visitor is in globex now.
	if r := b.post("/signin/account", url.Values{"account_id": {globex.ID.String()}}); r.Status != http.StatusSeeOther {
		t.Fatalf("choose globex: %d", r.Status)
	}
	form.Set("name", "made-in-acme's-page")
	p := b.post("/keys", form)
	if p.Status != http.StatusConflict || !strings.Contains(p.Body, "You switched accounts after this page was shown: no key was created.") {
		t.Fatalf("the form shown in acme, sent in globex: %d %.500s", p.Status, p.Body)
	}
	named := func(name string) (n int) {
		for _, id := range []uuid.UUID{acme.ID, globex.ID} {
			keys, err := e.Accounts.ListKeys(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if k.Name == name {
					n++
				}
			}
		}
		return n
	}
	if n := named("made-in-acme's-page"); n != 0 {
		t.Fatalf("%d keys created by the refused form", n)
	}
	form = shown()
	if form.Get("account_id") != globex.ID.String() {
		t.Fatalf("the form shown now names %s, want globex", form.Get("account_id"))
	}
	form.Set("name", "made-in-globex")
	if p := b.post("/keys", form); p.Status != http.StatusCreated {
		t.Fatalf("the form shown in globex, sent in globex: %d %.500s", p.Status, p.Body)
	}
	keys, err := e.Accounts.ListKeys(context.Background(), globex.ID)
	if err != nil || len(keys) != 1 || keys[0].Name != "made-in-globex" {
		t.Fatalf("globex's keys %v (%v), want the one made there", keys, err)
	}
	form = shown()
	form.Del("account_id")
	form.Set("name", "older-page")
	if p := b.post("/keys", form); p.Status != http.StatusCreated || named("older-page") != 1 {
		t.Fatalf("a form without account_id: %d, %d keys", p.Status, named("older-page"))
	}
}

// TestAgentStartBindsTheShownAccount: the Agents page's start form carries the account it was
// shown in, and sent after the visitor switched accounts it starts nothing (409).
func TestAgentStartBindsTheShownAccount(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", aliceEmail, "owner")
	for _, id := range []uuid.UUID{acme.ID, globex.ID} {
		if _, err := db.New(e.Store.Pool()).InsertAgentSlot(context.Background(), db.InsertAgentSlotParams{AccountID: id, Name: "main"}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	b.post("/signin/account", url.Values{"account_id": {acme.ID.String()}})
	page := b.get("/agents")
	m := regexp.MustCompile(`action="/agents/start"[^>]*>\s*<input type="hidden" name="account_id" value="([^"]+)">`).FindStringSubmatch(page.Body)
	if m == nil || m[1] != acme.ID.String() {
		t.Fatalf("the start form does not carry acme's id: %.2000s", page.Body)
	}
	b.post("/signin/account", url.Values{"account_id": {globex.ID.String()}})
	p := b.post("/agents/start", url.Values{"account_id": {m[1]}, "slot": {"main"}, "prompt": {"tidy the docs"}})
	if p.Status != http.StatusConflict || !strings.Contains(p.Body, "no agent session was started") {
		t.Fatalf("the form shown in acme, sent in globex: %d %.500s", p.Status, p.Body)
	}
	for _, id := range []uuid.UUID{acme.ID, globex.ID} {
		var n int
		if err := e.Store.Pool().QueryRow(context.Background(), "SELECT count(*) FROM agent_sessions WHERE account_id = $1", id).Scan(&n); err != nil || n != 0 {
			t.Fatalf("account %s has %d agent sessions (%v), want none", id, n, err)
		}
	}
}
