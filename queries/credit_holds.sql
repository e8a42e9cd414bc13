-- name: TakeCreditHold :one
-- Draws credit for a holder (a gateway process) in one statement: the account row is locked,
-- and when its available credit (balance - held) covers need_micros, the hold of the holder grows by
-- min(want_micros, max(need_micros, available / 2)) - never more than half of what is left
-- unless the request needs more, so that one process does not strand the last credit of an account
-- while another process is refused - and its lease is renewed. When the account cannot cover
-- need_micros nothing changes and granted is false. No row comes back for an unknown account.
-- The update writes both columns from the row locked by acct (the newest version, which nobody
-- else can change until commit): when the statement snapshot holds an older version, PostgreSQL
-- checks the constraints of the tuple made from that older version before it notices the
-- concurrent update and re-evaluates, and a grant computed from the newer balance would fail
-- the check against the older one.
WITH acct AS (
    SELECT a.id, a.balance_micros, a.held_micros, a.balance_micros - a.held_micros AS available
    FROM accounts a WHERE a.id = @account_id FOR UPDATE
), granted AS (
    SELECT acct.id, acct.balance_micros, acct.held_micros + LEAST(@want_micros::bigint, GREATEST(@need_micros::bigint, acct.available / 2))::bigint AS held,
           LEAST(@want_micros::bigint, GREATEST(@need_micros::bigint, acct.available / 2))::bigint AS amount
    FROM acct WHERE acct.available >= @need_micros::bigint
), moved AS (
    UPDATE accounts SET balance_micros = granted.balance_micros, held_micros = granted.held
    FROM granted WHERE accounts.id = granted.id
    RETURNING accounts.id
), hold AS (
    INSERT INTO credit_holds (account_id, holder, amount_micros, expires_at)
    SELECT granted.id, @holder::text, granted.amount, now() + sqlc.arg(lease_millis)::bigint * interval '1 millisecond'
    FROM granted
    ON CONFLICT (account_id, holder) DO UPDATE
        SET amount_micros = credit_holds.amount_micros + EXCLUDED.amount_micros,
            expires_at = EXCLUDED.expires_at,
            version = nextval('credit_hold_version')
    RETURNING credit_holds.amount_micros, credit_holds.version, credit_holds.expires_at
)
SELECT acct.balance_micros::bigint AS balance_micros,
       acct.available::bigint AS available_micros,
       (hold.version IS NOT NULL)::boolean AS granted,
       COALESCE(granted.amount, 0)::bigint AS granted_micros,
       COALESCE(hold.amount_micros, 0)::bigint AS hold_micros,
       COALESCE(hold.version, 0)::bigint AS hold_version,
       COALESCE(hold.expires_at, now())::timestamptz AS expires_at
FROM acct
LEFT JOIN granted ON true
LEFT JOIN hold ON true;

-- name: RenewCreditHolds :many
-- Extends the lease of every hold of the holder; the holds that come back are still there.
UPDATE credit_holds SET expires_at = now() + sqlc.arg(lease_millis)::bigint * interval '1 millisecond'
WHERE holder = sqlc.arg(holder)
RETURNING account_id, expires_at;

-- name: LockAccountsWithHoldsOf :many
-- Locks, in id order, the accounts on which the holder has a hold.
SELECT a.id FROM accounts a
WHERE a.id IN (SELECT h.account_id FROM credit_holds h WHERE h.holder = @holder)
ORDER BY a.id
FOR UPDATE OF a;

-- name: LockAccountsWithExpiredHolds :many
-- Locks, in id order, the accounts that have a hold whose lease has expired.
SELECT a.id FROM accounts a
WHERE a.id IN (SELECT h.account_id FROM credit_holds h WHERE h.expires_at < now())
ORDER BY a.id
FOR UPDATE OF a;

-- name: DeleteHolderHolds :many
-- Returns the holds of the holder on the given accounts (locked by the caller) to the accounts.
WITH gone AS (
    DELETE FROM credit_holds h
    WHERE h.holder = @holder AND h.account_id = ANY(@account_ids::uuid[])
    RETURNING h.account_id, h.holder, h.amount_micros, h.version, h.expires_at
), sums AS (
    SELECT gone.account_id, SUM(gone.amount_micros)::bigint AS total FROM gone GROUP BY gone.account_id
), moved AS (
    UPDATE accounts SET held_micros = accounts.held_micros - sums.total
    FROM sums WHERE accounts.id = sums.account_id
    RETURNING accounts.id
)
SELECT gone.account_id, gone.holder, gone.amount_micros, gone.version, gone.expires_at FROM gone;

-- name: DeleteExpiredHolds :many
-- Returns every expired hold on the given accounts (locked by the caller) to the accounts.
WITH gone AS (
    DELETE FROM credit_holds h
    WHERE h.expires_at < now() AND h.account_id = ANY(@account_ids::uuid[])
    RETURNING h.account_id, h.holder, h.amount_micros, h.version, h.expires_at
), sums AS (
    SELECT gone.account_id, SUM(gone.amount_micros)::bigint AS total FROM gone GROUP BY gone.account_id
), moved AS (
    UPDATE accounts SET held_micros = accounts.held_micros - sums.total
    FROM sums WHERE accounts.id = sums.account_id
    RETURNING accounts.id
)
SELECT gone.account_id, gone.holder, gone.amount_micros, gone.version, gone.expires_at FROM gone;

-- name: ListCreditHolds :many
SELECT * FROM credit_holds WHERE account_id = $1 ORDER BY holder;

-- name: ShrinkHolderHold :one
-- Gives back amount_micros of the holder's hold on the account (locked by the caller) when the
-- hold has at least that much; no row comes back otherwise, and nothing changes. The caller
-- then lowers the account's held_micros by the same amount (ReturnHeldCredit).
UPDATE credit_holds
SET amount_micros = amount_micros - @amount_micros::bigint,
    version = nextval('credit_hold_version')
WHERE account_id = @account_id AND holder = @holder AND amount_micros >= @amount_micros::bigint
RETURNING account_id, holder, amount_micros, version, expires_at;

-- name: ReturnHeldCredit :exec
-- Lowers the account's held credit by what a holder gave back of its hold (ShrinkHolderHold).
UPDATE accounts SET held_micros = held_micros - @amount_micros::bigint WHERE id = @account_id;

-- name: CountLiveCreditHolders :one
-- Counts the holders (gateway processes) with a live hold on any account: a process serves on
-- credit during a database outage only accounts it held, so this is how many may do so at once.
SELECT count(DISTINCT holder)::int AS holders FROM credit_holds WHERE expires_at > now();
