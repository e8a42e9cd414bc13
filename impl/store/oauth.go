package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
)

// The OAuth 2.1 authorization server of /api/mcp (impl/mcpauth) keeps its clients, codes,
// grants and tokens here. Codes and tokens are stored as their SHA-256 only.

// ErrOAuthReplay reports an authorization code or a refresh token presented after it was
// used: the grant it produced has been revoked.
var ErrOAuthReplay = errors.New("the code or refresh token was already used; its grant is revoked")

// ErrOAuthRefreshRaced reports a refresh token presented again within OAuthRefreshGrace of its
// rotation while nothing the rotation issued has been used yet: most likely two requests of the
// same client refreshing at once. It is refused, and the grant is left in force (the other
// request got the new tokens).
var ErrOAuthRefreshRaced = errors.New("the refresh token was rotated moments ago by another request")

// OAuthRefreshGrace is how long after its rotation a refresh token presented again counts as a
// concurrent refresh (ErrOAuthRefreshRaced) rather than a reuse (ErrOAuthReplay, which revokes
// the grant), as long as the tokens the rotation issued are unused: once the new access token
// was seen at the MCP endpoint or the new refresh token presented, a reuse within the grace
// revokes the grant too.
const OAuthRefreshGrace = 10 * time.Second

// OAuthClient is a registered OAuth client (a public client: it has no secret).
type OAuthClient struct {
	ID           string
	Name         string
	RedirectURIs []string
	ClientURI    string
	CreatedAt    time.Time
}

// OAuthCode is an authorization code as issued on the consent page: Hash is the SHA-256 of
// the code, and the code is bound to the client, redirect URI, PKCE challenge and resource.
type OAuthCode struct {
	Hash        []byte
	ClientID    string
	AccountID   uuid.UUID
	UserID      uuid.UUID
	Role        string
	RedirectURI string
	// RedirectURISent reports whether the authorization request carried redirect_uri (false:
	// the client's only registered one was used); the token request must repeat it only then.
	RedirectURISent bool
	CodeChallenge   string
	Resource        string
	Scope           string
	ExpiresAt       time.Time
	// MemberRole is the member's role in the account when the code is redeemed, "" when they
	// are no longer in it (set by RedeemOAuthCode only, for its check).
	MemberRole string
}

// OAuthTokens are the hashes and expiries of an access token and a refresh token to store
// for a grant.
type OAuthTokens struct {
	AccessHash     []byte
	AccessExpires  time.Time
	RefreshHash    []byte
	RefreshExpires time.Time
	// GrantLifetime, when positive, is the grant's absolute lifetime from its creation: no token
	// expires after it (the expiries above are shortened to it), and a refresh after it is
	// refused as an expired refresh token would be. RedeemOAuthCode stores its end as the new
	// grant's expires_at, after which OAuthGrantActive no longer finds the grant.
	GrantLifetime time.Duration
}

// capTo shortens the tokens' expiries to end, the end of their grant's lifetime.
func (t OAuthTokens) capTo(end time.Time) OAuthTokens {
	if t.AccessExpires.After(end) {
		t.AccessExpires = end
	}
	if t.RefreshExpires.After(end) {
		t.RefreshExpires = end
	}
	return t
}

// OAuthGrant is a member's approval of a client, as the console lists it.
type OAuthGrant struct {
	ID         uuid.UUID
	AccountID  uuid.UUID
	UserID     uuid.UUID
	ClientID   string
	Role       string
	Resource   string
	Scope      string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
	// ClientName and ClientRedirectURIs describe the client; UserEmail and UserName the member
	// (set by the listing queries only).
	ClientName         string
	ClientRedirectURIs []string
	UserEmail          string
	UserName           string
	// MemberRole is the member's role in the account now (set by RefreshOAuthTokens only).
	MemberRole string
}

