-- 0027: the API key that sent each agent command. An Idempotency-Key is per account, and a
-- command's answer is given again only to the key that sent it (its request hash includes the
-- key): another key of the account that reuses the Idempotency-Key gets a conflict, which now
-- says that another key used it rather than that its request differs (it may not). NULL for the
-- commands sent before this migration and for those no API key sent. No foreign key: a key is
-- never deleted, only revoked.
ALTER TABLE agent_commands ADD COLUMN key_id uuid;
