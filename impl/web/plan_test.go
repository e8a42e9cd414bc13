package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestPlanPageKeyQuota: the Plan & limits page shows the keys held against the plan's key quota
// ("Keys: N of M", the built-in demo plan's max_keys being 20; a revoked key does not count, a
// disabled one does), and at the quota the key form refuses a new key with the quota's message
// (422, an alert) and creates nothing.
func TestPlanPageKeyQuota(t *testing.T) {
	ctx := context.Background()
	e := start(t, nil)
	acct := e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	if p := b.get("/plan"); !strings.Contains(p.Body, "<dt>Keys</dt><dd>0 of 20 ") {
		t.Fatalf("plan page without keys: %d %.1500s", p.Status, p.Body)
	}
	var ids []string
	for range 3 {
		k, err := e.Accounts.CreateKey(ctx, acct.ID, "k", -1)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, k.Key.ID.String())
		// A key made off the page (as by the CLI) shows its last four on the Keys page too.
		if p := b.get("/keys"); !strings.Contains(p.Body, "…"+k.Plain[len(k.Plain)-4:]+"</code>") {
			t.Errorf("the Keys page does not show the last four of a key made by the service")
		}
	}
	if p := b.post("/keys/"+ids[0]+"/revoke", confirmed); p.Status != http.StatusSeeOther {
		t.Fatalf("revoke: %d", p.Status)
	}
	if p := b.post("/keys/"+ids[1]+"/disable", confirmed); p.Status != http.StatusSeeOther {
		t.Fatalf("disable: %d", p.Status)
	}
	if p := b.get("/plan"); !strings.Contains(p.Body, "<dt>Keys</dt><dd>2 of 20 ") || !strings.Contains(p.Body, "<dt>Active keys</dt><dd>1</dd>") {
		t.Fatalf("plan page with a revoked, a disabled and an active key: %.1500s", p.Body)
	}
	for range 18 {
		if _, err := e.Accounts.CreateKey(ctx, acct.ID, "k", -1); err != nil {
			t.Fatal(err)
		}
	}
	p := b.post("/keys", url.Values{"name": {"one-too-many"}})
	if p.Status != http.StatusUnprocessableEntity || !strings.Contains(p.Body, `role="alert"`) || !strings.Contains(p.Body, "at most 20 keys") {
		t.Fatalf("a key past the quota on the form: %d %.800s", p.Status, p.Body)
	}
	if n, err := e.Store.CountUnrevokedAPIKeys(ctx, acct.ID); err != nil || n != 20 {
		t.Fatalf("keys not revoked = %d, %v; want 20", n, err)
	}
	if p := b.get("/plan"); !strings.Contains(p.Body, "<dt>Keys</dt><dd>20 of 20 ") {
		t.Fatalf("plan page at the quota: %.1500s", p.Body)
	}
}