// OAuthAccess is what an access token stands for when it still works: its grant, and the role
// the member has in the account now (MemberRole) beside the one they had when they approved
// (GrantedRole).
type OAuthAccess struct {
	GrantID     uuid.UUID
	AccountID   uuid.UUID
	UserID      uuid.UUID
	ClientID    string
	Resource    string
	Scope       string
	GrantedRole string
	MemberRole  string
	ExpiresAt   time.Time
	// UserEmail is the member's e-mail address and ClientName the client's registered name
	// (empty when it gave none).
	UserEmail  string
	ClientName string
	// GrantedAt is when the grant was made (its absolute lifetime runs from it).
	GrantedAt time.Time
	// Revoked says that the grant was revoked, RevokedWhy why (its revoked_why: one of the
	// GrantRevoked reasons when a change of the membership revoked it). MemberRole is "" when
	// the member is no longer in the account.
	Revoked    bool
	RevokedWhy string
	// Seen says that the token was used before (MarkOAuthAccessSeen).
	Seen bool
}

// The reasons a change of membership gives for the grants it revokes (queries/web.sql writes
// them): the member was removed from the account, or their role lowered below the one they
// allowed the client with. Unlike the others (who revoked it), they may be told to the client.
const (
	GrantRevokedMemberRemoved = "the member was removed from the account"
	GrantRevokedRoleLowered   = "the member's role was lowered since the client was allowed"
)

// CreateOAuthClient stores a registered client.
func (s *Store) CreateOAuthClient(ctx context.Context, c OAuthClient) (OAuthClient, error) {
	row, err := s.q.InsertOAuthClient(ctx, db.InsertOAuthClientParams{ID: c.ID, Name: c.Name, RedirectUris: c.RedirectURIs, ClientUri: c.ClientURI})
	if err != nil {
		return OAuthClient{}, err
	}
	return oauthClientOf(row), nil
}

// SaveOAuthClient stores a client identified by a client ID metadata document (its ID is the
// document's URL), replacing what an earlier fetch of the document stored.
func (s *Store) SaveOAuthClient(ctx context.Context, c OAuthClient) (OAuthClient, error) {
	row, err := s.q.UpsertOAuthClient(ctx, db.UpsertOAuthClientParams{ID: c.ID, Name: c.Name, RedirectUris: c.RedirectURIs, ClientUri: c.ClientURI})
	if err != nil {
		return OAuthClient{}, err
	}
	return oauthClientOf(row), nil
}

// DeleteUnusedOAuthClients deletes the registered clients older than a day that never got a
// grant and have no code pending (registrations nobody completed), and returns how many.
func (s *Store) DeleteUnusedOAuthClients(ctx context.Context) (int64, error) {
	return s.q.DeleteUnusedOAuthClients(ctx)
}

// GetOAuthClient returns the registered client id, or ErrNotFound.
func (s *Store) GetOAuthClient(ctx context.Context, id string) (OAuthClient, error) {
	row, err := s.q.GetOAuthClient(ctx, id)
	if err != nil {
		return OAuthClient{}, notFound(err)
	}
	return oauthClientOf(row), nil
}

func oauthClientOf(r db.OauthClient) OAuthClient {
	return OAuthClient{ID: r.ID, Name: r.Name, RedirectURIs: r.RedirectUris, ClientURI: r.ClientUri, CreatedAt: r.CreatedAt}
}

// CreateOAuthCode stores an authorization code issued on the consent page (and deletes the
// codes that expired a day ago or more).
func (s *Store) CreateOAuthCode(ctx context.Context, c OAuthCode) error {
	if _, err := s.q.DeleteStaleOAuthCodes(ctx); err != nil {
		return err
	}
	return s.q.InsertOAuthCode(ctx, db.InsertOAuthCodeParams{CodeHash: c.Hash, ClientID: c.ClientID, AccountID: c.AccountID,
		UserID: c.UserID, Role: c.Role, RedirectUri: c.RedirectURI, CodeChallenge: c.CodeChallenge, Resource: c.Resource,
		Scope: c.Scope, ExpiresAt: c.ExpiresAt, RedirectUriSent: c.RedirectURISent})
}

// MaxOAuthGrantsPerClient is how many grants of one client a member of an account holds in
// force at most (a device each, say); a new one revokes the oldest beyond it.
const MaxOAuthGrantsPerClient = 10

