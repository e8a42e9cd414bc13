-- name: CreateAPIKey :one
-- display_suffix is the key's last four characters, for lists (prefix…last four).
INSERT INTO api_keys (account_id, name, key_hash, display_prefix, display_suffix, rpm_limit, expires_at,
                      credit_cap_micros, cap_period, models, created_by, created_by_user)
VALUES (@account_id, @name, @key_hash, @display_prefix, @display_suffix, @rpm_limit, sqlc.narg(expires_at),
        sqlc.narg(credit_cap_micros), @cap_period, sqlc.narg(models)::text[], @created_by, sqlc.narg(created_by_user)::uuid)
RETURNING *;

-- name: LockAccountKeys :one
-- Serializes the key creations of one account (the key quota): the account row is locked FOR NO
-- KEY UPDATE until the transaction ends, which excludes another creation's lock but not the
-- foreign-key checks of the account's usage, ledger and hold rows.
SELECT id FROM accounts WHERE id = $1 FOR NO KEY UPDATE;

-- name: CountUnrevokedAPIKeys :one
-- The keys that count against the plan's key quota: every key of the account not revoked
-- (disabled and expired ones too, since they can work again).
SELECT count(*) FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL;

-- name: GetActiveAPIKeyByHash :one
-- The authentication lookup: only keys that are not revoked (disabled and expired ones come
-- back: the caller says why it refuses them).
SELECT * FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL;

-- name: GetAPIKey :one
-- A key by id alone, of any account: for the operator's commands only (tollgate admin key
-- ...: KEY_ID names the account). A path that serves a tenant reads GetAccountAPIKey.
SELECT * FROM api_keys WHERE id = $1;

-- name: ListAPIKeys :many
SELECT * FROM api_keys WHERE account_id = $1 ORDER BY created_at, id;

-- name: TouchAPIKeys :exec
-- Records the last use of many keys at once, each at its own time (@used_at[i] for @ids[i]:
-- two unnests in one select list are read side by side), never moving a timestamp backwards
-- (written in batches, off the request path).
UPDATE api_keys AS k SET last_used_at = u.used_at
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@used_at::timestamptz[]) AS used_at) AS u
WHERE k.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.used_at);

-- name: GetAccountAPIKey :one
-- A key of the account (revoked or not); another account's key is not found.
SELECT * FROM api_keys WHERE id = @id AND account_id = @account_id;

-- name: ListAPIKeysWithSpend :many
-- The account's keys, oldest first, each with what it spent in its current cap period
-- (period_start, computed at @now: the UTC day, the UTC month, or since the epoch for the
-- period 'none') and when it was last used (the epoch: never), both read from usage_records (a request counts in
-- the period in which it started), so the list needs no write per request.
SELECT sqlc.embed(k),
       p.period_start::timestamptz AS period_start,
       COALESCE((SELECT SUM(u.cost_micros) FROM usage_records u
                 WHERE u.api_key_id = k.id AND u.started_at >= p.period_start), 0)::bigint AS period_spent_micros,
       COALESCE((SELECT MAX(u.started_at) FROM usage_records u WHERE u.api_key_id = k.id), 'epoch')::timestamptz AS last_request_at
FROM api_keys k
CROSS JOIN LATERAL (
    SELECT CASE k.cap_period
               WHEN 'daily' THEN date_trunc('day', @now::timestamptz, 'UTC')
               WHEN 'monthly' THEN date_trunc('month', @now::timestamptz, 'UTC')
               ELSE 'epoch'::timestamptz
           END AS period_start
) p
WHERE k.account_id = @account_id
ORDER BY k.created_at, k.id;

-- name: RevokeAccountAPIKey :one
-- Revokes a key of the account, for ever; nothing comes back for another account's key or a
-- key revoked already.
UPDATE api_keys SET revoked_at = now()
WHERE id = @id AND account_id = @account_id AND revoked_at IS NULL
RETURNING *;

-- name: RevokeAccountAPIKeys :many
-- Revokes every key of the account that is not revoked yet.
UPDATE api_keys SET revoked_at = now()
WHERE account_id = @account_id AND revoked_at IS NULL
RETURNING *;

