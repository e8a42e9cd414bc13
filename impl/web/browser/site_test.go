package browser_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/browsertest"
	"github.com/tollgate/tollgate/impl/devkit/devoidc"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/members"
)

// alice owns the test account; she signs in at the development provider with this password.
var alice = devoidc.User{Subject: "alice", Email: "alice@example.com", Name: "Alice", Password: "alice-password"}

// bob is a person the provider knows, with no membership until a test gives him one
// (signInAs signs him in).
var bob = devoidc.User{Subject: "bob", Email: "bob@example.com", Name: "Bob", Password: "bob-password"}

// sessionCookie is the web application's session cookie (impl/web's doc.go).
const sessionCookie = "__Host-tollgate_session"

// startingCredit is the test account's credit: far more than any test spends, so that only a
// key's own cap can answer 402.
const startingCredit = 10_000_000

// site is a gateway with the web application at http://localhost:PORT and the development
// OpenID provider at http://127.0.0.1:PORT (another site), on a fresh database, with one
// account that alice owns.
type site struct {
	URL     string // the application, without a trailing slash
	GW      *apitest.Gateway
	IdP     *devoidc.Provider
	Account store.Account
}

// start runs the site for the rest of the test.
func start(t *testing.T) *site {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with tune adjusting the gateway's configuration (nil: the default's).
func startWith(t *testing.T, tune func(*config.Config)) *site {
	t.Helper()
	ctx := context.Background()
	appLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The gateway's server closes the listener when it shuts down; this covers a start that
	// fails before it serves (a second Close does nothing).
	t.Cleanup(func() { _ = appLn.Close() })
	appURL := fmt.Sprintf("http://localhost:%d", appLn.Addr().(*net.TCPAddr).Port)

	idpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	idp, err := devoidc.Serve(idpLn, devoidc.Options{
		Users: []devoidc.User{alice, bob},
		Clients: []devoidc.Client{{ID: "tollgate", Secret: "browser-test-secret",
			RedirectURIs: []string{appURL + "/auth/callback"}, PostLogoutRedirectURIs: []string{appURL + "/"}}},
	})
	if err != nil {
		_ = idpLn.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idp.Close() })

	cfg := config.Default()
	cfg.Web = config.Web{Issuer: idp.Issuer(), ClientID: "tollgate", ClientSecret: "browser-test-secret", PublicURL: appURL + "/"}
	if tune != nil {
		tune(cfg)
	}
	cfg.Web.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw := apitest.Start(t, apitest.Options{Config: cfg, Listener: appLn})

	acct, err := gw.Accounts.CreateAccount(ctx, "acme", "default")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := gw.Accounts.GrantCredit(ctx, acct.ID, startingCredit, "browser-test", "browser test"); err != nil {
		t.Fatal(err)
	}
	if _, err := (members.New(gw.Store, nil)).Add(ctx, acct.ID, alice.Email, members.RoleOwner); err != nil {
		t.Fatal(err)
	}
	return &site{URL: appURL, GW: gw, IdP: idp, Account: acct}
}

// tour is a page and the screenshots taken of it: each page visited is shot, numbered in
// the order of the visit.
type tour struct {
	t *testing.T
	*browsertest.Page
	who string // the screenshots' prefix, telling the browsers of one test apart
	n   int
}

// newTour opens a page (a browser context of its own) for t.
func newTour(t *testing.T) *tour { return &tour{t: t, Page: browsertest.New(t)} }

// newNamedTour opens a page for t whose screenshots are named after who, for a test that uses
// two browsers.
func newNamedTour(t *testing.T, who string) *tour {
	return &tour{t: t, Page: browsertest.New(t), who: who + "-"}
}

// shot writes a screenshot of the page now shown, as [who-]NN-name.png.
func (p *tour) shot(name string) {
	p.t.Helper()
	p.n++
	p.Screenshot(fmt.Sprintf("%s%02d-%s", p.who, p.n, name))
}

// width is how wide the page shown is in CSS pixels (its document's scroll width), for the
// narrow-screen checks; it fails the test when the browser cannot tell.
func (p *tour) width() int {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.Context(), browsertest.ActionTimeout)
	defer cancel()
	width, err := chromedp.Run(ctx, chromedp.Evaluate[int]("document.documentElement.scrollWidth"))
	if err != nil {
		p.t.Fatalf("the page's width: %v", err)
	}
	return width
}

// at fails the test unless the page shown is url (ignoring a query) with the wanted status.
func (p *tour) at(status, wantStatus int, url string) {
	p.t.Helper()
	got := p.URL()
	if i := strings.IndexByte(got, '?'); i >= 0 {
		got = got[:i]
	}
	if got != url || status != wantStatus {
		p.t.Fatalf("the browser is at %s with status %d, want %s with %d; the page says:\n%s", p.URL(), status, url, wantStatus, p.Text("body"))
	}
}

// html is the page's whole document as the browser holds it now.
func (p *tour) html() string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.Context(), browsertest.ActionTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		p.t.Fatalf("read the page's HTML: %v", err)
	}
	return s
}

// value is the value of the form field the CSS selector finds.
func (p *tour) value(selector string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.Context(), browsertest.ActionTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(selector)))
	if err != nil {
		p.t.Fatalf("read the value of %s: %v", selector, err)
	}
	return s
}

// labels lists the text of every <label> of the page, for a test that must know whether a
// field is there before it uses it.
func (p *tour) labels() []string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.Context(), browsertest.ActionTimeout)
	defer cancel()
	l, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("label")].map((l) => l.textContent.trim().replace(/\s+/g, " "))`))
	if err != nil {
		p.t.Fatalf("list the page's labels: %v", err)
	}
	return l
}

// signIn signs alice in on p as a person does: the application's home page, its "Sign in"
// link, the provider's form; it ends on the application's home page with a session cookie
// fit for a session (__Host-, Secure, HttpOnly, SameSite=Lax), which it returns.
func (s *site) signIn(p *tour) string {
	p.t.Helper()
	return s.signInAs(p, alice)
}

// signInAs is signIn of user, who must be a member of the site's account alone.
func (s *site) signInAs(p *tour, user devoidc.User) string {
	p.t.Helper()
	p.at(p.Navigate(s.URL+"/"), http.StatusOK, s.URL+"/")
	if got := p.Title(); !strings.HasPrefix(got, "Sign in") {
		p.t.Fatalf("the signed-out home page is titled %q", got)
	}
	p.shot("signed-out-home")
	p.at(p.Follow("Sign in"), http.StatusOK, s.IdP.Issuer()+"/login")
	p.shot("provider-login")
	p.Fill("E-mail", user.Email)
	p.Fill("Password", user.Password)
	p.at(p.Submit("Sign in"), http.StatusOK, s.URL+"/")
	if got := p.Title(); !strings.Contains(got, s.Account.Name) {
		p.t.Fatalf("after signing in the home page is titled %q, want the account's name %q", got, s.Account.Name)
	}
	p.shot("home")
	return p.RequireHostCookie(s.URL, sessionCookie).Value
}

// replay asks for path with only a session cookie's value, as a stolen cookie would be
// used, and returns the status and where a redirect leads.
func (s *site) replay(t *testing.T, path, cookie string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: cookie})
	c := &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Location")
}

// api sends an API request with key as its bearer token (body nil: GET) through the client
// that checks every answer against the OpenAPI document, and returns the status and body.
func (s *site) api(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.GW.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}
