-- 0005: credit through a database outage. A gateway process that cannot reach the database and
-- whose credit hold on an account is spent may, when so configured (the failure handling
-- "continue"), serve the account's requests on credit, up to a per-account risk bound: backed
-- by no hold, and billed from the account's free credit once the database takes the usage.
-- on_credit marks the usage records of those requests (their ledger entries say so in the
-- note), so that what was served on credit is shown as such.
ALTER TABLE usage_records ADD COLUMN on_credit boolean NOT NULL DEFAULT false;
