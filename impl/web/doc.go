// Package web owns the signed-in web application (issue 14): the account console served on
// the API listener for the paths Owns reports ("/", /signin…, /auth/callback, /signout,
// /keys…, /usage…, /plan, /approvals…, /agents…, /datasets…, /audit, /sessions…, /static/…).
// Every other path stays the API's (Mount routes between the two).
//
// Sign-in is OpenID Connect (package signin): the authorization code flow with PKCE, state and
// nonce checked here, the ID token verified, auth_time kept. Users are linked to accounts by
// memberships (package members), found by the verified e-mail; with web.signup_plan set, a user
// without one may create an account of their own, once: the sign-up is claimed with one
// conditional statement (users.signup_claimed_at), so parallel or later sign-ups of the same
// user are sent to the account the first one made, and no second starting credit is granted.
// Sessions are server-side in PostgreSQL (package session, through alexedwards/scs), in the
// cookie __Host-tollgate_session (Secure, HttpOnly, SameSite=Lax, Path=/), renewed at sign-in,
// with idle and absolute timeouts. Sign out destroys the session and ends the provider's
// session too (RP-initiated logout).
//
// Security, by construction: a request carrying Authorization (or x-api-key) is refused with
// 400 before anything else, so an API key never reaches a page, and the API never reads the
// cookie; every state-changing request passes net/http.CrossOriginProtection (no bypass); every
// response has a nonce-based Content-Security-Policy (frame-ancestors 'none'; form-action
// 'self' and the provider's origins, which Chromium checks on the redirects after a form),
// X-Content-Type-Options, Referrer-Policy and Cache-Control: no-store. Creating a key needs a
// sign-in younger than web.reauth_after: an older one goes through the provider again with
// max_age=0 and prompt=login, and back to the form. A key is shown once, in the response that
// created it. Changes are recorded in the account's audit log (package audit).
//
// Roles: members see every page, create keys, and revoke or disable the keys they created
// themselves (created_by is their e-mail); changing a key's limits, enabling a disabled key,
// acting on keys others created, revoking all keys, deciding approvals and deleting or
// replacing datasets are the owners' (mayStop in keys.go, the owner wrapper): a member's
// attempt answers 403 with the reason and changes nothing, and the page shows those buttons
// disabled with the reason beside them. A member messages and stops only the agent sessions
// they started on the console, owners any (mayControlSession in agents.go): the page of
// another's session is read-only, saying who started it and who may act.
//
// What a person reads: amounts are written to the cent by one rule (money.go: "< $0.01" for a
// sub-cent amount, the exact amount in the title of any rounded one), projections only from
// enough history (usage.go, projectionText), runs of days without spend as one row, keys and
// people by their names rather than their ids (auditview.go), browsers as "Chrome on Linux"
// (useragent.go). A key's page shows, once, the key with a copy button (static/copy.js) and
// each client's settings filled with it and web.public_url (package connect, which a terminal
// command may print too). Destructive actions (revoking or disabling a key, revoking every
// key, deleting or replacing a dataset) are confirmed on the server (confirm.go): the first
// post answers with what will stop working and changes nothing; only the confirmation's form
// (confirm=yes, and the account's name typed for revoking every key) acts, so the
// confirmation holds without JavaScript.
//
// # Adding a page
//
// Pages are server-rendered with html/template, usable without JavaScript. A page is one
// handler file and one template.
//
// First, in navigation() (pages.go), give the page's entry a Routes function instead of nil
// (nil shows the "coming soon" placeholder and marks the entry pending):
//
//	{"/usage", "Usage", (*App).usageRoutes},
//
// Then write usage.go with the routes and handlers:
//
//	func (a *App) usageRoutes(mux *router) {
//		mux.Handle("GET /usage", a.member(a.usagePage))     // members of the account
//		mux.Handle("POST /usage/x", a.owner(a.usageAction)) // owners only
//	}
//
//	func (a *App) usagePage(w http.ResponseWriter, r *http.Request, v *Visitor) {
//		rows, err := ... v.Account.AccountID ... // always scope to the account
//		if err != nil {
//			a.failInternal(w, r, v, "usage", err) // 503, the error is logged, not shown
//			return
//		}
//		a.render(w, r, v, http.StatusOK, "usage", "Usage", rows)
//	}
//
// The wrappers are anyone, signedIn, member and owner; the Visitor holds the user, the
// account membership (AccountID, AccountName, Plan, Role) and the sign-in's time (a.fresh(v)
// says whether it is younger than reauth_after). An id in a path that belongs to another
// account must answer a.fail(w, r, v, 404, …), exactly as an unknown id.
// a.record(r, v, action, target, before, after) writes the audit log.
//
// Then write templates/usage.html defining {{define "content"}}…{{end}}: the layout gives it
// .Title, .Visitor, .Nonce (for <script nonce="{{.Nonce}}" src="/static/…">: scripts without
// the nonce are blocked, and so are inline style attributes) and the handler's data as .Data.
// Use <table> with <caption> and <th scope>, <label for> on every input, and POST forms for
// every change (they pass the cross-origin check as they are). Every form of an account's page
// carries the account it was shown in, first:
// <input type="hidden" name="account_id" value="{{$.Visitor.Account.AccountID}}">; member (and
// owner) refuses a POST whose form names none or another account with 409 before the handler
// runs (postedInShownAccount), and TestEveryPostIsBoundToTheShownAccount posts to every route
// the router holds. Static files (scripts, the
// chart library) go under static/, embedded and served at /static/; nothing comes from a CDN.
//
// A new top-level path must also be added to ownedPrefixes (app.go), or the API answers it.
package web
