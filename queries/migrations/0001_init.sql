-- 0001: accounts, users and memberships, API keys, model access, and the credit ledger.

-- schema_migrations records which numbered migrations have been applied.
CREATE TABLE schema_migrations (
    version    text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- accounts are the tenants. balance_micros is kept beside the ledger, in the same statement as
-- every ledger entry, and can never go below zero.
CREATE TABLE accounts (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name           text NOT NULL UNIQUE CHECK (name <> ''),
    plan           text NOT NULL DEFAULT 'default',
    balance_micros bigint NOT NULL DEFAULT 0 CHECK (balance_micros >= 0),
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- users are people who sign in to the web application through OpenID Connect.
CREATE TABLE users (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    oidc_issuer  text NOT NULL,
    oidc_subject text NOT NULL,
    email        text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (oidc_issuer, oidc_subject)
);

-- memberships say which users may act for which accounts.
CREATE TABLE memberships (
    account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role       text NOT NULL DEFAULT 'member' CHECK (role IN ('owner', 'admin', 'member')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, user_id)
);

-- api_keys hold only the SHA-256 of each key; the key itself is shown once at creation.
-- rpm_limit 0 means no per-key requests-per-minute cap.
CREATE TABLE api_keys (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id     uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name           text NOT NULL DEFAULT '',
    key_hash       bytea NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    display_prefix text NOT NULL,
    rpm_limit      integer NOT NULL DEFAULT 0 CHECK (rpm_limit >= 0),
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_used_at   timestamptz,
    revoked_at     timestamptz
);
CREATE INDEX api_keys_account_idx ON api_keys (account_id);

-- Every change that matters to an authenticated key's cached state is announced, whatever
-- wrote it, so that every gateway process drops its cached copy at once.
CREATE FUNCTION notify_api_key_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.revoked_at IS DISTINCT FROM OLD.revoked_at OR NEW.rpm_limit IS DISTINCT FROM OLD.rpm_limit THEN
        PERFORM pg_notify('tollgate_api_key_changed', encode(NEW.key_hash, 'hex'));
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER api_keys_changed AFTER UPDATE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION notify_api_key_changed();

-- model_access lists the configured models each account may use.
CREATE TABLE model_access (
    account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    model_id   text NOT NULL CHECK (model_id <> ''),
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, model_id)
);

CREATE FUNCTION notify_model_access_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tollgate_model_access_changed', COALESCE(NEW.account_id, OLD.account_id)::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER model_access_changed AFTER INSERT OR UPDATE OR DELETE ON model_access
    FOR EACH ROW EXECUTE FUNCTION notify_model_access_changed();

-- credit_ledger is append-only: every change of an account's balance is one row saying why.
-- amount_micros is positive for credit and negative for debit; balance_after_micros is the
-- account's balance right after the entry. idempotency_key makes every entry happen once.
CREATE TABLE credit_ledger (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id           uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    amount_micros        bigint NOT NULL,
    balance_after_micros bigint NOT NULL CHECK (balance_after_micros >= 0),
    reason               text NOT NULL CHECK (reason IN ('grant', 'usage', 'hold', 'release', 'adjustment')),
    idempotency_key      text NOT NULL CHECK (idempotency_key <> ''),
    note                 text NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, idempotency_key)
);

CREATE FUNCTION credit_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'credit_ledger is append-only';
END
$$;
CREATE TRIGGER credit_ledger_append_only BEFORE UPDATE OR DELETE ON credit_ledger
    FOR EACH ROW EXECUTE FUNCTION credit_ledger_append_only();
