package devoidc

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

const (
	// authRequestLifetime is how long a browser has to sign in after the relying party sent
	// it to the authorization endpoint.
	authRequestLifetime = 10 * time.Minute
	// codeLifetime is how long an authorization code can be exchanged.
	codeLifetime = time.Minute
	// accessTokenLifetime is how long an access token opens the userinfo endpoint.
	accessTokenLifetime = time.Hour
)

// errNotFound is what the storage answers for an unknown client, request, code or token.
var errNotFound = errors.New("devoidc: not found")

// authRequest is an authorization request between the authorization endpoint and the token
// exchange. The storage keeps it behind its lock and hands op copies.
type authRequest struct {
	id      string
	created time.Time
	req     oidc.AuthRequest

	// Set when the browser has signed in (or its provider session was good enough).
	done     bool
	subject  string
	authTime time.Time
	sid      string
	// omitAuthTime keeps auth_time out of the ID token (Options.OmitAuthTime).
	omitAuthTime bool

	// code is the authorization code issued for the request, codeIssued when; exchanged is
	// set by the first token exchange so that a concurrent second one fails.
	code       string
	codeIssued time.Time
	exchanged  bool
}

var _ op.AuthRequest = (*authRequest)(nil)

func (a *authRequest) GetID() string         { return a.id }
func (a *authRequest) GetACR() string        { return "" }
func (a *authRequest) GetAudience() []string { return []string{a.req.ClientID} }
func (a *authRequest) GetAuthTime() time.Time {
	if a.omitAuthTime {
		return time.Time{} // op leaves a zero auth_time out of the ID token
	}
	return a.authTime
}
func (a *authRequest) GetClientID() string                { return a.req.ClientID }
func (a *authRequest) GetNonce() string                   { return a.req.Nonce }
func (a *authRequest) GetRedirectURI() string             { return a.req.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType { return a.req.ResponseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return a.req.ResponseMode }
func (a *authRequest) GetScopes() []string                { return a.req.Scopes }
func (a *authRequest) GetState() string                   { return a.req.State }
func (a *authRequest) GetSubject() string                 { return a.subject }
func (a *authRequest) Done() bool                         { return a.done }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	if a.req.CodeChallenge == "" {
		return nil
	}
	return &oidc.CodeChallenge{Challenge: a.req.CodeChallenge, Method: a.req.CodeChallengeMethod}
}

// GetAMR says the user signed in with a password.
func (a *authRequest) GetAMR() []string {
	if !a.done {
		return nil
	}
	return []string{"pwd"}
}

// forcesLogin reports whether the request asks for a fresh sign-in from a browser whose
// provider session began at authTime: prompt=login, or a max_age the session is older than
// (op turns prompt=login into max_age=0 before the request is stored).
func (a *authRequest) forcesLogin(authTime, now time.Time) bool {
	if slices.Contains(a.req.Prompt, oidc.PromptLogin) {
		return true
	}
	if a.req.MaxAge == nil {
		return false
	}
	return now.Sub(authTime) >= time.Duration(*a.req.MaxAge)*time.Second
}

// promptNone reports whether the request forbids any interaction.
func (a *authRequest) promptNone() bool {
	return slices.Contains(a.req.Prompt, oidc.PromptNone)
}

// accessToken is an issued opaque access token.
type accessToken struct {
	subject   string
	clientID  string
	scopes    []string
	expires   time.Time
	requestID string // the authorization request it was issued for
}

// session is a provider session: a browser signed in as subject at authTime. The cookie
// carries its token; sid is a separate public identifier, put into ID tokens, that cannot
// be turned into the cookie.
type session struct {
	token    string
	sid      string
	subject  string
	authTime time.Time
}

// storage is the provider's op.Storage: everything in memory behind one lock.
type storage struct {
	key     *rsa.PrivateKey
	keyID   string
	users   []User // fixed after start
	clients map[string]*client
	log     *slog.Logger
	// omitAuthTime is Options.OmitAuthTime, given to every authorization request.
	omitAuthTime bool

	mu       sync.Mutex
	requests map[string]*authRequest // by request id
	codes    map[string]string       // live code -> request id
	spent    map[string]string       // exchanged or expired code -> request id
	tokens   map[string]*accessToken // by token id
	sessions map[string]*session     // by cookie token
}

