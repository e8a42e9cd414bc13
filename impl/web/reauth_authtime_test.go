package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/devoidc"
)

// reauthAt runs the re-authentication a page asked for (p, the application's redirect to
// /signin?reauth=1) at a provider that completes it without its form (IgnoreForcedLogin), and
// returns the application's answer at its callback.
func reauthAt(t *testing.T, e *env, b *browser, p page) page {
	t.Helper()
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, e.URL+"/signin?") || !strings.Contains(p.Location, "reauth=1") {
		t.Fatalf("want the redirect to a re-authentication, got %d %s", p.Status, p.Location)
	}
	authz := b.get(p.Location)
	if authz.Status != http.StatusFound || !strings.Contains(authz.Location, "prompt=login") || !strings.Contains(authz.Location, "max_age=0") {
		t.Fatalf("re-authentication request: %d %s", authz.Status, authz.Location)
	}
	back := b.follow(b.get(authz.Location), func(u string) bool { return strings.HasPrefix(u, e.URL) })
	if !strings.HasPrefix(back.Location, e.URL+"/auth/callback") {
		t.Fatalf("the provider did not send the browser back at once: %d %s %.300s", back.Status, back.Location, back.Body)
	}
	return b.get(back.Location)
}

// TestReauthWithoutAuthTimeIsRefused: at a provider that sends no auth_time and re-issues a
// token for its live session whatever max_age and prompt=login ask (as some do), an ordinary
// sign-in works, but it does not count as a recent one: the key form sends the browser to
// re-authenticate, and the provider's answer, an ID token without auth_time, is refused with a
// page (403) that says the provider did not confirm a fresh sign-in and that the operator can
// configure it to send auth_time. No key is made, and the person stays signed in. Before, the
// sign-in counted from the ID token's issue time: the key form was served at once, and a key
// made, by a browser whose person the provider never asked for a password again.
func TestReauthWithoutAuthTimeIsRefused(t *testing.T) {
	e := startWithProvider(t, func(*config.Config) {}, nil, nil, devoidc.Options{OmitAuthTime: true, IgnoreForcedLogin: true})
	acct := e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	if home := b.signIn(e, aliceEmail, alicePass); home.Status != http.StatusOK || !signedIn(b) {
		t.Fatalf("an ordinary sign-in without auth_time: %d %s, want signed in", home.Status, home.Location)
	}
	refused := reauthAt(t, e, b, b.get("/keys/new"))
	if refused.Status != http.StatusForbidden || !strings.Contains(refused.Body, "did not confirm that you signed in again") ||
		!strings.Contains(refused.Body, "send auth_time") || !strings.Contains(refused.Body, "still signed in") {
		t.Fatalf("the re-authentication without auth_time: %d %.800s, want 403 saying the provider did not confirm it", refused.Status, refused.Body)
	}
	if !signedIn(b) {
		t.Fatal("the refused re-authentication signed the person out")
	}
	if p := b.post("/keys", url.Values{"name": {"unconfirmed"}}); p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "reauth=1") {
		t.Fatalf("POST /keys after the refusal: %d %s, want the re-authentication again", p.Status, p.Location)
	}
	if keys, _ := e.Store.ListAPIKeys(context.Background(), acct.ID); len(keys) != 0 {
		t.Fatalf("%d keys made without a confirmed sign-in", len(keys))
	}
}

// TestReauthNamingAnEarlierSignInIsRefused: a provider that sends auth_time but re-issues a
// token for its live session whatever max_age and prompt=login ask names the earlier sign-in;
// the re-authentication is refused with a page that says so (403), not the bare "The sign-in
// failed", and creates nothing.
func TestReauthNamingAnEarlierSignInIsRefused(t *testing.T) {
	const reauthAfter = time.Second
	e := startWithProvider(t, func(c *config.Config) { c.Web.ReauthAfter = reauthAfter }, nil, nil, devoidc.Options{IgnoreForcedLogin: true})
	acct := e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	time.Sleep(6500 * time.Millisecond) // past reauth_after and the 5 s of clock skew a re-authentication's auth_time may have
	refused := reauthAt(t, e, b, b.get("/keys/new"))
	if refused.Status != http.StatusForbidden || !strings.Contains(refused.Body, "did not sign you in again") || !strings.Contains(refused.Body, "prompt=login") {
		t.Fatalf("the re-authentication naming an earlier sign-in: %d %.800s, want 403 saying so", refused.Status, refused.Body)
	}
	if keys, _ := e.Store.ListAPIKeys(context.Background(), acct.ID); len(keys) != 0 {
		t.Fatalf("%d keys made without a fresh sign-in", len(keys))
	}
}

// TestReauthTrustsIssueTimeWhenTheOperatorSaysSo: with web.reauth_trusts_issue_time, the
// operator's choice for a provider that never sends auth_time, a sign-in counts from its ID
// token's issue time: the key form is served right after it and a key is made, where without
// the setting (TestReauthWithoutAuthTimeIsRefused) no key could be made in the console at all.
func TestReauthTrustsIssueTimeWhenTheOperatorSaysSo(t *testing.T) {
	e := startWithProvider(t, func(c *config.Config) { c.Web.ReauthTrustsIssueTime = true }, nil, nil, devoidc.Options{OmitAuthTime: true})
	acct := e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	if home := b.signIn(e, aliceEmail, alicePass); home.Status != http.StatusOK || !signedIn(b) {
		t.Fatalf("sign-in: %d %s", home.Status, home.Location)
	}
	if form := b.get("/keys/new"); form.Status != http.StatusOK {
		t.Fatalf("the key form right after a sign-in without auth_time, trusted by its issue time: %d %s", form.Status, form.Location)
	}
	if p := b.post("/keys", url.Values{"name": {"trusted"}}); p.Status >= 400 || strings.Contains(p.Location, "reauth=1") {
		t.Fatalf("POST /keys: %d %s", p.Status, p.Location)
	}
	if keys, _ := e.Store.ListAPIKeys(context.Background(), acct.ID); len(keys) != 1 {
		t.Fatalf("%d keys made, want 1", len(keys))
	}
}
