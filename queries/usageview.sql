-- name: UsageViewAccountBalance :one
-- The account's balance and the part of it that gateway processes hold (impl/usageview reads
-- every query of this file scoped by an account id taken from the signed-in session).
SELECT balance_micros, held_micros FROM accounts WHERE id = @account_id;

-- name: UsageViewLogPage :many
-- One keyset page of the request log, newest first. Every query of the Usage page is scoped by
-- account_id, which the caller takes from the signed-in session. The request log pages are
-- keyset pages on (started_at, id), newest first: @before_started/@before_id is the last row
-- of the previous page (or a bound above every row for the first page), and @lim is the page
-- size plus one, so the caller knows whether there is a next page. The three page queries
-- differ only in the index they can use (migration 0009): a literal condition on api_key_id or
-- model, not an optional one, is what lets a prepared statement's generic plan use the key or
-- the model index. Route and status, and the other of key and model, are optional filters
-- ('' or the nil uuid: any). The keys' names are looked up once per page
-- (UsageViewKeyLabels), not joined row by row. Each row carries what explains its cost (migration
-- 0012): the tokens per kind, the price (jsonb, a few hundred bytes kept in the row) and each
-- kind's cost, so the page shows how a cost was made without a query per row.
SELECT u.id, u.request_id, u.started_at, u.finished_at, u.route, u.model, u.provider, u.upstream_model,
       u.api_key_id,
       u.input_tokens, u.output_tokens, u.cost_micros, u.hosted_tool_calls, u.hosted_tool_micros,
       u.status, u.on_credit,
       u.cache_read_tokens, u.cache_write_5m_tokens, u.cache_write_1h_tokens, u.reasoning_tokens,
       u.service_tier, u.price, u.input_cost_micros, u.cache_read_cost_micros, u.cache_write_5m_cost_micros,
       u.cache_write_1h_cost_micros, u.output_cost_micros, u.waived_micros, u.cache_savings_micros, u.trace_id,
       u.fitted_output_tokens
FROM usage_records u
WHERE u.account_id = @account_id
  AND u.started_at >= @from_time::timestamptz AND u.started_at < @to_time::timestamptz
  AND (u.started_at, u.id) < (@before_started::timestamptz, @before_id::bigint)
  AND (@model::text = '' OR u.model = @model::text)
  AND (@api_key_id::uuid = '00000000-0000-0000-0000-000000000000'::uuid OR u.api_key_id = @api_key_id::uuid)
  AND (@route::text = '' OR u.route = @route::text)
  AND (@status::text = '' OR u.status = @status::text)
ORDER BY u.started_at DESC, u.id DESC
LIMIT @lim;

-- name: UsageViewLogPageByKey :many
SELECT u.id, u.request_id, u.started_at, u.finished_at, u.route, u.model, u.provider, u.upstream_model,
       u.api_key_id,
       u.input_tokens, u.output_tokens, u.cost_micros, u.hosted_tool_calls, u.hosted_tool_micros,
       u.status, u.on_credit,
       u.cache_read_tokens, u.cache_write_5m_tokens, u.cache_write_1h_tokens, u.reasoning_tokens,
       u.service_tier, u.price, u.input_cost_micros, u.cache_read_cost_micros, u.cache_write_5m_cost_micros,
       u.cache_write_1h_cost_micros, u.output_cost_micros, u.waived_micros, u.cache_savings_micros, u.trace_id,
       u.fitted_output_tokens
FROM usage_records u
WHERE u.account_id = @account_id AND u.api_key_id = @api_key_id::uuid
  AND u.started_at >= @from_time::timestamptz AND u.started_at < @to_time::timestamptz
  AND (u.started_at, u.id) < (@before_started::timestamptz, @before_id::bigint)
  AND (@model::text = '' OR u.model = @model::text)
  AND (@route::text = '' OR u.route = @route::text)
  AND (@status::text = '' OR u.status = @status::text)
ORDER BY u.started_at DESC, u.id DESC
LIMIT @lim;

-- name: UsageViewLogPageByModel :many
SELECT u.id, u.request_id, u.started_at, u.finished_at, u.route, u.model, u.provider, u.upstream_model,
       u.api_key_id,
       u.input_tokens, u.output_tokens, u.cost_micros, u.hosted_tool_calls, u.hosted_tool_micros,
       u.status, u.on_credit,
       u.cache_read_tokens, u.cache_write_5m_tokens, u.cache_write_1h_tokens, u.reasoning_tokens,
       u.service_tier, u.price, u.input_cost_micros, u.cache_read_cost_micros, u.cache_write_5m_cost_micros,
       u.cache_write_1h_cost_micros, u.output_cost_micros, u.waived_micros, u.cache_savings_micros, u.trace_id,
       u.fitted_output_tokens
