package signin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Config is the relying party's registration at the provider.
type Config struct {
	Issuer, ClientID, ClientSecret, RedirectURL string
	// HTTPClient talks to the provider (nil: a client with a 10 s timeout).
	HTTPClient *http.Client
	// TrustIssueTime takes an ID token's issue time for its auth_time when it has none
	// (config.Web.ReauthTrustsIssueTime, the operator's choice for a provider that never
	// sends auth_time): a re-authentication is then checked against it.
	TrustIssueTime bool
}

// reauthSkew is how much older than the re-authentication request an auth_time may be (the
// clocks of the provider and the gateway differ a little).
const reauthSkew = 5 * time.Second

// Errors of Finish. Beyond what ErrNotReauthed and ErrNoAuthTime say (that the provider did
// not confirm a fresh sign-in), none of them is shown to the user beyond "sign-in failed".
var (
	ErrState       = errors.New("signin: state does not match")
	ErrNonce       = errors.New("signin: nonce does not match")
	ErrNotReauthed = errors.New("signin: the provider did not sign the user in again")
	// ErrNoAuthTime is a re-authentication whose ID token does not say when the provider
	// authenticated the user (no auth_time, which OpenID Connect Core 1.0 section 2 requires
	// when max_age is requested): the provider may have re-issued a token for its live session
	// without asking anyone anything. It is an ErrNotReauthed.
	ErrNoAuthTime = fmt.Errorf("%w: the ID token has no auth_time", ErrNotReauthed)
	ErrProvider   = errors.New("signin: the provider refused")
)

// RP is the relying party. It is safe for concurrent use.
type RP struct {
	cfg Config

	mu         sync.Mutex
	provider   *oidc.Provider
	endSession string
}

// New returns a relying party for cfg; it talks to the provider only when needed.
func New(cfg Config) *RP {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &RP{cfg: cfg}
}

// discover returns the provider, reading its discovery document the first time.
func (rp *RP) discover(ctx context.Context) (*oidc.Provider, error) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.provider != nil {
		return rp.provider, nil
	}
	// The provider keeps this context for its key set's requests: no cancellation, our client.
	pctx := oidc.ClientContext(context.WithoutCancel(ctx), rp.cfg.HTTPClient)
	p, err := oidc.NewProvider(pctx, rp.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("signin: discovery at %s: %w", rp.cfg.Issuer, err)
	}
	var extra struct {
		EndSession string `json:"end_session_endpoint"`
	}
	_ = p.Claims(&extra)
	rp.provider, rp.endSession = p, extra.EndSession
	return p, nil
}

func (rp *RP) oauth(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: rp.cfg.ClientID, ClientSecret: rp.cfg.ClientSecret, RedirectURL: rp.cfg.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "email", "profile"}}
}

// Request is a sign-in in progress, kept in the browser's session until the callback.
type Request struct {
	State    string    `json:"state"`
	Nonce    string    `json:"nonce"`
	Verifier string    `json:"verifier"`
	Started  time.Time `json:"started"`
	// Reauth asks the provider to sign the user in again (max_age=0, prompt=login).
	Reauth bool `json:"reauth,omitempty"`
	// Next is the local path to return to.
	Next string `json:"next,omitempty"`
}

// Encode serialises r for the session.
func (r Request) Encode() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// DecodeRequest parses what Encode wrote.
func DecodeRequest(s string) (Request, bool) {
	var r Request
	if s == "" || json.Unmarshal([]byte(s), &r) != nil || r.State == "" || r.Nonce == "" || r.Verifier == "" {
		return Request{}, false
	}
	return r, true
}

func random() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Start begins a sign-in: it returns the request to keep and the provider's URL to send the
// browser to. loginHint, when set, is sent as OpenID Connect's login_hint (the signed-in
// person's e-mail, for a re-authentication: the provider can fill it in or pick the account).
func (rp *RP) Start(ctx context.Context, reauth bool, next, loginHint string) (Request, string, error) {
	p, err := rp.discover(ctx)
	if err != nil {
		return Request{}, "", err
	}
	req := Request{Verifier: oauth2.GenerateVerifier(), Started: time.Now(), Reauth: reauth, Next: next}
	if req.State, err = random(); err != nil {
		return Request{}, "", err
	}
	if req.Nonce, err = random(); err != nil {
		return Request{}, "", err
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(req.Verifier), oidc.Nonce(req.Nonce)}
	if reauth {
		opts = append(opts, oauth2.SetAuthURLParam("max_age", "0"), oauth2.SetAuthURLParam("prompt", "login"))
	}
	if loginHint != "" {
		opts = append(opts, oauth2.SetAuthURLParam("login_hint", loginHint))
	}
	return req, rp.oauth(p).AuthCodeURL(req.State, opts...), nil
}

