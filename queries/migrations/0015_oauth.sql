-- 0015: MCP sign-in with OAuth 2.1 (issue 22). The web console is the authorization server of
-- /api/mcp: clients register (RFC 7591), a signed-in member approves a client on the consent
-- page, which records a grant, and the client holds short-lived access tokens and rotating
-- refresh tokens of that grant. Codes and tokens are random and only their SHA-256 is stored.

-- oauth_clients are the registered clients: public clients (no secret), each with the
-- redirect URIs it registered (https, or http on a loopback host).
CREATE TABLE oauth_clients (
    id            text PRIMARY KEY CHECK (id <> ''),
    name          text NOT NULL DEFAULT '',
    redirect_uris text[] NOT NULL CHECK (cardinality(redirect_uris) > 0),
    client_uri    text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- oauth_grants are what members approved: a client acting for the member (user_id) in the
-- account, at most with the role the member had then, for one resource (/api/mcp). A grant is
-- revoked on the console, by a replayed code or a reused refresh token; its tokens stop at once.
CREATE TABLE oauth_grants (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id   uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    client_id    text NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
    role         text NOT NULL,
    resource     text NOT NULL,
    scope        text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz,
    revoked_why  text NOT NULL DEFAULT ''
);
CREATE INDEX oauth_grants_account_idx ON oauth_grants (account_id, created_at DESC);

-- oauth_codes are authorization codes: single use, short-lived, bound to the client, the
-- redirect URI, the PKCE S256 challenge and the resource. grant_id is set when the code is
-- redeemed, so that a replayed code revokes the grant it produced.
CREATE TABLE oauth_codes (
    code_hash      bytea PRIMARY KEY CHECK (length(code_hash) = 32),
    client_id      text NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
    account_id     uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role           text NOT NULL,
    redirect_uri   text NOT NULL,
    code_challenge text NOT NULL,
    resource       text NOT NULL,
    scope          text NOT NULL DEFAULT '',
    expires_at     timestamptz NOT NULL,
    used_at        timestamptz,
    grant_id       uuid REFERENCES oauth_grants (id) ON DELETE CASCADE
);
CREATE INDEX oauth_codes_expiry_idx ON oauth_codes (expires_at);

-- oauth_tokens are the grants' access and refresh tokens. A refresh token is used once: the
-- refresh that uses it sets used_at and issues a new pair.
CREATE TABLE oauth_tokens (
    token_hash bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    grant_id   uuid NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('access', 'refresh')),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_tokens_grant_idx ON oauth_tokens (grant_id);
