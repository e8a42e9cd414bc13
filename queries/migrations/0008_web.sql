-- 0008: the signed-in web application (issue 14). users and memberships come from 0001; this
-- migration lets the operator add a member by e-mail before the person has ever signed in (a
-- user row without an OpenID subject, claimed at the first sign-in with that verified e-mail),
-- and adds the server-side web sessions and the account's audit log.

-- A user added by e-mail has no issuer and subject until the first sign-in.
ALTER TABLE users ALTER COLUMN oidc_issuer DROP NOT NULL;
ALTER TABLE users ALTER COLUMN oidc_subject DROP NOT NULL;
ALTER TABLE users ADD COLUMN name text NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN last_sign_in_at timestamptz;
ALTER TABLE users ADD CONSTRAINT users_subject_pair CHECK ((oidc_issuer IS NULL) = (oidc_subject IS NULL));
-- One user per e-mail address (compared without case): memberships are found by e-mail.
CREATE UNIQUE INDEX users_email_idx ON users (lower(email)) WHERE email <> '';
CREATE INDEX memberships_user_idx ON memberships (user_id);

-- web_sessions is the session store of the web application (alexedwards/scs): the token is
-- never stored, only its SHA-256. user_id and user_agent are copied out of the session's data
-- at every commit so that the Sessions page can list a user's sessions; last_seen_at is the
-- last commit (every request of a signed-in session commits, to move the idle expiry).
CREATE TABLE web_sessions (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_hash   bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    data         bytea NOT NULL,
    expiry       timestamptz NOT NULL,
    user_id      uuid REFERENCES users (id) ON DELETE CASCADE,
    user_agent   text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX web_sessions_expiry_idx ON web_sessions (expiry);
CREATE INDEX web_sessions_user_idx ON web_sessions (user_id) WHERE user_id IS NOT NULL;

-- audit_log records what people did to an account: sign-ins, keys created, revoked or changed,
-- limits changed, approvals decided. actor is the e-mail of the signed-in user (or "operator"
-- for the CLI); before and after are the changed object's state as JSON (NULL when absent).
CREATE TABLE audit_log (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id    uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    actor         text NOT NULL,
    actor_user_id uuid REFERENCES users (id) ON DELETE SET NULL,
    action        text NOT NULL CHECK (action <> ''),
    target        text NOT NULL DEFAULT '',
    before        jsonb,
    after         jsonb,
    at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_account_idx ON audit_log (account_id, id DESC);

-- The Keys page shows a key as its prefix and its last four characters ("tgk_AbCd…wxyz"): the
-- last four are kept when the web application creates the key (the key itself never is).
ALTER TABLE api_keys ADD COLUMN display_suffix text NOT NULL DEFAULT '' CHECK (length(display_suffix) <= 4);
