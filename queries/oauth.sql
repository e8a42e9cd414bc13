-- MCP sign-in with OAuth 2.1 (issue 22): clients, codes, grants and tokens (impl/store/oauth.go).

-- name: InsertOAuthClient :one
INSERT INTO oauth_clients (id, name, redirect_uris, client_uri) VALUES ($1, $2, $3, $4) RETURNING *;

-- name: GetOAuthClient :one
SELECT * FROM oauth_clients WHERE id = $1;

-- name: InsertOAuthCode :exec
INSERT INTO oauth_codes (code_hash, client_id, account_id, user_id, role, redirect_uri, code_challenge, resource, scope, expires_at, redirect_uri_sent)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11);

-- name: RedeemOAuthCode :one
-- Marks an unused code used (the row stays locked until the redemption commits, so a
-- concurrent replay sees the grant it produced).
UPDATE oauth_codes SET used_at = now() WHERE code_hash = $1 AND used_at IS NULL RETURNING *;

-- name: OAuthCodeMemberRole :one
-- The role of a code's member in its account, the membership row held FOR SHARE until the
-- redemption commits: a removal or a change of role waits for it (LockMembershipForChange), and
-- then revokes the grant it made. No row when the user is not a member (or was removed while
-- this waited).
SELECT role FROM memberships WHERE account_id = @account_id AND user_id = @user_id FOR SHARE;

-- name: GetOAuthCode :one
SELECT * FROM oauth_codes WHERE code_hash = $1;

-- name: SetOAuthCodeGrant :exec
UPDATE oauth_codes SET grant_id = $2 WHERE code_hash = $1;

-- name: InsertOAuthGrant :one
-- A new grant; @lifetime_seconds, when positive, is its absolute lifetime from now (its
-- expires_at), else it has no absolute end.
INSERT INTO oauth_grants (account_id, user_id, client_id, role, resource, scope, expires_at)
VALUES (@account_id, @user_id, @client_id, @role, @resource, @scope,
        CASE WHEN @lifetime_seconds::float8 > 0 THEN now() + make_interval(secs => @lifetime_seconds::float8) END)
RETURNING *;

-- name: RevokeSurplusOAuthGrants :many
-- Revokes the grants in force of one member of an account to one client beyond the newest
-- @keep, with why, and returns them: a member keeps at most that many of one client's grants
-- (one a device, say).
UPDATE oauth_grants SET revoked_at = now(), revoked_why = @why
WHERE id IN (SELECT g.id FROM oauth_grants g
             WHERE g.account_id = @account_id AND g.user_id = @user_id AND g.client_id = @client_id AND g.revoked_at IS NULL
             ORDER BY g.created_at DESC, g.id DESC
             OFFSET @keep)
RETURNING id;

-- name: RevokeOAuthGrantOfAnyAccount :many
-- Revokes a grant whatever its account, returning its account (nothing when it was revoked
-- already).
UPDATE oauth_grants SET revoked_at = now(), revoked_why = $2 WHERE id = $1 AND revoked_at IS NULL
RETURNING account_id;

-- name: RevokeAccountOAuthGrant :one
UPDATE oauth_grants SET revoked_at = now(), revoked_why = $3
WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL
RETURNING *;

-- name: GetAccountOAuthGrant :one
SELECT g.*, c.name AS client_name, c.redirect_uris, u.email AS user_email, u.name AS user_name
FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id JOIN users u ON u.id = g.user_id
WHERE g.id = $1 AND g.account_id = $2;

-- name: ListAccountOAuthGrants :many
-- The account's grants that still work at @now, newest first: not revoked, not past their
-- absolute lifetime, their member still in the account, and holding a token the client can
-- still use (an access token not expired, or a refresh token neither used nor expired). A
-- grant whose tokens have all expired can do nothing more (its client must be allowed again)
-- and is not listed, though nobody revoked it.
SELECT g.*, c.name AS client_name, c.redirect_uris, u.email AS user_email, u.name AS user_name
FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id JOIN users u ON u.id = g.user_id
JOIN memberships m ON m.account_id = g.account_id AND m.user_id = g.user_id
WHERE g.account_id = @account_id AND g.revoked_at IS NULL
  AND (g.expires_at IS NULL OR g.expires_at > @now::timestamptz)
  AND EXISTS (SELECT 1 FROM oauth_tokens t
              WHERE t.grant_id = g.id AND t.expires_at > @now::timestamptz AND (t.kind = 'access' OR t.used_at IS NULL))
ORDER BY g.created_at DESC
LIMIT 500;

-- name: TouchOAuthGrant :exec
-- Records a use, at most once a minute per grant.
UPDATE oauth_grants SET last_used_at = sqlc.arg(used_at)::timestamptz
WHERE id = sqlc.arg(id) AND (last_used_at IS NULL OR last_used_at < sqlc.arg(used_at)::timestamptz - interval '1 minute');

