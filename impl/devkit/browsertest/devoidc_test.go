package browsertest_test

import (
	"context"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/tollgate/tollgate/impl/devkit/browsertest"
	"github.com/tollgate/tollgate/impl/devkit/devoidc"
)

var oidcUser = devoidc.User{Subject: "user-ada", Email: "ada@example.com", Name: "Ada", Password: "correct horse"}

// relyingParty is a tiny OpenID Connect relying party, served as
// http://localhost:PORT while the development provider is on 127.0.0.1: the
// cross-site arrangement of the web application and its provider. It keeps
// each sign-in attempt (state, nonce, PKCE verifier) server-side under a
// __Host- cookie, and each session (the user and the ID token, for the
// logout's id_token_hint) under another.
type relyingParty struct {
	url      string
	conf     oauth2.Config
	verifier *oidc.IDTokenVerifier
	endpoint string // the provider's end_session_endpoint

	mu       sync.Mutex
	attempts map[string]attempt // by the __Host-signin cookie
	sessions map[string]session // by the __Host-session cookie
}

// attempt is what the relying party keeps between the redirect to the provider and the callback.
type attempt struct{ state, nonce, verifier string }

// session is a signed-in user of the relying party.
type session struct{ email, idToken string }

// rpPage is every page of the relying party; it has no script and no inline style.
var rpPage = template.Must(template.New("rp").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.}}</title></head>
<body><h1 id="message">{{.}}</h1></body></html>`))

func (rp *relyingParty) render(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = rpPage.Execute(w, message)
}

func (rp *relyingParty) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/signin":
		a := attempt{state: oauth2.GenerateVerifier(), nonce: oauth2.GenerateVerifier(), verifier: oauth2.GenerateVerifier()}
		id := oauth2.GenerateVerifier()
		rp.mu.Lock()
		rp.attempts[id] = a
		rp.mu.Unlock()
		hostCookie(w, "__Host-signin", id, http.SameSiteLaxMode)
		opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(a.verifier), oidc.Nonce(a.nonce)}
		if r.URL.Query().Get("prompt") == "login" {
			opts = append(opts, oauth2.SetAuthURLParam("prompt", "login"))
		}
		http.Redirect(w, r, rp.conf.AuthCodeURL(a.state, opts...), http.StatusFound)
	case "/auth/callback":
		c, err := r.Cookie("__Host-signin")
		rp.mu.Lock()
		a, ok := rp.attempts[cookieValue(c, err)]
		delete(rp.attempts, cookieValue(c, err))
		rp.mu.Unlock()
		if !ok || r.URL.Query().Get("state") != a.state {
			rp.render(w, http.StatusBadRequest, "sign-in failed: the sign-in cookie or the state did not come back")
			return
		}
		email, idToken, err := rp.exchange(r.Context(), r.URL.Query().Get("code"), a)
		if err != nil {
			rp.render(w, http.StatusBadRequest, "sign-in failed: "+err.Error())
			return
		}
		id := oauth2.GenerateVerifier()
		rp.mu.Lock()
		rp.sessions[id] = session{email: email, idToken: idToken}
		rp.mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: "__Host-signin", Path: "/", Secure: true, HttpOnly: true, MaxAge: -1})
		hostCookie(w, "__Host-session", id, http.SameSiteLaxMode)
		http.Redirect(w, r, "/home", http.StatusSeeOther)
	case "/home":
		s, ok := rp.session(r)
		if !ok {
			rp.render(w, http.StatusUnauthorized, "Signed out")
			return
		}
		rp.render(w, http.StatusOK, "Signed in as "+s.email)
	case "/signout":
		s, ok := rp.session(r)
		if !ok {
			http.Redirect(w, r, "/signed-out", http.StatusSeeOther)
			return
		}
		c, _ := r.Cookie("__Host-session")
		rp.mu.Lock()
		delete(rp.sessions, c.Value)
		rp.mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: "__Host-session", Path: "/", Secure: true, HttpOnly: true, MaxAge: -1})
		q := url.Values{"id_token_hint": {s.idToken}, "post_logout_redirect_uri": {rp.url + "/signed-out"}}
		http.Redirect(w, r, rp.endpoint+"?"+q.Encode(), http.StatusSeeOther)
	case "/signed-out":
		rp.render(w, http.StatusOK, "Signed out")
	default:
		http.NotFound(w, r)
	}
}

// exchange trades the code for tokens and verifies the ID token, its nonce too
// (go-oidc's Verify does not check it).
func (rp *relyingParty) exchange(ctx context.Context, code string, a attempt) (email, rawIDToken string, err error) {
	tok, err := rp.conf.Exchange(ctx, code, oauth2.VerifierOption(a.verifier))
	if err != nil {
		return "", "", fmt.Errorf("exchange: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := rp.verifier.Verify(ctx, raw)
	if err != nil {
		return "", "", fmt.Errorf("verify: %w", err)
	}
	if idt.Nonce != a.nonce {
		return "", "", fmt.Errorf("nonce %q, want %q", idt.Nonce, a.nonce)
	}
	var claims struct {
		Email string `json:"email"`
	}
	if err := idt.Claims(&claims); err != nil {
		return "", "", err
	}
	return claims.Email, raw, nil
}

func (rp *relyingParty) session(r *http.Request) (session, bool) {
	c, err := r.Cookie("__Host-session")
	rp.mu.Lock()
	defer rp.mu.Unlock()
	s, ok := rp.sessions[cookieValue(c, err)]
	return s, ok
}

func cookieValue(c *http.Cookie, err error) string {
	if err != nil {
		return ""
	}
	return c.Value
}

// startOIDC starts the development provider on 127.0.0.1 and the relying
// party on localhost.
func startOIDC(t *testing.T) (*relyingParty, *devoidc.Provider) {
	t.Helper()
	app := httptest.NewUnstartedServer(nil)
	rp := &relyingParty{
		url:      "http://localhost:" + fmt.Sprint(app.Listener.Addr().(*net.TCPAddr).Port),
		attempts: map[string]attempt{},
		sessions: map[string]session{},
	}
	app.Config.Handler = rp
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := devoidc.Serve(ln, devoidc.Options{
		Users: []devoidc.User{oidcUser},
		Clients: []devoidc.Client{{
			ID: "browsertest", Secret: "browsertest-secret",
			RedirectURIs:           []string{rp.url + "/auth/callback"},
			PostLogoutRedirectURIs: []string{rp.url + "/signed-out"},
		}},
	})
	if err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	provider, err := oidc.NewProvider(t.Context(), p.Issuer())
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var disc struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := provider.Claims(&disc); err != nil || disc.EndSession == "" {
		t.Fatalf("discovery: no end_session_endpoint (%v)", err)
	}
	rp.endpoint = disc.EndSession
	rp.conf = oauth2.Config{
		ClientID: "browsertest", ClientSecret: "browsertest-secret", RedirectURL: rp.url + "/auth/callback",
		Endpoint: provider.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "email", "profile"},
	}
	rp.verifier = provider.Verifier(&oidc.Config{ClientID: "browsertest"})
	app.Start()
	t.Cleanup(app.Close)
	return rp, p
}

// TestDevOIDCSignIn signs in through Chromium with the development provider's
// own login form, the relying party on localhost and the provider on
// 127.0.0.1: the relying party's __Host- cookies (Secure, HttpOnly,
// SameSite=Lax) survive the top-level round trip through the provider, the
// provider's session cookie lets a second sign-in skip the form (it too is
// sent on the cross-site redirect), prompt=login shows the form again, and
// signing out through the provider's end_session_endpoint ends its session and
// comes back to the relying party. A screenshot of each page is written.
func TestDevOIDCSignIn(t *testing.T) {
	rp, provider := startOIDC(t)
	p := browsertest.New(t)

	if status := p.Navigate(rp.url + "/signin"); status != http.StatusOK {
		t.Fatalf("sign-in: status %d", status)
	}
	if got := p.URL(); !strings.HasPrefix(got, provider.Issuer()+"/login") {
		t.Fatalf("after /signin the browser is at %s, want the provider's login form", got)
	}
	p.RequireHostCookie(rp.url, "__Host-signin")
	p.Fill("E-mail", oidcUser.Email)
	p.Fill("Password", "not the password")
	if status := p.Submit("Sign in"); status != http.StatusUnauthorized {
		t.Errorf("wrong password: status %d, want 401", status)
	}
	if got := p.Text("[role=alert]"); got == "" {
		t.Error("wrong password: no alert on the form")
	}
	p.Screenshot("provider-wrong-password")
	p.Fill("Password", oidcUser.Password)
	p.Screenshot("provider-login")
	if status := p.Submit("Sign in"); status != http.StatusOK {
		t.Fatalf("sign-in: status %d: %s", status, p.Text("body"))
	}
	if got, want := p.URL(), rp.url+"/home"; got != want {
		t.Fatalf("after signing in the browser is at %s (%q), want %s", got, p.Text("body"), want)
	}
	if got := p.Text("#message"); got != "Signed in as "+oidcUser.Email {
		t.Fatalf("home says %q", got)
	}
	p.Screenshot("signed-in")
	p.RequireHostCookie(rp.url, "__Host-session")
	if c := p.Cookie(rp.url, "__Host-signin"); c != nil {
		t.Errorf("the sign-in cookie outlived the callback: %+v", c)
	}
	if n := provider.Sessions(oidcUser.Subject); n != 1 {
		t.Errorf("provider sessions after sign-in: %d, want 1", n)
	}
	var providerCookie bool
	for _, c := range p.Cookies(provider.Issuer()) {
		if strings.HasPrefix(c.Name, "devoidc_session_") {
			providerCookie = true
			if !c.HTTPOnly || string(c.SameSite) != "Lax" {
				t.Errorf("provider session cookie %+v, want HttpOnly and SameSite=Lax", c)
			}
		}
	}
	if !providerCookie {
		t.Error("no provider session cookie")
	}

	// A second sign-in: the provider's session skips the form.
	if status := p.Navigate(rp.url + "/signin"); status != http.StatusOK {
		t.Fatalf("second sign-in: status %d", status)
	}
	if got, want := p.URL(), rp.url+"/home"; got != want {
		t.Fatalf("the second sign-in ended at %s, want %s without the form", got, want)
	}

	// prompt=login asks for the password again.
	p.Navigate(rp.url + "/signin?prompt=login")
	if got := p.URL(); !strings.HasPrefix(got, provider.Issuer()+"/login") {
		t.Fatalf("prompt=login ended at %s, want the login form", got)
	}
	p.Fill("E-mail", oidcUser.Email)
	p.Fill("Password", oidcUser.Password)
	if status := p.Submit("Sign in"); status != http.StatusOK || p.URL() != rp.url+"/home" {
		t.Fatalf("sign-in after prompt=login: status %d at %s", status, p.URL())
	}

	// Sign out at the relying party and at the provider.
	if status := p.Navigate(rp.url + "/signout"); status != http.StatusOK {
		t.Fatalf("sign-out: status %d", status)
	}
	if got, want := p.URL(), rp.url+"/signed-out"; got != want {
		t.Fatalf("sign-out ended at %s, want %s", got, want)
	}
	p.Screenshot("signed-out")
	if n := provider.Sessions(oidcUser.Subject); n != 0 {
		t.Errorf("provider sessions after sign-out: %d, want 0", n)
	}
	if c := p.Cookie(rp.url, "__Host-session"); c != nil {
		t.Errorf("the session cookie outlived the sign-out: %+v", c)
	}
	if status := p.Navigate(rp.url + "/home"); status != http.StatusUnauthorized {
		t.Errorf("home after sign-out: status %d, want 401", status)
	}
	// Signing in again needs the form: the provider session is gone.
	p.Navigate(rp.url + "/signin")
	if got := p.URL(); !strings.HasPrefix(got, provider.Issuer()+"/login") {
		t.Errorf("a sign-in after sign-out ended at %s, want the login form", got)
	}
}
