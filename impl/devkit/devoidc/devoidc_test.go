package devoidc_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/tollgate/tollgate/impl/devkit/devoidc"
)

// The relying party the tests play: its callback and post-logout pages are never served,
// the browser stops at their redirects.
const (
	clientID     = "tollgate-web"
	clientSecret = "web-secret"
	redirectURI  = "http://localhost:8080/auth/callback"
	afterLogout  = "http://localhost:8080/signed-out"
	rpOrigin     = "http://localhost:8080/"
)

var demo = devoidc.User{Subject: "user-demo", Email: "demo@example.com", Name: "Demo User", Password: "demo-password"}

// rp is a relying party (go-oidc and x/oauth2, as impl/web uses them) and a browser (a
// plain client with a cookie jar that posts the login form) against one provider.
type rp struct {
	t        *testing.T
	p        *devoidc.Provider
	oidc     *oidc.Provider
	conf     oauth2.Config
	verifier *oidc.IDTokenVerifier
	browser  *http.Client
	// noAuthTime says the provider leaves auth_time out (Options.OmitAuthTime).
	noAuthTime bool
}

func start(t *testing.T) *rp {
	t.Helper()
	return startWith(t, devoidc.Options{})
}

// startWith is start with the provider's options o (its users and clients are the tests').
func startWith(t *testing.T, o devoidc.Options) *rp {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.Users = []devoidc.User{demo}
	o.Clients = []devoidc.Client{{
		ID: clientID, Secret: clientSecret,
		RedirectURIs:           []string{redirectURI},
		PostLogoutRedirectURIs: []string{afterLogout},
	}}
	p, err := devoidc.Serve(ln, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	if !strings.HasPrefix(p.Issuer(), "http://127.0.0.1:") {
		t.Fatalf("issuer %q", p.Issuer())
	}
	op, err := oidc.NewProvider(t.Context(), p.Issuer())
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	return &rp{
		t: t, p: p, oidc: op,
		conf: oauth2.Config{
			ClientID: clientID, ClientSecret: clientSecret, RedirectURL: redirectURI,
			Endpoint: op.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "email", "profile"},
		},
		verifier:   op.Verifier(&oidc.Config{ClientID: clientID}),
		browser:    newBrowser(t),
		noAuthTime: o.OmitAuthTime,
	}
}

// newBrowser is a client with its own cookie jar that follows redirects until one leads to
// the relying party, and stops there.
func newBrowser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), rpOrigin) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

// flow is one sign-in attempt: what the relying party keeps between redirect and callback.
type flow struct {
	state, nonce, verifier string
}

func newFlow() flow {
	return flow{state: oauth2.GenerateVerifier(), nonce: oauth2.GenerateVerifier(), verifier: oauth2.GenerateVerifier()}
}

// page is what the browser ended on: a provider page (status and body) or a redirect to
// the relying party (its URL).
type page struct {
	status   int
	body     string
	redirect *url.URL
	cookies  []*http.Cookie
}

func (r *rp) get(u string) page {
	r.t.Helper()
	resp, err := r.browser.Get(u)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.read(resp)
}

func (r *rp) read(resp *http.Response) page {
	r.t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	pg := page{status: resp.StatusCode, body: string(b), cookies: resp.Cookies()}
	if resp.StatusCode/100 == 3 {
		pg.redirect, err = resp.Location()
		if err != nil {
			r.t.Fatal(err)
		}
	}
	return pg
}

// authorize sends the browser to the authorization endpoint with PKCE S256 and the nonce.
func (r *rp) authorize(f flow, opts ...oauth2.AuthCodeOption) page {
	r.t.Helper()
	opts = append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(f.verifier), oidc.Nonce(f.nonce)}, opts...)
	return r.get(r.conf.AuthCodeURL(f.state, opts...))
}

var requestIDField = regexp.MustCompile(`name="authRequestID" value="([^"]+)"`)

// isForm reports whether pg is the login form.
func isForm(pg page) bool {
	return pg.redirect == nil && requestIDField.MatchString(pg.body) &&
		strings.Contains(pg.body, `<label for="email">`) && strings.Contains(pg.body, `<label for="password">`) &&
		strings.Contains(pg.body, "development provider — not for production")
}