-- name: RevokeMemberAPIKeys :many
-- Revokes the keys of the account that the user made on the console and that are not revoked
-- yet (a member's keys, when the member is removed); the operator's keys are never theirs.
UPDATE api_keys SET revoked_at = now()
WHERE account_id = @account_id AND created_by_user = @user_id AND revoked_at IS NULL
RETURNING *;

-- name: SetAPIKeyDisabled :one
-- Disables (disabled true) or enables a key of the account that is not revoked. Disabling a
-- disabled key keeps its first time.
UPDATE api_keys
SET disabled_at = CASE WHEN @disabled::boolean THEN COALESCE(disabled_at, now()) ELSE NULL END
WHERE id = @id AND account_id = @account_id AND revoked_at IS NULL
RETURNING *;

-- name: SetAPIKeyLimits :one
-- Sets every limit of a key of the account that is not revoked.
UPDATE api_keys
SET rpm_limit = @rpm_limit, expires_at = sqlc.narg(expires_at), credit_cap_micros = sqlc.narg(credit_cap_micros),
    cap_period = @cap_period, models = sqlc.narg(models)::text[]
WHERE id = @id AND account_id = @account_id AND revoked_at IS NULL
RETURNING *;

-- name: SeedKeyBudgetSpend :exec
-- Raises the spend of a key's budget in the period that starts at period_start to what the
-- key's usage records that started in the period cost (creating the row): the budget is fed
-- only by the reservations of requests made under a cap of that period, so a cap put on a key,
-- or moved to another period, must count what the key spent in the period already. A spend
-- the budget counts beyond its usage records (records not written yet) is kept.
INSERT INTO key_budgets AS b (key_id, period_start, spent_micros)
SELECT @key_id::uuid, @period_start::timestamptz, COALESCE(SUM(u.cost_micros), 0)::bigint
FROM usage_records u
WHERE u.api_key_id = @key_id::uuid AND u.started_at >= @period_start::timestamptz
ON CONFLICT (key_id, period_start) DO UPDATE SET spent_micros = GREATEST(b.spent_micros, EXCLUDED.spent_micros);

-- name: ReserveKeyBudget :one
-- Reserves amount_micros of a capped key's budget for a request, in one statement: the
-- budget row of (key, period) is created or updated only while its spent + reserved +
-- amount stays within cap_micros (the row is locked and re-read, so concurrent reservations,
-- from any process, never pass the cap together), and the reservation row, held by holder
-- with a lease, is written with it. reserved is false when the cap would be passed; spent
-- and held are then the budget's as this statement saw them. A request id that has a
-- reservation row of the key already (live, reaped or settled: a retry) changes nothing here:
-- existing is true and the caller takes the row over (LockKeyReservation and what follows, in
-- one transaction). A row written by a concurrent statement after this one's snapshot makes
-- the insert fail with a unique violation, which undoes the whole statement.
WITH budget AS (
    INSERT INTO key_budgets AS b (key_id, period_start, reserved_micros)
    SELECT @key_id::uuid, @period_start::timestamptz, @amount_micros::bigint
    WHERE @amount_micros::bigint <= @cap_micros::bigint
      AND NOT EXISTS (SELECT 1 FROM key_reservations r
                      WHERE r.key_id = @key_id::uuid AND r.request_id = @request_id::text)
    ON CONFLICT (key_id, period_start) DO UPDATE
        SET reserved_micros = b.reserved_micros + EXCLUDED.reserved_micros
        WHERE b.spent_micros + b.reserved_micros + EXCLUDED.reserved_micros <= @cap_micros::bigint
    RETURNING b.key_id, b.period_start
), held AS (
    INSERT INTO key_reservations (key_id, request_id, period_start, amount_micros, holder, expires_at)
    SELECT budget.key_id, @request_id::text, budget.period_start, @amount_micros::bigint, @holder::text,
           now() + sqlc.arg(lease_millis)::bigint * interval '1 millisecond'
    FROM budget
    RETURNING key_reservations.key_id
)
SELECT EXISTS (SELECT 1 FROM held)::boolean AS reserved,
       EXISTS (SELECT 1 FROM key_reservations r
               WHERE r.key_id = @key_id::uuid AND r.request_id = @request_id::text)::boolean AS existing,
       COALESCE(kb.spent_micros, 0)::bigint AS spent_micros,
       COALESCE(kb.reserved_micros, 0)::bigint AS held_micros
FROM (SELECT 1) AS one
LEFT JOIN key_budgets kb ON kb.key_id = @key_id::uuid AND kb.period_start = @period_start::timestamptz;

-- name: LockKeyReservation :one
-- The reservation row of a request id, locked until the transaction ends (a retry takes it
-- over): the reservations and settlements of that request id, from any process, wait for it.
SELECT period_start, amount_micros, reaped, settled_at FROM key_reservations
WHERE key_id = @key_id AND request_id = @request_id
FOR UPDATE;

-- name: ReturnKeyBudgetReservation :exec
-- Takes amount_micros off the reservations of a key's budget in a period (a reservation taken
-- over into another period).
UPDATE key_budgets SET reserved_micros = reserved_micros - @amount_micros::bigint
WHERE key_id = @key_id AND period_start = @period_start;

