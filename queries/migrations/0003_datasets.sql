-- 0003: datasets. The record of which storage datasets each account has loaded into the query
-- engine, shared by every gateway process.

-- loaded_dataset_generation orders the loads: every (re)load of a dataset takes a new value, so
-- a process that holds a materialized copy can tell whether it is still the current one.
CREATE SEQUENCE loaded_dataset_generation;

-- loaded_datasets hold one row per dataset an account has loaded. The data itself is not here:
-- any gateway process materializes it from storage on first use, applying params (the load
-- parameters: columns, limit, filter) to the file of the recorded format. row_count and columns
-- describe what the load produced.
CREATE TABLE loaded_datasets (
    account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    dataset    text NOT NULL CHECK (dataset ~ '^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$'),
    format     text NOT NULL CHECK (format IN ('csv', 'parquet', 'jsonl')),
    params     jsonb NOT NULL DEFAULT '{}'::jsonb,
    row_count  bigint NOT NULL CHECK (row_count >= 0),
    columns    jsonb NOT NULL DEFAULT '[]'::jsonb,
    generation bigint NOT NULL DEFAULT nextval('loaded_dataset_generation'),
    loaded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, dataset)
);
