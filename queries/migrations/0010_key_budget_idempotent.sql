-- 0010: a key's budget counts a request id once, as the ledger does. An agent retries a step
-- with the same request id after a failure or a crash, so that its model call is billed once;
-- the key's budget must count it once too.
--
-- settled_at: when the request's reservation was settled (NULL: not yet). A settled reservation
-- keeps its row, with amount 0, as the marker that the request id was counted: a reservation
-- for that request id again reserves nothing and its settlement adds nothing. Settled rows are
-- deleted after a retention that outlasts every retry (billing's keySettledRetention).
ALTER TABLE key_reservations ADD COLUMN settled_at timestamptz;

-- The reaper and the lease renewal look only at live reservations (neither reaped nor settled):
-- their indexes leave the settled markers out, however many a process keeps.
DROP INDEX key_reservations_expires_idx;
DROP INDEX key_reservations_holder_idx;
CREATE INDEX key_reservations_expires_idx ON key_reservations (expires_at) WHERE NOT reaped AND settled_at IS NULL;
CREATE INDEX key_reservations_holder_idx ON key_reservations (holder) WHERE NOT reaped AND settled_at IS NULL;
-- The deletion of old markers and of reservations reaped long ago.
CREATE INDEX key_reservations_settled_idx ON key_reservations (settled_at) WHERE settled_at IS NOT NULL;
CREATE INDEX key_reservations_reaped_idx ON key_reservations (expires_at) WHERE reaped AND settled_at IS NULL;
