package devoidc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is a user who can sign in: Subject is the stable "sub" claim, Email and Password are
// what the login form asks for, Name goes into the profile claims (the e-mail when empty).
type User struct{ Subject, Email, Name, Password string }

// Client is a registered relying party. A client with a Secret is confidential
// (client_secret_basic or client_secret_post); one without is public and relies on PKCE alone.
// RedirectURIs and PostLogoutRedirectURIs are matched exactly.
type Client struct {
	ID, Secret                           string
	RedirectURIs, PostLogoutRedirectURIs []string
}

// Options configures a provider.
type Options struct {
	Users   []User
	Clients []Client
	// Logger receives the provider's own log lines; nil discards them.
	Logger *slog.Logger

	// The two options below make the provider behave as some real ones do, for tests of how a
	// relying party copes; leave them off otherwise.

	// OmitAuthTime leaves auth_time out of the ID tokens, even when the request carries
	// max_age or prompt=login (OpenID Connect Core 1.0 section 2 requires it then): released
	// Dex sends none, Google only with its session age claims, Entra ID only as an optional
	// claim.
	OmitAuthTime bool
	// IgnoreForcedLogin completes a request from a browser with a live provider session
	// without the form even when it carries prompt=login or a max_age the session is older
	// than: the provider re-issues a token instead of authenticating the person again.
	IgnoreForcedLogin bool
}

// Provider is a running development OpenID provider.
type Provider struct {
	issuer string
	store  *storage
	op     *op.Provider
	log    *slog.Logger
	cookie string // name of the provider session cookie
	// onlyEmail is the e-mail of the provider's one user ("" when it has several): the
	// sign-in form starts with it (make run's demo user; trial h6).
	onlyEmail string
	// ignoreForcedLogin is Options.IgnoreForcedLogin.
	ignoreForcedLogin bool
	srv               *http.Server
	served            chan struct{}
	closing           sync.Once
}

// Serve builds the provider for the listener's address (issuer "http://<ln.Addr()>") and
// serves it on ln until Close. The issuer is what the relying party configures. Once Serve
// succeeds it owns ln (Close closes it); when it fails, ln is left to the caller.
//
// The listener must be on a loopback address: the provider serves plain http and is for a
// developer's machine and tests only.
func Serve(ln net.Listener, o Options) (*Provider, error) {
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.IsLoopback() {
		return nil, fmt.Errorf("devoidc: the development provider listens on loopback addresses only, not %s", ln.Addr())
	}
	p, err := newProvider("http://"+ln.Addr().String(), o)
	if err != nil {
		return nil, err
	}
	p.srv = &http.Server{Handler: p.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(p.served)
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("devoidc: serving stopped", "err", err)
		}
	}()
	p.log.Info("devoidc: development OpenID provider started (not for production)", "issuer", p.issuer)
	return p, nil
}

func newProvider(issuer string, o Options) (*Provider, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("devoidc: issuer %q: %w", issuer, err)
	}
	p := &Provider{
		issuer: issuer,
		log:    log,
		// Cookies do not tell ports apart: two providers on one host keep their sessions in
		// different cookies.
		cookie:            "devoidc_session_" + u.Port(),
		served:            make(chan struct{}),
		ignoreForcedLogin: o.IgnoreForcedLogin,
	}
	users, err := checkUsers(o.Users)
	if err != nil {
		return nil, err
	}
	if len(users) == 1 {
		p.onlyEmail = users[0].Email
	}
	clients := make(map[string]*client, len(o.Clients))
	for _, c := range o.Clients {
		if c.ID == "" || len(c.RedirectURIs) == 0 {
			return nil, errors.New("devoidc: a client needs an ID and at least one redirect URI")
		}
		if _, dup := clients[c.ID]; dup {
			return nil, fmt.Errorf("devoidc: client %q registered twice", c.ID)
		}
		clients[c.ID] = &client{Client: c, loginURL: p.loginURL}
	}
	p.store, err = newStorage(users, clients, log)
	if err != nil {
		return nil, err
	}
	p.store.omitAuthTime = o.OmitAuthTime
	var cryptoKey [32]byte
	rand.Read(cryptoKey[:])
	config := &op.Config{
		CryptoKey:                cryptoKey,
		DefaultLogoutRedirectURI: issuer + loggedOutPath,
		CodeMethodS256:           true,
		AuthMethodPost:           true,
	}
	// Development only: op refuses an http issuer unless told to allow it.
	p.op, err = op.NewProvider(config, p.store, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		return nil, fmt.Errorf("devoidc: %w", err)
	}
	return p, nil
}

func checkUsers(users []User) ([]User, error) {
	out := make([]User, 0, len(users))
	seen := make(map[string]bool)
	for _, u := range users {
		if u.Subject == "" || u.Email == "" {
			return nil, errors.New("devoidc: a user needs a subject and an e-mail")
		}
		key := strings.ToLower(u.Email)
		if seen[key] || seen["sub:"+u.Subject] {
			return nil, fmt.Errorf("devoidc: user %q given twice", u.Email)
		}
		seen[key], seen["sub:"+u.Subject] = true, true
		if u.Name == "" {
			u.Name = u.Email
		}
		out = append(out, u)
	}
	return out, nil
}

// Issuer is the provider's issuer URL, for the relying party's configuration.
func (p *Provider) Issuer() string { return p.issuer }

// Close stops the provider: it closes the listener and every connection, and returns when
// the serving goroutine has ended.
func (p *Provider) Close() error {
	var err error
	p.closing.Do(func() {
		err = p.srv.Close()
		<-p.served
	})
	return err
}

// Sessions is how many signed-in sessions the provider holds for the subject (tests check
// sign-out ends them).
func (p *Provider) Sessions(subject string) int { return p.store.sessionCount(subject) }

const (
	loginPath     = "/login"
	loggedOutPath = "/logged-out"
)

// loginURL is where op sends the browser for an authorization request.
func (p *Provider) loginURL(authRequestID string) string {
	return p.issuer + loginPath + "?" + url.Values{"authRequestID": {authRequestID}}.Encode()
}

// callbackURL is where a signed-in browser goes back to op, which then redirects it to the
// relying party with the code.
func (p *Provider) callbackURL(authRequestID string) string {
	return p.op.AuthorizationEndpoint().Absolute(p.issuer) + "/callback?" + url.Values{"id": {authRequestID}}.Encode()
}

// handler routes the login pages to this package and everything else to op.
func (p *Provider) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+loginPath, p.showLogin)
	mux.Handle("POST "+loginPath, http.NewCrossOriginProtection().Handler(http.HandlerFunc(p.postLogin)))
	mux.HandleFunc("GET "+loggedOutPath, p.loggedOut)
	mux.HandleFunc(p.op.EndSessionEndpoint().Relative(), p.endSession)
	mux.Handle("/", p.op)
	return mux
}

// logoutKey is the context key of a logout's logoutContext.
type logoutKey struct{}

// logoutContext carries what the storage's TerminateSessionFromRequest needs of the HTTP
// request op hides from it: the browser's session cookie, and a way to clear it.
type logoutContext struct {
	cookieToken string
	clearCookie func()
}

// endSession hands RP-initiated logout to op with the browser's cookie in the context.
func (p *Provider) endSession(w http.ResponseWriter, r *http.Request) {
	lc := &logoutContext{clearCookie: func() {
		http.SetCookie(w, &http.Cookie{Name: p.cookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	}}
	if c, err := r.Cookie(p.cookie); err == nil {
		lc.cookieToken = c.Value
	}
	p.op.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), logoutKey{}, lc)))
}
