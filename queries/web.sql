-- The web application's queries (issue 14): users, memberships, web sessions, the audit log.

-- name: GetUserBySubject :one
SELECT * FROM users WHERE oidc_issuer = $1 AND oidc_subject = $2;

-- name: GetUserByEmail :one
SELECT * FROM users WHERE lower(email) = lower(@email::text) AND email <> '';

-- name: GetUser :one
SELECT * FROM users WHERE id = $1;

-- name: CreateUserByEmail :one
-- A user the operator adds by e-mail, before any sign-in.
INSERT INTO users (email) VALUES (@email::text) RETURNING *;

-- name: CreateUserBySubject :one
INSERT INTO users (oidc_issuer, oidc_subject, email, name) VALUES ($1, $2, $3, $4) RETURNING *;

-- name: ClaimUser :one
-- Binds a user added by e-mail (or bound to an issuer no longer configured) to the OpenID
-- subject that signed in with that verified e-mail.
UPDATE users SET oidc_issuer = $2, oidc_subject = $3
WHERE id = $1 AND (oidc_subject IS NULL OR oidc_issuer IS DISTINCT FROM $2)
RETURNING *;

-- name: RecordSignIn :one
UPDATE users SET email = $2, name = $3, last_sign_in_at = now() WHERE id = $1 RETURNING *;

-- name: RevokeOAuthGrantsAboveRole :many
-- Revokes the member's OAuth grants made with a role above @role, for a change of their role to
-- it (SetMembership, after LockMembershipForChange), and returns them: a grant acts with the
-- role its member had when they allowed the client, and one whose member's role was lowered
-- must not work again when the role is raised later (the member allows the client again).
UPDATE oauth_grants g SET revoked_at = now(), revoked_why = 'the member''s role was lowered since the client was allowed'
WHERE g.account_id = @account_id AND g.user_id = @user_id AND g.revoked_at IS NULL
  AND (CASE g.role WHEN 'owner' THEN 3 WHEN 'admin' THEN 2 WHEN 'member' THEN 1 ELSE 0 END)
    > (CASE @role::text WHEN 'owner' THEN 3 WHEN 'admin' THEN 2 WHEN 'member' THEN 1 ELSE 0 END)
RETURNING g.id;

-- name: UpsertMembership :one
-- Adds the member or sets their role (a lowered role's grants are revoked first, in the same
-- transaction: RevokeOAuthGrantsAboveRole).
INSERT INTO memberships (account_id, user_id, role) VALUES (@account_id, @user_id, @role::text)
ON CONFLICT (account_id, user_id) DO UPDATE SET role = EXCLUDED.role
RETURNING *;

-- name: LockMembershipForChange :one
-- Locks a membership row until the transaction ends, before a statement that changes it and
-- revokes the member's OAuth grants (DeleteMembership, UpsertMembership): an authorization code's
-- redemption holds the row FOR SHARE (OAuthCodeMemberRole) while it makes a grant, so that a
-- grant it made first is seen by the revoking statement, which starts after it committed, and a
-- redemption that comes second finds the change. No row when the user is not a member.
SELECT role FROM memberships WHERE account_id = @account_id AND user_id = @user_id FOR UPDATE;

-- name: DeleteMembership :execrows
-- Ends a membership, and revokes in the same statement the OAuth grants the member made in the
-- account: a member removed and added again later does not get the old grants back (trial h6).
WITH removed AS (
    UPDATE oauth_grants g SET revoked_at = now(), revoked_why = 'the member was removed from the account'
    WHERE g.account_id = @account_id AND g.user_id = @user_id AND g.revoked_at IS NULL
    RETURNING g.id
)
DELETE FROM memberships m WHERE m.account_id = @account_id AND m.user_id = @user_id;

-- name: ListAccountMembers :many
SELECT m.role, m.created_at, u.id AS user_id, u.email, u.name, u.last_sign_in_at
FROM memberships m JOIN users u ON u.id = m.user_id
WHERE m.account_id = $1
ORDER BY u.email;

-- name: ListUserMemberships :many
SELECT m.role, a.id AS account_id, a.name AS account_name, a.plan
FROM memberships m JOIN accounts a ON a.id = m.account_id
WHERE m.user_id = $1
ORDER BY a.name;

-- name: GetMembership :one
SELECT m.role, a.id AS account_id, a.name AS account_name, a.plan
FROM memberships m JOIN accounts a ON a.id = m.account_id
WHERE m.user_id = $1 AND m.account_id = $2;

-- name: FindWebSession :one
SELECT data FROM web_sessions WHERE token_hash = $1 AND expiry > now();

