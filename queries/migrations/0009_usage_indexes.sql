-- 0009: what the web application's Usage page reads (issue 14; impl/usageview): the request
-- log's indexes and usage_daily, the account's spend per UTC day, model and key, kept by a
-- trigger. docs/usage-page.md has the measurements on two million rows that chose them.
--
-- The migration runs in one transaction and locks usage_records against writes until it
-- commits (the usage writer waits; nothing is lost): the rollup's backfill and its trigger
-- must see the same rows. On a large existing table the CREATE INDEX statements are the long
-- part: build them first by hand with CREATE INDEX CONCURRENTLY under the same names, and
-- IF NOT EXISTS skips them here.
LOCK TABLE usage_records IN SHARE ROW EXCLUSIVE MODE;

-- The request log, newest first, and its keyset cursor (started_at, id): a page is one index
-- range scan that stops after the page's rows, however deep the cursor.
CREATE INDEX IF NOT EXISTS usage_records_account_started_idx
    ON usage_records (account_id, started_at DESC, id DESC);

-- The request log filtered by key: an account may have many keys, each a small share of its
-- rows. (0007's usage_records_key_started_idx has no id to break ties: the generic plan of a
-- prepared statement then read all of a key's rows and sorted them, 0.27 s for 40,000 rows.)
CREATE INDEX IF NOT EXISTS usage_records_account_key_started_idx
    ON usage_records (account_id, api_key_id, started_at DESC, id DESC)
    WHERE api_key_id IS NOT NULL;

-- The request log filtered by model: a rarely used model would otherwise be found by walking
-- the account's whole log.
CREATE INDEX IF NOT EXISTS usage_records_account_model_started_idx
    ON usage_records (account_id, model, started_at DESC, id DESC);

-- usage_daily is the account's spend per UTC day (of started_at), model and key (the nil uuid
-- for requests without one): the daily chart, its totals and the burn rate read a few rows a
-- day here instead of every request. It is kept in the usage writer's transaction by the
-- statement trigger below, from the rows each INSERT really inserted (a record skipped as
-- already written is not in the transition table), so it is always the sum of usage_records
-- (the writer locks the batch's accounts first, so two writers never update one account's rows
-- at once). Rows of usage_records are never updated; deleting old ones (a retention job) leaves
-- the history of spend here.
CREATE TABLE usage_daily (
    account_id  uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    day         date NOT NULL,
    model       text NOT NULL,
    api_key_id  uuid NOT NULL,
    requests    bigint NOT NULL CHECK (requests >= 0),
    cost_micros bigint NOT NULL CHECK (cost_micros >= 0),
    PRIMARY KEY (account_id, day, model, api_key_id)
);

CREATE FUNCTION usage_daily_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_daily AS d (account_id, day, model, api_key_id, requests, cost_micros)
    SELECT n.account_id, (n.started_at AT TIME ZONE 'UTC')::date, n.model,
           COALESCE(n.api_key_id, '00000000-0000-0000-0000-000000000000'::uuid), count(*), sum(n.cost_micros)
    FROM new_usage n
    GROUP BY 1, 2, 3, 4
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (account_id, day, model, api_key_id)
    DO UPDATE SET requests = d.requests + EXCLUDED.requests, cost_micros = d.cost_micros + EXCLUDED.cost_micros;
    RETURN NULL;
END
$$;

CREATE TRIGGER usage_daily_add AFTER INSERT ON usage_records
    REFERENCING NEW TABLE AS new_usage
    FOR EACH STATEMENT EXECUTE FUNCTION usage_daily_add();

INSERT INTO usage_daily (account_id, day, model, api_key_id, requests, cost_micros)
SELECT account_id, (started_at AT TIME ZONE 'UTC')::date, model,
       COALESCE(api_key_id, '00000000-0000-0000-0000-000000000000'::uuid), count(*), sum(cost_micros)
FROM usage_records
GROUP BY 1, 2, 3, 4;