-- name: AdjustKeyBudgetReservation :execrows
-- Replaces old_micros of a key budget's reservations with new_micros (a reservation taken
-- over), creating the budget row if needed, only while spent + reserved - old + new stays
-- within cap_micros; no row changed means the cap would be passed.
INSERT INTO key_budgets AS b (key_id, period_start, reserved_micros)
SELECT @key_id::uuid, @period_start::timestamptz, @new_micros::bigint
WHERE @new_micros::bigint <= @cap_micros::bigint
ON CONFLICT (key_id, period_start) DO UPDATE
    SET reserved_micros = b.reserved_micros + (EXCLUDED.reserved_micros - sqlc.arg(old_micros)::bigint)
    WHERE b.spent_micros + b.reserved_micros + (EXCLUDED.reserved_micros - sqlc.arg(old_micros)::bigint) <= @cap_micros::bigint;

-- name: TakeOverKeyReservation :exec
-- A retry's takeover of its request id's live or reaped reservation: the row is the holder's
-- now, with a fresh lease, its new amount and period, and not reaped any more.
UPDATE key_reservations
SET period_start = @period_start, amount_micros = @amount_micros, holder = @holder, reaped = false,
    expires_at = now() + sqlc.arg(lease_millis)::bigint * interval '1 millisecond'
WHERE key_id = @key_id AND request_id = @request_id;

