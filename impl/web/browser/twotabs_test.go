package browser_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/impl/devkit/browsertest"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestTwoTabsSwitchAccounts: alice, an owner of acme and globex, has acme's Keys page open in
// one tab, switches to globex in a second tab of the same browser, and then presses "Revoke all
// keys" in the first. The console answers 409 with a page naming both accounts and revokes
// nothing in either: before, the button (whose form named no account) led on to revoking
// globex's keys, on a page the person had opened in acme.
func TestTwoTabsSwitchAccounts(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	if _, err := s.GW.Accounts.CreateKey(ctx, s.Account.ID, "acme-ci", 0); err != nil {
		t.Fatal(err)
	}
	p := newTour(t)
	s.signIn(p)
	globex, err := s.GW.Accounts.CreateAccount(ctx, "globex", "default")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (members.New(s.GW.Store, nil)).Add(ctx, globex.ID, alice.Email, members.RoleOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GW.Accounts.CreateKey(ctx, globex.ID, "globex-prod", 0); err != nil {
		t.Fatal(err)
	}
	p.at(p.Navigate(s.URL+"/keys"), http.StatusOK, s.URL+"/keys")
	p.shot("keys-in-acme")

	// The second tab shares the first's browser context, and so its session.
	tab, closeTab := chromedp.NewContext(p.Context())
	defer closeTab()
	tctx, cancel := context.WithTimeout(tab, 2*browsertest.ActionTimeout)
	defer cancel()
	if _, err := chromedp.RunResponse(tctx, chromedp.Navigate(s.URL+"/signin/account")); err != nil {
		t.Fatalf("the second tab: open the account choice: %v", err)
	}
	resp, err := chromedp.RunResponse(tctx, chromedp.Click(chromedp.CSS(`form[action="/signin/account"] button`)))
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("the second tab: use globex: %v %v", resp, err)
	}
	if title, err := chromedp.Run(tctx, chromedp.Title()); err != nil || !strings.Contains(title, "globex") {
		t.Fatalf("the second tab after the switch is titled %q (%v), want globex's", title, err)
	}

	// The first tab still shows acme's Keys page; its button is sent now.
	if status := p.Submit("Revoke all keys"); status != http.StatusConflict {
		p.shot("revoke-all-after-switch")
		t.Fatalf("acme's Revoke all keys sent after the switch: %d, want 409: %s", status, p.Text("main"))
	}
	p.shot("refused-after-switch")
	if got := p.Text("main"); !strings.Contains(got, "This page was for acme; you are now working in globex") {
		t.Errorf("the refusal says %q, want it to name acme and globex", got)
	}
	for _, id := range []struct{ name, acct string }{{"acme-ci", s.Account.ID.String()}, {"globex-prod", globex.ID.String()}} {
		var status string
		if err := s.GW.Store.Pool().QueryRow(ctx, "SELECT CASE WHEN revoked_at IS NULL THEN 'active' ELSE 'revoked' END FROM api_keys WHERE name = $1 AND account_id = $2", id.name, id.acct).Scan(&status); err != nil || status != "active" {
			t.Errorf("key %s: %s (%v), want active", id.name, status, err)
		}
	}
}
