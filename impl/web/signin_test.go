package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/web/session"
)

// TestSignInEndToEnd signs in through the real development provider (another site), lands on
// the account's home page, and checks the session cookie's attributes, the stored token hash,
// the security headers and the audited sign-in.
func TestSignInEndToEnd(t *testing.T) {
	e := start(t, nil)
	acct := e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	p := b.get("/")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, `href="/signin"`) {
		t.Fatalf("home signed out: %d %.200s", p.Status, p.Body)
	}
	first := b.get("/signin")
	for _, want := range []string{"code_challenge_method=S256", "code_challenge=", "nonce=", "state="} {
		if !strings.Contains(first.Location, want) {
			t.Errorf("authorization URL %s lacks %s", first.Location, want)
		}
	}
	cb := b.toCallback(first.Location, e.IdP.Issuer(), aliceEmail, alicePass)
	preToken := b.cookie()
	res := b.get(cb)
	if res.Status != http.StatusSeeOther || res.Location != e.URL+"/" {
		t.Fatalf("callback: %d %s %.300s", res.Status, res.Location, res.Body)
	}
	var setCookie string
	for _, c := range res.Header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "__Host-tollgate_session=") {
			setCookie = c
		}
	}
	for _, want := range []string{"Path=/", "HttpOnly", "Secure", "SameSite=Lax"} {
		if !strings.Contains(setCookie, want) {
			t.Errorf("session cookie %q lacks %s", setCookie, want)
		}
	}
	if strings.Contains(setCookie, "Domain=") {
		t.Errorf("session cookie %q has a Domain", setCookie)
	}
	token := b.cookie()
	if token == "" || token == preToken {
		t.Fatalf("the session token was not renewed at sign-in (%q, before %q)", token, preToken)
	}
	home := b.get("/")
	if home.Status != http.StatusOK || !strings.Contains(home.Body, "acme") || !strings.Contains(home.Body, `href="/keys"`) {
		t.Fatalf("home signed in: %d %.300s", home.Status, home.Body)
	}
	csp := home.Header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'nonce-", "frame-ancestors 'none'", "form-action 'self' " + e.IdP.Issuer(), "default-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if home.Header.Get("X-Content-Type-Options") != "nosniff" || home.Header.Get("Referrer-Policy") == "" {
		t.Errorf("security headers missing: %v", home.Header)
	}
	if home.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control = %q", home.Header.Get("Cache-Control"))
	}
	// Only the token's hash is stored.
	var n int
	pool := e.Store.Pool()
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM web_sessions WHERE token_hash = $1 AND user_id IS NOT NULL`, session.Hash(token)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("session row by hash: %d %v", n, err)
	}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM web_sessions WHERE position($1::bytea in token_hash) > 0 OR position($1::bytea in data) > 0`, []byte(token)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the plain token is stored: %d %v", n, err)
	}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE account_id = $1 AND action = 'session.sign_in' AND actor = $2`, acct.ID, aliceEmail).Scan(&n); err != nil || n != 1 {
		t.Fatalf("audited sign-ins: %d %v", n, err)
	}
	for _, path := range []string{"/keys", "/plan", "/audit", "/sessions", "/usage", "/approvals", "/agents", "/datasets"} {
		if p := b.get(path); p.Status != http.StatusOK {
			t.Errorf("GET %s: %d %.200s", path, p.Status, p.Body)
		}
	}
	for _, path := range []string{"/keys", "/plan", "/audit", "/sessions", "/usage", "/approvals", "/agents", "/datasets"} {
		if p := b.get(path); strings.Contains(p.Body, "not built yet") {
			t.Errorf("%s is still the placeholder", path)
		}
	}
}

// signInURL starts a sign-in and returns the provider's authorization URL.
func signInURL(t *testing.T, b *browser) string {
	p := b.get("/signin")
	if p.Status != http.StatusFound {
		t.Fatalf("GET /signin: %d", p.Status)
	}
	return p.Location
}

func signedIn(b *browser) bool { return b.get("/keys").Status == http.StatusOK }

// TestStateMismatchRefused: a callback whose state is not the session's is refused, and
// signs nobody in.
func TestStateMismatchRefused(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	cb := b.toCallback(signInURL(t, b), e.IdP.Issuer(), aliceEmail, alicePass)
	u, _ := url.Parse(cb)
	q := u.Query()
	q.Set("state", "forged"+q.Get("state"))
	u.RawQuery = q.Encode()
	if p := b.get(u.String()); p.Status != http.StatusBadRequest {
		t.Fatalf("forged state: %d %.200s", p.Status, p.Body)
	}
	if signedIn(b) {
		t.Fatal("signed in with a forged state")
	}
}

// TestNonceMismatchRefused: an ID token whose nonce is not the one the sign-in sent (here the
// authorization request's nonce was changed on its way to the provider, which echoes it) is
// refused although the state matches.
func TestNonceMismatchRefused(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	u, _ := url.Parse(signInURL(t, b))
	q := u.Query()
	q.Set("nonce", "attacker-chosen-nonce")
	u.RawQuery = q.Encode()
	cb := b.toCallback(u.String(), e.IdP.Issuer(), aliceEmail, alicePass)
	if p := b.get(cb); p.Status != http.StatusBadRequest {
		t.Fatalf("nonce mismatch: %d %.200s", p.Status, p.Body)
	}
	if signedIn(b) {
		t.Fatal("signed in with a nonce mismatch")
	}
}

// TestReplayedCallbackRefused: a callback used once is refused the second time, both as it is
// (the sign-in it belonged to is over) and with the code grafted onto a new sign-in's state
// (the provider refuses the used code, and its PKCE verifier is not the new one's).
func TestReplayedCallbackRefused(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	cb := b.toCallback(signInURL(t, b), e.IdP.Issuer(), aliceEmail, alicePass)
	if p := b.get(cb); p.Status != http.StatusSeeOther {
		t.Fatalf("first callback: %d %.200s", p.Status, p.Body)
	}
	if p := b.get(cb); p.Status != http.StatusBadRequest {
		t.Fatalf("replayed callback: %d", p.Status)
	}
	// An attacker's browser, with a sign-in of its own, replays the stolen code.
	attacker := e.browser(t)
	au, _ := url.Parse(signInURL(t, attacker))
	old, _ := url.Parse(cb)
	q := old.Query()
	q.Set("state", au.Query().Get("state"))
	old.RawQuery = q.Encode()
	if p := attacker.get(old.String()); p.Status != http.StatusBadRequest {
		t.Fatalf("replayed code with a fresh state: %d %.200s", p.Status, p.Body)
	}
	if signedIn(attacker) {
		t.Fatal("the replayed code signed the attacker in")
	}
}

// TestSignInStartIsBounded: the page a sign-in returns to is kept only up to 8 KiB (a longer
// one is dropped, so the pre-sign-in session stays small), and one client address starts at
// most 60 sign-ins at once, then gets 429 with Retry-After, until its bucket refills. Trial
// h11 D11 and D12: an anonymous /signin?next= of a megabyte stored a megabyte per request in
// web_sessions, and a loop of sign-ins drove the provider's token endpoint without limit.
func TestSignInStartIsBounded(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	long := "/keys?x=" + strings.Repeat("a", 100_000)
	b := e.browser(t)
	if p := b.get("/signin?next=" + url.QueryEscape(long)); p.Status != http.StatusFound {
		t.Fatalf("a sign-in with a long next: %d %.200s", p.Status, p.Body)
	}
	var biggest int
	if err := e.Store.Pool().QueryRow(ctx, `SELECT coalesce(max(length(data)), 0) FROM web_sessions`).Scan(&biggest); err != nil {
		t.Fatal(err)
	}
	if biggest > 4096 {
		t.Errorf("a pre-sign-in session holds %d bytes", biggest)
	}
	// The browser above took one sign-in of the address's 60.
	for i := 2; i <= 60; i++ {
		if p := e.browser(t).get("/signin"); p.Status != http.StatusFound {
			t.Fatalf("sign-in %d of the burst: %d %.200s", i, p.Status, p.Body)
		}
	}
	p := e.browser(t).get("/signin")
	if p.Status != http.StatusTooManyRequests || p.Header.Get("Retry-After") == "" || !strings.Contains(p.Body, "Too many sign-ins from this address") {
		t.Errorf("sign-in 61: %d, Retry-After %q, %.300s", p.Status, p.Header.Get("Retry-After"), p.Body)
	}
}
