-- Agents (issue 13): slots, sessions, events, messages, commands, tickets and approvals. The
-- service impl/agent runs these, most of them inside its own transactions.

-- name: InsertAgentSlot :one
INSERT INTO agent_slots (account_id, name) VALUES ($1, $2) RETURNING *;

-- name: DeleteAgentSlot :execrows
DELETE FROM agent_slots WHERE id = $1 AND account_id = $2;

-- name: GetAgentSlot :one
SELECT * FROM agent_slots WHERE account_id = $1 AND name = $2;

-- name: GetAgentSlotForUpdate :one
-- NO KEY UPDATE: it serialises the slot's commands without blocking the FOR KEY SHARE locks that
-- rows referring to the slot take (a step inserting a command or a session), which FOR UPDATE
-- would block, deadlocking a spawn that waits for the session such a step holds.
SELECT * FROM agent_slots WHERE account_id = $1 AND name = $2 FOR NO KEY UPDATE;

-- name: ListAgentSlots :many
-- Slots with their account's name and their live session, if any: of one account, or of every
-- account when account_id is NULL.
SELECT s.id, s.account_id, s.name, s.created_at, a.name AS account_name,
       l.id AS session_id, COALESCE(l.state, '')::text AS session_state
FROM agent_slots s
JOIN accounts a ON a.id = s.account_id
LEFT JOIN agent_sessions l ON l.slot_id = s.id AND l.state NOT IN ('stopped', 'failed')
WHERE sqlc.narg('account_id')::uuid IS NULL OR s.account_id = sqlc.narg('account_id')::uuid
ORDER BY a.name, s.name;

-- name: FreeAgentSlots :many
-- The account's slots without a live session, by name, locked for the caller's transaction.
SELECT s.* FROM agent_slots s
WHERE s.account_id = $1
  AND NOT EXISTS (SELECT 1 FROM agent_sessions l WHERE l.slot_id = s.id AND l.state NOT IN ('stopped', 'failed'))
ORDER BY s.name
FOR NO KEY UPDATE OF s;

-- name: InsertAgentSession :one
INSERT INTO agent_sessions (
    id, account_id, slot_id, slot_name, model, purpose, agent_name, target_environment, resource_profile,
    max_turns, max_spend_micros, max_duration_seconds, state, key_id, trace_parent, oauth_grant_id, started_by_user
) VALUES (
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'provisioning', $13, $14, $15, $16
) RETURNING *;

-- name: GetAgentSession :one
-- A session by id alone, of any account: for the agents' River workers only (a step reading
-- the session its own job names). A path that serves a tenant reads GetAccountAgentSession.
SELECT * FROM agent_sessions WHERE id = $1;

-- name: GetAgentSessionForUpdate :one
-- A session by id alone, of any account, locked: for the agents' River workers only (the
-- session their own job names). A path that serves a tenant locks
-- GetAccountAgentSessionForUpdate.
SELECT * FROM agent_sessions WHERE id = $1 FOR UPDATE;

-- name: GetAccountAgentSession :one
SELECT * FROM agent_sessions WHERE account_id = $1 AND id = $2;

-- name: GetAccountAgentSessionForUpdate :one
-- The account's session with id, locked; no row for another account's.
SELECT * FROM agent_sessions WHERE account_id = $1 AND id = $2 FOR UPDATE;

-- name: LatestSlotSession :one
SELECT * FROM agent_sessions WHERE account_id = $1 AND slot_id = $2 ORDER BY created_at DESC LIMIT 1;

-- name: LiveSlotSessionForUpdate :one
SELECT * FROM agent_sessions WHERE account_id = $1 AND slot_id = $2 AND state NOT IN ('stopped', 'failed') FOR UPDATE;

-- name: MemberLiveAgentSessionIDs :many
-- The live sessions the member started on the console in the account (started_by_user), for
-- their removal from it to end them.
SELECT id FROM agent_sessions
WHERE account_id = $1 AND started_by_user = sqlc.arg('user_id')::uuid AND state NOT IN ('stopped', 'failed')
ORDER BY created_at;

-- name: KeysLiveAgentSessionIDs :many
-- The live sessions of the account started with one of the keys, for their revocation to end
-- them.
SELECT id FROM agent_sessions
WHERE account_id = $1 AND key_id = ANY(sqlc.arg('key_ids')::uuid[]) AND state NOT IN ('stopped', 'failed')
ORDER BY created_at;

