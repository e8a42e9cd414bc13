-- 0016: an agent session is one trace (issue 20). trace_parent is the W3C traceparent of the
-- session's invoke_agent span, made when the session is spawned; every step, on whichever
-- process River runs it (after a restart too), starts its span as a child of it, so that the
-- whole session reads as one trace. Empty when tracing was off at the spawn (or the session
-- is older than this migration): its steps are then not traced.
ALTER TABLE agent_sessions ADD COLUMN IF NOT EXISTS trace_parent text NOT NULL DEFAULT '';