FROM usage_records u
WHERE u.account_id = @account_id AND u.model = @model::text
  AND u.started_at >= @from_time::timestamptz AND u.started_at < @to_time::timestamptz
  AND (u.started_at, u.id) < (@before_started::timestamptz, @before_id::bigint)
  AND (@route::text = '' OR u.route = @route::text)
  AND (@status::text = '' OR u.status = @status::text)
ORDER BY u.started_at DESC, u.id DESC
LIMIT @lim;

-- name: UsageViewDailyByModel :many
-- The account's spend per day (midnight to midnight in the time zone @tz) and model, between
-- @from_time and @to_time, from usage_records: for a time zone other than UTC, whose days
-- usage_daily cannot give (it reads every request of those days). With the spend come the tokens
-- per kind (input_tokens is every input token; cache_write_tokens both cache writes) and what
-- prompt caching saved, as usage_daily keeps them.
SELECT date_trunc('day', started_at, @tz::text)::timestamptz AS day, model AS group_key,
       SUM(cost_micros)::bigint AS cost_micros, COUNT(*)::bigint AS requests,
       SUM(input_tokens)::bigint AS input_tokens, SUM(cache_read_tokens)::bigint AS cache_read_tokens,
       SUM(cache_write_5m_tokens + cache_write_1h_tokens)::bigint AS cache_write_tokens,
       SUM(output_tokens)::bigint AS output_tokens, SUM(cache_savings_micros)::bigint AS cache_savings_micros
FROM usage_records
WHERE account_id = @account_id AND started_at >= @from_time::timestamptz AND started_at < @to_time::timestamptz
GROUP BY 1, 2;

-- name: UsageViewDailyByKey :many
-- UsageViewDailyByModel per key (the nil uuid for requests that came with none).
SELECT date_trunc('day', started_at, @tz::text)::timestamptz AS day,
       COALESCE(api_key_id, '00000000-0000-0000-0000-000000000000'::uuid)::uuid AS group_key,
       SUM(cost_micros)::bigint AS cost_micros, COUNT(*)::bigint AS requests,
       SUM(input_tokens)::bigint AS input_tokens, SUM(cache_read_tokens)::bigint AS cache_read_tokens,
       SUM(cache_write_5m_tokens + cache_write_1h_tokens)::bigint AS cache_write_tokens,
       SUM(output_tokens)::bigint AS output_tokens, SUM(cache_savings_micros)::bigint AS cache_savings_micros
FROM usage_records
WHERE account_id = @account_id AND started_at >= @from_time::timestamptz AND started_at < @to_time::timestamptz
GROUP BY 1, 2;

-- name: UsageViewKeyLabels :many
-- The names, prefixes and last four characters (display_suffix, empty for keys made before it
-- was kept) of the account's keys among @ids (another account's id finds nothing).
SELECT id, name, display_prefix, display_suffix FROM api_keys WHERE account_id = @account_id AND id = ANY(@ids::uuid[]);

-- name: UsageViewRollupByModel :many
-- The account's spend, tokens per kind and savings from caching per UTC day and model from
-- usage_daily, for the days from @from_day to the day before @to_day.
SELECT (day::timestamp AT TIME ZONE 'UTC')::timestamptz AS day, model AS group_key,
       SUM(cost_micros)::bigint AS cost_micros, SUM(requests)::bigint AS requests,
       SUM(input_tokens)::bigint AS input_tokens, SUM(cache_read_tokens)::bigint AS cache_read_tokens,
       SUM(cache_write_tokens)::bigint AS cache_write_tokens,
       SUM(output_tokens)::bigint AS output_tokens, SUM(cache_savings_micros)::bigint AS cache_savings_micros
FROM usage_daily
WHERE account_id = @account_id
  AND day >= @from_day::date AND day < @to_day::date
GROUP BY 1, 2;

-- name: UsageViewRollupByKey :many
-- UsageViewRollupByModel per key (the nil uuid for requests that came with none).
SELECT (day::timestamp AT TIME ZONE 'UTC')::timestamptz AS day, api_key_id AS group_key,
       SUM(cost_micros)::bigint AS cost_micros, SUM(requests)::bigint AS requests,
       SUM(input_tokens)::bigint AS input_tokens, SUM(cache_read_tokens)::bigint AS cache_read_tokens,
       SUM(cache_write_tokens)::bigint AS cache_write_tokens,
       SUM(output_tokens)::bigint AS output_tokens, SUM(cache_savings_micros)::bigint AS cache_savings_micros