-- name: GrantLiveAgentSessionIDs :many
-- The live sessions of the account that the connected app with the grant started (an approved
-- agent_spawn), for the grant's revocation to end them.
SELECT id FROM agent_sessions
WHERE account_id = $1 AND oauth_grant_id = sqlc.arg('grant_id')::uuid AND state NOT IN ('stopped', 'failed')
ORDER BY created_at;

-- name: MemberGrantsLiveAgentSessionIDs :many
-- The live sessions of the account that the connected apps the member allowed started (their
-- OAuth grants', revoked with the membership), for the member's removal to end them.
SELECT s.id FROM agent_sessions s JOIN oauth_grants g ON g.id = s.oauth_grant_id
WHERE s.account_id = $1 AND g.account_id = $1 AND g.user_id = sqlc.arg('user_id')::uuid AND s.state NOT IN ('stopped', 'failed')
ORDER BY s.created_at;

-- name: LapsedAgentSessions :many
-- The live sessions, not stopping yet, whose right to run has lapsed with nobody ending them:
-- the connected app's grant revoked, past its lifetime or its member gone (access_revoked), or
-- the key revoked, disabled or expired (key_revoked, key_disabled, key_expired), or the member
-- who started it on the console gone from the account (member_removed; a membership that began
-- after the session did is theirs no longer: removed and added back), in the order a step
-- checks them; for the agents' sweep to end them (a removal's own ending may have failed).
SELECT s.id, s.account_id, s.key_id, s.oauth_grant_id, s.started_by_user, (CASE
    WHEN g.id IS NOT NULL AND (g.revoked_at IS NOT NULL OR g.expires_at <= now() OR m.user_id IS NULL) THEN 'access_revoked'
    WHEN k.revoked_at IS NOT NULL THEN 'key_revoked'
    WHEN k.disabled_at IS NOT NULL THEN 'key_disabled'
    WHEN k.id IS NOT NULL AND k.expires_at <= now() THEN 'key_expired'
    ELSE 'member_removed' END)::text AS reason
FROM agent_sessions s
LEFT JOIN oauth_grants g ON g.id = s.oauth_grant_id
LEFT JOIN memberships m ON m.account_id = g.account_id AND m.user_id = g.user_id
LEFT JOIN api_keys k ON k.id = s.key_id
LEFT JOIN memberships sm ON sm.account_id = s.account_id AND sm.user_id = s.started_by_user AND sm.created_at <= s.created_at
WHERE s.state IN ('provisioning', 'ready', 'busy')
  AND ((g.id IS NOT NULL AND (g.revoked_at IS NOT NULL OR g.expires_at <= now() OR m.user_id IS NULL))
    OR (k.id IS NOT NULL AND (k.revoked_at IS NOT NULL OR k.disabled_at IS NOT NULL OR k.expires_at <= now()))
    OR (s.started_by_user IS NOT NULL AND sm.user_id IS NULL))
ORDER BY s.account_id, s.created_at
LIMIT 500;

-- name: ListAccountAgentSessions :many
-- The account's sessions, newest first; with key_id, only those that key started.
SELECT * FROM agent_sessions
WHERE account_id = sqlc.arg('account_id')::uuid
  AND (sqlc.narg('key_id')::uuid IS NULL OR key_id = sqlc.narg('key_id')::uuid)
ORDER BY created_at DESC LIMIT sqlc.arg('max');

-- name: UpdateAgentSession :exec
-- Writes the session's mutable columns (the caller holds its row lock).
UPDATE agent_sessions
SET state = $2, end_reason = $3, turns = $4, spent_micros = $5, step = $6, next_seq = $7,
    ready_at = $8, ended_at = $9
WHERE id = $1;

-- name: InsertAgentEvent :exec
INSERT INTO agent_events (session_id, seq, account_id, kind, data) VALUES ($1, $2, $3, $4, $5);

-- name: ListAgentEvents :many
-- The events of the account's session after seq, in order; none for another account's session.
SELECT * FROM agent_events WHERE account_id = $1 AND session_id = $2 AND seq > $3 ORDER BY seq LIMIT $4;