// Result is a completed sign-in.
type Result struct {
	Issuer, Subject string
	Email           string
	EmailVerified   bool
	Name            string
	// AuthTime is when the provider last authenticated the user (auth_time), zero when the
	// provider does not say. It is never the token's issue time: a provider with single
	// sign-on issues a token now for a person who typed their password days ago.
	AuthTime time.Time
	// IDToken is the raw ID token, kept for the logout's id_token_hint.
	IDToken string
}

// Finish completes the sign-in req with the callback's query: it checks the state, redeems the
// code with the PKCE verifier, verifies the ID token (issuer, audience, expiry, signature), and
// checks its nonce and, for a re-authentication, that auth_time is there (ErrNoAuthTime) and
// not older than the request (ErrNotReauthed). An ordinary sign-in needs no auth_time.
func (rp *RP) Finish(ctx context.Context, req Request, query url.Values) (Result, error) {
	if subtle.ConstantTimeCompare([]byte(query.Get("state")), []byte(req.State)) != 1 {
		return Result{}, ErrState
	}
	if e := query.Get("error"); e != "" {
		return Result{}, fmt.Errorf("%w: %s", ErrProvider, e)
	}
	code := query.Get("code")
	if code == "" {
		return Result{}, fmt.Errorf("%w: no code", ErrProvider)
	}
	p, err := rp.discover(ctx)
	if err != nil {
		return Result{}, err
	}
	tok, err := rp.oauth(p).Exchange(oidc.ClientContext(ctx, rp.cfg.HTTPClient), code, oauth2.VerifierOption(req.Verifier))
	if err != nil {
		return Result{}, fmt.Errorf("%w: code exchange: %v", ErrProvider, err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return Result{}, fmt.Errorf("%w: no id_token", ErrProvider)
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: rp.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		return Result{}, fmt.Errorf("%w: id token: %v", ErrProvider, err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(req.Nonce)) != 1 {
		return Result{}, ErrNonce
	}
	var claims struct {
		Email         string          `json:"email"`
		EmailVerified json.RawMessage `json:"email_verified"`
		Name          string          `json:"name"`
		AuthTime      *float64        `json:"auth_time"`
	}
	if err := idt.Claims(&claims); err != nil {
		return Result{}, fmt.Errorf("%w: claims: %v", ErrProvider, err)
	}
	res := Result{Issuer: idt.Issuer, Subject: idt.Subject, Email: claims.Email, Name: claims.Name, IDToken: raw}
	// Some providers send email_verified as a string.
	switch string(claims.EmailVerified) {
	case "true", `"true"`:
		res.EmailVerified = true
	}
	switch {
	case claims.AuthTime != nil:
		res.AuthTime = time.Unix(int64(*claims.AuthTime), 0)
	case rp.cfg.TrustIssueTime:
		res.AuthTime = idt.IssuedAt
	}
	if req.Reauth && res.AuthTime.IsZero() {
		return Result{}, ErrNoAuthTime
	}
	if req.Reauth && res.AuthTime.Before(req.Started.Add(-reauthSkew)) {
		return Result{}, ErrNotReauthed
	}
	return res, nil
}

// LogoutURL is where to send the browser to end its session at the provider too
// (RP-initiated logout), coming back to postLogout; "" when the provider has no
// end_session_endpoint (or has not been discovered yet).
func (rp *RP) LogoutURL(ctx context.Context, idTokenHint, postLogout string) string {
	if _, err := rp.discover(ctx); err != nil {
		return ""
	}
	rp.mu.Lock()
	end := rp.endSession
	rp.mu.Unlock()
	if end == "" {
		return ""
	}
	u, err := url.Parse(end)
	if err != nil {
		return ""
	}
	q := u.Query()
	if idTokenHint != "" {
		q.Set("id_token_hint", idTokenHint)
	}
	q.Set("client_id", rp.cfg.ClientID)
	if postLogout != "" {
		q.Set("post_logout_redirect_uri", postLogout)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Origins are the provider's origins a browser is sent to by a form of the application
// (authorization and end-session endpoints; the issuer's before discovery), for the
// Content-Security-Policy's form-action.
func (rp *RP) Origins() []string {
	out := []string{origin(rp.cfg.Issuer)}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.provider != nil {
		out = append(out, origin(rp.provider.Endpoint().AuthURL), origin(rp.endSession))
	}
	seen := map[string]bool{}
	uniq := out[:0]
	for _, o := range out {
		if o != "" && !seen[o] {
			seen[o] = true
			uniq = append(uniq, o)
		}
	}
	return uniq
}

func origin(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
