-- 0029: the member who started each agent session on the console. A session started with an
-- API key or by a connected app's approved agent_spawn records the key or the grant and is
-- checked against it before every step; one a member started on the console recorded nothing,
-- so it kept taking its queued messages after the member was removed from the account, up to
-- its bounds. The step now checks that this member is still in the account (impl/agent,
-- Service.principal). NULL for the sessions started with a key or a grant, and for the
-- console's sessions started before this migration, which keep running as before (within their
-- bounds: max_turns, max_spend and a max_duration of at most the profile's). No foreign key: a
-- user deleted leaves no membership, which ends the session as a removal does.
ALTER TABLE agent_sessions ADD COLUMN started_by_user uuid;
