package browsertest_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/browsertest"
)

func TestMain(m *testing.M) { browsertest.Main(m) }

// page is the HTML of every page of the two test sites: a nonced script
// writes into #script, which shows that scripts carrying the nonce run.
var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style nonce="{{.Nonce}}">body { font-family: sans-serif; margin: 2rem; } label { display: block; margin-top: 1rem; }</style>
</head><body>
<h1 id="title">{{.Title}}</h1>
{{if .Message}}<p id="message">{{.Message}}</p>{{end}}
{{if .Form}}<form method="post" action="{{.Form}}">
  <input type="hidden" name="state" value="{{.State}}">
  <input type="hidden" name="redirect_uri" value="{{.RedirectURI}}">
  <label for="email">E-mail</label><input id="email" name="email" type="email" autocomplete="username">
  <label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password">
  <button type="submit">Sign in</button>
</form>{{end}}
{{if .Unsafe}}<script>document.title = "inline script without the nonce ran";</script>{{end}}
<p id="script"></p>
<script nonce="{{.Nonce}}">document.getElementById("script").textContent = "nonced script ran";</script>
</body></html>`))

// pageData fills the page template.
type pageData struct {
	Title, Message, Nonce    string
	Form, State, RedirectURI string
	Unsafe                   bool
}

// render writes a page under a nonce-based Content-Security-Policy like the
// web application's.
func render(w http.ResponseWriter, status int, d pageData) {
	d.Nonce = token()
	w.Header().Set("Content-Security-Policy", fmt.Sprintf(
		"default-src 'none'; script-src 'nonce-%s'; style-src 'nonce-%[1]s'; form-action 'self' http://localhost:* http://127.0.0.1:*; frame-ancestors 'none'; base-uri 'none'",
		d.Nonce))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = page.Execute(w, d)
}

// token returns a random hex string.
func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// hostCookie sets a __Host- cookie the way the web application sets its
// session cookie.
func hostCookie(w http.ResponseWriter, name, value string, sameSite http.SameSite) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", Secure: true, HttpOnly: true, SameSite: sameSite,
	})
}

// sites is a relying party served as http://localhost:PORT and a sign-in
// provider served as http://127.0.0.1:PORT: two sites, as the web
// application and its OpenID provider are in the browser tests.
type sites struct {
	app, provider string

	mu sync.Mutex
	// strictSeen records whether the callback received the SameSite=Strict
	// cookie, which a cross-site redirect must not carry.
	strictSeen bool
}

// newSites starts both servers for t.
func newSites(t *testing.T) *sites {
	s := &sites{}
	provider := httptest.NewServer(http.HandlerFunc(s.serveProvider))
	t.Cleanup(provider.Close)
	app := httptest.NewServer(http.HandlerFunc(s.serveApp))
	t.Cleanup(app.Close)
	s.provider = provider.URL
	s.app = strings.Replace(app.URL, "127.0.0.1", "localhost", 1)
	return s
}

// serveApp is the relying party: /signin sends the browser to the provider
// with a state bound to a __Host- cookie, /callback checks it and starts a
// session, /home needs the session, /unsafe violates the policy.
func (s *sites) serveApp(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/signin":
		state := token()
		hostCookie(w, "__Host-state", state, http.SameSiteLaxMode)
		hostCookie(w, "__Host-strict", "1", http.SameSiteStrictMode)
		q := url.Values{"state": {state}, "redirect_uri": {s.app + "/callback"}}
		http.Redirect(w, r, s.provider+"/authorize?"+q.Encode(), http.StatusFound)
	case "/callback":
		_, strictErr := r.Cookie("__Host-strict")
		s.mu.Lock()
		s.strictSeen = strictErr == nil
		s.mu.Unlock()
		c, err := r.Cookie("__Host-state")
		if err != nil || c.Value != r.URL.Query().Get("state") {
			render(w, http.StatusBadRequest, pageData{Title: "Sign-in failed", Message: "the state cookie did not come back"})
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "__Host-state", Path: "/", Secure: true, HttpOnly: true, MaxAge: -1})
		hostCookie(w, "__Host-session", "user="+r.URL.Query().Get("user"), http.SameSiteLaxMode)
		http.Redirect(w, r, "/home", http.StatusSeeOther)
	case "/home":
		c, err := r.Cookie("__Host-session")
		if err != nil {
			render(w, http.StatusUnauthorized, pageData{Title: "Signed out"})
			return
		}
		render(w, http.StatusOK, pageData{Title: "Home", Message: "Signed in as " + strings.TrimPrefix(c.Value, "user=")})
	case "/settings":
		if r.Method == http.MethodPost {
			_ = r.ParseForm()
			render(w, http.StatusOK, pageData{Title: "Saved", Message: fmt.Sprintf("reset=%s models=%s",
				r.PostForm.Get("reset"), strings.Join(r.PostForm["model"], ","))})
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; form-action 'self'")
		_, _ = io.WriteString(w, settingsPage)
	case "/unsafe":
		render(w, http.StatusOK, pageData{Title: "Unsafe", Unsafe: true})
	default:
		http.NotFound(w, r)
	}
}

// serveProvider is the provider: a login form that posts to itself and sends
// the browser back to the relying party with a 303.
func (s *sites) serveProvider(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/authorize" {
		http.NotFound(w, r)
		return
	}
	if r.Method == http.MethodGet {
		render(w, http.StatusOK, pageData{
			Title: "Provider sign-in", Form: "/authorize",
			State: r.URL.Query().Get("state"), RedirectURI: r.URL.Query().Get("redirect_uri"),
		})
		return
	}
	if r.PostFormValue("password") != "correct horse" {
		render(w, http.StatusUnauthorized, pageData{Title: "Provider sign-in", Message: "wrong password"})
		return
	}
	q := url.Values{"state": {r.PostFormValue("state")}, "user": {r.PostFormValue("email")}}
	http.Redirect(w, r, r.PostFormValue("redirect_uri")+"?"+q.Encode(), http.StatusSeeOther)
}

// TestCrossSiteSignIn signs in through a form on another site: the __Host-
// state cookie, Secure on http://localhost, SameSite=Lax, survives the top-level
// redirects to 127.0.0.1 and back (a SameSite=Strict one does not, which shows
// that the two really are different sites), and the session cookie it leads to
// has the attributes a session cookie needs. Pages load without console errors
// or CSP violations, and their screenshots are written.
func TestCrossSiteSignIn(t *testing.T) {
	s := newSites(t)
	p := browsertest.New(t)

	if status := p.Navigate(s.app + "/signin"); status != http.StatusOK {
		t.Fatalf("sign-in page: status %d", status)
	}
	if got := p.URL(); !strings.HasPrefix(got, s.provider+"/authorize") {
		t.Fatalf("after /signin the browser is at %s, want the provider %s", got, s.provider)
	}
	state := p.RequireHostCookie(s.app, "__Host-state")
	if state.Domain != "localhost" {
		t.Errorf("state cookie domain %q, want localhost", state.Domain)
	}
	if got := p.Text("#script"); got != "nonced script ran" {
		t.Errorf("#script = %q: the nonced script did not run", got)
	}
	p.Fill("E-mail", "ada@example.com")
	p.Fill("Password", "correct horse")
	shot := p.Screenshot("provider-login")

	if status := p.Submit("Sign in"); status != http.StatusOK {
		t.Fatalf("after signing in: status %d, page %q", status, p.Text("body"))
	}
	if got, want := p.URL(), s.app+"/home"; got != want {
		t.Fatalf("after signing in the browser is at %s, want %s", got, want)
	}
	if got := p.Text("#message"); got != "Signed in as ada@example.com" {
		t.Errorf("#message = %q", got)
	}
	s.mu.Lock()
	strictSeen := s.strictSeen
	s.mu.Unlock()
	if strictSeen {
		t.Errorf("the SameSite=Strict cookie came back through the cross-site redirect: localhost and 127.0.0.1 are not different sites here")
	}
	session := p.RequireHostCookie(s.app, "__Host-session")
	if session.Value != "user=ada@example.com" {
		t.Errorf("session cookie %q", session.Value)
	}
	if c := p.Cookie(s.app, "__Host-state"); c != nil {
		t.Errorf("the state cookie is still there after the callback: %+v", c)
	}
	if c := p.Cookie(s.provider, "__Host-session"); c != nil {
		t.Errorf("the app's session cookie is sent to the provider's site: %+v", c)
	}
	p.Screenshot("home")

	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("screenshot %s is not a PNG", shot)
	}
	if errs := p.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// TestWrongPassword shows the form's error page, and that a second Page has
// a cookie jar of its own.
func TestWrongPassword(t *testing.T) {
	s := newSites(t)
	first := browsertest.New(t)
	first.Navigate(s.app + "/signin")
	second := browsertest.New(t)
	if c := second.Cookie(s.app, "__Host-state"); c != nil {
		t.Errorf("a new page sees another page's cookie: %+v", c)
	}
	first.Fill("E-mail", "ada@example.com")
	first.Fill("Password", "wrong")
	if status := first.Submit("Sign in"); status != http.StatusUnauthorized {
		t.Errorf("wrong password: status %d, want 401", status)
	}
	if got := first.Text("#message"); got != "wrong password" {
		t.Errorf("#message = %q", got)
	}
}

// recorder is a testing.TB that keeps what a Page reports with Errorf, so
// that a test can show that a Page fails its test.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

// Errorf records the failure instead of failing the test.
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestCSPViolation shows that an inline script without the nonce is blocked
// and reported, and that a violation left untaken fails the test when the
// Page closes.
func TestCSPViolation(t *testing.T) {
	s := newSites(t)

	p := browsertest.New(t)
	p.Navigate(s.app + "/unsafe")
	if got := p.Text("#script"); got != "nonced script ran" {
		t.Errorf("#script = %q: the nonced script did not run", got)
	}
	if title := p.Title(); title != "Unsafe" {
		t.Errorf("the inline script without the nonce ran (title %q)", title)
	}
	v := p.TakeCSPViolations()
	if len(v) != 1 || v[0].Directive != "script-src-elem" || v[0].Blocked != "inline" || v[0].Disposition != "enforce" {
		t.Errorf("violations %v, want one script-src-elem blocking inline", v)
	}

	r := &recorder{TB: t}
	q := browsertest.New(r)
	q.Navigate(s.app + "/unsafe")
	q.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "Content-Security-Policy") || !strings.Contains(r.errors[0], "script-src-elem") {
		t.Errorf("closing a page with an untaken violation reported %q, want one CSP failure", r.errors)
	}
}

// settingsPage is a form with a list, checkboxes and a button named by
// aria-label, as the Keys page has.
const settingsPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Settings</title></head><body>
<form method="post" action="/settings">
  <label for="reset">Reset period</label>
  <select id="reset" name="reset"><option value="none">None</option><option value="daily">Daily</option><option value="monthly">Monthly</option></select>
  <fieldset><legend>Models</legend>
    <label><input type="checkbox" name="model" value="small" checked> Small model</label>
    <label><input type="checkbox" name="model" value="large"> Large model</label>
  </fieldset>
  <button type="submit" aria-label="Save the settings">Save</button>
</form></body></html>`

// TestFormControls chooses in a list, sets checkboxes and submits with a
// button named by aria-label.
func TestFormControls(t *testing.T) {
	s := newSites(t)
	p := browsertest.New(t)
	p.Navigate(s.app + "/settings")
	p.Select("Reset period", "Monthly")
	p.Check("Small model", false)
	p.Check("Large model", true)
	p.Check("Large model", true)
	if status := p.Submit("Save the settings"); status != http.StatusOK {
		t.Fatalf("save: status %d", status)
	}
	if got := p.Text("#message"); got != "reset=monthly models=large" {
		t.Errorf("saved %q, want reset=monthly models=large", got)
	}
}
