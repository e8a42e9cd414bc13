-- 0014: usage at scale (issue 21). usage_records becomes a table partitioned by month of
-- started_at (the column every read of the Usage page, the request log, the chart and the
-- keys' spend filters and sorts on), so that a month is one table: its indexes stay the size of
-- a month, and a month past the configured retention is archived to Parquet in the object
-- store and dropped whole (impl/usagearchive) instead of deleted row by row.
--
-- The existing table is converted in place, in this migration's one transaction: it is
-- renamed, the partitioned table is created with the same columns (and trace_id, below), a
-- partition is made for every month that has rows (and this month and the next two), the rows
-- are copied with their ids, and the old table is dropped. The copy rewrites the table once
-- and holds the usage writer off until it commits (the writer waits and retries; nothing is
-- lost); docs/speed.md has how long it takes per million rows.
--
-- Keys on a partitioned table must contain the partition key: the primary key is (id,
-- started_at) and the request's uniqueness (account_id, request_id, started_at). A request is
-- still billed once: its usage ledger entry ('usage:' || request_id, unique per account in
-- credit_ledger) is what the writer checks (WriteUsageBatch), whatever its start time, and
-- stays when the month is archived.
--
-- PostgreSQL 15 has no identity columns on partitioned tables: ids come from the sequence
-- usage_record_ids, which goes on from the old table's last id.
LOCK TABLE usage_records IN ACCESS EXCLUSIVE MODE;
ALTER TABLE usage_records RENAME TO usage_records_unpartitioned;
DROP TRIGGER usage_daily_add ON usage_records_unpartitioned;
-- Its indexes go first: the new table's take their names.
ALTER TABLE usage_records_unpartitioned DROP CONSTRAINT usage_records_pkey,
    DROP CONSTRAINT usage_records_account_id_request_id_key;
DROP INDEX usage_records_account_finished_idx, usage_records_account_started_idx, usage_records_account_key_started_idx,
    usage_records_account_model_started_idx, usage_records_key_started_idx, usage_records_agent_session_idx;

CREATE SEQUENCE usage_record_ids AS bigint;
SELECT setval('usage_record_ids', COALESCE((SELECT max(id) FROM usage_records_unpartitioned), 0) + 1, false);

CREATE TABLE usage_records (
    id                         bigint NOT NULL DEFAULT nextval('usage_record_ids'),
    account_id                 uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    request_id                 text NOT NULL CHECK (request_id <> ''),
    api_key_id                 uuid,
    model                      text NOT NULL,
    route                      text NOT NULL,
    provider                   text NOT NULL,
    upstream_model             text NOT NULL,
    input_tokens               bigint NOT NULL CHECK (input_tokens >= 0),
    output_tokens              bigint NOT NULL CHECK (output_tokens >= 0),
    cost_micros                bigint NOT NULL CHECK (cost_micros >= 0),
    status                     text NOT NULL,
    started_at                 timestamptz NOT NULL,
    finished_at                timestamptz NOT NULL,
    recorded_at                timestamptz NOT NULL DEFAULT now(),
    hosted_tool_calls          jsonb,
    hosted_tool_micros         bigint NOT NULL DEFAULT 0 CHECK (hosted_tool_micros >= 0),
    on_credit                  boolean NOT NULL DEFAULT false,
    agent_session_id           uuid,
    cache_read_tokens          bigint NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_5m_tokens      bigint NOT NULL DEFAULT 0 CHECK (cache_write_5m_tokens >= 0),
    cache_write_1h_tokens      bigint NOT NULL DEFAULT 0 CHECK (cache_write_1h_tokens >= 0),
    reasoning_tokens           bigint NOT NULL DEFAULT 0 CHECK (reasoning_tokens >= 0),
    service_tier               text NOT NULL DEFAULT '',
    price                      jsonb,
    input_cost_micros          bigint NOT NULL DEFAULT 0 CHECK (input_cost_micros >= 0),
    cache_read_cost_micros     bigint NOT NULL DEFAULT 0 CHECK (cache_read_cost_micros >= 0),
    cache_write_5m_cost_micros bigint NOT NULL DEFAULT 0 CHECK (cache_write_5m_cost_micros >= 0),
    cache_write_1h_cost_micros bigint NOT NULL DEFAULT 0 CHECK (cache_write_1h_cost_micros >= 0),
    output_cost_micros         bigint NOT NULL DEFAULT 0 CHECK (output_cost_micros >= 0),
    waived_micros              bigint NOT NULL DEFAULT 0 CHECK (waived_micros >= 0),
    cache_savings_micros       bigint NOT NULL DEFAULT 0,
    -- The W3C trace id of the request (16 bytes; NULL when it was not traced): the usage
    -- record points at the request's trace (issue 20).
    trace_id                   bytea CHECK (trace_id IS NULL OR octet_length(trace_id) = 16),
    CONSTRAINT usage_records_cache_within_input
        CHECK (cache_read_tokens + cache_write_5m_tokens + cache_write_1h_tokens <= input_tokens),
    CONSTRAINT usage_records_reasoning_within_output CHECK (reasoning_tokens <= output_tokens),
    CONSTRAINT usage_records_cost_reproducible CHECK (price IS NULL OR cost_micros =
        input_cost_micros + cache_read_cost_micros + cache_write_5m_cost_micros + cache_write_1h_cost_micros
        + output_cost_micros + hosted_tool_micros - waived_micros),
    PRIMARY KEY (id, started_at),
    UNIQUE (account_id, request_id, started_at)
) PARTITION BY RANGE (started_at);
ALTER SEQUENCE usage_record_ids OWNED BY usage_records.id;

-- The indexes of 0007 and 0009, now one per partition (0002's (account_id, finished_at) is
-- not made again: no query reads it).
CREATE INDEX usage_records_account_started_idx ON usage_records (account_id, started_at DESC, id DESC);
CREATE INDEX usage_records_account_key_started_idx ON usage_records (account_id, api_key_id, started_at DESC, id DESC)
    WHERE api_key_id IS NOT NULL;
CREATE INDEX usage_records_account_model_started_idx ON usage_records (account_id, model, started_at DESC, id DESC);
CREATE INDEX usage_records_key_started_idx ON usage_records (api_key_id, started_at) INCLUDE (cost_micros)
    WHERE api_key_id IS NOT NULL;
CREATE INDEX usage_records_agent_session_idx ON usage_records (agent_session_id) WHERE agent_session_id IS NOT NULL;

-- The default partition takes a row whose month has no partition (a record replayed long after
-- its month was archived, or one from past the months made ahead), so that a write never fails
-- for want of a partition. usage_partition_create moves such rows into the month's partition
-- when it makes one.
CREATE TABLE usage_records_default PARTITION OF usage_records DEFAULT;

-- usage_archives lists the months whose partitions were archived to Parquet and dropped: the
-- object's key in the object store, and the row count and cost that were verified in the
-- object before the partition was dropped (in the same transaction as this row was written).
-- The reads of archived months (impl/usageview) take the months to read from here.
CREATE TABLE usage_archives (
    month        date PRIMARY KEY CHECK (extract(day FROM month) = 1),
    object_key   text NOT NULL CHECK (object_key <> ''),
    records      bigint NOT NULL CHECK (records >= 0),
    cost_micros  bigint NOT NULL CHECK (cost_micros >= 0),
    object_bytes bigint NOT NULL CHECK (object_bytes >= 0),
    archived_at  timestamptz NOT NULL DEFAULT now()
);

-- usage_partition_name is the name of the partition of the month that starts at month (a
-- first of the month, UTC): usage_records_pYYYYMM.
CREATE FUNCTION usage_partition_name(month date) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'usage_records_p' || to_char(month, 'YYYYMM')
$$;

-- usage_partition_months returns the first day of each month that has a partition (the
-- default partition aside), from the partitions' names.
CREATE FUNCTION usage_partition_months() RETURNS SETOF date LANGUAGE sql STABLE AS $$
    SELECT to_date(substr(c.relname, length('usage_records_p') + 1), 'YYYYMM')
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'usage_records'::regclass AND c.relname ~ '^usage_records_p[0-9]{6}$'
$$;

-- usage_partition_create makes the partition of the UTC month that starts at month, unless it
-- exists or the month is archived, and returns whether it made it. Rows of that month already
-- in the default partition are moved into it. Callers on several gateway processes are
-- serialised by a transaction-level advisory lock, so making the months ahead is idempotent
-- across replicas.
CREATE FUNCTION usage_partition_create(month date) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    part text := usage_partition_name(month);
    lo timestamptz := month::timestamp AT TIME ZONE 'UTC';
    hi timestamptz := (month + interval '1 month')::timestamp AT TIME ZONE 'UTC';
BEGIN
    IF extract(day FROM month) <> 1 THEN
        RAISE EXCEPTION 'usage_partition_create: % is not the first of a month', month;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('usage_records partitions'));
    IF to_regclass(part) IS NOT NULL OR EXISTS (SELECT 1 FROM usage_archives a WHERE a.month = usage_partition_create.month) THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM usage_records_default d WHERE d.started_at >= lo AND d.started_at < hi) THEN
        EXECUTE format('CREATE TABLE %I (LIKE usage_records INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
        EXECUTE format('WITH moved AS (DELETE FROM usage_records_default WHERE started_at >= %L AND started_at < %L RETURNING *) '
                       'INSERT INTO %I SELECT * FROM moved', lo, hi, part);
        EXECUTE format('ALTER TABLE usage_records ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', part, lo, hi);
    ELSE
        EXECUTE format('CREATE TABLE %I PARTITION OF usage_records FOR VALUES FROM (%L) TO (%L)', part, lo, hi);
    END IF;
    RETURN true;
END
$$;

-- usage_partition_retire drops the partition of the month that starts at month once its
-- archive is verified: under an exclusive lock on the partition (no write can come between the
-- count and the drop), it counts the partition's rows and adds up their cost, and only when
-- they are the archive's (records, cost_micros) does it record the archive in usage_archives
-- and drop the partition, in the caller's transaction. Returns false, dropping nothing, when
-- the partition does not match (a row came after the export: export again) or does not exist.
CREATE FUNCTION usage_partition_retire(month date, object_key text, records bigint, cost_micros bigint, object_bytes bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    part text := usage_partition_name(month);
    n bigint;
    c bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('usage_records partitions'));
    IF to_regclass(part) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', part);
    EXECUTE format('SELECT count(*), COALESCE(sum(cost_micros), 0)::bigint FROM %I', part) INTO n, c;
    IF n <> records OR c <> cost_micros THEN
        RETURN false;
    END IF;
    INSERT INTO usage_archives (month, object_key, records, cost_micros, object_bytes)
    VALUES (usage_partition_retire.month, object_key, records, cost_micros, object_bytes);
    EXECUTE format('ALTER TABLE usage_records DETACH PARTITION %I', part);
    EXECUTE format('DROP TABLE %I', part);
    RETURN true;
END
$$;

-- The existing rows: a partition for every month they cover and for this month and the next
-- two, then the copy, ids kept.
DO $$
DECLARE
    m date;
    last date := (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '2 months')::date;
BEGIN
    m := COALESCE((SELECT date_trunc('month', min(started_at) AT TIME ZONE 'UTC')::date FROM usage_records_unpartitioned),
                  date_trunc('month', now() AT TIME ZONE 'UTC')::date);
    m := LEAST(m, date_trunc('month', now() AT TIME ZONE 'UTC')::date);
    WHILE m <= last LOOP
        PERFORM usage_partition_create(m);
        m := (m + interval '1 month')::date;
    END LOOP;
END
$$;

INSERT INTO usage_records (
    id, account_id, request_id, api_key_id, model, route, provider, upstream_model, input_tokens, output_tokens,
    cost_micros, status, started_at, finished_at, recorded_at, hosted_tool_calls, hosted_tool_micros, on_credit,
    agent_session_id, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, reasoning_tokens, service_tier,
    price, input_cost_micros, cache_read_cost_micros, cache_write_5m_cost_micros, cache_write_1h_cost_micros,
    output_cost_micros, waived_micros, cache_savings_micros)
SELECT id, account_id, request_id, api_key_id, model, route, provider, upstream_model, input_tokens, output_tokens,
    cost_micros, status, started_at, finished_at, recorded_at, hosted_tool_calls, hosted_tool_micros, on_credit,
    agent_session_id, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, reasoning_tokens, service_tier,
    price, input_cost_micros, cache_read_cost_micros, cache_write_5m_cost_micros, cache_write_1h_cost_micros,
    output_cost_micros, waived_micros, cache_savings_micros
FROM usage_records_unpartitioned;

DROP TABLE usage_records_unpartitioned;

-- usage_daily's trigger (0009, 0012), now on the partitioned table: a statement trigger with a
-- transition table sees the rows inserted into every partition. It comes after the copy, whose
-- rows usage_daily already counts.
CREATE TRIGGER usage_daily_add AFTER INSERT ON usage_records
    REFERENCING NEW TABLE AS new_usage
    FOR EACH STATEMENT EXECUTE FUNCTION usage_daily_add();