// login posts the form on pg as a browser would.
func (r *rp) login(pg page, email, password string) page {
	r.t.Helper()
	if !isForm(pg) {
		r.t.Fatalf("expected the login form, got %d %v\n%s", pg.status, pg.redirect, pg.body)
	}
	id := requestIDField.FindStringSubmatch(pg.body)[1]
	// The post itself does not follow the redirect, so that the page keeps the cookies it
	// set; the browser then follows the redirect as usual.
	once := *r.browser
	once.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := once.PostForm(r.p.Issuer()+"/login", url.Values{
		"authRequestID": {id}, "email": {email}, "password": {password},
	})
	if err != nil {
		r.t.Fatal(err)
	}
	posted := r.read(resp)
	if posted.redirect == nil || strings.HasPrefix(posted.redirect.String(), rpOrigin) {
		return posted
	}
	next := r.get(posted.redirect.String())
	next.cookies = posted.cookies
	return next
}

// code checks that pg is the redirect to the relying party's callback with a code and the
// flow's state, and returns the code.
func (r *rp) code(pg page, f flow) string {
	r.t.Helper()
	if pg.redirect == nil || !strings.HasPrefix(pg.redirect.String(), redirectURI+"?") {
		r.t.Fatalf("expected a redirect to the callback, got %d %v\n%s", pg.status, pg.redirect, pg.body)
	}
	q := pg.redirect.Query()
	if q.Get("error") != "" {
		r.t.Fatalf("callback with error %q: %q", q.Get("error"), q.Get("error_description"))
	}
	if q.Get("state") != f.state {
		r.t.Fatalf("state %q, want %q", q.Get("state"), f.state)
	}
	if q.Get("code") == "" {
		r.t.Fatal("callback without a code")
	}
	return q.Get("code")
}

// claims is what the tests read of an ID token.
type claims struct {
	Email    string `json:"email"`
	Name     string `json:"name"`
	Nonce    string `json:"nonce"`
	AuthTime int64  `json:"auth_time"`
	SID      string `json:"sid"`
}