-- name: ListAgentEventsTail :many
-- The newest events of the account's session, newest first; none for another account's session.
SELECT * FROM agent_events WHERE account_id = $1 AND session_id = $2 ORDER BY seq DESC LIMIT $3;

-- name: AllAgentEvents :many
SELECT * FROM agent_events WHERE session_id = $1 ORDER BY seq;

-- name: LastAgentEventSeq :one
SELECT COALESCE(MAX(seq), 0)::bigint FROM agent_events WHERE session_id = $1;

-- name: InsertAgentMessage :exec
INSERT INTO agent_messages (id, account_id, session_id, text) VALUES ($1, $2, $3, $4);

-- name: CountQueuedAgentMessages :one
-- How many messages wait for the session's next turn.
SELECT COUNT(*)::bigint FROM agent_messages WHERE session_id = $1 AND state = 'queued';

-- name: ListQueuedAgentMessages :many
SELECT * FROM agent_messages WHERE session_id = $1 AND state = 'queued' ORDER BY created_at, id;

-- name: TakeAgentMessages :execrows
UPDATE agent_messages SET state = 'taken', taken_turn = @turn::integer WHERE id = ANY(@ids::uuid[]) AND state = 'queued';

-- name: InsertAgentCommand :exec
INSERT INTO agent_commands (id, account_id, slot_id, session_id, kind, status, idempotency_key, request_hash, answer, key_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10);

-- name: GetAgentCommandByKey :one
SELECT * FROM agent_commands WHERE account_id = $1 AND idempotency_key = $2;

-- name: ForgetOldAgentCommandKey :execrows
-- Frees an Idempotency-Key used more than 24 hours ago.
UPDATE agent_commands SET idempotency_key = NULL
WHERE account_id = $1 AND idempotency_key = $2 AND created_at < now() - interval '24 hours';

-- name: SetAgentCommandStatus :exec
UPDATE agent_commands SET status = $2 WHERE id = $1;

-- name: InsertAgentTicket :one
INSERT INTO agent_tickets (id, account_id, session_id, title, body, opened_by)
VALUES ($1, $2, $3, $4, $5, $6) RETURNING *;

-- name: GetAgentTicket :one
-- A ticket by id alone, of any account: for the operator's commands only (tollgate admin ticket
-- close). A path that serves a tenant reads GetAccountAgentTicket.
SELECT * FROM agent_tickets WHERE id = $1;

-- name: GetAccountAgentTicket :one
-- The account's ticket with id; no row for another account's.
SELECT * FROM agent_tickets WHERE id = $1 AND account_id = $2;

-- name: CloseAgentTicket :one
-- Closes the account's open ticket with id; no row when it is closed already or another
-- account's.
UPDATE agent_tickets SET state = 'closed', closed_at = now()
WHERE id = $1 AND account_id = $2 AND state = 'open' RETURNING *;

-- name: ListAgentTickets :many
-- With key_id, only the tickets that the sessions that key started opened.
SELECT * FROM agent_tickets
WHERE (sqlc.narg('account_id')::uuid IS NULL OR account_id = sqlc.narg('account_id')::uuid)
  AND (sqlc.arg('state')::text = '' OR state = sqlc.arg('state')::text)
  AND (sqlc.narg('key_id')::uuid IS NULL
       OR session_id IN (SELECT id FROM agent_sessions WHERE key_id = sqlc.narg('key_id')::uuid))
ORDER BY created_at DESC LIMIT sqlc.arg('max');

-- name: InsertAgentApproval :one
INSERT INTO agent_approvals (id, account_id, key_id, action, arguments, arguments_hash, expires_at, requested_by, trace_parent, oauth_grant_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING *;

-- name: GetAgentApproval :one
-- An approval by id alone, of any account: for the operator's commands only (tollgate admin
-- approval approve/deny/show). A path that serves a tenant reads GetAccountAgentApproval.
SELECT * FROM agent_approvals WHERE id = $1;

-- name: GetAccountAgentApproval :one
-- The account's approval with id; no row for another account's.
SELECT * FROM agent_approvals WHERE id = $1 AND account_id = $2;

