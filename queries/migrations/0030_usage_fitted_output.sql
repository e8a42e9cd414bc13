-- 0030: the output bound a request without one was fitted to, its caller's credit not covering
-- a worst case at the model's whole bound (docs/billing.md, "A request without an output bound
-- is fitted to the credit"): the upstream was sent it and the output billed is capped at it, so
-- the row explains an answer cut short at that bound. 0 for a request that was not fitted (and
-- for every record written before this migration).
ALTER TABLE usage_records ADD COLUMN fitted_output_tokens bigint NOT NULL DEFAULT 0 CHECK (fitted_output_tokens >= 0);
