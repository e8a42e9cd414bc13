-- name: InsertServerSecret :exec
-- Stores a new secret under name unless one is there already (the first replica's wins).
INSERT INTO server_secrets (name, secret) VALUES (@name, @secret) ON CONFLICT (name) DO NOTHING;

-- name: ServerSecret :one
SELECT secret FROM server_secrets WHERE name = @name;
