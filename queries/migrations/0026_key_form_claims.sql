-- 0026: the console's new-key forms that were sent, each claimed once by the request that
-- creates its key. The form's id (a random token on the form) used to be remembered in the
-- web session's data; but two requests of one session at the same instant (a double click)
-- each load the session before either saves it, and both created a key. A claim is a row here,
-- inserted with ON CONFLICT DO NOTHING: of any number of posts of one form, on any gateway
-- process, exactly one inserts it and creates the key; the others find the row, and the key it
-- made once key_id is set. A post that creates no key (an invalid field) deletes its claim, so
-- the corrected form can be sent. Claims are kept a week (past any web session's lifetime),
-- deleted by the account's later claims.
CREATE TABLE web_key_forms (
    account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    form_id    text NOT NULL,
    -- key_id is the key the form created (NULL while it is being created). No foreign key: a
    -- key is never deleted, only revoked.
    key_id     uuid,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, form_id)
);
