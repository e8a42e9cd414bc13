-- name: SchemaMigrationsTableExists :one
SELECT (to_regclass('public.schema_migrations') IS NOT NULL)::boolean AS present;

-- name: LockMigrations :exec
-- Serialises migrators of several gateway processes for the rest of the transaction.
SELECT pg_advisory_xact_lock(7318204917);

-- name: ListAppliedMigrations :many
SELECT version FROM schema_migrations ORDER BY version;

-- name: RecordMigration :exec
INSERT INTO schema_migrations (version) VALUES ($1);

-- name: LockMigrationsSession :exec
-- LockMigrations for a whole session (River's migrations run in transactions of their own).
SELECT pg_advisory_lock(7318204917);

-- name: UnlockMigrationsSession :exec
SELECT pg_advisory_unlock(7318204917);
