package mcpauth

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
)

// AuthorizeRequest is an authorization request (RFC 6749 section 4.1.1 with PKCE, RFC 7636,
// and the resource indicator, RFC 8707), as the consent page receives it in its query and
// posts it back with the person's decision.
type AuthorizeRequest struct {
	ResponseType        string
	ClientID            string
	RedirectURI         string
	State               string
	CodeChallenge       string
	CodeChallengeMethod string
	Resource            string
	Scope               string
}

// AuthorizeRequestFrom reads an authorization request from a query or a form.
func AuthorizeRequestFrom(v url.Values) AuthorizeRequest {
	return AuthorizeRequest{ResponseType: v.Get("response_type"), ClientID: v.Get("client_id"), RedirectURI: v.Get("redirect_uri"),
		State: v.Get("state"), CodeChallenge: v.Get("code_challenge"), CodeChallengeMethod: v.Get("code_challenge_method"),
		Resource: v.Get("resource"), Scope: v.Get("scope")}
}

// Values is the request as form values (the consent form's hidden fields).
func (a AuthorizeRequest) Values() url.Values {
	v := url.Values{}
	for name, val := range map[string]string{"response_type": a.ResponseType, "client_id": a.ClientID, "redirect_uri": a.RedirectURI,
		"state": a.State, "code_challenge": a.CodeChallenge, "code_challenge_method": a.CodeChallengeMethod, "resource": a.Resource,
		"scope": a.Scope} {
		if val != "" {
			v.Set(name, val)
		}
	}
	return v
}

// Consent is an authorization request that passed every check: what the consent page shows.
type Consent struct {
	// Request is the request as the client sent it (the consent form posts it back as is: a
	// redirect_uri the client left out stays out, and the code records that it did).
	Request AuthorizeRequest
	Client  store.OAuthClient
	// RedirectURI is where the browser returns: the request's redirect_uri, or the client's
	// only registered redirect URI when the request carried none.
	RedirectURI string
	// RedirectHost is the host the browser returns to (the redirect URI's host and port).
	RedirectHost string
	// RedirectOrigin is the redirect URI's scheme, host and port (for the page's
	// Content-Security-Policy form-action, which Chromium checks on the redirect).
	RedirectOrigin string
}

// AuthorizeError is the refusal of an authorization request. The person is always shown
// Message on the console and the browser goes nowhere, even when the client's redirect URI is
// registered: anyone may register a client with any https redirect URI, so redirecting a GET
// nobody acted on would make the console an open redirector. The browser is sent to the client
// only after the member acted on a valid request (Allow, or Deny with access_denied).
type AuthorizeError struct {
	Code    string // the OAuth error code
	Message string
}

// Error implements error.
func (e *AuthorizeError) Error() string { return e.Code + ": " + e.Message }

// challengeSyntax is an S256 code challenge: 32 bytes of SHA-256 in base64url, no padding.
var challengeSyntax = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// CheckAuthorize checks an authorization request: a registered client (or one whose client_id
// is the https URL of its client ID metadata document, fetched now), one of its redirect URIs
// (exactly; a client with only one may leave redirect_uri out, RFC 6749 section 3.1.2.3), response_type code, a PKCE S256 challenge (plain is refused), this gateway's
// MCP endpoint as the resource, and no scope beyond "mcp". Its error is an *AuthorizeError, or
// a database failure.
func (s *Server) CheckAuthorize(ctx context.Context, req AuthorizeRequest) (Consent, error) {
	if req.ClientID == "" {
		return Consent{}, &AuthorizeError{Code: "invalid_request", Message: "The request names no client (client_id is missing)."}
	}
	var c store.OAuthClient
	var err error
	if isDocumentClientID(req.ClientID) {
		c, err = s.documentClient(ctx, req.ClientID)
	} else {
		c, err = s.store.GetOAuthClient(ctx, req.ClientID)
	}
	if errors.Is(err, store.ErrNotFound) {
		return Consent{}, &AuthorizeError{Code: "invalid_client", Message: "The client is not registered with this gateway. Ask it to register again."}
	}
	if err != nil {
		return Consent{}, err
	}
	redirect := req.RedirectURI
	if redirect == "" && len(c.RedirectURIs) == 1 {
		redirect = c.RedirectURIs[0]
	}
	registered := false
	for _, u := range c.RedirectURIs {
		registered = registered || u == redirect
	}
	if !registered {
		return Consent{}, &AuthorizeError{Code: "invalid_request",
			Message: "The redirect URI is not one the client registered, so the browser is not sent there."}
	}
	back := func(code, msg string) error {
		return &AuthorizeError{Code: code, Message: "The client's request is not valid (" + code + "): " + msg + "."}
	}
	switch {
	case req.ResponseType != "code":
		return Consent{}, back("unsupported_response_type", "response_type must be code")
	case req.CodeChallenge == "":
		return Consent{}, back("invalid_request", "PKCE is required: send code_challenge with code_challenge_method S256")
	case req.CodeChallengeMethod != "S256":
		return Consent{}, back("invalid_request", "code_challenge_method must be S256 (plain is refused)")
	case !challengeSyntax.MatchString(req.CodeChallenge):
		return Consent{}, back("invalid_request", "code_challenge is not an S256 challenge (43 base64url characters)")
	case req.Resource == "":
		return Consent{}, back("invalid_target", "resource is required: "+s.Resource())
	case req.Resource != s.Resource():
		return Consent{}, back("invalid_target", "this server issues tokens only for the resource "+s.Resource())
	}
	for _, sc := range strings.Fields(req.Scope) {
		if sc != Scope && sc != "offline_access" {
			return Consent{}, back("invalid_scope", "the only scope is "+Scope)
		}
	}
	u, _ := url.Parse(redirect)
	return Consent{Request: req, Client: c, RedirectURI: redirect, RedirectHost: u.Host, RedirectOrigin: u.Scheme + "://" + u.Host}, nil
}

