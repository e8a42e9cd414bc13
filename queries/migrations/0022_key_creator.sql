-- The web user who created a key on the console (NULL for the operator's keys and for keys
-- created before this migration). A member may stop the keys they created: matched on this id,
-- which is the person's (issuer, subject) for good, and not on created_by's e-mail, which the
-- provider may change or give to someone else.
ALTER TABLE api_keys ADD COLUMN created_by_user uuid;
