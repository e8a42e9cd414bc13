package devoidc

import (
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// idTokenLifetime is how long the ID tokens the provider issues are valid.
const idTokenLifetime = time.Hour

// client is a registered relying party as op sees it: a web application using the
// authorization code flow, confidential when it has a secret and public otherwise.
type client struct {
	Client
	loginURL func(authRequestID string) string
}

var _ op.Client = (*client)(nil)

// GetID returns the client id.
func (c *client) GetID() string { return c.ID }

// RedirectURIs returns the registered redirect URIs; op accepts exact matches only.
func (c *client) RedirectURIs() []string { return slices.Clone(c.Client.RedirectURIs) }

// PostLogoutRedirectURIs returns the registered post-logout redirect URIs.
func (c *client) PostLogoutRedirectURIs() []string {
	return slices.Clone(c.Client.PostLogoutRedirectURIs)
}

// ApplicationType is web: op then accepts http redirect URIs for the code flow, which the
// development setup needs.
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }

// AuthMethod is client_secret_basic for a client with a secret (op accepts the secret in the
// form body as well, as client_secret_post) and none for a public client.
func (c *client) AuthMethod() oidc.AuthMethod {
	if c.Secret == "" {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}

// ResponseTypes allows the code flow only.
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}

// GrantTypes allows the authorization code grant only (no refresh tokens).
func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode}
}

// LoginURL is where op sends the browser to sign in for an authorization request.
func (c *client) LoginURL(authRequestID string) string { return c.loginURL(authRequestID) }

// AccessTokenType is an opaque bearer token, checked by the userinfo endpoint.
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }

// IDTokenLifetime is how long an ID token is valid.
func (c *client) IDTokenLifetime() time.Duration { return idTokenLifetime }

// DevMode stays off: the client is held to op's ordinary redirect URI rules.
func (c *client) DevMode() bool { return false }

// RestrictAdditionalIdTokenScopes keeps every scope.
func (c *client) RestrictAdditionalIdTokenScopes() func(scopes []string) []string {
	return func(scopes []string) []string { return scopes }
}

// RestrictAdditionalAccessTokenScopes keeps every scope.
func (c *client) RestrictAdditionalAccessTokenScopes() func(scopes []string) []string {
	return func(scopes []string) []string { return scopes }
}

// IsScopeAllowed allows no scope beyond the standard OpenID ones.
func (c *client) IsScopeAllowed(string) bool { return false }

// IDTokenUserinfoClaimsAssertion puts the e-mail and profile claims into the ID token even
// though an access token is issued, so a relying party needs no userinfo call.
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }

// ClockSkew is zero.
func (c *client) ClockSkew() time.Duration { return 0 }
