-- 0002: metering. Credit holds drawn by gateway processes, and the usage record of every
-- settled request.

-- held_micros is the part of the balance that gateway processes hold to reserve requests
-- against (the sum of the account's credit_holds). A hold is not a movement of the balance and
-- has no ledger entry; the constraint makes PostgreSQL refuse any statement, from any process,
-- that would hold more than the balance or spend credit that somebody holds.
ALTER TABLE accounts ADD COLUMN held_micros bigint NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD CONSTRAINT accounts_held_within_balance
    CHECK (held_micros >= 0 AND held_micros <= balance_micros);

-- credit_hold_version orders the states of holds: every change of a hold's amount takes a new
-- value, so a process can tell which of two answers about its hold is the newer one.
CREATE SEQUENCE credit_hold_version;

-- credit_holds are the grants of credit that gateway processes (holders) draw from accounts in
-- chunks. amount_micros is what is still held (drawn and not yet spent by flushed usage nor
-- returned). Every statement that changes amount_micros locks the account row first and moves
-- accounts.held_micros by the same amount. The owning process renews expires_at; a hold whose
-- lease has expired belongs to a process that is gone, and any process may release it.
CREATE TABLE credit_holds (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id    uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    holder        text NOT NULL CHECK (holder <> ''),
    amount_micros bigint NOT NULL CHECK (amount_micros >= 0),
    version       bigint NOT NULL DEFAULT nextval('credit_hold_version'),
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    UNIQUE (account_id, holder)
);
CREATE INDEX credit_holds_expires_idx ON credit_holds (expires_at);
CREATE INDEX credit_holds_holder_idx ON credit_holds (holder);

-- usage_records hold one row per settled request, written in batches together with the
-- request's usage entry in credit_ledger (idempotency key 'usage:' || request_id). api_key_id
-- is deliberately not a foreign key: usage history outlives key management, and one bad id
-- must never stop the batching writer.
CREATE TABLE usage_records (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id     uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    request_id     text NOT NULL CHECK (request_id <> ''),
    api_key_id     uuid,
    model          text NOT NULL,
    route          text NOT NULL,
    provider       text NOT NULL,
    upstream_model text NOT NULL,
    input_tokens   bigint NOT NULL CHECK (input_tokens >= 0),
    output_tokens  bigint NOT NULL CHECK (output_tokens >= 0),
    cost_micros    bigint NOT NULL CHECK (cost_micros >= 0),
    status         text NOT NULL,
    started_at     timestamptz NOT NULL,
    finished_at    timestamptz NOT NULL,
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, request_id)
);
CREATE INDEX usage_records_account_finished_idx ON usage_records (account_id, finished_at);
