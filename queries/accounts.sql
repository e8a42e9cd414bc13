-- name: CreateAccount :one
INSERT INTO accounts (name, plan) VALUES ($1, $2) RETURNING *;

-- name: GetAccount :one
SELECT * FROM accounts WHERE id = $1;

-- name: GetAccountByName :one
SELECT * FROM accounts WHERE name = $1;

-- name: ListAccounts :many
SELECT * FROM accounts ORDER BY created_at, name;

-- name: GetAccountBalance :one
SELECT balance_micros FROM accounts WHERE id = $1;
