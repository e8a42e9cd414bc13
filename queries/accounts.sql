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

-- name: GetAccountCredit :one
-- The balance and the part of it that gateway processes hold.
SELECT balance_micros, held_micros FROM accounts WHERE id = $1;

-- name: LockAccounts :many
-- Locks the account rows for the rest of the transaction, always in id order so that writers
-- of several accounts never deadlock; returns the ids that exist.
SELECT id FROM accounts WHERE id = ANY(@ids::uuid[]) ORDER BY id FOR UPDATE;

-- name: GetAccountByNameAnyCase :one
-- The account whose name is name but for letter case (at most one: accounts_name_lower_key).
SELECT * FROM accounts WHERE lower(name) = lower(@name::text);
