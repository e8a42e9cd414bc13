-- account_upstream_keys holds an account's own upstream keys, one per configured provider (by
-- its name in the configuration), set by the operator (tollgate admin provider-key set). An
-- attempt of the account on that provider is sent with it instead of the operator's key, so
-- that the provider's prompt cache, which belongs to the upstream account a key is of, is the
-- tenant's own (docs/inference.md). The key is stored sealed (AES-256-GCM under a key derived
-- from the server secret sealed_ids, with the account and the provider as associated data:
-- impl/upstreamkeys), never in the clear; hint is its last four characters, for the operator to
-- tell keys apart. A change notifies tollgate_model_access_changed with the account, as a
-- change of its model list does: the gateways' cache of an account's grants holds its keys too,
-- and drops them at once.
CREATE TABLE account_upstream_keys (
    account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    provider   text NOT NULL CHECK (provider <> ''),
    sealed     bytea NOT NULL,
    hint       text NOT NULL,
    set_by     text NOT NULL,
    set_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, provider)
);

CREATE TRIGGER account_upstream_keys_changed AFTER INSERT OR UPDATE OR DELETE ON account_upstream_keys
    FOR EACH ROW EXECUTE FUNCTION notify_model_access_changed();
