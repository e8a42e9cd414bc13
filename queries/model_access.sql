-- name: GrantModel :exec
INSERT INTO model_access (account_id, model_id) VALUES ($1, $2)
ON CONFLICT (account_id, model_id) DO NOTHING;

-- name: RevokeModel :execrows
DELETE FROM model_access WHERE account_id = $1 AND model_id = $2;

-- name: ListAccountModels :many
SELECT * FROM model_access WHERE account_id = $1 ORDER BY model_id;

-- name: GetAccountModel :one
SELECT * FROM model_access WHERE account_id = $1 AND model_id = $2;
