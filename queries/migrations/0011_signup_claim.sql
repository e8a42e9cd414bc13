-- 0011: self-service sign-up happens once per user. Every account made by sign-up gets the
-- plan's starting credit, so a user who sends the sign-up form many times at once (parallel
-- requests) must still get one account: the sign-up is claimed first with one conditional
-- statement (signup_claimed_at set only while it is NULL), and only the request that claimed
-- it creates the account. signup_account_id is the account it made (NULL while it is being
-- made, and after the account is deleted: the claim stays, so no second sign-up).
ALTER TABLE users ADD COLUMN signup_claimed_at timestamptz;
ALTER TABLE users ADD COLUMN signup_account_id uuid REFERENCES accounts (id) ON DELETE SET NULL;