// RedeemOAuthCode exchanges the code whose hash is given for a new grant and its first tokens,
// in one transaction. The code is marked used first; check then judges it (client, redirect
// URI, PKCE verifier, resource, expiry, and the member's role now, MemberRole: a member removed
// or lowered since the consent revoked the grants they held, and the code must not become one
// that nothing revoked): when check fails, the code stays used and check's error is returned. A code that was used already is ErrOAuthReplay, and the grant it produced
// is revoked; an unknown code is ErrNotFound. then (nil: nothing) runs in the transaction for
// each grant it revokes: the replayed code's, or the member's oldest of the client's beyond
// MaxOAuthGrantsPerClient (the agents end the sessions their app started).
func (s *Store) RedeemOAuthCode(ctx context.Context, hash []byte, check func(OAuthCode) error, tokens OAuthTokens, then GrantRevoked) (OAuthGrant, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return OAuthGrant{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	q := s.q.WithTx(tx)
	row, err := q.RedeemOAuthCode(ctx, hash)
	if errors.Is(err, pgx.ErrNoRows) {
		used, err := q.GetOAuthCode(ctx, hash)
		if err != nil {
			return OAuthGrant{}, notFound(err)
		}
		if !used.GrantID.Valid {
			// Used, but no grant came of it (its verifier was wrong): nothing to revoke.
			return OAuthGrant{}, ErrOAuthReplay
		}
		return OAuthGrant{}, revokeReplayed(ctx, tx, q, used.GrantID.Bytes, "authorization code replayed", then)
	}
	if err != nil {
		return OAuthGrant{}, err
	}
	code := OAuthCode{Hash: row.CodeHash, ClientID: row.ClientID, AccountID: row.AccountID, UserID: row.UserID, Role: row.Role,
		RedirectURI: row.RedirectUri, RedirectURISent: row.RedirectUriSent, CodeChallenge: row.CodeChallenge, Resource: row.Resource, Scope: row.Scope, ExpiresAt: row.ExpiresAt}
	// The membership row is held until the grant is committed: a removal or a change of role
	// that comes meanwhile waits, then revokes the grant (lockMembership).
	role, err := q.OAuthCodeMemberRole(ctx, db.OAuthCodeMemberRoleParams{AccountID: row.AccountID, UserID: row.UserID})
	switch {
	case err == nil:
		code.MemberRole = role
	case !errors.Is(err, pgx.ErrNoRows):
		return OAuthGrant{}, err
	}
	if err := check(code); err != nil {
		// The code stays used: a wrong verifier is not given a second try.
		if cerr := tx.Commit(ctx); cerr != nil {
			return OAuthGrant{}, cerr
		}
		return OAuthGrant{}, err
	}
	g, err := q.InsertOAuthGrant(ctx, db.InsertOAuthGrantParams{AccountID: code.AccountID, UserID: code.UserID, ClientID: code.ClientID,
		Role: code.Role, Resource: code.Resource, Scope: code.Scope, LifetimeSeconds: tokens.GrantLifetime.Seconds()})
	if err != nil {
		return OAuthGrant{}, err
	}
	if err := q.SetOAuthCodeGrant(ctx, db.SetOAuthCodeGrantParams{CodeHash: hash, GrantID: pgtype.UUID{Bytes: g.ID, Valid: true}}); err != nil {
		return OAuthGrant{}, err
	}
	// A member keeps at most MaxOAuthGrantsPerClient of one client's grants in force: the oldest
	// go as a new one comes (trial h11 D8: each grant has its own request budget, and a member
	// could hold any number).
	surplus, err := q.RevokeSurplusOAuthGrants(ctx, db.RevokeSurplusOAuthGrantsParams{Why: fmt.Sprintf("superseded: at most %d grants of one client per member", MaxOAuthGrantsPerClient),
		AccountID: code.AccountID, UserID: code.UserID, ClientID: code.ClientID, Keep: MaxOAuthGrantsPerClient})
	if err != nil {
		return OAuthGrant{}, err
	}
	if err := grantsRevoked(q, tx, code.AccountID, surplus, then); err != nil {
		return OAuthGrant{}, err
	}
	// The grant's expires_at is its creation plus tokens.GrantLifetime (none without one): no
	// token outlives it, and OAuthGrantActive counts the grant gone after it.
	if g.ExpiresAt != nil {
		tokens = tokens.capTo(*g.ExpiresAt)
	}
	if err := insertOAuthTokens(ctx, q, g.ID, tokens); err != nil {
		return OAuthGrant{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return OAuthGrant{}, err
	}
	return oauthGrantOf(g), nil
}

// RefreshOAuthTokens rotates the refresh token whose hash is given: in one transaction it is
// marked used and the new tokens are stored for its grant. check judges the grant the token
// belongs to (client, resource; the grant is still in force and its member still in the
// account when check is called) before anything is issued. A refresh token used already is
// ErrOAuthRefreshRaced when it was rotated less than OAuthRefreshGrace ago and no token issued
// since has been used (the grant stays in force), else ErrOAuthReplay, and its grant is revoked; an unknown, expired or revoked one, or
// one whose grant is past tokens.GrantLifetime, is ErrNotFound. The new tokens never outlive
// the grant's lifetime. then (nil: nothing) runs in the transaction when a replay revokes the
// grant.
func (s *Store) RefreshOAuthTokens(ctx context.Context, hash []byte, now time.Time, check func(OAuthGrant) error, tokens OAuthTokens, then GrantRevoked) (OAuthGrant, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return OAuthGrant{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	q := s.q.WithTx(tx)
	t, err := q.UseOAuthRefreshToken(ctx, hash)
	if errors.Is(err, pgx.ErrNoRows) {
		old, err := q.GetOAuthToken(ctx, hash)
		if err != nil || old.Kind != "refresh" {
			return OAuthGrant{}, ErrNotFound
		}
		recent, err := q.OAuthRefreshRotatedWithin(ctx, db.OAuthRefreshRotatedWithinParams{GraceSeconds: OAuthRefreshGrace.Seconds(), TokenHash: hash})
		if err != nil {
			return OAuthGrant{}, err
		}
		if !recent {
			return OAuthGrant{}, revokeReplayed(ctx, tx, q, old.GrantID, "rotated refresh token reused", then)
		}
		used, err := q.OAuthRefreshSuccessorsUsed(ctx, hash)
		if err != nil {
			return OAuthGrant{}, err
		}
		if used {
			// Whoever rotated the token has used what it got: this is not a request of a
			// client racing itself, but one of two holders of the token (RFC 9700 section
			// 4.14.2), and which of them is the thief cannot be told.
			return OAuthGrant{}, revokeReplayed(ctx, tx, q, old.GrantID, "rotated refresh token reused after its successor was used", then)
		}
		return OAuthGrant{}, ErrOAuthRefreshRaced
	}
	if err != nil {
		return OAuthGrant{}, err
	}
	if !now.Before(t.ExpiresAt) {
		return OAuthGrant{}, ErrNotFound
	}
	g, err := q.OAuthGrantActive(ctx, t.GrantID)
	if err != nil {
		return OAuthGrant{}, notFound(err)
	}
	out := OAuthGrant{ID: g.ID, AccountID: g.AccountID, UserID: g.UserID, ClientID: g.ClientID, Role: g.Role, Resource: g.Resource,
		Scope: g.Scope, CreatedAt: g.CreatedAt, LastUsedAt: g.LastUsedAt, MemberRole: g.MemberRole}
	if tokens.GrantLifetime > 0 {
		end := g.CreatedAt.Add(tokens.GrantLifetime)
		if !now.Before(end) {
			return OAuthGrant{}, ErrNotFound
		}
		tokens = tokens.capTo(end)
	}
	if err := check(out); err != nil {
		return OAuthGrant{}, err
	}
	if err := insertOAuthTokens(ctx, q, g.ID, tokens); err != nil {
		return OAuthGrant{}, err
	}
	// Each refresh leaves an expired access token behind: the grant's are deleted here.
	if _, err := q.DeleteExpiredOAuthGrantTokens(ctx, g.ID); err != nil {
		return OAuthGrant{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return OAuthGrant{}, err
	}
	return out, nil
}

func insertOAuthTokens(ctx context.Context, q *db.Queries, grant uuid.UUID, t OAuthTokens) error {
	if err := q.InsertOAuthToken(ctx, db.InsertOAuthTokenParams{TokenHash: t.AccessHash, GrantID: grant, Kind: "access", ExpiresAt: t.AccessExpires}); err != nil {
		return fmt.Errorf("store access token: %w", err)
	}
	if err := q.InsertOAuthToken(ctx, db.InsertOAuthTokenParams{TokenHash: t.RefreshHash, GrantID: grant, Kind: "refresh", ExpiresAt: t.RefreshExpires}); err != nil {
		return fmt.Errorf("store refresh token: %w", err)
	}
	return nil
}

// OAuthAccessByHash returns what the access token whose hash is given stands for, read from
// the database on every call (so a revocation anywhere takes effect at the next request). An
// unknown token, a token of a revoked grant, or one whose member has left the account is
// ErrNotFound; the caller judges expiry and resource.
func (s *Store) OAuthAccessByHash(ctx context.Context, hash []byte) (OAuthAccess, error) {
	r, err := s.q.OAuthAccessTokenGrant(ctx, hash)
	if err != nil {
		return OAuthAccess{}, notFound(err)
	}
	return OAuthAccess{GrantID: r.GrantID, AccountID: r.AccountID, UserID: r.UserID, ClientID: r.ClientID, Resource: r.Resource,
		Scope: r.Scope, GrantedRole: r.GrantedRole, MemberRole: r.MemberRole, ExpiresAt: r.ExpiresAt, UserEmail: r.UserEmail,
		ClientName: r.ClientName, GrantedAt: r.GrantedAt, Revoked: r.Revoked, RevokedWhy: r.RevokedWhy, Seen: r.Seen}, nil
}

// MarkOAuthAccessSeen records the first use of the access token whose hash is given (a refresh
// token's reuse within OAuthRefreshGrace after it revokes the grant); later uses write nothing.
func (s *Store) MarkOAuthAccessSeen(ctx context.Context, hash []byte) error {
	return s.q.MarkOAuthAccessSeen(ctx, hash)
}

// TouchOAuthGrant records that the grant was used at at (written at most once a minute).
func (s *Store) TouchOAuthGrant(ctx context.Context, id uuid.UUID, at time.Time) error {
	return s.q.TouchOAuthGrant(ctx, db.TouchOAuthGrantParams{ID: id, UsedAt: at})
}

// OAuthTokenGrant returns the grant id of a stored token (access or refresh) and the client
// it was issued to, or ErrNotFound.
func (s *Store) OAuthTokenGrant(ctx context.Context, hash []byte) (grant uuid.UUID, clientID string, err error) {
	t, err := s.q.GetOAuthToken(ctx, hash)
	if err != nil {
		return uuid.Nil, "", notFound(err)
	}
	g, err := s.q.OAuthGrantActive(ctx, t.GrantID)
	if err != nil {
		return uuid.Nil, "", notFound(err)
	}
	return g.ID, g.ClientID, nil
}

// GrantRevoked runs in the transaction that revokes an OAuth grant of the account, after the
// revocation (the agents end the sessions the grant's app started); its error undoes it. The
// agents' callbacks never undo a revocation (see KeysRevoked).
type GrantRevoked func(tx *AgentTx, accountID, grant uuid.UUID) error

// RevokeOAuthGrantByID revokes a grant whatever its account (the token endpoint's revocation,
// RFC 7009, which has checked the client); revoking a revoked grant does nothing. then (nil:
// nothing) runs in the revocation's transaction when it revoked the grant.
func (s *Store) RevokeOAuthGrantByID(ctx context.Context, id uuid.UUID, why string, then GrantRevoked) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		accounts, err := q.RevokeOAuthGrantOfAnyAccount(ctx, db.RevokeOAuthGrantOfAnyAccountParams{ID: id, RevokedWhy: why})
		if err != nil || then == nil || len(accounts) == 0 {
			return err
		}
		return then(newAgentTx(s.q, tx), accounts[0], id)
	})
}

// ListOAuthGrants returns the account's grants that are in force at now, newest first (at
// most 500): not revoked, not past their lifetime, their member still in the account, and
// with a token their client can still use (an access token not expired, or a refresh token
// neither used nor expired). A grant whose every token has expired is not in force: its client
// can do nothing more with it until it is allowed again.
func (s *Store) ListOAuthGrants(ctx context.Context, accountID uuid.UUID, now time.Time) ([]OAuthGrant, error) {
	rows, err := s.q.ListAccountOAuthGrants(ctx, db.ListAccountOAuthGrantsParams{AccountID: accountID, Now: now})
	if err != nil {
		return nil, err
	}
	out := make([]OAuthGrant, 0, len(rows))
	for _, r := range rows {
		out = append(out, OAuthGrant{ID: r.ID, AccountID: r.AccountID, UserID: r.UserID, ClientID: r.ClientID, Role: r.Role,
			Resource: r.Resource, Scope: r.Scope, CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt,
			ClientName: r.ClientName, ClientRedirectURIs: r.RedirectUris, UserEmail: r.UserEmail, UserName: r.UserName})
	}
	return out, nil
}

// GetOAuthGrant returns one grant of the account (revoked or not), or ErrNotFound.
func (s *Store) GetOAuthGrant(ctx context.Context, accountID, id uuid.UUID) (OAuthGrant, error) {
	r, err := s.q.GetAccountOAuthGrant(ctx, db.GetAccountOAuthGrantParams{ID: id, AccountID: accountID})
	if err != nil {
		return OAuthGrant{}, notFound(err)
	}
	return OAuthGrant{ID: r.ID, AccountID: r.AccountID, UserID: r.UserID, ClientID: r.ClientID, Role: r.Role,
		Resource: r.Resource, Scope: r.Scope, CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt,
		ClientName: r.ClientName, ClientRedirectURIs: r.RedirectUris, UserEmail: r.UserEmail, UserName: r.UserName}, nil
}

// RevokeOAuthGrant revokes one grant of the account; ErrNotFound when the account has no such
// grant in force. then (nil: nothing) runs in the revocation's transaction. Its tokens are refused from the next request on, on every replica (tokens
// are checked against the database on each use).
func (s *Store) RevokeOAuthGrant(ctx context.Context, accountID, id uuid.UUID, why string, then GrantRevoked) (OAuthGrant, error) {
	var g db.OauthGrant
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		g, err = s.q.WithTx(tx).RevokeAccountOAuthGrant(ctx, db.RevokeAccountOAuthGrantParams{ID: id, AccountID: accountID, RevokedWhy: why})
		if err != nil {
			return notFound(err)
		}
		if then == nil {
			return nil
		}
		return then(newAgentTx(s.q, tx), accountID, id)
	})
	if err != nil {
		return OAuthGrant{}, err
	}
	return oauthGrantOf(g), nil
}

