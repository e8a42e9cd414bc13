// Package devoidc owns the development OpenID Connect provider: a real provider, built on
// zitadel/oidc's op package, that keeps everything in memory and exists so that `tollgate dev`
// and the tests can sign in without an external identity provider.
//
// DEVELOPMENT ONLY. It serves plain http (it turns on op's allow-insecure option, which a real
// provider must never do), its users and passwords are given in clear in Options, its signing
// key is generated at start and lives only as long as the process, and nothing it holds survives
// a restart. `tollgate serve` never starts it; its login page carries a visible "development
// provider — not for production" banner.
//
// Serve starts a provider on a listener, which must be on a loopback address; its issuer is
// "http://" followed by the listener's address, so a listener on 127.0.0.1:0 gives an issuer
// such as http://127.0.0.1:41234. It supports:
//
//   - discovery (/.well-known/openid-configuration) and the key set (/keys), one RS256 key;
//   - the authorization code flow, for the registered clients and redirect URIs only, with
//     PKCE S256 required (an authorization request without an S256 code_challenge is refused,
//     so a token exchange without the right code_verifier fails), the nonce echoed into the
//     ID token, and auth_time, sid, email and name in the ID token;
//   - single-use authorization codes: a code is valid for a minute and for one exchange; a
//     replayed code is refused and revokes the access tokens the first exchange issued;
//   - the token endpoint with client_secret_basic or client_secret_post (a client registered
//     without a secret is public and authenticates with PKCE alone), and userinfo;
//   - a plain HTML login form (e-mail and password; no JavaScript) and a provider session kept
//     in a cookie (devoidc_session_<port>, HttpOnly, SameSite=Lax, renewed at every password
//     sign-in; the port in the name keeps two providers on one host apart), so that a second sign-in from the same browser skips the form unless the
//     request carries prompt=login or a max_age the session is older than (then the form is
//     shown again, and auth_time moves to the new sign-in); prompt=none answers
//     login_required when the form would be needed;
//   - RP-initiated logout (the end_session_endpoint): it ends the provider session the browser's
//     cookie names and the one the id_token_hint's sid names, and redirects to the client's
//     registered post_logout_redirect_uri with the state, or to a plain "signed out" page.
//
// Two options make it behave as some real providers do, for tests of a relying party:
// Options.OmitAuthTime leaves auth_time out of every ID token (released Dex; Google without
// its session age claims), and Options.IgnoreForcedLogin completes a request from a browser
// with a live provider session without the form, prompt=login and max_age notwithstanding.
//
// Sessions reports how many provider sessions a subject holds, which is how tests check that
// signing out ended them. The op package logs through slog's default logger; Options.Logger
// receives this package's own lines (sign-ins, refused passwords, sessions ended).
package devoidc
