package web_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/devkit/devoidc"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/gateway"
	"github.com/tollgate/tollgate/impl/h1server"
	"github.com/tollgate/tollgate/impl/sealedid"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web"
	"github.com/tollgate/tollgate/impl/web/members"
	"github.com/tollgate/tollgate/impl/web/session"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	aliceEmail = "alice@example.com"
	alicePass  = "alice-password"
	bobEmail   = "bob@example.com"
	bobPass    = "bob-password"
	carolEmail = "carol@example.com"
	carolPass  = "carol-password"
)

// env is a gateway with the web application, at http://localhost:<port> (its own site), and the
// development OpenID provider at http://127.0.0.1:<port> (another site), on a fresh database.
type env struct {
	URL      string
	Store    *store.Store
	Accounts *accounts.Service
	Members  *members.Service
	IdP      *devoidc.Provider
	Config   *config.Config
	// DatasetDir is the directory of the datasets' storage.
	DatasetDir string
	// Statements names the store's statements (store.OpenObserved), for a test that counts
	// the reads a page makes.
	Statements *statementLog
}

// statementLog counts the statements the store sent by their sqlc names ("GetKeyBudget").
type statementLog struct {
	mu     sync.Mutex
	counts map[string]int
}

// observe counts the statement sql by its sqlc name; a statement without one is not counted.
func (l *statementLog) observe(sql string) {
	rest, ok := strings.CutPrefix(sql, "-- name: ")
	if !ok {
		return
	}
	name, _, _ := strings.Cut(rest, " ")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[string]int{}
	}
	l.counts[name]++
}

// since returns how many statements of each name were sent while do ran (the gateway's own
// work at the same time counted too).
func (l *statementLog) since(do func()) map[string]int {
	l.mu.Lock()
	before := maps.Clone(l.counts)
	l.mu.Unlock()
	do()
	l.mu.Lock()
	defer l.mu.Unlock()
	sent := map[string]int{}
	for n, c := range l.counts {
		if c > before[n] {
			sent[n] = c - before[n]
		}
	}
	return sent
}

// start runs the environment for the rest of the test; tune adjusts the web configuration.
func start(t *testing.T, tune func(*config.Web)) *env {
	t.Helper()
	return startConfig(t, func(c *config.Config) {
		if tune != nil {
			tune(&c.Web)
		}
	})
}

// startConfig is start with tune adjusting the whole configuration.
func startConfig(t *testing.T, tune func(*config.Config)) *env {
	t.Helper()
	return startServing(t, tune, nil)
}

// startServing is startConfig with the application's listener wrapped by wrap (nil: as it is).
func startServing(t *testing.T, tune func(*config.Config), wrap func(net.Listener) net.Listener) *env {
	t.Helper()
	return startClocked(t, tune, wrap, nil)
}

// startClocked is startServing with the gateway's prices taken on the day of now (nil:
// time.Now; gateway.Options.Now).
func startClocked(t *testing.T, tune func(*config.Config), wrap func(net.Listener) net.Listener, now func() time.Time) *env {
	t.Helper()
	return startWithProvider(t, tune, wrap, now, devoidc.Options{})
}

