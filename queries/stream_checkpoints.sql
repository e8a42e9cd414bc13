-- name: SaveStreamCheckpoints :one
-- Writes the holder's checkpoints of its streams in flight in one statement (parallel arrays,
-- one element per stream), each with a lease of lease_millis from now: a row per (account,
-- request id) is inserted or replaced. A stream whose usage record is already written (it
-- settled while this statement was on its way) gets no row, and the holder's rows whose
-- usage record is written (a checkpoint that raced past its stream's settlement) are deleted:
-- the holder's rows are those of its streams in flight, give or take one interval. A stream
-- of an account that no longer exists is skipped. Rows are written in (account_id, request_id)
-- order, as every statement on the table locks them, so that none deadlocks with the usage
-- writer's deletes.
WITH input AS (
    SELECT unnest(@account_ids::uuid[]) AS account_id, unnest(@request_ids::text[]) AS request_id,
           unnest(@records::jsonb[]) AS record
), saved AS (
    INSERT INTO stream_checkpoints (account_id, request_id, holder, record, updated_at, expires_at)
    SELECT i.account_id, i.request_id, @holder::text, i.record, now(),
           now() + sqlc.arg(lease_millis)::bigint * interval '1 millisecond'
    FROM input i
    WHERE EXISTS (SELECT 1 FROM accounts a WHERE a.id = i.account_id)
      AND NOT EXISTS (SELECT 1 FROM usage_records u WHERE u.account_id = i.account_id AND u.request_id = i.request_id)
    ORDER BY i.account_id, i.request_id
    ON CONFLICT (account_id, request_id) DO UPDATE
        SET holder = EXCLUDED.holder, record = EXCLUDED.record,
            updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at
    RETURNING 1
), stale AS (
    DELETE FROM stream_checkpoints c
    WHERE (c.account_id, c.request_id) IN (
        SELECT s.account_id, s.request_id FROM stream_checkpoints s
        WHERE s.holder = @holder::text
          AND EXISTS (SELECT 1 FROM usage_records u WHERE u.account_id = s.account_id AND u.request_id = s.request_id)
        ORDER BY s.account_id, s.request_id
        FOR UPDATE OF s)
    RETURNING 1
)
SELECT (SELECT count(*) FROM saved)::bigint AS saved, (SELECT count(*) FROM stale)::bigint AS cleaned;

-- name: ListLostStreamCheckpoints :many
-- The checkpoints of processes that are gone, oldest holder first: not the caller's own
-- (alive), and either past their own lease, or of a holder named in gone_holders (whose holds
-- the caller has just reaped), or of a holder with a credit hold whose lease has expired.
SELECT c.account_id, c.request_id, c.holder, c.record, c.updated_at, c.expires_at
FROM stream_checkpoints c
WHERE c.holder <> @alive::text
  AND (c.expires_at < now()
       OR c.holder = ANY(@gone_holders::text[])
       OR EXISTS (SELECT 1 FROM credit_holds h WHERE h.holder = c.holder AND h.expires_at < now()))
ORDER BY c.holder, c.account_id, c.request_id
LIMIT @max_rows;

-- name: DeleteStreamCheckpoints :execrows
-- Deletes the checkpoints of the given requests (parallel arrays), locked in (account_id,
-- request_id) order: their usage records are written in the same transaction.
DELETE FROM stream_checkpoints c
WHERE (c.account_id, c.request_id) IN (
    SELECT s.account_id, s.request_id
    FROM stream_checkpoints s
    JOIN (SELECT unnest(@account_ids::uuid[]) AS account_id, unnest(@request_ids::text[]) AS request_id) AS d
      ON s.account_id = d.account_id AND s.request_id = d.request_id
    ORDER BY s.account_id, s.request_id
    FOR UPDATE OF s);

-- name: DeleteHolderStreamCheckpoints :execrows
-- Deletes every checkpoint of the holder (a process that drained: its usage records are
-- written), locked in (account_id, request_id) order.
DELETE FROM stream_checkpoints c
WHERE (c.account_id, c.request_id) IN (
    SELECT s.account_id, s.request_id FROM stream_checkpoints s
    WHERE s.holder = @holder
    ORDER BY s.account_id, s.request_id
    FOR UPDATE OF s);

-- name: ListStreamCheckpoints :many
-- The account's checkpoints (for tests and the operator).
SELECT account_id, request_id, holder, record, updated_at, expires_at
FROM stream_checkpoints WHERE account_id = @account_id ORDER BY request_id;

-- name: SettleKeyReservationsAtBill :execrows
-- Makes the key reservations of a batch's usage records (parallel arrays: key, account,
-- request id, the record's cost and start), written now or refused as duplicates, count what
-- the ledger bills for their request ids: the cost of the usage record billed under the
-- request id that started within window_millis of the record (this
-- record's, or another attempt's that the ledger took first, a retry's served by another
-- process), with the record that billed the rest of a lost stream (request id + '_rest'), when
-- those records are of the key (0 when the request id was billed to another key). A
-- reservation not settled yet (live or reaped) is marked settled at that bill: its amount
-- leaves the budget's reserved_micros and the bill joins spent_micros. A settled one whose
-- settled_micros is not the bill (another attempt of the request id settled it, or a
-- settlement beyond the reservation whose COMMIT went unanswered added what the record does
-- not charge) is moved to the bill, and spent_micros by the difference (never below 0). When
-- the request id has no usage record within the window (its account was deleted, its month
-- archived, or the billed attempt started further away than any retry of it comes), an
-- unsettled reservation is settled at the record's cost and a settled one is left as it is, as
-- is one settled before migration 0021 (settled_micros NULL). A request id without a
-- reservation of the key (an uncapped key) changes nothing. Each request id costs one index
-- probe of key_reservations and one of each partition of usage_records the window reaches
-- (one or two: the others are pruned as the statement runs).
WITH input AS (
    SELECT unnest(@key_ids::uuid[]) AS key_id, unnest(@account_ids::uuid[]) AS account_id,
           unnest(@request_ids::text[]) AS request_id, unnest(@costs::bigint[]) AS cost_micros,
           unnest(@started_at::timestamptz[]) AS started_at
), billed AS (
    SELECT input.key_id, input.request_id, input.cost_micros, found.records, found.bill
    FROM input
    CROSS JOIN LATERAL (
        SELECT count(*) AS records,
               COALESCE(SUM(u.cost_micros) FILTER (WHERE u.api_key_id = input.key_id), 0)::bigint AS bill
        FROM usage_records u
        WHERE u.account_id = input.account_id
          AND u.request_id IN (input.request_id, input.request_id || '_rest')
          AND u.started_at >= input.started_at - sqlc.arg(window_millis)::bigint * interval '1 millisecond'
          AND u.started_at <= input.started_at + sqlc.arg(window_millis)::bigint * interval '1 millisecond'
    ) AS found
), was AS (
    SELECT r.key_id, r.request_id, r.period_start, r.amount_micros, r.settled_at IS NULL AS unsettled,
           r.settled_micros, CASE WHEN billed.records > 0 THEN billed.bill ELSE billed.cost_micros END AS bill
    FROM key_reservations r JOIN billed ON r.key_id = billed.key_id AND r.request_id = billed.request_id
    WHERE r.settled_at IS NULL
       OR (billed.records > 0 AND r.settled_micros IS NOT NULL AND r.settled_micros <> billed.bill)
    ORDER BY r.key_id, r.request_id
    FOR UPDATE OF r
), done AS (
    UPDATE key_reservations r SET settled_at = COALESCE(r.settled_at, now()), settled_micros = was.bill
    FROM was WHERE r.key_id = was.key_id AND r.request_id = was.request_id
    RETURNING r.key_id
), per_budget AS (
    SELECT was.key_id, was.period_start,
           SUM(CASE WHEN was.unsettled THEN was.amount_micros ELSE 0 END)::bigint AS returned,
           SUM(CASE WHEN was.unsettled THEN was.bill ELSE was.bill - was.settled_micros END)::bigint AS added
    FROM was GROUP BY was.key_id, was.period_start
)
UPDATE key_budgets b
SET spent_micros = GREATEST(b.spent_micros + per_budget.added, 0),
    reserved_micros = b.reserved_micros - per_budget.returned
FROM per_budget
WHERE b.key_id = per_budget.key_id AND b.period_start = per_budget.period_start;

-- name: LostStreamUsage :many
-- The usage records, among the given requests (parallel arrays: account, request id), that were
-- billed from a stream's last checkpoint after its process was lost (status process_lost): a
-- record of such a request that arrives later bills the rest of its usage (WriteUsage).
SELECT u.* FROM usage_records u
JOIN (SELECT unnest(@account_ids::uuid[]) AS account_id, unnest(@request_ids::text[]) AS request_id) AS r
    ON u.account_id = r.account_id AND u.request_id = r.request_id
WHERE u.status = 'process_lost';

-- name: RaiseLostStreamKeySpend :execrows
-- Raises the spend of the keys of streams whose process was lost to what their requests' usage
-- records charge together (parallel arrays: key, request id, total), once: each settled
-- reservation whose settled_micros is below the total adds the difference to its budget's
-- spent_micros and keeps the total as settled_micros. A reservation settled at more (the lost
-- process settled it with its full cost before the reaper billed the checkpoint), one settled
-- before settled_micros was kept (NULL), or a request without a reservation (an uncapped key)
-- changes nothing.
WITH input AS (
    SELECT unnest(@key_ids::uuid[]) AS key_id, unnest(@request_ids::text[]) AS request_id,
           unnest(@totals::bigint[]) AS total
), was AS (
    SELECT r.key_id, r.request_id, r.period_start, input.total, input.total - r.settled_micros AS added
    FROM key_reservations r JOIN input ON r.key_id = input.key_id AND r.request_id = input.request_id
    WHERE r.settled_at IS NOT NULL AND r.settled_micros < input.total
    ORDER BY r.key_id, r.request_id
    FOR UPDATE OF r
), raised AS (
    UPDATE key_reservations r SET settled_micros = was.total
    FROM was WHERE r.key_id = was.key_id AND r.request_id = was.request_id
    RETURNING r.key_id
), per_budget AS (
    SELECT was.key_id, was.period_start, SUM(was.added)::bigint AS added
    FROM was GROUP BY was.key_id, was.period_start
)
UPDATE key_budgets b
SET spent_micros = b.spent_micros + per_budget.added
FROM per_budget
WHERE b.key_id = per_budget.key_id AND b.period_start = per_budget.period_start;
