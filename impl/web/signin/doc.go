// Package signin owns the web application's OpenID Connect relying party: the authorization
// code flow with PKCE (S256), the state and nonce it checks itself (go-oidc's Verify checks the
// ID token's issuer, audience, expiry and signature, but not the nonce), the auth_time it
// keeps for re-authentication (max_age=0 and prompt=login), and the provider's
// RP-initiated logout URL (end_session_endpoint with id_token_hint).
//
// The provider's discovery document is read at the first sign-in, not at start-up, so that a
// gateway starts (and serves the API) while the provider is unreachable; a failed discovery is
// tried again at the next sign-in.
package signin
