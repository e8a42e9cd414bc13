package mcpauth

import (
	"context"
	"errors"
	"strings"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/store"
)

// InvalidTokenError is the refusal of an access token (RFC 6750 invalid_token): unknown,
// expired, revoked, its member gone from the account, or minted for another resource.
type InvalidTokenError struct{ Reason string }

// Error implements error.
func (e *InvalidTokenError) Error() string { return "invalid OAuth access token: " + e.Reason }

// BearerToken returns the token of an Authorization header of the Bearer scheme, if it is one
// of this server's access tokens (an API key, or anything else, is not).
func BearerToken(authorization string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(authorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, strings.HasPrefix(token, AccessTokenPrefix)
}

// Grant is what a verified access token acts for.
type Grant struct {
	ID        uuid.UUID
	AccountID uuid.UUID
	UserID    uuid.UUID
	ClientID  string
	// Role is the member's role (never above the one they had when they approved: a grant
	// whose member's role was lowered is refused).
	Role string
}

// Verify checks an access token presented to the MCP endpoint, against the database on every
// call: a revoked grant, a member removed from the account or whose role was lowered, an
// expired token or a token whose audience is not this resource is an *InvalidTokenError. The
// principal acts for the grant's account with no API key (KeyID is zero: no key's limits
// apply, as for the member on the console); its OAuth field names the grant, the member and
// the client, and its RPMLimit is the per-grant rate limit (Options.GrantRPM), which the
// gateway's limiter keeps per grant. Other errors are the database's (apierror.Unavailable),
// among them a failure to record the token's first use, which the refresh token reuse
// detection needs: such a request is refused, not served.
func (s *Server) Verify(ctx context.Context, token string) (auth.Principal, Grant, error) {
	if !strings.HasPrefix(token, AccessTokenPrefix) {
		return auth.Principal{}, Grant{}, &InvalidTokenError{Reason: "not an access token of this server"}
	}
	a, err := s.store.OAuthAccessByHash(ctx, hash(token))
	if errors.Is(err, store.ErrNotFound) {
		return auth.Principal{}, Grant{}, &InvalidTokenError{Reason: "the token is unknown or its grant was revoked"}
	}
	if err != nil {
		return auth.Principal{}, Grant{}, apierror.Unavailable("the database", err)
	}
	switch {
	case a.Revoked && (a.RevokedWhy == store.GrantRevokedMemberRemoved || a.RevokedWhy == store.GrantRevokedRoleLowered):
		return auth.Principal{}, Grant{}, &InvalidTokenError{Reason: "the grant was revoked: " + a.RevokedWhy + "; allow the client again"}
	case a.Revoked:
		// Who revoked it (an e-mail address, say) is not the client's business.
		return auth.Principal{}, Grant{}, &InvalidTokenError{Reason: "the token is unknown or its grant was revoked"}
	case a.MemberRole == "":
		return auth.Principal{}, Grant{}, &InvalidTokenError{Reason: "the member is no longer in the account"}
	}
	if !s.now().Before(a.ExpiresAt) {
		return auth.Principal{}, Grant{}, &InvalidTokenError{Reason: "the token expired; refresh it"}
	}
	if !s.now().Before(a.GrantedAt.Add(s.lifetime)) {
		return auth.Principal{}, Grant{}, &InvalidTokenError{Reason: "the grant reached its maximum lifetime; allow the client again"}
	}
	if a.Resource != s.Resource() {
		return auth.Principal{}, Grant{}, &InvalidTokenError{Reason: "the token was issued for another resource"}
	}
	if roleLowered(a.GrantedRole, a.MemberRole) {
		return auth.Principal{}, Grant{}, &InvalidTokenError{Reason: "the member's role was lowered since the client was allowed; allow it again"}
	}
	if !a.Seen {
		// The token's first use: a reuse of the refresh token it was rotated from, within the
		// grace, now revokes the grant (store.OAuthRefreshGrace). A use that was not recorded
		// is not served: an attacker who refreshed a stolen token first and then used what it
		// got unrecorded would keep the grant when the client presented the stolen token
		// within the grace (refused as a race of the client's own), the very case reuse
		// detection is for. The client retries after the 503; its retry records the use.
		if err := s.store.MarkOAuthAccessSeen(ctx, hash(token)); err != nil {
			return auth.Principal{}, Grant{}, apierror.Unavailable("the database", err)
		}
	}
	if err := s.store.TouchOAuthGrant(ctx, a.GrantID, s.now()); err != nil {
		s.log.Debug("mcpauth: recording a grant's last use failed", "grant", a.GrantID, "err", err)
	}
	g := Grant{ID: a.GrantID, AccountID: a.AccountID, UserID: a.UserID, ClientID: a.ClientID, Role: a.MemberRole}
	p := auth.Principal{AccountID: a.AccountID, RPMLimit: s.grantRPM,
		OAuth: &auth.OAuthActor{GrantID: a.GrantID, UserID: a.UserID, UserEmail: a.UserEmail, ClientID: a.ClientID, ClientName: a.ClientName}}
	return p, g, nil
}