FROM usage_daily
WHERE account_id = @account_id
  AND day >= @from_day::date AND day < @to_day::date
GROUP BY 1, 2;

-- name: UsageViewSpendSince :one
-- What the account's requests cost from the UTC day @since_day on (the burn rate's window),
-- from usage_daily.
SELECT COALESCE(SUM(cost_micros), 0)::bigint AS cost_micros, COALESCE(SUM(requests), 0)::bigint AS requests
FROM usage_daily
WHERE account_id = @account_id AND day >= @since_day::date;

-- name: UsageViewStatementBounds :one
-- The ledger entries of the account's statement for the period [@from_time, @to_time): those
-- after the last entry written before @from_time (opening_id, 0 when none) up to the last entry
-- written before @to_time (closing_id), with the balances after each (0 when there is none: an
-- account starts at 0 and every change of its balance is an entry). Entries of one account
-- are numbered in the order they moved its balance (each takes the account's row lock first),
-- so the entries between the two ids add up exactly to closing - opening. Their time is
-- when their transaction began, which may lag the order by the time spent waiting for that
-- lock: an entry stamped just after a boundary but numbered before an entry stamped just
-- before it belongs to the earlier period, so that the periods never overlap nor leave a gap.
-- Each bound is the first match of a walk down the ledger's ids from the newest, which reads
-- the entries written since the bound (credit_ledger has no index on its time).
SELECT COALESCE(o.id, 0)::bigint AS opening_id, COALESCE(o.balance_after_micros, 0)::bigint AS opening_micros,
       COALESCE(c.id, 0)::bigint AS closing_id, COALESCE(c.balance_after_micros, 0)::bigint AS closing_micros
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT l.id, l.balance_after_micros FROM credit_ledger l
    WHERE l.account_id = @account_id AND l.created_at < @from_time::timestamptz
    ORDER BY l.id DESC LIMIT 1
) AS o ON true
LEFT JOIN LATERAL (
    SELECT l.id, l.balance_after_micros FROM credit_ledger l
    WHERE l.account_id = @account_id AND l.created_at < @to_time::timestamptz
    ORDER BY l.id DESC LIMIT 1
) AS c ON true;

-- name: UsageViewStatementLines :many
-- One page of a statement's lines: the account's ledger entries after @after_id up to
-- @closing_id, in ledger order, each usage entry (idempotency key 'usage:' || request id) with
-- the account's usage record of that request id, which explains its cost (has_record false when
-- the record is gone, or for other entries). The page of entries is taken first, then joined:
-- one index lookup of usage_records per usage line of the page (a lateral lookup: with monthly
-- partitions the planner would otherwise hash every partition whole for a custom plan). A request starts before its usage entry is
-- written (the bound allows a day of clocks disagreeing), which lets PostgreSQL skip the monthly
-- partitions after the entry's (migration 0014); a record whose month was archived is not
-- here (has_record false), and impl/usageview reads it from the month's archive.
SELECT l.id, l.amount_micros, l.balance_after_micros, l.reason, l.idempotency_key, l.note, l.created_at,
       (u.id IS NOT NULL)::boolean AS has_record,
       COALESCE(u.request_id, '')::text AS request_id,
       COALESCE(u.started_at, l.created_at)::timestamptz AS started_at,
       COALESCE(u.model, '')::text AS model, COALESCE(u.route, '')::text AS route,
       COALESCE(u.provider, '')::text AS provider, COALESCE(u.upstream_model, '')::text AS upstream_model,
       COALESCE(u.api_key_id, '00000000-0000-0000-0000-000000000000'::uuid)::uuid AS api_key_id,
       COALESCE(u.input_tokens, 0)::bigint AS input_tokens, COALESCE(u.output_tokens, 0)::bigint AS output_tokens,
       COALESCE(u.cache_read_tokens, 0)::bigint AS cache_read_tokens,
       COALESCE(u.cache_write_5m_tokens, 0)::bigint AS cache_write_5m_tokens,
       COALESCE(u.cache_write_1h_tokens, 0)::bigint AS cache_write_1h_tokens,
       COALESCE(u.reasoning_tokens, 0)::bigint AS reasoning_tokens,
       COALESCE(u.service_tier, '')::text AS service_tier, u.price,
       COALESCE(u.input_cost_micros, 0)::bigint AS input_cost_micros,
       COALESCE(u.cache_read_cost_micros, 0)::bigint AS cache_read_cost_micros,
       COALESCE(u.cache_write_5m_cost_micros, 0)::bigint AS cache_write_5m_cost_micros,
       COALESCE(u.cache_write_1h_cost_micros, 0)::bigint AS cache_write_1h_cost_micros,
       COALESCE(u.output_cost_micros, 0)::bigint AS output_cost_micros,
       COALESCE(u.hosted_tool_micros, 0)::bigint AS hosted_tool_micros, u.hosted_tool_calls,
       COALESCE(u.waived_micros, 0)::bigint AS waived_micros,
       COALESCE(u.cache_savings_micros, 0)::bigint AS cache_savings_micros,
       COALESCE(u.cost_micros, 0)::bigint AS cost_micros,
       COALESCE(u.on_credit, false)::boolean AS on_credit,
       COALESCE(u.fitted_output_tokens, 0)::bigint AS fitted_output_tokens