var (
	_ op.Storage                        = (*storage)(nil)
	_ op.CanSetUserinfoFromRequest      = (*storage)(nil)
	_ op.CanTerminateSessionFromRequest = (*storage)(nil)
)

func newStorage(users []User, clients map[string]*client, log *slog.Logger) (*storage, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	return &storage{
		key:      key,
		keyID:    rand.Text(),
		users:    users,
		clients:  clients,
		log:      log,
		requests: make(map[string]*authRequest),
		codes:    make(map[string]string),
		spent:    make(map[string]string),
		tokens:   make(map[string]*accessToken),
		sessions: make(map[string]*session),
	}, nil
}

// userByEmail finds a user by e-mail, ignoring case.
func (s *storage) userByEmail(email string) (User, bool) {
	for _, u := range s.users {
		if strings.EqualFold(u.Email, strings.TrimSpace(email)) {
			return u, true
		}
	}
	return User{}, false
}

// userBySubject finds a user by subject.
func (s *storage) userBySubject(subject string) (User, bool) {
	for _, u := range s.users {
		if u.Subject == subject {
			return u, true
		}
	}
	return User{}, false
}

// checkPassword reports whether email and password name a user, and which.
func (s *storage) checkPassword(email, password string) (User, bool) {
	u, ok := s.userByEmail(email)
	want := sha256.Sum256([]byte(u.Password))
	got := sha256.Sum256([]byte(password))
	if subtle.ConstantTimeCompare(want[:], got[:]) != 1 || !ok {
		return User{}, false
	}
	return u, true
}

// pruneLocked forgets what has expired. The maps are small and pruned on every new
// authorization request, so no goroutine is needed.
func (s *storage) pruneLocked(now time.Time) {
	for id, r := range s.requests {
		if now.Sub(r.created) > authRequestLifetime+codeLifetime {
			delete(s.requests, id)
		}
	}
	for code, id := range s.codes {
		if _, ok := s.requests[id]; !ok {
			delete(s.codes, code)
		}
	}
	for code, id := range s.spent {
		if _, ok := s.requests[id]; !ok && !s.hasTokensLocked(id, now) {
			delete(s.spent, code)
		}
	}
	for id, t := range s.tokens {
		if now.After(t.expires) {
			delete(s.tokens, id)
		}
	}
}

func (s *storage) hasTokensLocked(requestID string, now time.Time) bool {
	for _, t := range s.tokens {
		if t.requestID == requestID && now.Before(t.expires) {
			return true
		}
	}
	return false
}

// CreateAuthRequest stores a validated authorization request. It refuses one without an
// S256 code challenge: PKCE is required for every client.
func (s *storage) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if req.CodeChallenge == "" || req.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE with code_challenge_method=S256 is required")
	}
	now := time.Now()
	r := &authRequest{id: rand.Text(), created: now, req: *req, omitAuthTime: s.omitAuthTime}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(now)
	s.requests[r.id] = r
	c := *r
	return &c, nil
}

// AuthRequestByID returns a copy of a pending authorization request.
func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	r, ok := s.pendingRequest(id)
	if !ok {
		return nil, errNotFound
	}
	return r, nil
}

// pendingRequest returns a copy of the authorization request id if it has not expired.
func (s *storage) pendingRequest(id string) (*authRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok || time.Since(r.created) > authRequestLifetime {
		return nil, false
	}
	c := *r
	return &c, true
}

// AuthRequestByCode returns the request a live code was issued for. A code that was already
// exchanged (or has expired) is refused, and a replay revokes the tokens the first exchange
// issued (RFC 6749, section 4.1.2).
func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.spent[code]; ok {
		for tid, t := range s.tokens {
			if t.requestID == id {
				delete(s.tokens, tid)
			}
		}
		return nil, errors.New("devoidc: authorization code already used")
	}
	id, ok := s.codes[code]
	if !ok {
		return nil, errNotFound
	}
	r, ok := s.requests[id]
	if !ok || time.Since(r.codeIssued) > codeLifetime {
		delete(s.codes, code)
		s.spent[code] = id
		return nil, errors.New("devoidc: authorization code expired")
	}
	c := *r
	return &c, nil
}

