package mcpauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate/tollgate/impl/plaintext"
	"github.com/tollgate/tollgate/impl/store"
)

// maxBody bounds the bodies of the registration, token and revocation requests.
const maxBody = 64 << 10

// maxRedirectURIs and maxRedirectURI bound a client's redirect URIs: how many, and the length
// of each.
const (
	maxRedirectURIs = 10
	maxRedirectURI  = 2 << 10
)

// deleteUnusedClients deletes the registered clients older than a day that never got a grant,
// at most once a minute per process; a failure is only logged (registration goes on).
func (s *Server) deleteUnusedClients(ctx context.Context) {
	now := s.now()
	s.cleanupMu.Lock()
	due := now.Sub(s.cleanedAt) >= time.Minute
	if due {
		s.cleanedAt = now
	}
	s.cleanupMu.Unlock()
	if !due {
		return
	}
	n, err := s.store.DeleteUnusedOAuthClients(ctx)
	if err != nil {
		s.log.Warn("mcpauth: deleting unused registered clients failed", "err", err)
		return
	}
	if n > 0 {
		s.log.Info("mcpauth: deleted registered clients unused for a day", "clients", n)
	}
}

// Routes registers the server's HTTP surface on mux: the protected-resource metadata
// (RFC 9728) at /.well-known/oauth-protected-resource and its path-suffixed form for
// /api/mcp, the authorization-server metadata (RFC 8414), registration (RFC 7591), the token
// endpoint and revocation (RFC 7009), the last three limited per client address
// (addrlimit.go). The authorization endpoint is the web console's consent page (impl/web).
func (s *Server) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /.well-known/oauth-protected-resource", s.resourceMetadata)
	mux.HandleFunc("GET /.well-known/oauth-protected-resource"+ResourcePath, s.resourceMetadata)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.serverMetadata)
	mux.HandleFunc("POST /oauth/register", limited(s.registerLimit, s.register))
	mux.HandleFunc("POST /oauth/token", limited(s.tokenLimit, s.token))
	mux.HandleFunc("POST /oauth/revoke", limited(s.revokeLimit, s.revoke))
	for _, p := range []string{"/oauth/register", "/oauth/token", "/oauth/revoke"} {
		mux.HandleFunc("OPTIONS "+p, preflight("POST", "Content-Type, Authorization, MCP-Protocol-Version"))
	}
	// The MCP clients' discovery sends MCP-Protocol-Version with its GETs of the metadata, which
	// makes a browser ask first: a 405 there fails the preflight, and the TypeScript SDK then
	// retries without the header (a console error and a second round trip in the Inspector).
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource" + ResourcePath,
		"/.well-known/oauth-authorization-server"} {
		mux.HandleFunc("OPTIONS "+p, preflight("GET", "MCP-Protocol-Version"))
	}
}

// ResourceMetadata is the protected-resource metadata document of RFC 9728.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ScopesSupported        []string `json:"scopes_supported"`
	ResourceName           string   `json:"resource_name"`
}

// ServerMetadata is the authorization-server metadata document of RFC 8414.
type ServerMetadata struct {
	Issuer                                 string   `json:"issuer"`
	AuthorizationEndpoint                  string   `json:"authorization_endpoint"`
	TokenEndpoint                          string   `json:"token_endpoint"`
	RegistrationEndpoint                   string   `json:"registration_endpoint"`
	RevocationEndpoint                     string   `json:"revocation_endpoint"`
	ResponseTypesSupported                 []string `json:"response_types_supported"`
	ResponseModesSupported                 []string `json:"response_modes_supported"`
	GrantTypesSupported                    []string `json:"grant_types_supported"`
	CodeChallengeMethodsSupported          []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethodsSupported      []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethodsSupported []string `json:"revocation_endpoint_auth_methods_supported"`
	ScopesSupported                        []string `json:"scopes_supported"`
	// AuthorizationResponseIssParameterSupported says that the authorization response carries
	// iss (RFC 9207, Server.redirectWith). A client takes iss as a defence against mix-up only
	// when the metadata says so: without it, an authorization server that leaves iss out
	// cannot be told from one that does not support it.
	AuthorizationResponseIssParameterSupported bool `json:"authorization_response_iss_parameter_supported"`
	ClientIDMetadataDocumentSupported          bool `json:"client_id_metadata_document_supported"`
}

func (s *Server) resourceMetadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, ResourceMetadata{Resource: s.Resource(), AuthorizationServers: []string{s.Issuer()},
		BearerMethodsSupported: []string{"header"}, ScopesSupported: []string{Scope}, ResourceName: "tollgate MCP endpoint"})
}

