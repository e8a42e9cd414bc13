-- 0024: the end of an OAuth grant's absolute lifetime, kept on the grant. The authorization
-- server (impl/mcpauth) caps every token of a grant to its lifetime from the member's approval,
-- so a grant past it has no working token; but OAuthGrantActive, which the agents' approvals
-- and the sessions a connected app started ask, did not look at the lifetime, and such a grant
-- still counted as working there (an approval it had asked for could be approved and run).
-- With expires_at on the row, every check of a grant sees the same end as its tokens.
--
-- Grants made before this migration get created_at + 90 days: mcpauth.DefaultGrantLifetime,
-- the only lifetime a gateway has given grants (the gateway sets no other). NULL means no
-- absolute end (a grant stored by a caller that gives no lifetime).
ALTER TABLE oauth_grants ADD COLUMN expires_at timestamptz;
UPDATE oauth_grants SET expires_at = created_at + interval '90 days';