func oauthGrantOf(g db.OauthGrant) OAuthGrant {
	return OAuthGrant{ID: g.ID, AccountID: g.AccountID, UserID: g.UserID, ClientID: g.ClientID, Role: g.Role, Resource: g.Resource,
		Scope: g.Scope, CreatedAt: g.CreatedAt, LastUsedAt: g.LastUsedAt, RevokedAt: g.RevokedAt}
}

// revokeReplayed revokes the grant of a replayed code or refresh token, saying why, runs then
// (nil: nothing) when it revoked it, and commits tx; it returns ErrOAuthReplay, or the error
// that kept the revocation from being stored.
func revokeReplayed(ctx context.Context, tx pgx.Tx, q *db.Queries, grant uuid.UUID, why string, then GrantRevoked) error {
	accounts, err := q.RevokeOAuthGrantOfAnyAccount(ctx, db.RevokeOAuthGrantOfAnyAccountParams{ID: grant, RevokedWhy: why})
	if err != nil {
		return err
	}
	for _, account := range accounts {
		if err := grantsRevoked(q, tx, account, []uuid.UUID{grant}, then); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return ErrOAuthReplay
}

// grantsRevoked runs then (nil: nothing) in tx for each of the account's grants revoked.
func grantsRevoked(q *db.Queries, tx pgx.Tx, accountID uuid.UUID, grants []uuid.UUID, then GrantRevoked) error {
	if then == nil {
		return nil
	}
	for _, g := range grants {
		if err := then(newAgentTx(q, tx), accountID, g); err != nil {
			return err
		}
	}
	return nil
}