func (s *Server) serverMetadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, ServerMetadata{
		Issuer: s.Issuer(), AuthorizationEndpoint: s.base + "/oauth/authorize", TokenEndpoint: s.base + "/oauth/token",
		RegistrationEndpoint: s.base + "/oauth/register", RevocationEndpoint: s.base + "/oauth/revoke",
		ResponseTypesSupported: []string{"code"}, ResponseModesSupported: []string{"query"},
		GrantTypesSupported: []string{"authorization_code", "refresh_token"}, CodeChallengeMethodsSupported: []string{"S256"},
		TokenEndpointAuthMethodsSupported: []string{"none"}, RevocationEndpointAuthMethodsSupported: []string{"none"},
		ScopesSupported: []string{Scope}, AuthorizationResponseIssParameterSupported: true, ClientIDMetadataDocumentSupported: true,
	})
}

// oauthError is the error body of the OAuth endpoints (RFC 6749 section 5.2, RFC 7591
// section 3.2.2).
type oauthError struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description,omitempty"`
}

func writeError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, oauthError{Error: code, ErrorDescription: description})
}

// writeJSON answers v as JSON with status: every JSON answer of the OAuth endpoints, the
// documents and the refusals (writeError), which may repeat what the client sent. nosniff
// keeps a browser from reading one as anything but JSON, as the web console's answers are.
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	// Browser-based MCP clients (the MCP Inspector) read these documents and answers from
	// another origin; none of them rests on a cookie.
	h.Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// preflight returns the answer to a CORS preflight of an endpoint that takes methods and the
// request headers headers (from any origin: none of these endpoints rests on a cookie).
func preflight(methods, headers string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", methods)
		h.Set("Access-Control-Allow-Headers", headers)
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
	}
}

// RegistrationRequest is the client metadata of a dynamic registration (RFC 7591), as far as
// this server reads it.
type RegistrationRequest struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	Scope                   string   `json:"scope"`
}

