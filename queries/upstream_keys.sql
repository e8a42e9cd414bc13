-- name: SetAccountUpstreamKey :exec
-- Stores the account's own key for the provider, replacing the one it had.
INSERT INTO account_upstream_keys (account_id, provider, sealed, hint, set_by)
VALUES (@account_id, @provider, @sealed, @hint, @set_by)
ON CONFLICT (account_id, provider) DO UPDATE
SET sealed = EXCLUDED.sealed, hint = EXCLUDED.hint, set_by = EXCLUDED.set_by, set_at = now();

-- name: ListAccountUpstreamKeys :many
SELECT * FROM account_upstream_keys WHERE account_id = @account_id ORDER BY provider;

-- name: RemoveAccountUpstreamKey :execrows
DELETE FROM account_upstream_keys WHERE account_id = @account_id AND provider = @provider;