// SaveAuthCode records the code issued for a signed-in request.
func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok || !r.done || r.code != "" {
		return errNotFound
	}
	r.code, r.codeIssued = code, time.Now()
	s.codes[code] = id
	return nil
}

// DeleteAuthRequest forgets a request after its tokens were issued; its code is remembered
// as spent so that a replay is recognised.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.requests[id]; ok && r.code != "" {
		delete(s.codes, r.code)
		s.spent[r.code] = id
	}
	delete(s.requests, id)
	return nil
}

// CreateAccessToken issues an access token. For an authorization request it is also where
// the code is consumed, under the lock, so that of two concurrent exchanges of one code only
// the first gets tokens.
func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &accessToken{subject: req.GetSubject(), scopes: req.GetScopes(), expires: time.Now().Add(accessTokenLifetime)}
	ar, ok := req.(*authRequest)
	if !ok {
		return "", time.Time{}, oidc.ErrUnsupportedGrantType()
	}
	stored, ok := s.requests[ar.id]
	if !ok || stored.exchanged {
		return "", time.Time{}, oidc.ErrInvalidGrant().WithDescription("authorization code already used")
	}
	stored.exchanged = true
	t.clientID, t.requestID = ar.GetClientID(), ar.id
	id := rand.Text()
	s.tokens[id] = t
	return id, t.expires, nil
}

// CreateAccessAndRefreshTokens is not supported: the clients have no refresh_token grant.
func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, oidc.ErrUnsupportedGrantType()
}

// TokenRequestByRefreshToken is not supported: no refresh token is ever issued.
func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

// GetRefreshTokenInfo answers that no token is a refresh token.
func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

// TerminateSession ends every provider session of userID. op calls it only when the storage
// does not implement TerminateSessionFromRequest, which this one does; it is kept correct.
func (s *storage) TerminateSession(_ context.Context, userID, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for token, ss := range s.sessions {
		if ss.subject == userID {
			delete(s.sessions, token)
		}
	}
	return nil
}

// TerminateSessionFromRequest is RP-initiated logout: it ends the session the browser's
// cookie names and the one the id_token_hint's sid names, clears the cookie, and answers
// where op redirects the browser.
func (s *storage) TerminateSessionFromRequest(ctx context.Context, req *op.EndSessionRequest) (string, error) {
	lc, _ := ctx.Value(logoutKey{}).(*logoutContext)
	var sid string
	if req.IDTokenHintClaims != nil {
		sid = req.IDTokenHintClaims.SessionID
		if sid == "" {
			sid, _ = req.IDTokenHintClaims.Claims["sid"].(string)
		}
	}
	ended := 0
	s.mu.Lock()
	for token, ss := range s.sessions {
		if (lc != nil && token == lc.cookieToken) || (sid != "" && ss.sid == sid) {
			delete(s.sessions, token)
			ended++
		}
	}
	s.mu.Unlock()
	s.log.Info("devoidc: signed out", "subject", req.UserID, "client", req.ClientID, "sessions_ended", ended)
	if lc != nil {
		lc.clearCookie()
	}
	return req.RedirectURI, nil
}

// RevokeToken revokes an access token by id; refresh tokens do not exist here.
func (s *storage) RevokeToken(_ context.Context, tokenOrTokenID, userID, clientID string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[tokenOrTokenID]
	if !ok {
		return nil // RFC 7009: an unknown token is not an error.
	}
	if t.clientID != clientID {
		return oidc.ErrInvalidClient().WithDescription("token was not issued to this client")
	}
	delete(s.tokens, tokenOrTokenID)
	return nil
}

// signingKey is the provider's one RS256 key.
type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return k.id }

// publicKey is the public half of the signing key, as the key set publishes it.
type publicKey struct{ signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

// SigningKey returns the key ID tokens are signed with.
func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	return signingKey{id: s.keyID, key: s.key}, nil
}

// SignatureAlgorithms lists RS256.
func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

// KeySet publishes the public key.
func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{signingKey{id: s.keyID, key: s.key}}}, nil
}

// GetClientByClientID returns a registered client.
func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok {
		return nil, errNotFound
	}
	return c, nil
}

