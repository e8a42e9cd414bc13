-- 0013: streams in flight survive a crash in the books (issue 23). A stream's answer reaches
-- its client while it runs, long before the stream is settled and its usage record written;
-- a gateway process killed meanwhile (SIGKILL, a crash, a power cut) used to take the stream's
-- usage with it, and its credit came back when another process reaped its hold.
--
-- stream_checkpoints keep, for each stream in flight, the usage record it would be settled
-- with if it were cut now (record: a store.UsageRecord as JSON, priced and costed as the
-- writer bills it), written by its process (holder) every checkpoint interval (2 s by default)
-- in one statement for all its streams, each write renewing the row's lease (expires_at). A
-- stream that settles deletes its checkpoint in the transaction that writes its usage record.
-- When a process is gone (its credit hold's lease expired, or the checkpoint's own), a reaper
-- bills its checkpoints as usage records - from the dead process's hold while it is there -
-- and deletes them in the same transaction; the unique index of usage_records bills a request
-- id once, so concurrent reapers, or a checkpoint left behind a usage record already written,
-- bill nothing twice. See impl/billing ("Leases and crashes").
--
-- account_id is deliberately not a foreign key: the check would lock the account row (FOR KEY
-- SHARE) from the statement that writes a process's checkpoints, while the usage writer holds
-- the account rows locked and deletes checkpoints, in the other order. Every statement here
-- locks checkpoint rows in (account_id, request_id) order; the checkpoint of an account that
-- was deleted is dropped by the reaper (the usage writer drops records of unknown accounts).
CREATE TABLE stream_checkpoints (
    account_id uuid NOT NULL,
    request_id text NOT NULL CHECK (request_id <> ''),
    holder     text NOT NULL CHECK (holder <> ''),
    record     jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (account_id, request_id)
);
-- A process's own rows (its writes clean up after it, Close deletes them) and the reaper's
-- expired ones.
CREATE INDEX stream_checkpoints_holder_idx ON stream_checkpoints (holder);
CREATE INDEX stream_checkpoints_expires_idx ON stream_checkpoints (expires_at);
