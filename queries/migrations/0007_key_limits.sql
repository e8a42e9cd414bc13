-- 0007: per-key limits. A key may expire, be disabled (and enabled again: unlike revocation,
-- which is for ever), be confined to a subset of its account's models, and carry a credit cap
-- that resets every UTC day or month (or never). created_by says who made the key.

-- expires_at: the key is refused from then on (NULL: never). disabled_at: the key is refused
-- while set. credit_cap_micros: the most the key may spend in a cap period (NULL: no cap), the
-- period being cap_period: 'none' (one period for ever), 'daily' or 'monthly' (UTC calendar
-- days and months). models: the models the key may use, each one of its account's (NULL: every
-- model of the account). created_by: 'operator' (the CLI) or the e-mail of the web user.
ALTER TABLE api_keys
    ADD COLUMN expires_at        timestamptz,
    ADD COLUMN disabled_at       timestamptz,
    ADD COLUMN credit_cap_micros bigint CHECK (credit_cap_micros >= 0),
    ADD COLUMN cap_period        text NOT NULL DEFAULT 'none' CHECK (cap_period IN ('none', 'daily', 'monthly')),
    ADD COLUMN models            text[],
    ADD COLUMN created_by        text NOT NULL DEFAULT 'operator';

-- Every change of what authenticating a key caches (revocation, the RPM cap, expiry, disabling,
-- the credit cap and its period, the model subset) is announced, whatever wrote it, so that
-- every gateway process drops its cached copy at once. last_used_at, written in batches, is not.
CREATE OR REPLACE FUNCTION notify_api_key_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF ROW(NEW.revoked_at, NEW.rpm_limit, NEW.expires_at, NEW.disabled_at, NEW.credit_cap_micros,
           NEW.cap_period, NEW.models)
       IS DISTINCT FROM
       ROW(OLD.revoked_at, OLD.rpm_limit, OLD.expires_at, OLD.disabled_at, OLD.credit_cap_micros,
           OLD.cap_period, OLD.models) THEN
        PERFORM pg_notify('tollgate_api_key_changed', encode(NEW.key_hash, 'hex'));
    END IF;
    RETURN NEW;
END
$$;

-- key_budgets hold, per capped key and cap period (period_start: the start of the UTC day or
-- month, or 'epoch' for the period 'none'), what the key has spent (spent_micros: the costs of
-- its settled requests, as charged in their usage records) and what its requests in flight
-- have reserved (reserved_micros: the sum of its key_reservations of the period). A request
-- reserves with one conditional UPDATE that adds its worst case only while spent + reserved
-- stays within the cap, so no two processes can together reserve past it.
CREATE TABLE key_budgets (
    key_id          uuid NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    period_start    timestamptz NOT NULL,
    spent_micros    bigint NOT NULL DEFAULT 0 CHECK (spent_micros >= 0),
    reserved_micros bigint NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0),
    PRIMARY KEY (key_id, period_start)
);

-- key_reservations are the worst cases reserved by capped keys' requests in flight, one row a
-- request, held by the gateway process (holder) serving it, which renews expires_at while the
-- request runs. A reservation whose lease has expired belongs to a process that is gone: any
-- process may return it to its budget (the reaper, or a request of the key that its budget
-- would otherwise refuse), which sets its amount to 0 and reaped, and takes the amount off the
-- budget's reserved_micros. The row stays until its request settles (the settlement deletes it
-- and adds the cost to spent_micros, whether or not it was reaped, so the budget's spend stays
-- what the ledger charged), or for a day after its lease if its process is gone for good.
CREATE TABLE key_reservations (
    key_id        uuid NOT NULL,
    request_id    text NOT NULL CHECK (request_id <> ''),
    period_start  timestamptz NOT NULL,
    amount_micros bigint NOT NULL CHECK (amount_micros >= 0),
    holder        text NOT NULL CHECK (holder <> ''),
    expires_at    timestamptz NOT NULL,
    reaped        boolean NOT NULL DEFAULT false,
    PRIMARY KEY (key_id, request_id)
);
CREATE INDEX key_reservations_expires_idx ON key_reservations (expires_at);
CREATE INDEX key_reservations_holder_idx ON key_reservations (holder);

-- The spend of a key in a period is also read from usage_records (the Keys page, key list):
-- by key and start time.
CREATE INDEX usage_records_key_started_idx ON usage_records (api_key_id, started_at) INCLUDE (cost_micros)
    WHERE api_key_id IS NOT NULL;
