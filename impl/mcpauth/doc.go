// Package mcpauth is the OAuth 2.1 authorization server and resource-server check of the MCP
// endpoint (/api/mcp), per the MCP authorization specification (2025-11-25): MCP clients that
// get a 401 discover the protected-resource metadata (RFC 9728) named in its WWW-Authenticate,
// then this gateway's authorization-server metadata (RFC 8414), register themselves (RFC 7591,
// public clients) or name the https URL of their client ID metadata document, send a person to the web console's consent page (authorization code with
// PKCE S256 and the resource indicator of RFC 8707), and exchange the code for a short-lived
// access token and a rotating refresh token.
//
// It owns the protocol: the metadata documents, /oauth/register, /oauth/token and /oauth/revoke
// (Handler, mounted by impl/httpapi beside /api/mcp), the checks of an authorization request and
// the issuing of codes (CheckAuthorize and Approve, used by the console's consent page in
// impl/web), and the check of an access token on each MCP request (Verify). Clients, codes,
// grants and tokens live in PostgreSQL (impl/store/oauth.go); codes and tokens are random and
// stored as their SHA-256 only.
//
// It is a package of its own, not part of impl/httpapi or impl/web, because both use it: the API
// serves the token endpoints and checks tokens, the console shows the consent page and the
// grants, and neither should hold the other's half of one protocol.
//
// Decisions: an access token lives 10 minutes and works only on /api/mcp (its grant's resource);
// it is looked up in the database on every use, so a grant revoked on the console, or a member
// removed from the account, is refused at the next request on every replica. A refresh token is
// used once: each refresh returns a new one, and presenting a used one more than a few seconds
// after its rotation revokes the grant (as does presenting a used authorization code: OAuth 2.1,
// section 4.1.3); a grant lasts at most DefaultGrantLifetime. A token acts for the member who
// approved it, in their account, within their role: it stops when the member leaves the
// account or their role is lowered (they allow the client again, within the new role), and its
// requests are rate-limited per grant. A refused authorization request is shown on the console
// and never redirected (no open redirector); the registration, token and revocation endpoints
// are rate-limited per client address; client ID metadata documents are fetched from public
// addresses only. docs/mcp-oauth.md has the decisions.
package mcpauth
