-- server_secrets holds keys the replicas share and keep across restarts, by name: each is 32
-- random bytes made by the first process that needs it (crypto/rand, INSERT … ON CONFLICT DO
-- NOTHING, so replicas starting together agree on one). "sealed_ids" keys impl/sealedid, which
-- turns the database's sequence ids into opaque tokens before a tenant sees them (the request
-- log's page cursor): a sequence shared by every account would otherwise show a tenant the
-- whole gateway's volume.
CREATE TABLE server_secrets (
    name       text PRIMARY KEY,
    secret     bytea NOT NULL CHECK (length(secret) = 32),
    created_at timestamptz NOT NULL DEFAULT now()
);
