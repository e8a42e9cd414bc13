-- name: WriteUsageBatch :many
-- Writes and bills a batch of usage records in one statement, on the accounts of the batch
-- (account_ids, locked by the caller in this transaction; every record's account is one of
-- them). The records come as parallel arrays of equal length, one element per record.
--
-- The first step inserts the records; a record whose request was already billed (its usage
-- ledger entry, key usage:<request id>, exists: billed by an earlier batch, whatever start time
-- that record had and even when its month has since been archived and dropped) is skipped, and
-- so is one repeated in this batch (it conflicts on the unique index of (account, request id,
-- start time)), so a batch written twice bills once. Only the records inserted now go on: one
-- usage ledger entry each (amount -cost, key usage:<request id>, balance_after running in record
-- order), and per account one decrement of the balance, of held_micros and of the hold of the
-- holder. Usage ledger entries are written nowhere else, and the writer locks the batch's
-- accounts before this statement (whose snapshot therefore sees every earlier batch of them),
-- so the ledger's unique key is the idempotency check of usage_records (which, partitioned by
-- month since migration 0014, cannot have a unique index without the start time). trace_ids
-- are 16-byte trace ids, NULL for a request that was not traced.
--
-- The cost is drawn from that hold; what the hold does not cover (it expired and was released,
-- or the record was served on credit during a database outage, backed by no hold: on_credit,
-- billed after the records drawn from the hold) from the account's free credit (balance -
-- held), and, when that is not enough, from the holds: what is left of the writer's own, then
-- the others' (largest first), which give up what they must, each with a new version so that
-- its holder sees the change. Usage already served is billed whenever the balance covers it
-- (holds are credit set aside for requests to come); only what the balance does not cover is
-- not billed, the note of the entry saying so, so the statement never fails a check. A record
-- served on credit has a note saying so (and what was not billed, if anything). Returns
-- one row per account of the batch with the number of records written, the hold of the holder
-- after the batch and a fresh version (a new value from credit_hold_version when the holder has
-- no hold).
WITH new_usage AS (
    INSERT INTO usage_records (
        account_id, request_id, api_key_id, model, route, provider, upstream_model,
        input_tokens, output_tokens, cost_micros, status, started_at, finished_at,
        hosted_tool_calls, hosted_tool_micros, on_credit, agent_session_id,
        cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, reasoning_tokens, service_tier, price,
        input_cost_micros, cache_read_cost_micros, cache_write_5m_cost_micros, cache_write_1h_cost_micros,
        output_cost_micros, waived_micros, cache_savings_micros, trace_id, fitted_output_tokens
    )
    SELECT r.account_id, r.request_id, NULLIF(r.api_key_id, '00000000-0000-0000-0000-000000000000'::uuid),
           r.model, r.route, r.provider, r.upstream_model,
           r.input_tokens, r.output_tokens, r.cost_micros, r.status, r.started_at, r.finished_at,
           r.hosted_tool_calls, r.hosted_tool_micros, r.on_credit,
           NULLIF(r.agent_session_id, '00000000-0000-0000-0000-000000000000'::uuid),
           r.cache_read_tokens, r.cache_write_5m_tokens, r.cache_write_1h_tokens, r.reasoning_tokens, r.service_tier,
           r.price, r.input_cost_micros, r.cache_read_cost_micros, r.cache_write_5m_cost_micros,
           r.cache_write_1h_cost_micros, r.output_cost_micros, r.waived_micros, r.cache_savings_micros, r.trace_id,
           r.fitted_output_tokens
    FROM (
        SELECT unnest(@record_account_ids::uuid[]) AS account_id, unnest(@request_ids::text[]) AS request_id,
               unnest(@api_key_ids::uuid[]) AS api_key_id, unnest(@models::text[]) AS model,
               unnest(@routes::text[]) AS route, unnest(@providers::text[]) AS provider,
               unnest(@upstream_models::text[]) AS upstream_model, unnest(@input_tokens::bigint[]) AS input_tokens,
               unnest(@output_tokens::bigint[]) AS output_tokens, unnest(@cost_micros::bigint[]) AS cost_micros,
               unnest(@statuses::text[]) AS status, unnest(@started_at::timestamptz[]) AS started_at,
               unnest(@finished_at::timestamptz[]) AS finished_at,
               unnest(@hosted_tool_calls::jsonb[]) AS hosted_tool_calls,
               unnest(@hosted_tool_micros::bigint[]) AS hosted_tool_micros,
               unnest(@on_credit::boolean[]) AS on_credit,
               unnest(@agent_session_ids::uuid[]) AS agent_session_id,
               unnest(@cache_read_tokens::bigint[]) AS cache_read_tokens,
               unnest(@cache_write_5m_tokens::bigint[]) AS cache_write_5m_tokens,
               unnest(@cache_write_1h_tokens::bigint[]) AS cache_write_1h_tokens,
               unnest(@reasoning_tokens::bigint[]) AS reasoning_tokens,
               unnest(@service_tiers::text[]) AS service_tier,
               unnest(@prices::jsonb[]) AS price,
               unnest(@input_cost_micros::bigint[]) AS input_cost_micros,
               unnest(@cache_read_cost_micros::bigint[]) AS cache_read_cost_micros,
               unnest(@cache_write_5m_cost_micros::bigint[]) AS cache_write_5m_cost_micros,
               unnest(@cache_write_1h_cost_micros::bigint[]) AS cache_write_1h_cost_micros,
               unnest(@output_cost_micros::bigint[]) AS output_cost_micros,
               unnest(@waived_micros::bigint[]) AS waived_micros,
               unnest(@cache_savings_micros::bigint[]) AS cache_savings_micros,
               unnest(@trace_ids::bytea[]) AS trace_id,
               unnest(@fitted_output_tokens::bigint[]) AS fitted_output_tokens
    ) AS r
    WHERE NOT EXISTS (SELECT 1 FROM credit_ledger b
                      WHERE b.account_id = r.account_id AND b.idempotency_key = 'usage:' || r.request_id)
    ON CONFLICT (account_id, request_id, started_at) DO NOTHING
    RETURNING usage_records.id, usage_records.account_id, usage_records.request_id, usage_records.cost_micros,
              usage_records.on_credit
), totals AS (
    SELECT new_usage.account_id, SUM(new_usage.cost_micros)::bigint AS total, COUNT(*)::bigint AS records,
           COALESCE(SUM(new_usage.cost_micros) FILTER (WHERE NOT new_usage.on_credit), 0)::bigint AS hold_total
    FROM new_usage GROUP BY new_usage.account_id
), caps AS (
    SELECT a.id AS account_id, a.balance_micros, a.held_micros,
           COALESCE(t.total, 0)::bigint AS total,
           COALESCE(t.records, 0)::bigint AS records,
           (COALESCE(t.total, 0) - COALESCE(t.hold_total, 0))::bigint AS credit_total,
           LEAST(COALESCE(t.hold_total, 0), COALESCE(h.amount_micros, 0))::bigint AS from_hold
    FROM accounts a
    LEFT JOIN totals t ON t.account_id = a.id
    LEFT JOIN credit_holds h ON h.account_id = a.id AND h.holder = @holder::text
    WHERE a.id = ANY(@account_ids::uuid[])
), plan AS (
    -- Whatever the balance covers is billed (from_hold <= the holder's hold <= held <= balance,
    -- so billed >= from_hold). What the holds leave free may not cover it (credit served while
    -- the database was away, or a hold that expired and was released): then the holds give up
    -- the rest (cut), the writer's own first, so that held stays within the balance.
    SELECT caps.account_id, caps.balance_micros, caps.total, caps.records, caps.credit_total, caps.from_hold,
           LEAST(caps.total, caps.balance_micros)::bigint AS billed,
           GREATEST(0, (caps.held_micros - caps.from_hold) - (caps.balance_micros - LEAST(caps.total, caps.balance_micros)))::bigint AS cut
    FROM caps
), charged AS (
    SELECT n.id, n.account_id, n.request_id, n.cost_micros, n.on_credit, p.balance_micros,
           GREATEST(0, LEAST(n.cost_micros,
               p.billed - (SUM(n.cost_micros) OVER (PARTITION BY n.account_id ORDER BY n.on_credit, n.id) - n.cost_micros)))::bigint AS amount
    FROM new_usage n JOIN plan p ON p.account_id = n.account_id
), ledger AS (
    INSERT INTO credit_ledger (account_id, amount_micros, balance_after_micros, reason, idempotency_key, note)
    SELECT c.account_id, -c.amount,
           c.balance_micros - SUM(c.amount) OVER (PARTITION BY c.account_id ORDER BY c.id),
           'usage', 'usage:' || c.request_id,
           CASE WHEN c.on_credit AND c.amount < c.cost_micros
                THEN format('served on credit during a database outage: cost %s micro-units, %s not billed: the account''s balance did not cover it', c.cost_micros, c.cost_micros - c.amount)
                WHEN c.on_credit
                THEN 'served on credit during a database outage'
                WHEN c.amount < c.cost_micros
                THEN format('cost %s micro-units, %s not billed: the credit hold had been released and the account''s balance did not cover it', c.cost_micros, c.cost_micros - c.amount)
                ELSE '' END
    FROM charged c
    ORDER BY c.id
    RETURNING credit_ledger.id
), moved AS (
    UPDATE accounts
    SET balance_micros = accounts.balance_micros - plan.billed,
        held_micros = accounts.held_micros - plan.from_hold - plan.cut
    FROM plan WHERE accounts.id = plan.account_id AND plan.billed > 0
    RETURNING accounts.id
), cuts AS (
    -- Each hold of the batch's accounts gives: the writer's its records' from_hold, and then,
    -- while plan.cut is not covered, what is left of each hold, the writer's first, then the
    -- largest. A hold that changes gets a new version, so its holder sees it changed.
    SELECT h.id, h.account_id, h.holder = @holder::text AS own, o.from_hold + o.cut AS taken
    FROM (
        SELECT h.id,
               CASE WHEN h.holder = @holder::text THEN p.from_hold ELSE 0 END AS from_hold,
               GREATEST(0, LEAST(h.amount_micros - CASE WHEN h.holder = @holder::text THEN p.from_hold ELSE 0 END,
                   p.cut - (SUM(h.amount_micros - CASE WHEN h.holder = @holder::text THEN p.from_hold ELSE 0 END)
                                OVER (PARTITION BY h.account_id ORDER BY h.holder <> @holder::text, h.amount_micros DESC, h.id)
                            - (h.amount_micros - CASE WHEN h.holder = @holder::text THEN p.from_hold ELSE 0 END))))::bigint AS cut
        FROM credit_holds h JOIN plan p ON p.account_id = h.account_id
        WHERE h.holder = @holder::text OR p.cut > 0
    ) AS o JOIN credit_holds h ON h.id = o.id
), held AS (
    UPDATE credit_holds
    SET amount_micros = credit_holds.amount_micros - cuts.taken,
        version = nextval('credit_hold_version')
    FROM cuts WHERE credit_holds.id = cuts.id AND (cuts.own OR cuts.taken > 0)
    RETURNING credit_holds.account_id, credit_holds.holder, credit_holds.amount_micros, credit_holds.version
), own_held AS (
    SELECT held.account_id, held.amount_micros, held.version FROM held WHERE held.holder = @holder::text
)
SELECT plan.account_id,
       plan.records::bigint AS written_records,
       plan.total::bigint AS total_micros,
       plan.billed::bigint AS billed_micros,
       plan.credit_total::bigint AS credit_micros,
       (own_held.account_id IS NOT NULL)::boolean AS has_hold,
       COALESCE(own_held.amount_micros, 0)::bigint AS hold_micros,
       COALESCE(own_held.version, nextval('credit_hold_version'))::bigint AS hold_version
FROM plan
LEFT JOIN own_held ON own_held.account_id = plan.account_id;

-- name: ListUsageRecords :many
-- The newest usage records of the account, newest first.
SELECT * FROM usage_records WHERE account_id = $1 ORDER BY id DESC LIMIT $2;

-- name: SumUsageRecords :one
SELECT COUNT(*)::bigint AS records, COALESCE(SUM(cost_micros), 0)::bigint AS cost_micros
FROM usage_records WHERE account_id = $1;
