-- name: AppendLedgerEntry :one
-- Moves the balance and appends the entry in one statement. No row comes back when the entry
-- would take the balance below zero (or the account does not exist); a repeated idempotency
-- key fails on the unique constraint and changes nothing.
WITH moved AS (
    UPDATE accounts SET balance_micros = balance_micros + @amount_micros::bigint
    WHERE accounts.id = @account_id AND accounts.balance_micros + @amount_micros::bigint >= accounts.held_micros
    RETURNING accounts.id, accounts.balance_micros
)
INSERT INTO credit_ledger (account_id, amount_micros, balance_after_micros, reason, idempotency_key, note)
SELECT moved.id, @amount_micros::bigint, moved.balance_micros, @reason, @idempotency_key, @note
FROM moved
RETURNING *;

-- name: GetLedgerEntryByKey :one
SELECT * FROM credit_ledger WHERE account_id = $1 AND idempotency_key = $2;

-- name: ListLedgerEntries :many
SELECT * FROM credit_ledger WHERE account_id = $1 ORDER BY id DESC LIMIT $2;

-- name: SumLedger :one
SELECT COALESCE(SUM(amount_micros), 0)::bigint AS total FROM credit_ledger WHERE account_id = $1;