// Approve issues an authorization code for a consent the member approved, acting in accountID
// with their role, and returns where to send the browser: the client's redirect URI with the
// code, the state and the issuer (RFC 9207). The code is single use and lives CodeTTL; it
// records whether the request carried redirect_uri, which the token request must then repeat.
func (s *Server) Approve(ctx context.Context, c Consent, accountID, userID uuid.UUID, role string) (string, error) {
	code, h := secret(codePrefix)
	err := s.store.CreateOAuthCode(ctx, store.OAuthCode{Hash: h, ClientID: c.Client.ID, AccountID: accountID, UserID: userID,
		Role: role, RedirectURI: c.RedirectURI, RedirectURISent: c.Request.RedirectURI != "", CodeChallenge: c.Request.CodeChallenge, Resource: c.Request.Resource,
		Scope: Scope, ExpiresAt: s.now().Add(s.code)})
	if err != nil {
		return "", err
	}
	return s.redirectWith(c, url.Values{"code": {code}}), nil
}

// Deny returns where to send the browser when the member declines: the client's redirect URI
// with error=access_denied.
func (s *Server) Deny(c Consent) string {
	return s.redirectWith(c, url.Values{"error": {"access_denied"}, "error_description": {"the member declined"}})
}

// redirectWith is the consent's redirect URI with params, the state and the issuer added to
// its query.
func (s *Server) redirectWith(c Consent, params url.Values) string {
	u, err := url.Parse(c.RedirectURI)
	if err != nil {
		return ""
	}
	q := u.Query()
	for k, vs := range params {
		q[k] = vs
	}
	if c.Request.State != "" {
		q.Set("state", c.Request.State)
	}
	q.Set("iss", s.Issuer())
	u.RawQuery = q.Encode()
	return u.String()
}

// Grants lists the account's grants in force, newest first: those its clients can still use.
// A grant whose tokens have all expired (its refresh token unused for its lifetime, or the
// grant past DefaultGrantLifetime) is not listed, though nobody revoked it: its client must be
// allowed again.
func (s *Server) Grants(ctx context.Context, accountID uuid.UUID) ([]store.OAuthGrant, error) {
	return s.store.ListOAuthGrants(ctx, accountID, s.now())
}

// Grant returns one of the account's grants (store.ErrNotFound when it has none by that id).
func (s *Server) Grant(ctx context.Context, accountID, id uuid.UUID) (store.OAuthGrant, error) {
	return s.store.GetOAuthGrant(ctx, accountID, id)
}

// Revoke revokes one of the account's grants: its tokens are refused from the next request
// on, on every replica, and, with Options.Agents, the live agent sessions its app started end
// (access_revoked). store.ErrNotFound when the account has no such grant in force.
func (s *Server) Revoke(ctx context.Context, accountID, id uuid.UUID, by string) (store.OAuthGrant, error) {
	return s.store.RevokeOAuthGrant(ctx, accountID, id, "revoked on the console by "+by, s.endSessions(ctx))
}

// endSessions is what ends the agent sessions of a grant in its revocation's transaction (nil
// without Options.Agents).
func (s *Server) endSessions(ctx context.Context) store.GrantRevoked {
	if s.agents == nil {
		return nil
	}
	return func(tx *store.AgentTx, accountID, grant uuid.UUID) error {
		return s.agents.EndGrantSessions(ctx, tx, accountID, grant)
	}
}
