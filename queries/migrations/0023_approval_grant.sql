-- 0023: the OAuth grant an approval was asked through, and the grant a session started from an
-- approved agent_spawn acts for. An MCP client signed in with OAuth (issue 22) has no key, so
-- key_id said nothing about it: a grant revoked since (on the console's Connected apps, or by
-- removing its member or lowering their role) could still have its request approved and run,
-- and its session ran on for the account alone. With the grant recorded, an approval whose grant
-- no longer works cannot be approved (nor run), and its session ends with access_revoked before
-- its next model call, as a revoked key's does.
--
-- No foreign key to oauth_grants, on purpose: a grant row can be deleted (by the cascades from
-- its user, its account or its client), and a deleted grant must count as gone, not as "no
-- grant". ON DELETE SET NULL would turn it into an approval or a session without a grant, which
-- acts for the account alone; ON DELETE CASCADE would delete the account's history of
-- approvals and sessions; RESTRICT would forbid deleting the user. Kept as a plain id, a grant
-- that is no longer there is not found by OAuthGrantActive, and so is gone. NULL means the
-- approval or session was not made through a grant (a key, the console, or before this
-- migration).
ALTER TABLE agent_approvals ADD COLUMN oauth_grant_id uuid;
ALTER TABLE agent_sessions ADD COLUMN oauth_grant_id uuid;
