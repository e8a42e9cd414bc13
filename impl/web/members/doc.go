// Package members owns the web application's people: users (who sign in through OpenID
// Connect) and their memberships of accounts, with a role (owner or member). The operator adds
// members by e-mail before they ever sign in (tollgate admin member add); the first sign-in
// with that verified e-mail claims the user. The CLI and the web application both call it.
package members