-- name: ResolveAgentApproval :one
-- Resolves the account's pending, unexpired approval: the one conditional update that makes
-- resolution happen exactly once under any concurrency. An approved one's action is queued.
UPDATE agent_approvals
SET state = sqlc.arg('state')::text, resolved_at = now(), resolved_by = sqlc.arg('resolved_by')::text,
    action_status = CASE WHEN sqlc.arg('state')::text = 'approved' THEN 'queued' END
WHERE id = sqlc.arg('id') AND account_id = sqlc.arg('account_id') AND state = 'pending' AND expires_at > now()
RETURNING *;

-- name: ExpireAgentApprovals :many
-- Marks every pending approval past its expiry expired.
UPDATE agent_approvals SET state = 'expired', resolved_at = now(), resolved_by = 'expiry'
WHERE state = 'pending' AND expires_at <= now()
RETURNING id;

-- name: CountPendingAgentApprovals :one
-- The account's approvals pending and not past their expiry (the bound on how many it may ask
-- for at once).
SELECT count(*) FROM agent_approvals
WHERE account_id = $1 AND state = 'pending' AND expires_at > now();

-- name: CancelSessionPromptApprovals :exec
-- Cancels the pending agent_prompt approvals of a session that has ended: what they ask could
-- never be sent.
UPDATE agent_approvals SET state = 'cancelled', resolved_at = now(), resolved_by = 'the session ended'
WHERE account_id = sqlc.arg('account_id') AND state = 'pending' AND action = 'prompt'
  AND arguments->>'session_id' = sqlc.arg('session_id')::text;

-- name: ExpireAgentApproval :execrows
-- Expires the account's approval with id when it is pending past its expiry; another
-- account's is not touched.
UPDATE agent_approvals SET state = 'expired', resolved_at = now(), resolved_by = 'expiry'
WHERE id = $1 AND account_id = $2 AND state = 'pending' AND expires_at <= now();

-- name: GetAgentApprovalForUpdate :one
-- An approval, locked until the transaction ends: the worker of an approved action holds it
-- while the action runs, so a second run of the job waits and then finds it done. By id alone:
-- for that River worker only (the approval its own job names).
SELECT * FROM agent_approvals WHERE id = $1 FOR UPDATE;

-- name: SetAgentApprovalAction :execrows
-- Moves an approved action's status on from the given one only (queued → running → done |
-- failed): no row when another run has moved it already.
UPDATE agent_approvals
SET action_status = sqlc.arg('action_status')::text, session_id = sqlc.narg('session_id'),
    message_id = sqlc.narg('message_id'), failure = sqlc.narg('failure')
WHERE id = sqlc.arg('id') AND state = 'approved' AND action_status = sqlc.arg('from')::text;

-- name: ListAgentApprovals :many
SELECT * FROM agent_approvals
WHERE (sqlc.narg('account_id')::uuid IS NULL OR account_id = sqlc.narg('account_id')::uuid)
  AND (sqlc.arg('state')::text = '' OR state = sqlc.arg('state')::text)
ORDER BY created_at DESC LIMIT sqlc.arg('max');

-- name: LockAgentKey :exec
-- Serialises the requests of one account that carry the same Idempotency-Key, for the rest of
-- the transaction.
SELECT pg_advisory_xact_lock(hashtextextended(sqlc.arg('lock_key')::text, 7318204918));

-- name: FirstLiveAgentStopCommand :one
-- The session's first stop command still under way (accepted, or running until the session
-- ends): a stop of a session that is stopping answers it again rather than queue another.
SELECT * FROM agent_commands
WHERE account_id = $1 AND session_id = $2 AND kind = 'stop' AND status IN ('accepted', 'running')
ORDER BY created_at, id LIMIT 1;

-- name: FinishAgentStopCommands :exec
-- The stop commands still under way (accepted or running) of a session that has ended end with
-- it: done when it ended stopped by the user, failed when it ended for another cause first.
UPDATE agent_commands SET status = sqlc.arg('status')::text
WHERE session_id = $1 AND kind = 'stop' AND status IN ('accepted', 'running');

-- name: AgentStarterRole :one
-- The role in the account of the member who started a session on the console; no row when
-- they are no longer in it, or when their membership began after the session did (they were
-- removed and added back: adding a member back revives nothing).
SELECT role FROM memberships
WHERE account_id = $1 AND user_id = $2 AND created_at <= sqlc.arg('session_started')::timestamptz;