FROM (
    SELECT e.id, e.account_id, e.amount_micros, e.balance_after_micros, e.reason, e.idempotency_key, e.note, e.created_at
    FROM credit_ledger e
    WHERE e.account_id = @account_id AND e.id > @after_id::bigint AND e.id <= @closing_id::bigint
    ORDER BY e.id
    LIMIT @lim
) AS l
LEFT JOIN LATERAL (
    SELECT r.* FROM usage_records r
    WHERE l.reason = 'usage' AND r.account_id = l.account_id AND r.request_id = substr(l.idempotency_key, 7)
      AND r.started_at <= l.created_at + interval '1 day'
    LIMIT 1
) AS u ON true
ORDER BY l.id;

-- name: UsageArchivedMonths :many
-- The months of usage_records archived to Parquet (migration 0014), oldest first: every read
-- of a period that covers one of them reads it from its object as well.
SELECT month, object_key, records, cost_micros, object_bytes, archived_at FROM usage_archives ORDER BY month;

-- name: UsageCreatePartition :one
-- Makes the partition of the UTC month that starts at @month unless it exists or the month is
-- archived; true when it made it (usage_partition_create, migration 0014).
SELECT usage_partition_create(@month::date)::boolean AS created;

-- name: UsagePartitionMonths :many
-- The months that have a partition of usage_records (usage_partition_months, migration 0014),
-- oldest first.
SELECT m::date AS month FROM usage_partition_months() AS m ORDER BY 1;

-- name: UsageMonthTotals :one
-- The number of usage records that started in [@from_time, @to_time) and their cost, of every
-- account (the archiver's check of a month).
SELECT COUNT(*)::bigint AS records, COALESCE(SUM(cost_micros), 0)::bigint AS cost_micros
FROM usage_records
WHERE started_at >= @from_time::timestamptz AND started_at < @to_time::timestamptz;

-- name: UsageMonthRows :many
-- One batch of the usage records of every account that started in [@from_time, @to_time), in
-- id order after @after_id: the archiver reads a month in batches (one index range scan of the
-- month's partition each).
SELECT id, account_id, request_id, api_key_id, model, route, provider, upstream_model, input_tokens, output_tokens,
       cost_micros, status, started_at, finished_at, recorded_at, hosted_tool_calls, hosted_tool_micros, on_credit,
       agent_session_id, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, reasoning_tokens,
       service_tier, price, input_cost_micros, cache_read_cost_micros, cache_write_5m_cost_micros,
       cache_write_1h_cost_micros, output_cost_micros, waived_micros, cache_savings_micros, trace_id,
       fitted_output_tokens
FROM usage_records
WHERE started_at >= @from_time::timestamptz AND started_at < @to_time::timestamptz AND id > @after_id::bigint
ORDER BY id
LIMIT @lim;

-- name: UsageRetirePartition :one
-- Records the month's archive and drops its partition when the partition holds exactly
-- @records rows costing @cost_micros (usage_partition_retire, migration 0014): false, and
-- nothing dropped, when it does not.
SELECT usage_partition_retire(@month::date, @object_key::text, @records::bigint, @cost_micros::bigint, @object_bytes::bigint)::boolean AS retired;

-- name: UsageTryArchiveLock :one
-- Takes the session-level advisory lock of usage archival if no other session holds it: one
-- gateway process archives at a time (impl/usagearchive).
SELECT pg_try_advisory_lock(hashtext('usage_records archive'))::boolean AS locked;

-- name: UsageArchiveUnlock :one
-- Releases the lock UsageTryArchiveLock took, on the same session.
SELECT pg_advisory_unlock(hashtext('usage_records archive'))::boolean AS unlocked;
