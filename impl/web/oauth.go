package web

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/mcpauth"
	"github.com/tollgate/tollgate/impl/plaintext"
	"github.com/tollgate/tollgate/impl/store"
)

// The console is the OAuth authorization server of the MCP endpoint (impl/mcpauth): its
// consent page is the authorization endpoint, /oauth/authorize, and its Connected apps page,
// /oauth/grants, lists what members approved and revokes it. The protocol's checks and the
// codes are mcpauth's; this file is the pages.

// The audit log's actions of this file, and how the Audit log page says them.
const (
	actionOAuthGranted = "oauth.granted"
	actionOAuthRevoked = "oauth.revoked"
)

func init() {
	auditActions[actionOAuthGranted] = "Allowed an MCP client (OAuth)"
	auditActions[actionOAuthRevoked] = "Revoked an MCP client's access (OAuth)"
}

// oauthRoutes registers the consent page and the Connected apps page.
func (a *App) oauthRoutes(mux *router) {
	mux.Handle("GET /oauth/authorize", a.member(a.consentPage))
	mux.Handle("POST /oauth/authorize", a.member(a.consentDecision))
	mux.Handle("GET /oauth/grants", a.member(a.grantsPage))
	mux.Handle("POST /oauth/grants/{id}/revoke", a.member(a.revokeGrant))
}

// consentView is what the consent page shows.
type consentView struct {
	ClientName   string
	ClientID     string
	RedirectHost string
	Fields       url.Values // the authorization request, posted back with the decision
}

// grantsView is what the Connected apps page shows.
type grantsView struct {
	Available bool
	Grants    []grantRow
	Notice    string
	Resource  string
}

// grantRow is one grant as the Connected apps page lists it.
type grantRow struct {
	store.OAuthGrant
	Client       string // the client's registered name, or a description of an unnamed one
	RedirectHost string
	Member       string
	MayRevoke    bool
}

// originSyntax is a redirect origin fit for a Content-Security-Policy source expression.
var originSyntax = regexp.MustCompile(`^https?://[A-Za-z0-9.\-\[\]:]+$`)

// consentPage shows the member which client asks for what, in which account, or why the
// request is refused. The page's form-action also allows the client's redirect origin:
// Chromium checks form-action on the redirect that follows the decision.
func (a *App) consentPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	c, ok := a.checkConsent(w, r, v, mcpauth.AuthorizeRequestFrom(r.URL.Query()))
	if !ok {
		return
	}
	if a.reauthForGrant(w, r, v, c.Request) {
		return
	}
	if originSyntax.MatchString(c.RedirectOrigin) {
		h := w.Header()
		h.Set("Content-Security-Policy", strings.Replace(h.Get("Content-Security-Policy"), "form-action ", "form-action "+c.RedirectOrigin+" ", 1))
	}
	a.render(w, r, v, http.StatusOK, "consent", "Allow "+clientLabel(c.Client.Name)+" to use tollgate?", consentView{
		ClientName: plaintext.Visible(c.Client.Name, false), ClientID: c.Client.ID, RedirectHost: plaintext.Visible(c.RedirectHost, false), Fields: c.Request.Values()})
}

// consentDecision acts on the member's decision: Allow issues a code (bound to the client,
// the redirect URI, the PKCE challenge and the resource) and sends the browser back to the
// client with it; Deny sends it back with access_denied. The form is cross-origin protected
// like every form of the console, it carries the account the page showed (a decision posted
// while the visitor's current account is another one is refused with a page), and the request
// is checked again as when it was shown.
func (a *App) consentDecision(w http.ResponseWriter, r *http.Request, v *Visitor) {
	if err := r.ParseForm(); err != nil {
		a.fail(w, r, v, http.StatusBadRequest, "The form could not be read.")
		return
	}
	// The decision binds the account the page showed (its account_id, checked by member
	// before this runs, as every form of an account's page): a visitor who switched accounts
	// in another tab since is not granting (or denying) in an account they did not see named.
	c, ok := a.checkConsent(w, r, v, mcpauth.AuthorizeRequestFrom(r.PostForm))
	if !ok {
		return
	}
	if r.PostFormValue("decision") == "allow" && a.reauthForGrant(w, r, v, c.Request) {
		return
	}
	if r.PostFormValue("decision") != "allow" {
		http.Redirect(w, r, a.oauth.Deny(c), http.StatusSeeOther)
		return
	}
	to, err := a.oauth.Approve(r.Context(), c, v.Account.AccountID, v.User.ID, v.Account.Role)
	if err != nil {
		a.failInternal(w, r, v, "issue an authorization code", err)
		return
	}
	a.record(r, v, actionOAuthGranted, "client "+c.Client.ID, nil, map[string]string{"client": c.Client.Name, "redirect_host": c.RedirectHost, "role": v.Account.Role})
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// reauthForGrant sends a visitor whose sign-in is older than web.reauth_after to sign in again,
// back to the consent page of req afterwards, and reports whether it did. A grant is a
// credential like a key (an MCP client's, for 90 days), so it is issued, like a key, only to a
// browser whose person signed in recently, never to one that was merely left signed in.
func (a *App) reauthForGrant(w http.ResponseWriter, r *http.Request, v *Visitor, req mcpauth.AuthorizeRequest) bool {
	if a.fresh(v) {
		return false
	}
	http.Redirect(w, r, signinURL(true, "/oauth/authorize?"+req.Values().Encode()), http.StatusSeeOther)
	return true
}

// checkConsent checks an authorization request; when it is refused it has answered with a
// page that says why. The browser is never sent to the client for a refused request (even to a
// registered redirect URI: that would make the console an open redirector); only the member's
// Allow or Deny on a valid request sends it back.
func (a *App) checkConsent(w http.ResponseWriter, r *http.Request, v *Visitor, req mcpauth.AuthorizeRequest) (mcpauth.Consent, bool) {
	if a.oauth == nil {
		a.fail(w, r, v, http.StatusNotFound, "Signing in MCP clients with OAuth is not available on this gateway.")
		return mcpauth.Consent{}, false
	}
	c, err := a.oauth.CheckAuthorize(r.Context(), req)
	var refused *mcpauth.AuthorizeError
	switch {
	case errors.As(err, &refused):
		a.fail(w, r, v, http.StatusBadRequest, refused.Message)
		return mcpauth.Consent{}, false
	case err != nil:
		a.failInternal(w, r, v, "check an authorization request", err)
		return mcpauth.Consent{}, false
	}
	return c, true
}

// clientLabel is how a client is named to people: its registered name, quoted, or "an
// unnamed client".
func clientLabel(name string) string {
	if name == "" {
		return "an unnamed client"
	}
	return "“" + plaintext.Visible(name, false) + "”"
}

// grantsPage lists the account's grants in force: the client, who approved it, with which
// role, when, and when it was last used.
func (a *App) grantsPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	a.renderGrants(w, r, v, "")
}

