-- 0017: who asked for an approval when no key did. An agent_spawn or agent_prompt called
-- through an OAuth grant (MCP sign-in, issue 22) has no key; requested_by names the connected
-- app and the member who granted it ("Claude Code (alice@example.com)"), so that the console's
-- Approvals page names the requester instead of showing a dash. Empty for a key's request
-- (key_id names it) and for approvals older than this migration.
ALTER TABLE agent_approvals ADD COLUMN IF NOT EXISTS requested_by text NOT NULL DEFAULT '';