// exchange trades the code for tokens and verifies the ID token as the relying party does
// (issuer, audience, signature, expiry with go-oidc; the nonce by hand, since go-oidc's
// Verify does not check it).
func (r *rp) exchange(code string, f flow) (*oauth2.Token, string, claims) {
	r.t.Helper()
	tok, err := r.conf.Exchange(r.t.Context(), code, oauth2.VerifierOption(f.verifier))
	if err != nil {
		r.t.Fatalf("exchange: %v", err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok {
		r.t.Fatal("no id_token in the token response")
	}
	idt, err := r.verifier.Verify(r.t.Context(), raw)
	if err != nil {
		r.t.Fatalf("verify ID token: %v", err)
	}
	var c claims
	if err := idt.Claims(&c); err != nil {
		r.t.Fatal(err)
	}
	if idt.Subject != demo.Subject || c.Email != demo.Email || c.Name != demo.Name {
		r.t.Fatalf("ID token sub %q email %q name %q", idt.Subject, c.Email, c.Name)
	}
	if idt.Nonce != f.nonce || c.Nonce != f.nonce {
		r.t.Fatalf("nonce %q, want %q", idt.Nonce, f.nonce)
	}
	if c.AuthTime == 0 && !r.noAuthTime {
		r.t.Fatal("ID token without auth_time")
	}
	if c.AuthTime != 0 && r.noAuthTime {
		r.t.Fatalf("ID token with auth_time %d from a provider told to omit it", c.AuthTime)
	}
	return tok, raw, c
}

// signIn runs a whole flow through the login form and returns the ID token and its claims.
func (r *rp) signIn() (string, claims) {
	r.t.Helper()
	f := newFlow()
	code := r.code(r.login(r.authorize(f), demo.Email, demo.Password), f)
	_, raw, c := r.exchange(code, f)
	return raw, c
}

// oauthError returns the OAuth error code of a failed exchange.
func oauthError(t *testing.T, err error) string {
	t.Helper()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		t.Fatalf("expected a token endpoint error, got %v", err)
	}
	return re.ErrorCode
}

// TestCodeFlow runs discovery and the full code flow with PKCE and a nonce: the ID token
// verifies with go-oidc (issuer, audience, signature), carries the nonce, auth_time, sid and
// the user's e-mail, the access token opens userinfo, and the provider holds one session.
func TestCodeFlow(t *testing.T) {
	r := start(t)
	var disc struct {
		Issuer        string   `json:"issuer"`
		EndSession    string   `json:"end_session_endpoint"`
		CodeMethods   []string `json:"code_challenge_methods_supported"`
		AuthMethods   []string `json:"token_endpoint_auth_methods_supported"`
		ResponseTypes []string `json:"response_types_supported"`
	}
	if err := r.oidc.Claims(&disc); err != nil {
		t.Fatal(err)
	}
	if disc.Issuer != r.p.Issuer() || disc.EndSession != r.p.Issuer()+"/end_session" ||
		strings.Join(disc.CodeMethods, " ") != "S256" ||
		!strings.Contains(strings.Join(disc.AuthMethods, " "), "client_secret_basic") ||
		!strings.Contains(strings.Join(disc.AuthMethods, " "), "client_secret_post") {
		t.Fatalf("discovery: %+v", disc)
	}

	before := time.Now().Add(-time.Second).Unix()
	f := newFlow()
	form := r.authorize(f)
	if form.status != http.StatusOK || !isForm(form) {
		t.Fatalf("expected the login form, got %d\n%s", form.status, form.body)
	}
	signedIn := r.login(form, demo.Email, demo.Password)
	if len(signedIn.cookies) != 1 || !signedIn.cookies[0].HttpOnly || signedIn.cookies[0].SameSite != http.SameSiteLaxMode ||
		signedIn.cookies[0].Path != "/" {
		t.Fatalf("provider session cookie: %+v", signedIn.cookies)
	}
	tok, _, c := r.exchange(r.code(signedIn, f), f)
	if c.AuthTime < before || c.AuthTime > time.Now().Unix()+1 {
		t.Fatalf("auth_time %d is not the sign-in's", c.AuthTime)
	}
	if c.SID == "" {
		t.Fatal("ID token without sid")
	}
	info, err := r.oidc.UserInfo(t.Context(), oauth2.StaticTokenSource(tok))
	if err != nil {
		t.Fatalf("userinfo: %v", err)
	}
	if info.Subject != demo.Subject || info.Email != demo.Email || !info.EmailVerified {
		t.Fatalf("userinfo %+v", info)
	}
	if n := r.p.Sessions(demo.Subject); n != 1 {
		t.Fatalf("Sessions = %d, want 1", n)
	}
}

// TestWrongPassword shows the form again with an error (and no session), and the right
// password then signs in.
func TestWrongPassword(t *testing.T) {
	r := start(t)
	f := newFlow()
	pg := r.login(r.authorize(f), demo.Email, "not-the-password")
	if pg.status != http.StatusUnauthorized || !isForm(pg) || !strings.Contains(pg.body, `role="alert"`) ||
		!strings.Contains(pg.body, "The e-mail or the password is wrong.") || !strings.Contains(pg.body, `value="demo@example.com"`) {
		t.Fatalf("expected the form again with an error, got %d\n%s", pg.status, pg.body)
	}
	if strings.Contains(pg.body, "not-the-password") {
		t.Fatal("the page repeats the password")
	}
	pg2 := r.login(pg, "nobody@example.com", demo.Password)
	if !isForm(pg2) || pg2.status != http.StatusUnauthorized {
		t.Fatalf("an unknown e-mail: got %d\n%s", pg2.status, pg2.body)
	}
	if n := r.p.Sessions(demo.Subject); n != 0 {
		t.Fatalf("Sessions = %d after refused passwords", n)
	}
	r.exchange(r.code(r.login(pg2, demo.Email, demo.Password), f), f)
}

// TestPKCERequired refuses a token exchange without the code_verifier or with a wrong one,
// and an authorization request without an S256 code challenge.
func TestPKCERequired(t *testing.T) {
	r := start(t)
	f := newFlow()
	code := r.code(r.login(r.authorize(f), demo.Email, demo.Password), f)

	if _, err := r.conf.Exchange(t.Context(), code); err == nil {
		t.Fatal("an exchange without code_verifier succeeded")
	} else if e := oauthError(t, err); e != "invalid_request" {
		t.Fatalf("missing verifier: error %q", e)
	}
	if _, err := r.conf.Exchange(t.Context(), code, oauth2.VerifierOption(oauth2.GenerateVerifier())); err == nil {
		t.Fatal("an exchange with a wrong code_verifier succeeded")
	} else if e := oauthError(t, err); e != "invalid_grant" {
		t.Fatalf("wrong verifier: error %q", e)
	}

	for name, opts := range map[string][]oauth2.AuthCodeOption{
		"no challenge": {oidc.Nonce("n")},
		"plain": {oidc.Nonce("n"), oauth2.SetAuthURLParam("code_challenge", f.verifier),
			oauth2.SetAuthURLParam("code_challenge_method", "plain")},
	} {
		pg := r.get(r.conf.AuthCodeURL("st", opts...))
		if pg.redirect == nil || pg.redirect.Query().Get("error") != "invalid_request" || pg.redirect.Query().Get("state") != "st" {
			t.Fatalf("%s: expected a redirect with error=invalid_request, got %d %v\n%s", name, pg.status, pg.redirect, pg.body)
		}
	}
}

// TestReplayedCode refuses a second exchange of a code, and the replay revokes the access
// token the first exchange issued.
func TestReplayedCode(t *testing.T) {
	r := start(t)
	f := newFlow()
	code := r.code(r.login(r.authorize(f), demo.Email, demo.Password), f)
	tok, _, _ := r.exchange(code, f)
	_, err := r.conf.Exchange(t.Context(), code, oauth2.VerifierOption(f.verifier))
	if err == nil {
		t.Fatal("a replayed code was exchanged")
	}
	if e := oauthError(t, err); e != "invalid_grant" {
		t.Fatalf("replay: error %q", e)
	}
	if _, err := r.oidc.UserInfo(t.Context(), oauth2.StaticTokenSource(tok)); err == nil {
		t.Fatal("the first exchange's access token still opens userinfo after the replay")
	}
}

// TestConcurrentExchanges races ten exchanges of one code: exactly one gets tokens.
func TestConcurrentExchanges(t *testing.T) {
	r := start(t)
	f := newFlow()
	code := r.code(r.login(r.authorize(f), demo.Email, demo.Password), f)
	const n = 10
	var wg sync.WaitGroup
	var won atomic.Int32
	for range n {
		wg.Go(func() {
			if _, err := r.conf.Exchange(context.Background(), code, oauth2.VerifierOption(f.verifier)); err == nil {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d of %d concurrent exchanges of one code succeeded, want 1", won.Load(), n)
	}
}

// TestSingleSignOn: a second flow from the same browser skips the form and keeps the first
// sign-in's auth_time and sid; another browser gets the form.
func TestSingleSignOn(t *testing.T) {
	r := start(t)
	_, first := r.signIn()
	f := newFlow()
	pg := r.authorize(f, oauth2.SetAuthURLParam("max_age", "3600"))
	_, _, second := r.exchange(r.code(pg, f), f)
	if second.AuthTime != first.AuthTime || second.SID != first.SID {
		t.Fatalf("SSO: auth_time %d sid %q, first %d %q", second.AuthTime, second.SID, first.AuthTime, first.SID)
	}
	if n := r.p.Sessions(demo.Subject); n != 1 {
		t.Fatalf("Sessions = %d, want 1", n)
	}
	other := &rp{t: t, p: r.p, oidc: r.oidc, conf: r.conf, verifier: r.verifier, browser: newBrowser(t)}
	if pg := other.authorize(newFlow()); !isForm(pg) {
		t.Fatalf("a browser without the cookie skipped the form: %d %v", pg.status, pg.redirect)
	}
}

// TestForcedLogin: prompt=login and max_age=0 show the form again to a signed-in browser,
// and prompt=none answers login_required where the form would be needed.
func TestForcedLogin(t *testing.T) {
	r := start(t)
	r.signIn()
	for _, opt := range []oauth2.AuthCodeOption{
		oauth2.SetAuthURLParam("prompt", "login"),
		oauth2.SetAuthURLParam("max_age", "0"),
	} {
		f := newFlow()
		pg := r.authorize(f, opt)
		if !isForm(pg) {
			t.Fatalf("expected the login form, got %d %v", pg.status, pg.redirect)
		}
		_, _, c := r.exchange(r.code(r.login(pg, demo.Email, demo.Password), f), f)
		if c.AuthTime == 0 {
			t.Fatal("no auth_time")
		}
	}
	if n := r.p.Sessions(demo.Subject); n != 1 {
		t.Fatalf("Sessions = %d after signing in again in one browser, want 1", n)
	}

	fresh := &rp{t: t, p: r.p, oidc: r.oidc, conf: r.conf, verifier: r.verifier, browser: newBrowser(t)}
	pg := fresh.authorize(newFlow(), oauth2.SetAuthURLParam("prompt", "none"))
	if pg.redirect == nil || pg.redirect.Query().Get("error") != "login_required" {
		t.Fatalf("prompt=none without a session: got %d %v", pg.status, pg.redirect)
	}
}

// TestProviderQuirks: OmitAuthTime leaves auth_time out of every ID token, a forced login's
// too, and IgnoreForcedLogin completes prompt=login and max_age=0 from a signed-in browser
// without the form, as the providers they stand for do; a browser without a session still
// gets the form.
func TestProviderQuirks(t *testing.T) {
	r := startWith(t, devoidc.Options{OmitAuthTime: true, IgnoreForcedLogin: true})
	_, first := r.signIn()
	if first.SID == "" {
		t.Fatal("ID token without sid")
	}
	for _, opt := range []oauth2.AuthCodeOption{
		oauth2.SetAuthURLParam("prompt", "login"),
		oauth2.SetAuthURLParam("max_age", "0"),
	} {
		f := newFlow()
		pg := r.authorize(f, opt)
		if isForm(pg) {
			t.Fatalf("IgnoreForcedLogin showed the form for %v", opt)
		}
		if _, _, c := r.exchange(r.code(pg, f), f); c.SID != first.SID {
			t.Fatalf("the forced login's sid %q, want the live session's %q", c.SID, first.SID)
		}
	}
	other := &rp{t: t, p: r.p, oidc: r.oidc, conf: r.conf, verifier: r.verifier, browser: newBrowser(t), noAuthTime: true}
	if pg := other.authorize(newFlow(), oauth2.SetAuthURLParam("prompt", "login")); !isForm(pg) {
		t.Fatalf("a browser without a session skipped the form: %d %v", pg.status, pg.redirect)
	}
}

// TestEndSession: RP-initiated logout with the id_token_hint ends the provider session and
// redirects to the registered post-logout URI with the state; the next sign-in needs the
// form. An unregistered post-logout URI is refused and ends nothing.
func TestEndSession(t *testing.T) {
	r := start(t)
	idToken, _ := r.signIn()
	var disc struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := r.oidc.Claims(&disc); err != nil {
		t.Fatal(err)
	}
	end := disc.EndSession

	bad := r.get(end + "?" + url.Values{"id_token_hint": {idToken}, "post_logout_redirect_uri": {"http://evil.example/"}}.Encode())
	if bad.status != http.StatusBadRequest || bad.redirect != nil {
		t.Fatalf("unregistered post_logout_redirect_uri: got %d %v", bad.status, bad.redirect)
	}
	if n := r.p.Sessions(demo.Subject); n != 1 {
		t.Fatalf("Sessions = %d after a refused logout, want 1", n)
	}

	pg := r.get(end + "?" + url.Values{"id_token_hint": {idToken}, "post_logout_redirect_uri": {afterLogout}, "state": {"bye"}}.Encode())
	if pg.redirect == nil || pg.redirect.String() != afterLogout+"?state=bye" {
		t.Fatalf("logout: got %d %v\n%s", pg.status, pg.redirect, pg.body)
	}
	if n := r.p.Sessions(demo.Subject); n != 0 {
		t.Fatalf("Sessions = %d after logout, want 0", n)
	}
	if pg := r.authorize(newFlow()); !isForm(pg) {
		t.Fatalf("after logout the form was skipped: %d %v", pg.status, pg.redirect)
	}

	// Without a hint or a post-logout URI the browser's cookie names the session, and the
	// provider's own page says it is signed out.
	r.signIn()
	if n := r.p.Sessions(demo.Subject); n != 1 {
		t.Fatalf("Sessions = %d, want 1", n)
	}
	pg = r.get(end)
	if pg.status != http.StatusOK || !strings.Contains(pg.body, "You are signed out") {
		t.Fatalf("logout without a hint: got %d %v\n%s", pg.status, pg.redirect, pg.body)
	}
	if n := r.p.Sessions(demo.Subject); n != 0 {
		t.Fatalf("Sessions = %d after logout by cookie, want 0", n)
	}
}

// TestUnregisteredRedirectURI refuses an authorization request for a redirect URI the
// client did not register, without redirecting there.
func TestUnregisteredRedirectURI(t *testing.T) {
	r := start(t)
	conf := r.conf
	conf.RedirectURL = "http://localhost:8080/elsewhere"
	f := newFlow()
	pg := r.get(conf.AuthCodeURL(f.state, oauth2.S256ChallengeOption(f.verifier)))
	if pg.status != http.StatusBadRequest || pg.redirect != nil || isForm(pg) {
		t.Fatalf("unregistered redirect_uri: got %d %v\n%s", pg.status, pg.redirect, pg.body)
	}
	conf.RedirectURL = redirectURI
	conf.ClientID = "unknown-client"
	if pg := r.get(conf.AuthCodeURL(f.state, oauth2.S256ChallengeOption(f.verifier))); pg.status != http.StatusBadRequest || pg.redirect != nil {
		t.Fatalf("unknown client: got %d %v", pg.status, pg.redirect)
	}
}

// TestClientAuthentication accepts the secret as client_secret_basic and client_secret_post
// and refuses a wrong one.
func TestClientAuthentication(t *testing.T) {
	r := start(t)
	r.conf.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	r.signIn()
	// The browser is signed in now: the next flows skip the form (single sign-on).
	r.conf.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	f := newFlow()
	r.exchange(r.code(r.authorize(f), f), f)

	r.conf.ClientSecret = "wrong"
	f = newFlow()
	code := r.code(r.authorize(f), f)
	if _, err := r.conf.Exchange(context.Background(), code, oauth2.VerifierOption(f.verifier)); err == nil {
		t.Fatal("a wrong client secret was accepted")
	} else if e := oauthError(t, err); e != "unauthorized_client" && e != "invalid_client" {
		t.Fatalf("wrong secret: error %q", e)
	}
}

// TestOptionsChecked refuses a listener off loopback and incomplete users and clients.
func TestOptionsChecked(t *testing.T) {
	ok := devoidc.Options{Users: []devoidc.User{demo}, Clients: []devoidc.Client{{ID: "c", RedirectURIs: []string{redirectURI}}}}
	if ln, err := net.Listen("tcp", "0.0.0.0:0"); err == nil {
		if p, err := devoidc.Serve(ln, ok); err == nil {
			p.Close()
			t.Error("Serve accepted a listener on every interface")
		}
		ln.Close()
	}
	for name, o := range map[string]devoidc.Options{
		"client without redirect URI": {Clients: []devoidc.Client{{ID: "c"}}},
		"client twice":                {Clients: []devoidc.Client{ok.Clients[0], ok.Clients[0]}},
		"user without subject":        {Users: []devoidc.User{{Email: "a@example.com"}}},
		"user twice":                  {Users: []devoidc.User{demo, demo}},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if p, err := devoidc.Serve(ln, o); err == nil {
			p.Close()
			t.Errorf("%s: accepted", name)
		}
		ln.Close()
	}
}

// TestOneUsersEmailFilledIn: a provider with one user (make run's demo user) starts its sign-in
// form with that user's e-mail (trial h6: the banner named it, the form did not).
func TestOneUsersEmailFilledIn(t *testing.T) {
	r := start(t)
	pg := r.authorize(newFlow())
	if !isForm(pg) || !strings.Contains(pg.body, `value="`+demo.Email+`"`) {
		t.Fatalf("the sign-in form of a one-user provider: %d\n%s", pg.status, pg.body)
	}
}
