package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
)

// webRoutes is every route of the web application, with a method.
func webRoutes(keyID string) [][2]string {
	return [][2]string{
		{"GET", "/"}, {"GET", "/signin"}, {"GET", "/signin?reauth=1"}, {"GET", "/auth/callback?state=x&code=y"},
		{"GET", "/signin/account"}, {"POST", "/signin/account"}, {"POST", "/signin/signup"}, {"POST", "/signout"},
		{"GET", "/keys"}, {"GET", "/keys/new"}, {"POST", "/keys"}, {"POST", "/keys/revoke-all"},
		{"POST", "/keys/" + keyID + "/revoke"}, {"POST", "/keys/" + keyID + "/rpm"},
		{"GET", "/plan"}, {"GET", "/audit"}, {"GET", "/sessions"}, {"POST", "/sessions/1/end"}, {"POST", "/sessions/end-all"},
		{"GET", "/usage"}, {"GET", "/usage/statement.csv"}, {"GET", "/approvals"}, {"GET", "/agents"}, {"GET", "/datasets"}, {"GET", "/static/style.css"},
		{"GET", "/keys/does-not-exist"},
	}
}

// TestAPIKeyRefusedOnEveryWebRoute: a request to a web route with an Authorization header (a
// valid API key, with or without a valid session cookie) is refused with 400 and does
// nothing; x-api-key too.
func TestAPIKeyRefusedOnEveryWebRoute(t *testing.T) {
	e := start(t, nil)
	acct := e.account(t, "acme", aliceEmail, "owner")
	k, err := e.Accounts.CreateKey(context.Background(), acct.ID, "ci", -1)
	if err != nil {
		t.Fatal(err)
	}
	anon := e.browser(t)
	user := e.browser(t)
	user.signIn(e, aliceEmail, alicePass)
	for _, b := range []*browser{anon, user} {
		for _, r := range webRoutes(k.Key.ID.String()) {
			for _, h := range []map[string]string{
				{"Authorization": "Bearer " + k.Plain, "Origin": e.URL},
				{"X-Api-Key": k.Plain, "Origin": e.URL},
			} {
				var form url.Values
				if r[0] == "POST" {
					form = url.Values{"rpm": {"1"}, "name": {"x"}}
				}
				p := b.do(r[0], r[1], form, h)
				if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "API keys are not accepted") {
					t.Errorf("%s %s with %v: %d %.100s", r[0], r[1], h, p.Status, p.Body)
				}
			}
		}
	}
	got, err := e.Store.GetAPIKey(context.Background(), k.Key.ID)
	if err != nil || got.RevokedAt != nil || got.RPMLimit != k.Key.RPMLimit {
		t.Fatalf("the key changed: %+v %v", got, err)
	}
	if !signedIn(user) {
		t.Fatal("the session ended")
	}
}