// AuthorizeClientIDSecret checks a confidential client's secret.
func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	c, ok := s.clients[id]
	if !ok || c.Secret == "" {
		return errors.New("devoidc: unknown client")
	}
	want := sha256.Sum256([]byte(c.Secret))
	got := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(want[:], got[:]) != 1 {
		return errors.New("devoidc: wrong client secret")
	}
	return nil
}

// SetUserinfoFromScopes is deprecated in op and left empty; SetUserinfoFromRequest does it.
func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

// SetUserinfoFromRequest fills the ID token's user claims, and its sid.
func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.setUserinfo(info, req.GetSubject(), scopes); err != nil {
		return err
	}
	if ar, ok := req.(*authRequest); ok && ar.sid != "" {
		info.AppendClaims("sid", ar.sid)
	}
	return nil
}

// SetUserinfoFromToken answers the userinfo endpoint for a live access token.
func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	t, ok := s.liveToken(tokenID)
	if !ok || t.subject != subject {
		return errors.New("devoidc: access token is invalid or expired")
	}
	return s.setUserinfo(info, subject, t.scopes)
}

// SetIntrospectionFromToken answers the introspection endpoint for a live access token
// issued to clientID.
func (s *storage) SetIntrospectionFromToken(_ context.Context, resp *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	t, ok := s.liveToken(tokenID)
	if !ok || t.subject != subject || t.clientID != clientID {
		return errors.New("devoidc: access token is invalid or expired")
	}
	info := new(oidc.UserInfo)
	if err := s.setUserinfo(info, subject, t.scopes); err != nil {
		return err
	}
	resp.SetUserInfo(info)
	resp.Scope = t.scopes
	resp.ClientID = t.clientID
	resp.Expiration = oidc.FromTime(t.expires)
	return nil
}

func (s *storage) liveToken(id string) (accessToken, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[id]
	if !ok || time.Now().After(t.expires) {
		return accessToken{}, false
	}
	return *t, true
}

// setUserinfo fills the claims of the user subject that scopes ask for.
func (s *storage) setUserinfo(info *oidc.UserInfo, subject string, scopes []string) error {
	u, ok := s.userBySubject(subject)
	if !ok {
		return errNotFound
	}
	info.Subject = u.Subject
	for _, scope := range scopes {
		switch scope {
		case oidc.ScopeEmail:
			info.Email = u.Email
			info.EmailVerified = true
		case oidc.ScopeProfile:
			info.Name = u.Name
			info.PreferredUsername = u.Email
		}
	}
	return nil
}

// GetPrivateClaimsFromScopes adds no private claims.
func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

// GetKeyByIDAndClientID knows no client keys: private_key_jwt is not supported.
func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errNotFound
}

// ValidateJWTProfileScopes refuses: the JWT profile grant is not supported.
func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, oidc.ErrUnsupportedGrantType()
}

// Health answers that the in-memory storage is fine.
func (s *storage) Health(context.Context) error { return nil }

// sessionByCookie returns a copy of the session a cookie token names.
func (s *storage) sessionByCookie(token string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[token]
	if !ok {
		return session{}, false
	}
	return *ss, true
}

// signIn records a password sign-in of subject at now by the browser holding cookie token
// (empty if it has none): the browser's session is renewed (a new cookie token, the same sid
// if the subject is the same) or a new one begins. It returns the session.
func (s *storage) signIn(cookieToken, subject string, now time.Time) session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := &session{token: rand.Text(), sid: rand.Text(), subject: subject, authTime: now}
	if old, ok := s.sessions[cookieToken]; ok {
		delete(s.sessions, cookieToken)
		if old.subject == subject {
			ss.sid = old.sid
		}
	}
	s.sessions[ss.token] = ss
	return *ss
}

// complete marks a pending authorization request as signed in by sess.
func (s *storage) complete(id string, sess session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok || r.done {
		return errNotFound
	}
	r.done, r.subject, r.authTime, r.sid = true, sess.subject, sess.authTime, sess.sid
	return nil
}

// sessions counts the provider sessions of subject.
func (s *storage) sessionCount(subject string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ss := range s.sessions {
		if ss.subject == subject {
			n++
		}
	}
	return n
}