// RegistrationResponse is the registered client's information (RFC 7591 section 3.2.1).
type RegistrationResponse struct {
	ClientID                string   `json:"client_id"`
	ClientIDIssuedAt        int64    `json:"client_id_issued_at"`
	ClientName              string   `json:"client_name,omitempty"`
	ClientURI               string   `json:"client_uri,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	Scope                   string   `json:"scope"`
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		writeError(w, http.StatusBadRequest, "invalid_client_metadata", "send the client metadata as application/json")
		return
	}
	var req RegistrationRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_client_metadata", "the body is not a JSON object of client metadata")
		return
	}
	if len(req.RedirectURIs) == 0 || len(req.RedirectURIs) > maxRedirectURIs {
		writeError(w, http.StatusBadRequest, "invalid_redirect_uri", "redirect_uris must list 1 to 10 redirect URIs")
		return
	}
	for _, u := range req.RedirectURIs {
		if why := redirectProblem(u); why != "" {
			writeError(w, http.StatusBadRequest, "invalid_redirect_uri", u+": "+why)
			return
		}
	}
	if m := req.TokenEndpointAuthMethod; m != "" && m != "none" {
		writeError(w, http.StatusBadRequest, "invalid_client_metadata",
			"token_endpoint_auth_method must be none: this server registers public clients, which prove themselves with PKCE")
		return
	}
	for _, g := range req.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			writeError(w, http.StatusBadRequest, "invalid_client_metadata", "grant type "+g+" is not supported; use authorization_code and refresh_token")
			return
		}
	}
	for _, t := range req.ResponseTypes {
		if t != "code" {
			writeError(w, http.StatusBadRequest, "invalid_client_metadata", "response type "+t+" is not supported; use code")
			return
		}
	}
	name := strings.TrimSpace(req.ClientName)
	if why := clientNameProblem(name); why != "" {
		writeError(w, http.StatusBadRequest, "invalid_client_metadata", why)
		return
	}
	clientURI := ""
	if u, err := url.Parse(req.ClientURI); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && len(req.ClientURI) <= 500 {
		clientURI = req.ClientURI
	}
	// Registrations nobody completed are removed after a day (at most once a minute, here).
	s.deleteUnusedClients(r.Context())
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	c, err := s.store.CreateOAuthClient(r.Context(), store.OAuthClient{ID: clientIDPrefix + base64.RawURLEncoding.EncodeToString(b),
		Name: name, RedirectURIs: req.RedirectURIs, ClientURI: clientURI})
	if err != nil {
		s.fail(w, r, "register a client", err)
		return
	}
	writeJSON(w, http.StatusCreated, RegistrationResponse{ClientID: c.ID, ClientIDIssuedAt: c.CreatedAt.Unix(), ClientName: c.Name,
		ClientURI: c.ClientURI, RedirectURIs: c.RedirectURIs, TokenEndpointAuthMethod: "none",
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}, Scope: Scope})
}

// redirectProblem says why u cannot be a redirect URI, or "": an absolute https URL, or an
// http URL on a loopback host (a native client's local listener, RFC 8252), without a
// fragment.
func redirectProblem(u string) string {
	if len(u) > maxRedirectURI {
		return "a redirect URI is at most 2 KiB"
	}
	if r, found := plaintext.Hidden(u); found {
		return fmt.Sprintf("a redirect URI holds the character U+%04X, which does not show as itself", r)
	}
	p, err := url.Parse(u)
	if err != nil || !p.IsAbs() || p.Host == "" {
		return "not an absolute URL"
	}
	if !asciiHost(p.Hostname()) {
		// The consent page shows the host the browser returns to, as the check against a
		// client's own name: a host of other scripts (a Cyrillic "а" in claude.ai) would look
		// like another. Trial h11 D7.
		return "the host must be ASCII: write an internationalized domain name in its xn-- form"
	}
	if p.Fragment != "" || strings.Contains(u, "#") {
		return "a redirect URI has no fragment"
	}
	if p.User != nil {
		return "a redirect URI has no user information"
	}
	switch p.Scheme {
	case "https":
		return ""
	case "http":
		if loopback(p.Hostname()) {
			return ""
		}
		return "http is allowed only on a loopback host (127.0.0.1, [::1] or localhost); use https"
	}
	return "the scheme must be https, or http on a loopback host"
}

// asciiHost reports whether host (a URL's Hostname) is written in ASCII letters, digits,
// hyphens and dots, as a DNS name or an IPv4 address is, or is an IPv6 address.
func asciiHost(host string) bool {
	if strings.Contains(host, ":") {
		return net.ParseIP(host) != nil
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return host != ""
}

// clientNameProblem says why a client's name (trimmed) cannot be kept, or "": it is shown as it
// is on the consent page, Connected apps and the Approvals page, beside the host and the note
// that the name is the client's own, so it is held to the rule of key names (trial h11 D1, D2).
func clientNameProblem(name string) string {
	if len(name) > 200 {
		return "client_name must be at most 200 bytes"
	}
	if r, found := plaintext.Hidden(name); found {
		return fmt.Sprintf("client_name holds the character U+%04X, which does not show as itself: use printable text on one line", r)
	}
	return ""
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// TokenResponse is the token endpoint's answer (RFC 6749 section 5.1).
type TokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// grantError is a refusal of a token request: an OAuth error code and its description.
type grantError struct{ code, description string }

func (e *grantError) Error() string { return e.code + ": " + e.description }

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	form, ok := readForm(w, r)
	if !ok {
		return
	}
	clientID := form.Get("client_id")
	if clientID == "" {
		writeError(w, http.StatusUnauthorized, "invalid_client", "client_id is required (public clients send it in the body)")
		return
	}
	if res := form.Get("resource"); res != "" && res != s.Resource() {
		writeError(w, http.StatusBadRequest, "invalid_target", "the resource must be "+s.Resource())
		return
	}
	var (
		err            error
		access, renew  string
		tokens         store.OAuthTokens
		grantType      = form.Get("grant_type")
		invalidRequest = func(msg string) { writeError(w, http.StatusBadRequest, "invalid_request", msg) }
	)
	access, renew, tokens = s.newTokens()
	switch grantType {
	case "authorization_code":
		code, verifier, redirect := form.Get("code"), form.Get("code_verifier"), form.Get("redirect_uri")
		if code == "" || verifier == "" {
			invalidRequest("code and code_verifier are required")
			return
		}
		now := s.now()
		_, err = s.store.RedeemOAuthCode(r.Context(), hash(code), func(c store.OAuthCode) error {
			switch {
			case c.ClientID != clientID:
				return &grantError{"invalid_grant", "the code was issued to another client"}
			case !now.Before(c.ExpiresAt):
				return &grantError{"invalid_grant", "the code expired"}
			case redirect == "" && c.RedirectURISent:
				return &grantError{"invalid_request", "redirect_uri is required: the authorization request carried one"}
			case redirect != "" && c.RedirectURI != redirect:
				return &grantError{"invalid_grant", "redirect_uri differs from the authorization request's"}
			case !pkceMatches(verifier, c.CodeChallenge):
				return &grantError{"invalid_grant", "the code_verifier does not match the code_challenge"}
			case c.Resource != s.Resource():
				return &grantError{"invalid_target", "the code was issued for another resource"}
			case c.MemberRole == "":
				return &grantError{"invalid_grant", "the member who allowed the client is no longer in the account"}
			case roleLowered(c.Role, c.MemberRole):
				return &grantError{"invalid_grant", "the member's role was lowered since the client was allowed; allow it again"}
			}
			return nil
		}, tokens, s.endSessions(r.Context()))
		if errors.Is(err, store.ErrNotFound) {
			err = &grantError{"invalid_grant", "the code is unknown"}
		}
		if errors.Is(err, store.ErrOAuthReplay) {
			s.log.Warn("mcpauth: an authorization code was replayed; its grant is revoked", "client", clientID)
			err = &grantError{"invalid_grant", "the code was already used (a code is good for one try, even a failed one); any tokens issued for it are revoked: start the sign-in again"}
		}
	case "refresh_token":
		refresh := form.Get("refresh_token")
		if refresh == "" {
			invalidRequest("refresh_token is required")
			return
		}
		_, err = s.store.RefreshOAuthTokens(r.Context(), hash(refresh), s.now(), func(g store.OAuthGrant) error {
			switch {
			case g.ClientID != clientID:
				return &grantError{"invalid_grant", "the refresh token was issued to another client"}
			case g.Resource != s.Resource():
				return &grantError{"invalid_target", "the refresh token was issued for another resource"}
			case roleLowered(g.Role, g.MemberRole):
				return &grantError{"invalid_grant", "the member's role was lowered since the client was allowed; allow it again"}
			}
			return nil
		}, tokens, s.endSessions(r.Context()))
		if errors.Is(err, store.ErrNotFound) {
			err = &grantError{"invalid_grant", "the refresh token is unknown, expired or revoked"}
		}
		if errors.Is(err, store.ErrOAuthRefreshRaced) {
			err = &grantError{"invalid_grant", "the refresh token was rotated moments ago by another request of this client; use the refresh token that request received"}
		}
		if errors.Is(err, store.ErrOAuthReplay) {
			s.log.Warn("mcpauth: a rotated refresh token was reused; its grant is revoked", "client", clientID)
			err = &grantError{"invalid_grant", "the refresh token was already used; the grant is revoked"}
		}
	case "":
		invalidRequest("grant_type is required")
		return
	default:
		writeError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
		return
	}
	var ge *grantError
	switch {
	case errors.As(err, &ge):
		writeError(w, http.StatusBadRequest, ge.code, ge.description)
		return
	case err != nil:
		s.fail(w, r, "issue tokens", err)
		return
	}
	writeJSON(w, http.StatusOK, TokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: int64(s.access / time.Second),
		RefreshToken: renew, Scope: Scope})
}

// revoke is token revocation (RFC 7009): revoking an access or refresh token revokes its
// grant. An unknown token, or one of another client, is answered 200 as the RFC asks, and
// nothing is revoked.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	form, ok := readForm(w, r)
	if !ok {
		return
	}
	token, clientID := form.Get("token"), form.Get("client_id")
	if token == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "token is required")
		return
	}
	if clientID == "" {
		writeError(w, http.StatusUnauthorized, "invalid_client", "client_id is required (public clients send it in the body)")
		return
	}
	grant, owner, err := s.store.OAuthTokenGrant(r.Context(), hash(token))
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		s.fail(w, r, "find a token's grant", err)
		return
	case owner == clientID:
		if err := s.store.RevokeOAuthGrantByID(r.Context(), grant, "revoked by the client", s.endSessions(r.Context())); err != nil {
			s.fail(w, r, "revoke a grant", err)
			return
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(http.StatusOK)
}

// readForm reads an application/x-www-form-urlencoded body, answering a malformed one.
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/x-www-form-urlencoded" {
		writeError(w, http.StatusBadRequest, "invalid_request", "send the parameters as application/x-www-form-urlencoded")
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		writeError(w, http.StatusBadRequest, "invalid_request", "the body could not be read, or is larger than 64 KiB")
		return nil, false
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "the body is not form-encoded")
		return nil, false
	}
	for name, vs := range form {
		if len(vs) > 1 {
			writeError(w, http.StatusBadRequest, "invalid_request", "the parameter "+name+" is repeated")
			return nil, false
		}
	}
	return form, true
}

// pkceMatches reports whether verifier is an RFC 7636 code verifier whose S256 challenge is
// challenge.
func pkceMatches(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 || strings.IndexFunc(verifier, func(c rune) bool {
		return !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~')
	}) >= 0 {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(want), []byte(challenge)) == 1
}

// fail answers a failure of the store: 503 when the database cannot serve, 500 otherwise (the
// detail only in the log).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	s.log.Error("mcpauth: "+what, "err", err)
	w.Header().Set("Retry-After", "2")
	writeError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the authorization server cannot reach its database; retry shortly")
}
