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
-- (UsageViewKeyLabels), not joined row by row.
SELECT u.id, u.request_id, u.started_at, u.finished_at, u.route, u.model, u.provider, u.upstream_model,
       u.api_key_id,
       u.input_tokens, u.output_tokens, u.cost_micros, u.hosted_tool_calls, u.hosted_tool_micros,
       u.status, u.on_credit
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
       u.status, u.on_credit
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
       u.status, u.on_credit
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
-- usage_daily cannot give (it reads every request of those days).
SELECT date_trunc('day', started_at, @tz::text)::timestamptz AS day, model AS group_key,
       SUM(cost_micros)::bigint AS cost_micros, COUNT(*)::bigint AS requests
FROM usage_records
WHERE account_id = @account_id AND started_at >= @from_time::timestamptz AND started_at < @to_time::timestamptz
GROUP BY 1, 2;

-- name: UsageViewDailyByKey :many
-- UsageViewDailyByModel per key (the nil uuid for requests that came with none).
SELECT date_trunc('day', started_at, @tz::text)::timestamptz AS day,
       COALESCE(api_key_id, '00000000-0000-0000-0000-000000000000'::uuid)::uuid AS group_key,
       SUM(cost_micros)::bigint AS cost_micros, COUNT(*)::bigint AS requests
FROM usage_records
WHERE account_id = @account_id AND started_at >= @from_time::timestamptz AND started_at < @to_time::timestamptz
GROUP BY 1, 2;

-- name: UsageViewKeyLabels :many
-- The names, prefixes and last four characters (display_suffix, empty for keys made before it
-- was kept) of the account's keys among @ids (another account's id finds nothing).
SELECT id, name, display_prefix, display_suffix FROM api_keys WHERE account_id = @account_id AND id = ANY(@ids::uuid[]);

-- name: UsageViewRollupByModel :many
-- The account's spend per UTC day and model from usage_daily, for the days from @from_day
-- to the day before @to_day.
SELECT (day::timestamp AT TIME ZONE 'UTC')::timestamptz AS day, model AS group_key,
       SUM(cost_micros)::bigint AS cost_micros, SUM(requests)::bigint AS requests
FROM usage_daily
WHERE account_id = @account_id
  AND day >= @from_day::date AND day < @to_day::date
GROUP BY 1, 2;

-- name: UsageViewRollupByKey :many
-- UsageViewRollupByModel per key (the nil uuid for requests that came with none).
SELECT (day::timestamp AT TIME ZONE 'UTC')::timestamptz AS day, api_key_id AS group_key,
       SUM(cost_micros)::bigint AS cost_micros, SUM(requests)::bigint AS requests
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