// startWithProvider is startClocked with the development provider behaving as quirks says
// (its OmitAuthTime and IgnoreForcedLogin; its users and clients are the harness's).
func startWithProvider(t *testing.T, tune func(*config.Config), wrap func(net.Listener) net.Listener, now func() time.Time, quirks devoidc.Options) *env {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	appLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(appLn.Addr().String())
	appURL := "http://localhost:" + port
	idpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	idp, err := devoidc.Serve(idpLn, devoidc.Options{
		Users: []devoidc.User{
			{Subject: "alice", Email: aliceEmail, Name: "Alice", Password: alicePass},
			{Subject: "bob", Email: bobEmail, Name: "Bob", Password: bobPass},
			{Subject: "carol", Email: carolEmail, Name: "Carol", Password: carolPass},
		},
		Clients: []devoidc.Client{{ID: "tollgate", Secret: "client-secret",
			RedirectURIs: []string{appURL + "/auth/callback"}, PostLogoutRedirectURIs: []string{appURL + "/"}}},
		OmitAuthTime:      quirks.OmitAuthTime,
		IgnoreForcedLogin: quirks.IgnoreForcedLogin,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idp.Close() })

	cfg := config.Default()
	cfg.Web = config.Web{Issuer: idp.Issuer(), ClientID: "tollgate", ClientSecret: "client-secret", PublicURL: appURL + "/"}
	tune(cfg)
	cfg.Web.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	statements := &statementLog{}
	st, err := store.OpenObserved(ctx, pgtest.ConnString(t), statements.observe)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	datasetDir := t.TempDir()
	storage, err := dataset.NewDirStorage(datasetDir)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Options{Store: st, Config: cfg, Logger: log, DatasetStorage: storage, SimulatorURL: "http://127.0.0.1:1", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = gw.Run(runCtx) }()
	srv := &h1server.Server{Handler: gw.Handler}
	served := make(chan struct{})
	ln := appLn
	if wrap != nil {
		ln = wrap(appLn)
	}
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = gw.Close() })
	t.Cleanup(func() { stop(); <-done })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-served
	})
	deadline := time.Now().Add(10 * time.Second)
	for !gw.Feed.Live() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return &env{URL: appURL, Store: st, Accounts: &accounts.Service{Store: st, Config: cfg},
		Members: members.New(st, nil), IdP: idp, Config: cfg, Statements: statements,
		DatasetDir: datasetDir}
}

