-- name: CreateAPIKey :one
INSERT INTO api_keys (account_id, name, key_hash, display_prefix, rpm_limit)
VALUES ($1, $2, $3, $4, $5)
RETURNING *;

-- name: GetActiveAPIKeyByHash :one
-- The authentication lookup: only keys that are not revoked.
SELECT * FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL;

-- name: GetAPIKey :one
SELECT * FROM api_keys WHERE id = $1;

-- name: ListAPIKeys :many
SELECT * FROM api_keys WHERE account_id = $1 ORDER BY created_at, id;

-- name: RevokeAPIKey :one
UPDATE api_keys SET revoked_at = now()
WHERE id = $1 AND revoked_at IS NULL
RETURNING *;

-- name: SetAPIKeyRPMLimit :one
UPDATE api_keys SET rpm_limit = $2 WHERE id = $1 RETURNING *;

-- name: TouchAPIKeys :exec
-- Records the last use of many keys at once (written in batches, off the request path).
UPDATE api_keys SET last_used_at = @used_at::timestamptz
WHERE id = ANY(@ids::uuid[]) AND (last_used_at IS NULL OR last_used_at < @used_at::timestamptz);
