package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/addrlimit"
	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/mcpauth"
	"github.com/tollgate/tollgate/impl/routing"
	"github.com/tollgate/tollgate/impl/sealedid"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usageview"
	"github.com/tollgate/tollgate/impl/web/audit"
	"github.com/tollgate/tollgate/impl/web/members"
	"github.com/tollgate/tollgate/impl/web/session"
	"github.com/tollgate/tollgate/impl/web/signin"
)

// CookieName is the session cookie. The __Host- prefix makes browsers insist on Secure,
// Path=/ and no Domain (browsers take Secure cookies over http://localhost and 127.0.0.1).
const CookieName = "__Host-tollgate_session"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options are what the web application is built from.
type Options struct {
	Store  *store.Store
	Config *config.Config
	Logger *slog.Logger
	// HTTPClient talks to the OpenID provider (nil: a client with a 10 s timeout).
	HTTPClient *http.Client
	// Datasets serves the Datasets page (nil: the page says datasets are not available).
	Datasets *dataset.Service
	// UsageArchive holds the archived months of usage the Usage page reads (nil: none is read;
	// impl/usagearchive).
	UsageArchive usageview.ArchiveFiles
	// Agents serves the Approvals and Agents pages (nil: they say agents are not available).
	Agents *agent.Service
	// OAuth is the MCP endpoint's authorization server, whose consent page and grants the
	// console serves (oauth.go); nil: the pages say OAuth is not available.
	OAuth *mcpauth.Server
	// Models is a configured model as the exchange holds it today, priced for the day
	// (exchange.Engine.Model: the prices the meter bills by and GET /v1/models shows), which
	// the settings the console gives read; nil: the configuration's, as validated.
	Models func(id string) (*routing.Model, bool)
	// UnreachableModels are the account's granted models it cannot call, each with the provider
	// whose upstream key of its own (account_keys: required) the account lacks
	// (exchange.Engine.UnreachableModels): the key form does not offer them, the Plan page
	// marks them. nil: every granted model is offered.
	UnreachableModels func(ctx context.Context, account uuid.UUID) (map[string]string, error)
	// Meter reads a capped key's budget for the Keys page (billing.Meter.KeyBudget, what GET
	// /v1/credits shows the key); nil: the page shows what the key spent alone.
	Meter *billing.Meter
	// RedirectToPublicURL sends a GET of "/" or /signin… whose Host is not web.public_url's
	// to the same path there (303), so that a sign-in begins on the host its cookies and
	// callback belong to. For `tollgate dev` only: behind a proxy that rewrites Host it loops.
	RedirectToPublicURL bool
}

// App is the web application: an http.Handler for the paths Owns reports.
type App struct {
	cfg      *config.Config
	web      config.Web
	log      *slog.Logger
	store    *store.Store
	accounts *accounts.Service
	members  *members.Service
	audit    *audit.Log
	sessions *session.Store
	// seals seals the ids a page would otherwise show from a sequence every account shares
	// (the request log's cursor, the Sessions page's session ids).
	seals    *sealedid.Loader
	sm       *scs.SessionManager
	rp       *signin.RP
	pages    map[string]*template.Template
	nav      []page
	handler  http.Handler
	datasets *dataset.Service     // the Datasets page (datasets.go)
	agents   *agent.Service       // the Approvals and Agents pages (approvals.go, agents.go)
	tails    tails                // the live tails of agent sessions (agents.go)
	usage    *usageview.Service   // the Usage page and the home page's spend (usage.go, other.go)
	oauth    *mcpauth.Server      // the consent page and Connected apps (oauth.go); nil: none
	meter    *billing.Meter       // a capped key's budget on the Keys page (keys.go); nil: none
	signins  *addrlimit.ByAddress // the sign-ins started per client address (auth.go)
	notFound http.Handler         // the "not found" page of paths nobody serves (NotFoundPage)
	// models are the models priced for the day, which the settings read (Options.Models).
	models func(id string) (*routing.Model, bool)
	// unreachable are the account's granted models it cannot call (Options.UnreachableModels;
	// nil: none).
	unreachable func(ctx context.Context, account uuid.UUID) (map[string]string, error)
	// routePatterns are the patterns of the console's routes, as registered (router).
	routePatterns []string
	// uploadLocks serialise this process's dataset uploads, by account (a stripe each), before
	// they take the account's upload lock in the database (datasets.go).
	uploadLocks [64]sync.Mutex
}