-- name: SettleKeyReservation :execrows
-- Ends a key reservation: its row is marked settled (and kept, as the marker that the request
-- id was counted), its amount (0 if it was reaped) leaves the budget's reserved_micros, and
-- cost_micros (what the request's usage record charges) joins spent_micros
-- and is kept as the reservation's settled_micros. A
-- reservation settled already is not found (0 rows; a concurrent settlement waits for the row
-- and then finds it settled): settling is idempotent, so a settlement retried after an unknown
-- outcome, or a retry's settlement of a request id counted already, counts once.
WITH done AS (
    UPDATE key_reservations SET settled_at = now(), settled_micros = @cost_micros::bigint
    WHERE key_reservations.key_id = @key_id AND key_reservations.request_id = @request_id
      AND key_reservations.settled_at IS NULL
    RETURNING key_reservations.period_start, key_reservations.amount_micros
)
UPDATE key_budgets b
SET spent_micros = b.spent_micros + @cost_micros::bigint,
    reserved_micros = b.reserved_micros - done.amount_micros
FROM done
WHERE b.key_id = @key_id AND b.period_start = done.period_start;

-- name: LockKeyBudget :one
-- A key's budget in a period, locked until the transaction ends: the settlement of a bill beyond
-- its reservation (SettleKeyReservationBeyond) reads what the cap has free and adds to the spend
-- while no other reservation or settlement of the key's period moves it.
SELECT spent_micros, reserved_micros FROM key_budgets
WHERE key_id = @key_id AND period_start = @period_start
FOR UPDATE;

-- name: ReleaseKeyReservation :execrows
-- Ends a key reservation whose request is billed nothing under its request id (it never reached
-- an upstream, or its failed attempt's usage record went under an id of its own): its amount
-- leaves the budget's reserved_micros and its row is left as a reaped one (amount 0, not
-- settled), not as the marker of a request id counted: a retry with the same request id (an
-- agent's step after a failed model call), which the ledger bills, takes the row over and is
-- reserved against the cap and counted as any request. A reservation settled already is not
-- found (0 rows).
WITH old AS (
    SELECT r.period_start, r.amount_micros FROM key_reservations r
    WHERE r.key_id = @key_id AND r.request_id = @request_id AND r.settled_at IS NULL
    FOR UPDATE
), done AS (
    UPDATE key_reservations r SET amount_micros = 0, reaped = true
    FROM old
    WHERE r.key_id = @key_id AND r.request_id = @request_id
    RETURNING old.period_start, old.amount_micros
)
UPDATE key_budgets b
SET reserved_micros = b.reserved_micros - done.amount_micros
FROM done
WHERE b.key_id = @key_id AND b.period_start = done.period_start;

-- name: RenewKeyReservations :execrows
-- Extends the lease of every live reservation of the holder.
UPDATE key_reservations SET expires_at = now() + sqlc.arg(lease_millis)::bigint * interval '1 millisecond'
WHERE holder = @holder AND NOT reaped AND settled_at IS NULL;

-- name: ReapKeyReservations :execrows
-- Returns the reservations whose lease has expired (their process is gone) to their budgets:
-- of one key (key_id) or, when key_id is the nil uuid, of every key. A reaped reservation keeps its row,
-- with amount 0, until its request settles, so that a late settlement still counts its cost.
-- One reaper at a time (a transaction-level advisory lock, tried once: a reaper that does not
-- get it reaps nothing, the one that has it is at work), so that two reapers never lock the
-- same budgets in different orders and deadlock.
WITH expired AS (
    SELECT r.key_id, r.request_id, r.period_start, r.amount_micros
    FROM key_reservations r
    WHERE (SELECT pg_try_advisory_xact_lock(7310514401))
      AND NOT r.reaped AND r.settled_at IS NULL AND r.expires_at < now()
      AND (@key_id::uuid = '00000000-0000-0000-0000-000000000000'::uuid OR r.key_id = @key_id::uuid)
    ORDER BY r.key_id, r.request_id
    FOR UPDATE SKIP LOCKED
), marked AS (
    UPDATE key_reservations r SET amount_micros = 0, reaped = true
    FROM expired
    WHERE r.key_id = expired.key_id AND r.request_id = expired.request_id
    RETURNING r.key_id
), per_budget AS (
    SELECT expired.key_id, expired.period_start, SUM(expired.amount_micros)::bigint AS amount
    FROM expired GROUP BY expired.key_id, expired.period_start
)
UPDATE key_budgets b SET reserved_micros = b.reserved_micros - per_budget.amount
FROM per_budget
WHERE b.key_id = per_budget.key_id AND b.period_start = per_budget.period_start;

-- name: DeleteStaleKeyReservations :one
-- Deletes the reaped reservations whose lease ended more than retention_millis ago (a record
-- replayed later from a spill file is not counted against its key) and the settled ones
-- settled more than retention_millis ago (no retry of their request id can come any more).
WITH reaped AS (
    DELETE FROM key_reservations
    WHERE reaped AND settled_at IS NULL
      AND expires_at < now() - sqlc.arg(retention_millis)::bigint * interval '1 millisecond'
    RETURNING 1
), settled AS (
    DELETE FROM key_reservations
    WHERE settled_at < now() - sqlc.arg(retention_millis)::bigint * interval '1 millisecond'
    RETURNING 1
)
SELECT ((SELECT count(*) FROM reaped) + (SELECT count(*) FROM settled))::bigint AS deleted;

-- name: GetKeyBudget :one
-- A key's budget in a period (for tests and the operator).
SELECT * FROM key_budgets WHERE key_id = @key_id AND period_start = @period_start;

-- name: GetKeyBudgets :many
-- The budgets of several keys, each in its own period (key_ids[i] in period_starts[i]; the two
-- unnests in one select list are read side by side), in one statement for the Keys page. A key
-- without a row in its period has spent and reserved nothing there and is left out.
SELECT b.key_id, b.spent_micros, b.reserved_micros
FROM key_budgets b
JOIN (SELECT unnest(@key_ids::uuid[]) AS key_id, unnest(@period_starts::timestamptz[]) AS period_start) AS p
  ON b.key_id = p.key_id AND b.period_start = p.period_start;
