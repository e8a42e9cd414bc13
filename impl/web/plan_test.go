package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
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

// TestPlanPageUpstreamKeysForOwners: an owner sees on the Plan & limits page the account's own
// upstream keys (provider, the last four characters, when set), read-only, and none of another
// account's; a key for a provider no longer configured is marked unused; an account with none
// says so. A member of the account sees no such list, and the page never shows a key.
func TestPlanPageUpstreamKeysForOwners(t *testing.T) {
	ctx := context.Background()
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	if _, err := e.Members.Add(ctx, acme.ID, bobEmail, "member"); err != nil {
		t.Fatal(err)
	}
	other := e.account(t, "globex", carolEmail, "owner")
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	if p := alice.get("/plan"); !strings.Contains(p.Body, `<table id="upstream-keys">`) || !strings.Contains(p.Body, "None: every provider is reached with the operator's key.") {
		t.Fatalf("owner's plan page without upstream keys: %d %.2500s", p.Status, p.Body)
	}
	set := func(account uuid.UUID, provider, hint string) {
		t.Helper()
		if err := e.Store.SetUpstreamKey(ctx, store.UpstreamKey{AccountID: account, Provider: provider,
			Sealed: []byte("sealed-bytes-never-shown"), Hint: hint, SetBy: "operator (root)"}); err != nil {
			t.Fatal(err)
		}
	}
	set(acme.ID, "sim-anthropic", "…x9Qa")
	set(acme.ID, "gone-provider", "…7fKe")
	set(other.ID, "sim-openai-chat", "…Zz99")
	p := alice.get("/plan")
	for _, want := range []string{"<th scope=\"row\">sim-anthropic</th><td><code>…x9Qa</code></td>",
		"<th scope=\"row\">gone-provider (not in the configuration: not used)</th><td><code>…7fKe</code></td>"} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("owner's plan page lacks %q: %.2500s", want, p.Body)
		}
	}
	for _, never := range []string{"…Zz99", "sim-openai-chat", "sealed-bytes-never-shown", "operator (root)", "None: every provider"} {
		if strings.Contains(p.Body[strings.Index(p.Body, `<table id="upstream-keys">`):], never) {
			t.Errorf("owner's upstream keys show %q: %.2500s", never, p.Body)
		}
	}
	bob := e.browser(t)
	bob.signIn(e, bobEmail, bobPass)
	if p := bob.get("/plan"); p.Status != http.StatusOK || strings.Contains(p.Body, "upstream-keys") || strings.Contains(p.Body, "…x9Qa") {
		t.Errorf("a member's plan page shows the upstream keys: %d %.2500s", p.Status, p.Body)
	}
}

// TestPlanPageNamesProvidersThatNeedTheAccountsKey: a provider with account_keys: required is
// not reached with the operator's key, so an owner whose account has no key for it is told so
// on the Plan & limits page (its requests there are refused), not "None: every provider is
// reached with the operator's key" (the review of s15h6: the page said so of an account every
// request of which to such a provider was a 403); once its key is set, the key is listed
// instead.
func TestPlanPageNamesProvidersThatNeedTheAccountsKey(t *testing.T) {
	ctx := context.Background()
	e := startConfig(t, func(c *config.Config) {
		for i := range c.Providers {
			if c.Providers[i].Name == "sim-anthropic" {
				c.Providers[i].AccountKeys = config.AccountKeysRequired
			}
		}
	})
	acme := e.account(t, "acme", aliceEmail, "owner")
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	const missing = `<th scope="row">sim-anthropic</th><td colspan="2">None: this provider serves only accounts with a key of their own, so this account's requests to it are refused.</td>`
	p := alice.get("/plan")
	if !strings.Contains(p.Body, missing) || strings.Contains(p.Body, "None: every provider is reached with the operator's key.") {
		t.Fatalf("owner's plan page, no key for a provider that requires one: %d %.2500s", p.Status, p.Body)
	}
	if err := e.Store.SetUpstreamKey(ctx, store.UpstreamKey{AccountID: acme.ID, Provider: "sim-anthropic",
		Sealed: []byte("sealed"), Hint: "…x9Qa", SetBy: "operator (root)"}); err != nil {
		t.Fatal(err)
	}
	p = alice.get("/plan")
	if !strings.Contains(p.Body, `<th scope="row">sim-anthropic</th><td><code>…x9Qa</code></td>`) || strings.Contains(p.Body, missing) {
		t.Errorf("owner's plan page with the key set: %d %.2500s", p.Status, p.Body)
	}
}