// TestCrossOriginPostForbidden: a state-changing request from another origin (by Origin or by
// Sec-Fetch-Site) gets 403 and changes nothing; the same request from the application's own
// origin works.
func TestCrossOriginPostForbidden(t *testing.T) {
	e := start(t, nil)
	acct := e.account(t, "acme", aliceEmail, "owner")
	k, err := e.Accounts.CreateKey(context.Background(), acct.ID, "ci", -1)
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	path := "/keys/" + k.Key.ID.String() + "/revoke"
	for _, h := range []map[string]string{
		{"Origin": "http://evil.example"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Origin": e.IdP.Issuer()},
	} {
		// Confirmed, as the confirmation page's form sends it: only the origin stops it.
		if p := b.do("POST", path, confirmed, h); p.Status != http.StatusForbidden {
			t.Errorf("cross-origin POST with %v: %d", h, p.Status)
		}
	}
	for _, p := range []string{"/signout", "/keys/revoke-all", "/sessions/end-all"} {
		form := url.Values{"confirm": {"yes"}, "confirm_text": {"acme"}}
		if r := b.do("POST", p, form, map[string]string{"Origin": "http://evil.example"}); r.Status != http.StatusForbidden {
			t.Errorf("cross-origin POST %s: %d", p, r.Status)
		}
	}
	if got, _ := e.Store.GetAPIKey(context.Background(), k.Key.ID); got.RevokedAt != nil {
		t.Fatal("a cross-origin POST revoked the key")
	}
	if p := b.post(path, confirmed); p.Status != http.StatusSeeOther {
		t.Fatalf("same-origin revoke: %d %.200s", p.Status, p.Body)
	}
	if got, _ := e.Store.GetAPIKey(context.Background(), k.Key.ID); got.RevokedAt == nil {
		t.Fatal("the same-origin POST did not revoke the key")
	}
}

// TestSessionCookieIgnoredOnAPI: the API never reads the session cookie: a signed-in browser's
// cookie on /v1/models is 401, as no credentials are.
func TestSessionCookieIgnoredOnAPI(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	if b.cookie() == "" {
		t.Fatal("no session cookie")
	}
	for _, path := range []string{"/v1/models", "/v1/credits"} {
		if p := b.get(path); p.Status != http.StatusUnauthorized {
			t.Errorf("GET %s with the session cookie: %d %.200s", path, p.Status, p.Body)
		}
	}
	// Unknown paths stay the API's JSON 404.
	if p := b.get("/nope"); p.Status != http.StatusNotFound || !strings.Contains(p.Header.Get("Content-Type"), "json") {
		t.Errorf("GET /nope: %d %s", p.Status, p.Header.Get("Content-Type"))
	}
}

// TestExpiredSessionSignsOut: a session unused for longer than the idle timeout, and one older
// than the absolute timeout however busy, send the browser to sign in again.
func TestExpiredSessionSignsOut(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		e := start(t, func(w *config.Web) { w.SessionIdleTimeout = time.Second })
		e.account(t, "acme", aliceEmail, "owner")
		b := e.browser(t)
		b.signIn(e, aliceEmail, alicePass)
		if !signedIn(b) {
			t.Fatal("not signed in")
		}
		time.Sleep(1500 * time.Millisecond)
		p := b.get("/keys")
		if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, e.URL+"/signin") {
			t.Fatalf("idle session: %d %s", p.Status, p.Location)
		}
	})
	t.Run("absolute", func(t *testing.T) {
		e := start(t, func(w *config.Web) { w.SessionAbsoluteTimeout = 2 * time.Second })
		e.account(t, "acme", aliceEmail, "owner")
		b := e.browser(t)
		b.signIn(e, aliceEmail, alicePass)
		deadline := time.Now().Add(10 * time.Second)
		for signedIn(b) { // used all along, it still ends
			if time.Now().After(deadline) {
				t.Fatal("the session outlived its absolute timeout")
			}
			time.Sleep(200 * time.Millisecond)
		}
		p := b.get("/keys")
		if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, e.URL+"/signin") {
			t.Fatalf("expired session: %d %s", p.Status, p.Location)
		}
	})
}

// TestSignOutEndsProviderSession: signing out destroys the session here and, through the
// provider's end_session_endpoint, there too; the cookie no longer signs anyone in.
func TestSignOutEndsProviderSession(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	if n := e.IdP.Sessions("alice"); n != 1 {
		t.Fatalf("provider sessions before: %d", n)
	}
	token := b.cookie()
	p := b.post("/signout", nil)
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, e.IdP.Issuer()) || !strings.Contains(p.Location, "id_token_hint=") {
		t.Fatalf("sign-out: %d %s", p.Status, p.Location)
	}
	end := b.follow(p, func(u string) bool { return strings.HasPrefix(u, e.URL) })
	if !strings.HasPrefix(end.Location, e.URL+"/") {
		t.Fatalf("the provider did not send us back: %d %s %.200s", end.Status, end.Location, end.Body)
	}
	if n := e.IdP.Sessions("alice"); n != 0 {
		t.Fatalf("provider sessions after sign-out: %d", n)
	}
	var n int
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM web_sessions WHERE user_id IS NOT NULL`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("web sessions left: %d %v", n, err)
	}
	// The old cookie, replayed, signs nobody in.
	replay := e.browser(t)
	u, _ := url.Parse(e.URL)
	replay.c.Jar.SetCookies(u, []*http.Cookie{{Name: "__Host-tollgate_session", Value: token, Path: "/", Secure: true}})
	if signedIn(replay) {
		t.Fatal("the signed-out session's token still works")
	}
}