-- name: CommitWebSession :exec
-- Saves a session. A session that has ended (signed out, ended on the Sessions page, expired)
-- stays ended: a request that loaded it just before it ended saves it when it answers, and
-- that save must not bring it back, so an ended session's row is kept (a tombstone, see
-- DeleteWebSession) and the update applies to live rows only.
INSERT INTO web_sessions (token_hash, data, expiry, user_id, user_agent)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (token_hash) DO UPDATE
SET data = EXCLUDED.data, expiry = EXCLUDED.expiry, user_id = EXCLUDED.user_id,
    user_agent = EXCLUDED.user_agent, last_seen_at = now()
WHERE web_sessions.expiry > now();

-- name: DeleteWebSession :exec
-- Ends a session: its row stays as a tombstone (no data, no user, expired now) until
-- DeleteExpiredWebSessions removes it, so that a save in flight cannot re-insert it.
UPDATE web_sessions SET data = '', user_id = NULL, expiry = now() WHERE token_hash = $1;

-- name: DeleteExpiredWebSessions :execrows
-- Removes sessions (and tombstones) that ended more than a day ago: far longer than any
-- request that loaded one before it ended takes to save it.
DELETE FROM web_sessions WHERE expiry <= now() - interval '1 day';

-- name: ListUserWebSessions :many
SELECT id, token_hash, expiry, user_agent, created_at, last_seen_at
FROM web_sessions
WHERE user_id = @user_id::uuid AND expiry > now()
ORDER BY last_seen_at DESC, id DESC;

-- name: DeleteUserWebSession :execrows
-- Ends one of the user's live sessions (a tombstone, as DeleteWebSession).
UPDATE web_sessions SET data = '', user_id = NULL, expiry = now()
WHERE id = @id AND user_id = @user_id::uuid AND expiry > now();

-- name: DeleteUserWebSessions :execrows
-- Ends every live session of the user (tombstones, as DeleteWebSession).
UPDATE web_sessions SET data = '', user_id = NULL, expiry = now()
WHERE user_id = @user_id::uuid AND expiry > now();

-- name: InsertAudit :one
INSERT INTO audit_log (account_id, actor, actor_user_id, action, target, before, after)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING *;

-- name: ListAudit :many
-- Newest first, a page at a time: before_id is the last id of the previous page (0: the first).
SELECT * FROM audit_log
WHERE account_id = @account_id AND (@before_id::bigint = 0 OR id < @before_id::bigint)
ORDER BY id DESC
LIMIT @row_limit;

-- name: SetAPIKeySuffix :exec
-- Keeps a new key's last four characters for the Keys page.
UPDATE api_keys SET display_suffix = $3 WHERE id = $1 AND account_id = $2;

-- name: ListAPIKeySuffixes :many
SELECT id, display_suffix FROM api_keys WHERE account_id = $1 AND display_suffix <> '';

-- name: ClaimSignup :execrows
-- Claims the user's self-service sign-up: 1 row for the one request that may create the
-- account, 0 for every other (concurrent or later) one. A claim that made no account and is
-- older than @stale_seconds (its request failed and could not give it back, the database gone
-- between the two) may be claimed again; SetSignupAccount keeps it to one account even then.
UPDATE users SET signup_claimed_at = now()
WHERE id = @id AND signup_account_id IS NULL
  AND (signup_claimed_at IS NULL OR signup_claimed_at < now() - make_interval(secs => @stale_seconds::int));

-- name: SetSignupAccount :execrows
-- Records the account the user's sign-up made: 0 rows when another sign-up of the user made
-- one already (the account being made is then not kept).
UPDATE users SET signup_account_id = @account_id::uuid WHERE id = @id AND signup_account_id IS NULL;

-- name: ReleaseSignup :exec
-- Gives the claim back when the sign-up made no account, so that the user may try again.
UPDATE users SET signup_claimed_at = NULL WHERE id = $1 AND signup_account_id IS NULL;

-- name: GetSignupAccount :one
-- The account the user's sign-up made (NULL while it is being made, or when it made none).
SELECT signup_account_id FROM users WHERE id = $1;

-- name: ClaimKeyForm :execrows
-- Claims the new-key form @form_id of the account for the request that creates its key: 1 when
-- this request has it, 0 when another did. The account's claims older than a week go.
WITH old AS (
    DELETE FROM web_key_forms WHERE account_id = @account_id AND created_at < now() - interval '7 days'
)
INSERT INTO web_key_forms (account_id, form_id) VALUES (@account_id, @form_id)
ON CONFLICT DO NOTHING;

-- name: GetKeyFormKey :one
-- The key a claimed new-key form created (NULL while it is being created); no row when the
-- form is not claimed.
SELECT key_id FROM web_key_forms WHERE account_id = $1 AND form_id = $2;

-- name: SetKeyFormKey :exec
UPDATE web_key_forms SET key_id = $3 WHERE account_id = $1 AND form_id = $2;

-- name: ReleaseKeyForm :exec
-- Gives back the claim of a form that created no key.
DELETE FROM web_key_forms WHERE account_id = $1 AND form_id = $2 AND key_id IS NULL;
