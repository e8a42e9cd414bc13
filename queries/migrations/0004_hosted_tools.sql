-- 0004: hosted tools. A request may use tools the provider runs itself and bills per call (a
-- web search); its usage record says how many calls of each were billed and what they cost.
-- hosted_tool_calls maps a tool's name to its calls (NULL when there were none);
-- hosted_tool_micros is their part of cost_micros.
ALTER TABLE usage_records
    ADD COLUMN hosted_tool_calls  jsonb,
    ADD COLUMN hosted_tool_micros bigint NOT NULL DEFAULT 0 CHECK (hosted_tool_micros >= 0);
