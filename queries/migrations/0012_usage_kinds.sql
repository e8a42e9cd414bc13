-- 0012: usage records that explain the bill (issue 18). A request's tokens are priced per kind,
-- as the providers publish their prices: uncached input, input read from the provider's prompt
-- cache, input written to it for five minutes or for one hour, and output (reasoning tokens
-- are output: reasoning_tokens is the part of output_tokens spent on reasoning). Every record
-- written from now on carries the counts per kind, the price it was billed at (price: the
-- rates in micro-units per million tokens of each kind, the long-context tier, and the catalog
-- entry and its date when the price came from the catalog), the cost of each kind, and what of
-- that cost was not billed (waived_micros: the part above the request's reservation, or all of
-- it for an answer that never reached its client), so that
--
--   cost_micros = input_cost_micros + cache_read_cost_micros + cache_write_5m_cost_micros
--               + cache_write_1h_cost_micros + output_cost_micros + hosted_tool_micros
--               - waived_micros
--
-- holds on every priced row (the check below), and each kind's cost is its count times its
-- rate divided by a million, rounded up (impl/price.Cost): the bill is reproducible from the
-- row alone.
--
-- input_tokens keeps its meaning (every input token, cache reads and writes included), so the
-- rows written before this migration stay valid as they are: their cache counts are 0, their
-- price is NULL (they were billed at the input and output prices alone, which the gateway's
-- configuration of the day held), and the check does not apply to them.
-- The uncached input is input_tokens less the three cache counts (never stored twice).
-- Adding columns with constant defaults rewrites nothing; the table-wide checks are added NOT
-- VALID (they hold for every old row by construction, and PostgreSQL enforces them on every
-- new one), so the migration does not scan a large table.
ALTER TABLE usage_records
    ADD COLUMN cache_read_tokens          bigint NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    ADD COLUMN cache_write_5m_tokens      bigint NOT NULL DEFAULT 0 CHECK (cache_write_5m_tokens >= 0),
    ADD COLUMN cache_write_1h_tokens      bigint NOT NULL DEFAULT 0 CHECK (cache_write_1h_tokens >= 0),
    ADD COLUMN reasoning_tokens           bigint NOT NULL DEFAULT 0 CHECK (reasoning_tokens >= 0),
    ADD COLUMN service_tier               text NOT NULL DEFAULT '',
    ADD COLUMN price                      jsonb,
    ADD COLUMN input_cost_micros          bigint NOT NULL DEFAULT 0 CHECK (input_cost_micros >= 0),
    ADD COLUMN cache_read_cost_micros     bigint NOT NULL DEFAULT 0 CHECK (cache_read_cost_micros >= 0),
    ADD COLUMN cache_write_5m_cost_micros bigint NOT NULL DEFAULT 0 CHECK (cache_write_5m_cost_micros >= 0),
    ADD COLUMN cache_write_1h_cost_micros bigint NOT NULL DEFAULT 0 CHECK (cache_write_1h_cost_micros >= 0),
    ADD COLUMN output_cost_micros         bigint NOT NULL DEFAULT 0 CHECK (output_cost_micros >= 0),
    ADD COLUMN waived_micros              bigint NOT NULL DEFAULT 0 CHECK (waived_micros >= 0),
    -- What the cache reads saved against the uncached input price, less what the cache writes
    -- cost above it (negative when a request wrote more than it read); 0 for rows priced
    -- before this migration.
    ADD COLUMN cache_savings_micros       bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT usage_records_cache_within_input
        CHECK (cache_read_tokens + cache_write_5m_tokens + cache_write_1h_tokens <= input_tokens) NOT VALID,
    ADD CONSTRAINT usage_records_reasoning_within_output CHECK (reasoning_tokens <= output_tokens) NOT VALID,
    ADD CONSTRAINT usage_records_cost_reproducible CHECK (price IS NULL OR cost_micros =
        input_cost_micros + cache_read_cost_micros + cache_write_5m_cost_micros + cache_write_1h_cost_micros
        + output_cost_micros + hosted_tool_micros - waived_micros) NOT VALID;

-- usage_daily also keeps the day's tokens per kind and the savings from caching, for the Usage
-- page (old days count their tokens as uncached input and output, as they were billed).
ALTER TABLE usage_daily
    ADD COLUMN input_tokens          bigint NOT NULL DEFAULT 0,
    ADD COLUMN cache_read_tokens     bigint NOT NULL DEFAULT 0,
    ADD COLUMN cache_write_tokens    bigint NOT NULL DEFAULT 0,
    ADD COLUMN output_tokens         bigint NOT NULL DEFAULT 0,
    ADD COLUMN cache_savings_micros  bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION usage_daily_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_daily AS d (account_id, day, model, api_key_id, requests, cost_micros,
                                  input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, cache_savings_micros)
    SELECT n.account_id, (n.started_at AT TIME ZONE 'UTC')::date, n.model,
           COALESCE(n.api_key_id, '00000000-0000-0000-0000-000000000000'::uuid), count(*), sum(n.cost_micros),
           sum(n.input_tokens), sum(n.cache_read_tokens), sum(n.cache_write_5m_tokens + n.cache_write_1h_tokens),
           sum(n.output_tokens), sum(n.cache_savings_micros)
    FROM new_usage n
    GROUP BY 1, 2, 3, 4
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (account_id, day, model, api_key_id)
    DO UPDATE SET requests = d.requests + EXCLUDED.requests, cost_micros = d.cost_micros + EXCLUDED.cost_micros,
                  input_tokens = d.input_tokens + EXCLUDED.input_tokens,
                  cache_read_tokens = d.cache_read_tokens + EXCLUDED.cache_read_tokens,
                  cache_write_tokens = d.cache_write_tokens + EXCLUDED.cache_write_tokens,
                  output_tokens = d.output_tokens + EXCLUDED.output_tokens,
                  cache_savings_micros = d.cache_savings_micros + EXCLUDED.cache_savings_micros;
    RETURN NULL;
END
$$;

UPDATE usage_daily d SET input_tokens = s.input_tokens, output_tokens = s.output_tokens
FROM (SELECT account_id, (started_at AT TIME ZONE 'UTC')::date AS day, model,
             COALESCE(api_key_id, '00000000-0000-0000-0000-000000000000'::uuid) AS api_key_id,
             sum(input_tokens)::bigint AS input_tokens, sum(output_tokens)::bigint AS output_tokens
      FROM usage_records GROUP BY 1, 2, 3, 4) s
WHERE d.account_id = s.account_id AND d.day = s.day AND d.model = s.model AND d.api_key_id = s.api_key_id;
