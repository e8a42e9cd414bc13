-- name: InsertUsageRecords :copyfrom
-- The batching writer copies a batch of usage records (none of them billed yet) in one COPY.
INSERT INTO usage_records (
    account_id, request_id, api_key_id, model, route, provider, upstream_model,
    input_tokens, output_tokens, cost_micros, status, started_at, finished_at
) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13);

-- name: ListBilledUsage :many
-- Of the given (account, request id) pairs, those already billed: with a usage ledger entry or
-- a usage record. The batching writer skips them, so that a batch flushed twice bills once.
SELECT b.account_id::uuid AS account_id, b.request_id::text AS request_id
FROM (SELECT unnest(@account_ids::uuid[]) AS account_id, unnest(@request_ids::text[]) AS request_id) AS b
WHERE EXISTS (
    SELECT 1 FROM credit_ledger l
    WHERE l.account_id = b.account_id AND l.idempotency_key = 'usage:' || b.request_id
) OR EXISTS (
    SELECT 1 FROM usage_records u
    WHERE u.account_id = b.account_id AND u.request_id = b.request_id
);

-- name: ChargeUsageBatch :many
-- Bills the usage records just copied (new_account_ids / new_request_ids) on the accounts of
-- the batch (account_ids, locked by the caller in this transaction), set-based: one usage
-- ledger entry per record (amount -cost, key usage:<request id>, balance_after running in
-- record order), and per account one decrement of the balance, of held_micros and of the
-- hold of the holder. The cost is drawn from that hold; only when the hold no longer covers
-- it (it expired and was released) from the free credit of the account (balance - held); whatever
-- neither covers is not billed, and the note of the entry says so, so the statement never fails a
-- check. Returns one row per account of the batch with the hold of the holder after the batch and a
-- fresh version (a new value from credit_hold_version when the holder has no hold).
WITH new_usage AS (
    SELECT u.id, u.account_id, u.request_id, u.cost_micros
    FROM usage_records u
    JOIN (SELECT unnest(@new_account_ids::uuid[]) AS account_id, unnest(@new_request_ids::text[]) AS request_id) AS n
      ON u.account_id = n.account_id AND u.request_id = n.request_id
), totals AS (
    SELECT new_usage.account_id, SUM(new_usage.cost_micros)::bigint AS total
    FROM new_usage GROUP BY new_usage.account_id
), caps AS (
    SELECT a.id AS account_id, a.balance_micros,
           COALESCE(t.total, 0)::bigint AS total,
           LEAST(COALESCE(t.total, 0), COALESCE(h.amount_micros, 0))::bigint AS from_hold,
           (a.balance_micros - a.held_micros)::bigint AS free
    FROM accounts a
    LEFT JOIN totals t ON t.account_id = a.id
    LEFT JOIN credit_holds h ON h.account_id = a.id AND h.holder = @holder::text
    WHERE a.id = ANY(@account_ids::uuid[])
), plan AS (
    SELECT caps.account_id, caps.balance_micros, caps.total, caps.from_hold,
           (caps.from_hold + LEAST(caps.total - caps.from_hold, caps.free))::bigint AS billed
    FROM caps
), charged AS (
    SELECT n.id, n.account_id, n.request_id, n.cost_micros, p.balance_micros,
           GREATEST(0, LEAST(n.cost_micros,
               p.billed - (SUM(n.cost_micros) OVER (PARTITION BY n.account_id ORDER BY n.id) - n.cost_micros)))::bigint AS amount
    FROM new_usage n JOIN plan p ON p.account_id = n.account_id
), ledger AS (
    INSERT INTO credit_ledger (account_id, amount_micros, balance_after_micros, reason, idempotency_key, note)
    SELECT c.account_id, -c.amount,
           c.balance_micros - SUM(c.amount) OVER (PARTITION BY c.account_id ORDER BY c.id),
           'usage', 'usage:' || c.request_id,
           CASE WHEN c.amount < c.cost_micros
                THEN format('cost %s micro-units, %s not billed: the credit hold had been released', c.cost_micros, c.cost_micros - c.amount)
                ELSE '' END
    FROM charged c
    ORDER BY c.id
    RETURNING credit_ledger.id
), moved AS (
    UPDATE accounts
    SET balance_micros = accounts.balance_micros - plan.billed,
        held_micros = accounts.held_micros - plan.from_hold
    FROM plan WHERE accounts.id = plan.account_id AND plan.billed > 0
    RETURNING accounts.id
), held AS (
    UPDATE credit_holds
    SET amount_micros = credit_holds.amount_micros - plan.from_hold,
        version = nextval('credit_hold_version')
    FROM plan WHERE credit_holds.account_id = plan.account_id AND credit_holds.holder = @holder::text
    RETURNING credit_holds.account_id, credit_holds.amount_micros, credit_holds.version
)
SELECT plan.account_id,
       plan.total::bigint AS total_micros,
       plan.billed::bigint AS billed_micros,
       (held.account_id IS NOT NULL)::boolean AS has_hold,
       COALESCE(held.amount_micros, 0)::bigint AS hold_micros,
       COALESCE(held.version, nextval('credit_hold_version'))::bigint AS hold_version
FROM plan
LEFT JOIN held ON held.account_id = plan.account_id;

-- name: ListUsageRecords :many
-- The newest usage records of the account, newest first.
SELECT * FROM usage_records WHERE account_id = $1 ORDER BY id DESC LIMIT $2;

-- name: SumUsageRecords :one
SELECT COUNT(*)::bigint AS records, COALESCE(SUM(cost_micros), 0)::bigint AS cost_micros
FROM usage_records WHERE account_id = $1;
