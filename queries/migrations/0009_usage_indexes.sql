-- 0009: the indexes behind the web application's Usage page (issue 14; impl/usageview). They
-- keep the page's queries proportional to what they show, not to the account's history (see
-- docs/usage-page.md for the measurements on two million rows).
--
-- The migration runs in one transaction, so these are plain CREATE INDEX statements, which
-- block writes to usage_records while they build. On a large existing table, build them first
-- by hand with CREATE INDEX CONCURRENTLY under the same names: IF NOT EXISTS then skips them.

-- The request log, newest first, and its keyset cursor (started_at, id): a page is one index
-- range scan that stops after the page's rows, however deep the cursor. The included columns
-- make the daily spend chart (grouped by model or by key), the burn rate and the totals an
-- index-only scan of the chosen days.
CREATE INDEX IF NOT EXISTS usage_records_account_started_idx
    ON usage_records (account_id, started_at DESC, id DESC)
    INCLUDE (model, api_key_id, cost_micros);

-- The request log filtered by key: an account may have many keys, each a small share of its
-- rows, which the index above would have to skip one by one.
CREATE INDEX IF NOT EXISTS usage_records_account_key_started_idx
    ON usage_records (account_id, api_key_id, started_at DESC, id DESC)
    WHERE api_key_id IS NOT NULL;

-- The request log filtered by model: a rarely used model would otherwise be found by walking
-- the whole account's log.
CREATE INDEX IF NOT EXISTS usage_records_account_model_started_idx
    ON usage_records (account_id, model, started_at DESC, id DESC);