-- name: InsertOAuthToken :exec
INSERT INTO oauth_tokens (token_hash, grant_id, kind, expires_at) VALUES ($1, $2, $3, $4);

-- name: UseOAuthRefreshToken :one
-- Marks an unused refresh token used (a rotation); no row when it is unknown or already used.
UPDATE oauth_tokens SET used_at = now() WHERE token_hash = $1 AND kind = 'refresh' AND used_at IS NULL RETURNING *;

-- name: GetOAuthToken :one
SELECT * FROM oauth_tokens WHERE token_hash = $1;

-- name: OAuthAccessTokenGrant :one
-- The grant an access token stands for, with the member's current role ('' when the member is
-- no longer in the account) and, for a revoked grant, why: no row when the token is unknown or
-- not an access token.
SELECT t.expires_at, g.id AS grant_id, g.account_id, g.user_id, g.client_id, g.role AS granted_role,
       g.resource, g.scope, COALESCE(m.role, '')::text AS member_role, u.email AS user_email, c.name AS client_name,
       g.created_at AS granted_at, (g.revoked_at IS NOT NULL)::boolean AS revoked, g.revoked_why,
       (t.used_at IS NOT NULL)::boolean AS seen
FROM oauth_tokens t
JOIN oauth_grants g ON g.id = t.grant_id
LEFT JOIN memberships m ON m.account_id = g.account_id AND m.user_id = g.user_id
JOIN users u ON u.id = g.user_id
JOIN oauth_clients c ON c.id = g.client_id
WHERE t.token_hash = $1 AND t.kind = 'access';

-- name: OAuthGrantActive :one
-- The grant with the member's current role, if the grant still works: not revoked, not past
-- its absolute lifetime (its tokens end with it), and its member still in the account.
SELECT g.*, m.role AS member_role
FROM oauth_grants g JOIN memberships m ON m.account_id = g.account_id AND m.user_id = g.user_id
WHERE g.id = $1 AND g.revoked_at IS NULL AND (g.expires_at IS NULL OR g.expires_at > now());

-- name: DeleteExpiredOAuthGrantTokens :execrows
-- A grant's expired tokens (used refresh tokens are kept until they expire: a reuse must still
-- be recognised).
DELETE FROM oauth_tokens WHERE grant_id = $1 AND expires_at < now();

-- name: DeleteStaleOAuthCodes :execrows
-- Codes expired a day ago or more (a replay of one is refused as unknown then).
DELETE FROM oauth_codes WHERE expires_at < now() - interval '1 day';

-- name: UpsertOAuthClient :one
-- A client identified by its client ID metadata document (its id is the document's URL): the
-- document as last fetched.
INSERT INTO oauth_clients (id, name, redirect_uris, client_uri) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, redirect_uris = EXCLUDED.redirect_uris, client_uri = EXCLUDED.client_uri
RETURNING *;

-- name: OAuthRefreshRotatedWithin :one
-- Whether a used refresh token was rotated less than grace_seconds ago (a concurrent refresh
-- with the same token, which is refused without revoking the grant).
SELECT COALESCE(used_at > now() - make_interval(secs => sqlc.arg(grace_seconds)::float8), false)::bool AS recent
FROM oauth_tokens WHERE token_hash = sqlc.arg(token_hash) AND kind = 'refresh';

-- name: MarkOAuthAccessSeen :exec
-- Records the first use of an access token at the MCP endpoint (its used_at), which tells a
-- refresh token's reuse within the grace from a concurrent refresh (OAuthRefreshSuccessorsUsed).
UPDATE oauth_tokens SET used_at = now() WHERE token_hash = $1 AND kind = 'access' AND used_at IS NULL;

-- name: OAuthRefreshSuccessorsUsed :one
-- Whether a token of the used refresh token's grant issued at its rotation or after it (the
-- rotation stores the new pair in the transaction that marks the old token used, so their
-- created_at is its used_at) has been used since: the new access token seen at the MCP
-- endpoint, or the new refresh token presented.
SELECT EXISTS (
    SELECT 1 FROM oauth_tokens old
    JOIN oauth_tokens t ON t.grant_id = old.grant_id AND t.token_hash <> old.token_hash
    WHERE old.token_hash = $1 AND old.kind = 'refresh' AND old.used_at IS NOT NULL
      AND t.created_at >= old.used_at AND t.used_at IS NOT NULL
)::bool AS used;

-- name: DeleteUnusedOAuthClients :execrows
-- Registered clients older than a day that never got a grant and have no code pending (a
-- registration nobody completed). Clients of client ID metadata documents are stored again
-- when they next ask.
DELETE FROM oauth_clients c
WHERE c.created_at < now() - interval '1 day'
  AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = c.id)
  AND NOT EXISTS (SELECT 1 FROM oauth_codes o WHERE o.client_id = c.id AND o.expires_at > now());