func (a *App) renderGrants(w http.ResponseWriter, r *http.Request, v *Visitor, notice string) {
	data := grantsView{Available: a.oauth != nil, Notice: notice}
	if a.oauth != nil {
		data.Resource = a.oauth.Resource()
		gs, err := a.oauth.Grants(r.Context(), v.Account.AccountID)
		if err != nil {
			a.failInternal(w, r, v, "list OAuth grants", err)
			return
		}
		for _, g := range gs {
			data.Grants = append(data.Grants, grantRowOf(g, v))
		}
	}
	a.render(w, r, v, http.StatusOK, "grants", "Connected apps", data)
}

func grantRowOf(g store.OAuthGrant, v *Visitor) grantRow {
	row := grantRow{OAuthGrant: g, Client: clientLabel(g.ClientName), Member: g.UserEmail,
		MayRevoke: v.Owner() || g.UserID == v.User.ID}
	if row.Member == "" {
		row.Member = g.UserName
	}
	// The grant does not keep the redirect URI it was issued to (the audit entry of the
	// consent does): every host the client may return to is named, not only its first (trial
	// h11 D6: a client's first host was shown for a grant issued to its second).
	var hosts []string
	for _, raw := range g.ClientRedirectURIs {
		if u, err := url.Parse(raw); err == nil && !slices.Contains(hosts, u.Host) {
			hosts = append(hosts, u.Host)
		}
	}
	row.RedirectHost = plaintext.Visible(strings.Join(hosts, " or "), false)
	return row
}

// revokeGrant revokes a grant once the visitor has confirmed it (confirm.go): owners any grant
// of the account, members the grants they approved. Its tokens are refused from the next
// request on, on every gateway.
func (a *App) revokeGrant(w http.ResponseWriter, r *http.Request, v *Visitor) {
	if a.oauth == nil {
		a.fail(w, r, v, http.StatusNotFound, "Signing in MCP clients with OAuth is not available on this gateway.")
		return
	}
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, v, http.StatusNotFound, "There is no such connected app (or it was revoked).")
		return
	}
	g, err := a.oauth.Grant(r.Context(), v.Account.AccountID, id)
	switch {
	case errors.Is(err, store.ErrNotFound) || err == nil && g.RevokedAt != nil:
		a.fail(w, r, v, http.StatusNotFound, "There is no such connected app (or it was revoked).")
		return
	case err != nil:
		a.failInternal(w, r, v, "find an OAuth grant", err)
		return
	}
	row := grantRowOf(g, v)
	if !row.MayRevoke {
		a.fail(w, r, v, http.StatusForbidden, "Only the account's owners may revoke an app another member connected.")
		return
	}
	name := row.Client
	if !a.confirmed(w, r, v, confirmation{Title: "Disconnect " + name + "?", Action: "/oauth/grants/" + g.ID.String() + "/revoke",
		Button: "Revoke access of " + name, Back: "/oauth/grants", Consequences: []string{
			"Revoking the access of " + name + " (returning to " + row.RedirectHost + ", connected by " + row.Member +
				") stops it at once: from within a second every gateway refuses its MCP requests (401), and its refresh token no longer works.",
			"To use the gateway again the client must be allowed again on this console.",
		}}) {
		return
	}
	if _, err := a.oauth.Revoke(r.Context(), v.Account.AccountID, g.ID, actorName(v.User)); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			a.fail(w, r, v, http.StatusNotFound, "There is no such connected app (or it was revoked).")
			return
		}
		a.failInternal(w, r, v, "revoke an OAuth grant", err)
		return
	}
	a.record(r, v, actionOAuthRevoked, "client "+g.ClientID, map[string]string{"client": g.ClientName, "member": row.Member}, nil)
	a.renderGrants(w, r, v, "Revoked the access of "+name+".")
}
