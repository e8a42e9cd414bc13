-- name: UpsertLoadedDataset :one
-- Records a load of a dataset, replacing an earlier load of the same dataset with a new
-- generation.
INSERT INTO loaded_datasets (account_id, dataset, format, params, row_count, columns)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (account_id, dataset) DO UPDATE
    SET format     = EXCLUDED.format,
        params     = EXCLUDED.params,
        row_count  = EXCLUDED.row_count,
        columns    = EXCLUDED.columns,
        generation = nextval('loaded_dataset_generation'),
        loaded_at  = now()
RETURNING *;

-- name: GetLoadedDataset :one
SELECT * FROM loaded_datasets WHERE account_id = $1 AND dataset = $2;

-- name: ListLoadedDatasets :many
SELECT * FROM loaded_datasets WHERE account_id = $1 ORDER BY dataset;

-- name: DeleteLoadedDataset :execrows
DELETE FROM loaded_datasets WHERE account_id = $1 AND dataset = $2;

-- name: LockDatasetUploads :exec
-- Serialises the dataset uploads of one account (lock_key names it) for the rest of the
-- transaction: each checks what is stored and stores its file while it holds the lock. The
-- transaction idles while the file is stored (as long as a large upload takes), so it lifts
-- the pool's idle_in_transaction_session_timeout for itself (impl/store/sessionbounds.go); the
-- server's TCP keepalives still end it when its client is gone.
SELECT pg_advisory_xact_lock(hashtextextended(sqlc.arg('lock_key')::text, 7318204919)),
       set_config('idle_in_transaction_session_timeout', '0', true);
