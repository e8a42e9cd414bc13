-- 0028: whether an authorization code's request carried redirect_uri. A client with one
-- registered redirect URI may leave it out of the authorization request (RFC 6749 sections
-- 3.1.2.3 and 4.1.1); the code is then bound to that URI, and the token request needs
-- redirect_uri only when the authorization request carried it (RFC 6749 section 4.1.3, OAuth
-- 2.1 section 4.1.3). The token endpoint required it always, so such a client could never
-- redeem its code. Codes issued before this migration (they live 60 seconds) are taken as
-- having carried it, as the token endpoint took them.
ALTER TABLE oauth_codes ADD COLUMN redirect_uri_sent boolean NOT NULL DEFAULT true;
