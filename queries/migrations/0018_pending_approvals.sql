-- The approvals an account has pending are counted at every request for one (at most
-- agent.MaxPendingApprovals at once): an index of them alone, by account, so that the count
-- does not read the account's whole history.
CREATE INDEX agent_approvals_account_pending_idx ON agent_approvals (account_id) WHERE state = 'pending';