// New builds the application from o.Config.Web (which must be enabled).
func New(o Options) (*App, error) {
	if o.Config == nil || !o.Config.Web.Enabled() {
		return nil, errors.New("web: the configuration has no web.issuer")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	w := o.Config.Web
	pool := o.Store.Pool()
	a := &App{
		cfg: o.Config, web: w, log: o.Logger, store: o.Store,
		accounts: &accounts.Service{Store: o.Store, Config: o.Config},
		members:  members.New(o.Store, memberSessions(o.Agents)),
		audit:    &audit.Log{Store: o.Store},
		sessions: session.New(o.Store, nil),
		rp: signin.New(signin.Config{Issuer: w.Issuer, ClientID: w.ClientID, ClientSecret: w.ClientSecret,
			RedirectURL: w.RedirectURL, HTTPClient: o.HTTPClient, TrustIssueTime: w.ReauthTrustsIssueTime}),
		datasets: o.Datasets, agents: o.Agents, tails: newTails(),
		usage: usageview.New(pool, usageview.Options{Archive: o.UsageArchive}), oauth: o.OAuth, meter: o.Meter,
		models: o.Models, unreachable: o.UnreachableModels,
		signins: addrlimit.New[netip.Prefix](signinLimit, nil),
		seals:   sealedid.NewLoader(func(ctx context.Context) ([]byte, error) { return o.Store.Secret(ctx, sealedid.SecretName) }),
	}
	if a.models == nil {
		a.models = routing.NewRegistry(o.Config).Model
	}
	if o.Agents != nil {
		// A key's revocation ends the agent sessions started with it (key_revoked).
		a.accounts.Agents = o.Agents
	}
	sm := scs.New()
	sm.Store = a.sessions
	sm.Lifetime = w.SessionAbsoluteTimeout
	sm.IdleTimeout = w.SessionIdleTimeout
	sm.Cookie = scs.SessionCookie{Name: CookieName, HttpOnly: true, Path: "/", SameSite: http.SameSiteLaxMode,
		Secure: true, Persist: false}
	sm.ErrorFunc = func(w http.ResponseWriter, r *http.Request, err error) {
		a.log.Warn("web: session store", "err", err)
		a.unavailable(w)
	}
	a.sm = sm
	a.nav = navigation()
	var err error
	if a.pages, err = parseTemplates(); err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	rt := &router{mux: mux}
	a.routes(rt)
	a.routePatterns = rt.patterns
	static, _ := fs.Sub(staticFS, "static")
	outer := http.NewServeMux()
	outer.Handle("GET /static/", http.StripPrefix("/static/", cacheStatic(http.FileServerFS(static))))
	// Browsers ask for /favicon.ico where a response names no icon (the pages link
	// /static/favicon.svg): the same icon, rather than a 404 in the console.
	outer.Handle("GET /favicon.ico", cacheStatic(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		http.ServeFileFS(w, r, static, "favicon.svg")
	})))
	outer.Handle("/", sm.LoadAndSave(noStore(mux)))
	a.notFound = a.securityHeaders(sm.LoadAndSave(noStore(a.anyone(a.noSuchPage))))
	// Every state-changing request is checked for a cross-origin source (Sec-Fetch-Site, or
	// Origin against Host); there are no bypass patterns.
	cop := http.NewCrossOriginProtection()
	a.handler = refuseAPIKeys(a.securityHeaders(cop.Handler(outer)))
	if o.RedirectToPublicURL {
		if a.handler, err = toPublicHost(w.PublicURL, a.handler); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// NotFoundPage returns the console's "not found" page (404, in the console's layout, with a
// link home), whatever the request's path. The API shows it to a browser that asks for a path
// neither serves, instead of its JSON 404 (httpapi.Options.PageNotFound).
func (a *App) NotFoundPage() http.Handler { return a.notFound }

// ServeHTTP serves the web application's paths.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

// ownedPrefixes are the path trees of the web application (besides "/" itself).
var ownedPrefixes = []string{"/signin", "/auth/callback", "/signout", "/keys", "/usage", "/plan", "/approvals",
	"/agents", "/datasets", "/audit", "/sessions", "/static", "/favicon.ico",
	"/oauth/authorize", "/oauth/grants"}

// Owns reports whether path is the web application's: "/" and the trees of ownedPrefixes
// ("/keys" and "/keys/…", never "/keysx"). Everything else (/v1/…, /api/…, unknown paths)
// is the API's.
func Owns(path string) bool {
	if path == "/" {
		return true
	}
	for _, p := range ownedPrefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// Mount returns a handler that sends the web application's paths to app and every other
// request to api. The API never sees the session cookie's paths, and the application never
// sees the API's.
func Mount(app http.Handler, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Owns(r.URL.Path) {
			app.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// noStore keeps pages out of every cache: they show account data, and a new key once.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func cacheStatic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

// unavailable answers a dependency failure (the database, the provider) without its detail.
func (a *App) unavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "5")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = fmt.Fprintln(w, "The service is unavailable for a moment. Try again shortly.")
}

// now is the application's clock.
func now() time.Time { return time.Now() }

// memberSessions is the agents that end the sessions of a member's removal (members.New): nil
// without agents, never a nil *agent.Service inside a non-nil interface.
func memberSessions(agents *agent.Service) members.Sessions {
	if agents == nil {
		return nil
	}
	return agents
}
