-- 0006: agents (issue 13): slots, sessions and their event logs, queued messages, commands with
-- their idempotency keys, tickets, approvals, and the session tag of usage records. River's own
-- tables come from River's migrations (rivermigrate), run beside these ones.

-- agent_slots are the agent capacity units the operator assigns to an account; a slot runs at
-- most one live session. Names are unique within an account only.
CREATE TABLE agent_slots (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (name <> ''),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, name)
);

-- agent_sessions are agent conversations. state follows the machine of impl/agent (doc.go);
-- end_reason is set when the session ends (and, while it is stopping, says why it stops).
-- step numbers the step jobs: a step job runs only while its number is the session's.
-- The slot survives as slot_name when the operator unassigns it (slot_id is then NULL).
CREATE TABLE agent_sessions (
    id                   uuid PRIMARY KEY,
    account_id           uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    slot_id              uuid REFERENCES agent_slots (id) ON DELETE SET NULL,
    slot_name            text NOT NULL,
    model                text NOT NULL,
    purpose              text NOT NULL DEFAULT '',
    agent_name           text NOT NULL DEFAULT '',
    target_environment   text NOT NULL DEFAULT '',
    resource_profile     text NOT NULL DEFAULT '',
    max_turns            integer NOT NULL CHECK (max_turns > 0),
    max_spend_micros     bigint NOT NULL CHECK (max_spend_micros > 0),
    max_duration_seconds integer NOT NULL CHECK (max_duration_seconds > 0),
    state                text NOT NULL CHECK (state IN ('provisioning', 'ready', 'busy', 'stopping', 'stopped', 'failed')),
    end_reason           text NOT NULL DEFAULT '',
    turns                integer NOT NULL DEFAULT 0 CHECK (turns >= 0 AND turns <= max_turns),
    spent_micros         bigint NOT NULL DEFAULT 0 CHECK (spent_micros >= 0 AND spent_micros <= max_spend_micros),
    step                 bigint NOT NULL DEFAULT 0,
    key_id               uuid,
    next_seq             bigint NOT NULL DEFAULT 1,
    created_at           timestamptz NOT NULL DEFAULT now(),
    ready_at             timestamptz,
    ended_at             timestamptz
);
CREATE UNIQUE INDEX agent_sessions_live_slot_idx ON agent_sessions (slot_id) WHERE state NOT IN ('stopped', 'failed');
CREATE INDEX agent_sessions_account_idx ON agent_sessions (account_id, created_at DESC);
CREATE INDEX agent_sessions_slot_idx ON agent_sessions (slot_id, created_at DESC);

-- agent_events are the sessions' event logs, numbered per session from 1 without gaps (the
-- session row's next_seq, taken under its row lock). Each insert notifies
-- tollgate_agent_events with '<session id>:<seq>' when its transaction commits.
CREATE TABLE agent_events (
    session_id uuid NOT NULL REFERENCES agent_sessions (id) ON DELETE CASCADE,
    seq        bigint NOT NULL CHECK (seq > 0),
    account_id uuid NOT NULL,
    kind       text NOT NULL,
    data       jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq)
);

CREATE FUNCTION agent_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tollgate_agent_events', NEW.session_id::text || ':' || NEW.seq::text);
    RETURN NULL;
END;
$$;
CREATE TRIGGER agent_events_notify AFTER INSERT ON agent_events
    FOR EACH ROW EXECUTE FUNCTION agent_events_notify();

-- agent_messages are messages sent to a session: queued until a step takes them.
CREATE TABLE agent_messages (
    id         uuid PRIMARY KEY,
    account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    session_id uuid NOT NULL REFERENCES agent_sessions (id) ON DELETE CASCADE,
    text       text NOT NULL,
    state      text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'taken')),
    created_at timestamptz NOT NULL DEFAULT now(),
    taken_turn integer
);
CREATE INDEX agent_messages_queued_idx ON agent_messages (session_id, created_at) WHERE state = 'queued';

-- agent_commands are the accepted spawn, message and stop requests, with the Idempotency-Key
-- (unique per account) and the hash of the request that used it, and the answer given.
CREATE TABLE agent_commands (
    id              uuid PRIMARY KEY,
    account_id      uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    slot_id         uuid REFERENCES agent_slots (id) ON DELETE SET NULL,
    session_id      uuid REFERENCES agent_sessions (id) ON DELETE SET NULL,
    kind            text NOT NULL CHECK (kind IN ('spawn', 'message', 'stop')),
    status          text NOT NULL CHECK (status IN ('accepted', 'running', 'done', 'failed', 'queued', 'taken')),
    idempotency_key text,
    request_hash    text NOT NULL DEFAULT '',
    answer          jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, idempotency_key)
);

-- agent_tickets are per-account tickets, opened by agents (open_ticket) and operators.
CREATE TABLE agent_tickets (
    id         uuid PRIMARY KEY,
    account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    session_id uuid REFERENCES agent_sessions (id) ON DELETE SET NULL,
    title      text NOT NULL,
    body       text NOT NULL DEFAULT '',
    state      text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed')),
    opened_by  text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    closed_at  timestamptz
);
CREATE INDEX agent_tickets_account_idx ON agent_tickets (account_id, state, created_at DESC);

-- agent_approvals are approval-gated actions (agent_spawn, agent_prompt) bound to their exact
-- arguments; resolved once, by a person.
CREATE TABLE agent_approvals (
    id             uuid PRIMARY KEY,
    account_id     uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    key_id         uuid,
    action         text NOT NULL CHECK (action IN ('spawn', 'prompt')),
    arguments      jsonb NOT NULL,
    arguments_hash text NOT NULL,
    state          text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'cancelled')),
    action_status  text CHECK (action_status IN ('queued', 'running', 'done', 'failed')),
    session_id     uuid,
    message_id     uuid,
    failure        text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    resolved_at    timestamptz,
    resolved_by    text NOT NULL DEFAULT ''
);
CREATE INDEX agent_approvals_account_idx ON agent_approvals (account_id, created_at DESC);
CREATE INDEX agent_approvals_pending_idx ON agent_approvals (expires_at) WHERE state = 'pending';

-- A model call of an agent session is a usage record of its account, tagged with the session.
ALTER TABLE usage_records ADD COLUMN agent_session_id uuid;
CREATE INDEX usage_records_agent_session_idx ON usage_records (agent_session_id) WHERE agent_session_id IS NOT NULL;
