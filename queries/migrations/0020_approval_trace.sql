-- The W3C traceparent of the request that asked for an approval (empty when it was not traced):
-- the approved action's job has no span of its own, so the session it spawns links its
-- invoke_agent span to that request (tollgate.link=spawned_by), and the jobs it inserts name
-- that request as what enqueued them.
ALTER TABLE agent_approvals ADD COLUMN trace_parent text NOT NULL DEFAULT '';