// account creates an account with the e-mail as a member in role.
func (e *env) account(t *testing.T, name, email, role string) store.Account {
	t.Helper()
	acct, err := e.Accounts.CreateAccount(context.Background(), name, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if email != "" {
		if _, err := e.Members.Add(context.Background(), acct.ID, email, role); err != nil {
			t.Fatal(err)
		}
	}
	return acct
}

// browser is a plain HTTP client with a cookie jar that does not follow redirects by itself.
type browser struct {
	t   *testing.T
	c   *http.Client
	app string
	// userAgent is the User-Agent header sent ("web-test" when empty).
	userAgent string
	// e is the environment the browser signs in to (its session store).
	e *env
}

func (e *env) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, e: e, app: e.URL, c: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// page is a response read whole.
type page struct {
	Status   int
	Location string
	Body     string
	Header   http.Header
}

func (b *browser) do(method, u string, form url.Values, hdr map[string]string) page {
	b.t.Helper()
	if strings.HasPrefix(u, "/") {
		u = b.app + u
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	ua := b.userAgent
	if ua == "" {
		ua = "web-test"
	}
	req.Header.Set("User-Agent", ua)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	loc := resp.Header.Get("Location")
	if loc != "" {
		if l, err := resp.Request.URL.Parse(loc); err == nil {
			loc = l.String()
		}
	}
	return page{Status: resp.StatusCode, Location: loc, Body: string(raw), Header: resp.Header}
}

func (b *browser) get(u string) page { return b.do(http.MethodGet, u, nil, nil) }

// post submits a form as a same-origin browser does (Origin and Sec-Fetch-Site), from a page
// shown just now: a form without account_id to a route of an account gets the session's
// current account's, as every form of its page carries (postRaw sends the form as given).
func (b *browser) post(u string, form url.Values) page {
	if form == nil {
		form = url.Values{}
	}
	if _, named := form["account_id"]; !named && boundPath(u) {
		if id := b.currentAccount(); id != "" {
			form = maps.Clone(form) // the caller's may be sent again, elsewhere
			form.Set("account_id", id)
		}
	}
	return b.postRaw(u, form)
}

// postRaw submits form as it is, as a same-origin browser does.
func (b *browser) postRaw(u string, form url.Values) page {
	if form == nil {
		form = url.Values{}
	}
	return b.do(http.MethodPost, u, form, map[string]string{"Origin": b.app, "Sec-Fetch-Site": "same-origin"})
}

// unboundPrefixes are the console's POST routes that act on no account (docs/web.md, "Forms
// bound to the account they were shown in"): the account switch and sign-up, sign-out and the
// Sessions page's.
var unboundPrefixes = []string{"/signin/", "/signout", "/sessions/"}

// boundPath reports whether a POST to u must name the account it was made for.
func boundPath(u string) bool {
	for _, p := range unboundPrefixes {
		if strings.HasPrefix(u, p) {
			return false
		}
	}
	return strings.HasPrefix(u, "/")
}

// currentAccount is the id of the account the browser's session works in ("" when none).
func (b *browser) currentAccount() string {
	b.t.Helper()
	token := b.cookie()
	if token == "" {
		return ""
	}
	data, found, err := session.New(b.e.Store, nil).FindCtx(context.Background(), token)
	if err != nil {
		b.t.Fatal(err)
	}
	if !found {
		return ""
	}
	_, values, err := scs.GobCodec{}.Decode(data)
	if err != nil {
		b.t.Fatal(err)
	}
	id, _ := values["account_id"].(string)
	return id
}

// follow follows redirects from p until stop says so or a page is not a redirect.
func (b *browser) follow(p page, stop func(string) bool) page {
	b.t.Helper()
	for i := 0; i < 20 && p.Location != ""; i++ {
		if stop != nil && stop(p.Location) {
			return p
		}
		p = b.get(p.Location)
	}
	return p
}

var authRequestRe = regexp.MustCompile(`name="authRequestID" value="([^"]+)"`)

// login answers the provider's login form shown in p, and returns the provider's answer.
func (b *browser) login(p page, issuer, email, password string) page {
	b.t.Helper()
	m := authRequestRe.FindStringSubmatch(p.Body)
	if m == nil {
		b.t.Fatalf("no login form (status %d): %.300s", p.Status, p.Body)
	}
	return b.do(http.MethodPost, issuer+"/login", url.Values{"authRequestID": {m[1]}, "email": {email}, "password": {password}},
		map[string]string{"Origin": issuer})
}

// toCallback goes from the provider's authorization URL to the application's callback URL
// (not requested), signing in at the provider when it asks.
func (b *browser) toCallback(authURL, issuer, email, password string) string {
	b.t.Helper()
	isCallback := func(u string) bool { return strings.HasPrefix(u, b.app+"/auth/callback") }
	p := b.follow(b.get(authURL), isCallback)
	if !isCallback(p.Location) {
		p = b.follow(b.login(p, issuer, email, password), isCallback)
	}
	if !isCallback(p.Location) {
		b.t.Fatalf("the provider did not send us back: %d %s %.300s", p.Status, p.Location, p.Body)
	}
	return p.Location
}

// signIn signs in through the provider and returns the page the application lands on.
func (b *browser) signIn(e *env, email, password string) page {
	b.t.Helper()
	p := b.get("/signin")
	if p.Status != http.StatusFound || !strings.HasPrefix(p.Location, e.IdP.Issuer()) {
		b.t.Fatalf("GET /signin: %d %s", p.Status, p.Location)
	}
	cb := b.toCallback(p.Location, e.IdP.Issuer(), email, password)
	return b.follow(b.get(cb), nil)
}

// cookie is the browser's session cookie for the application ("" when none).
func (b *browser) cookie() string {
	u, _ := url.Parse(b.app)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "__Host-tollgate_session" {
			return c.Value
		}
	}
	return ""
}

// sealedSessionID is the token the Sessions page shows for the session with that id.
func sealedSessionID(t *testing.T, e *env, id int64) string {
	t.Helper()
	key, err := e.Store.Secret(context.Background(), sealedid.SecretName)
	if err != nil {
		t.Fatal(err)
	}
	seal, err := sealedid.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return web.SessionToken(seal, id)
}
