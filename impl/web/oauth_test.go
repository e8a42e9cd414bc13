package web_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/mcpauth"
	"github.com/tollgate/tollgate/impl/web/members"
)

// oauthGrant runs a whole authorization for the member (the consent page's Approve, then the
// token endpoint) and returns the access token.
func (e *env) oauthGrant(t *testing.T, srv *mcpauth.Server, clientID, redirect string, account uuid.UUID, user members.User, role string) string {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	verifier := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(verifier))
	c, err := srv.CheckAuthorize(context.Background(), mcpauth.AuthorizeRequest{ResponseType: "code", ClientID: clientID, RedirectURI: redirect,
		CodeChallenge: base64.RawURLEncoding.EncodeToString(sum[:]), CodeChallengeMethod: "S256", Resource: e.URL + "/api/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	to, err := srv.Approve(context.Background(), c, account, user.ID, role)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(to)
	resp, err := http.PostForm(e.URL+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID},
		"code": {u.Query().Get("code")}, "code_verifier": {verifier}, "redirect_uri": {redirect}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.AccessToken == "" {
		t.Fatalf("token: %d %v", resp.StatusCode, err)
	}
	return out.AccessToken
}

// registerClient registers an OAuth client named name with the one redirect URI, as an MCP
// client does (dynamic client registration), and returns its client id.
func (e *env) registerClient(t *testing.T, name, redirect string) string {
	t.Helper()
	resp, err := http.Post(e.URL+"/oauth/register", "application/json", strings.NewReader(`{"client_name":"`+name+`","redirect_uris":["`+redirect+`"]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reg); err != nil {
		t.Fatal(err)
	}
	return reg.ClientID
}

// TestOAuthGrantsByRole: on Connected apps a member sees the account's grants but may revoke
// only those they approved (an owner's is offered disabled, and refused 403 when posted); an
// owner may revoke any. The consent page names the member's own role, and a cross-site post of
// the consent form is refused.
func TestOAuthGrantsByRole(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, "owner")
	bobUser, err := e.Members.Add(ctx, acme.ID, bobEmail, "member")
	if err != nil {
		t.Fatal(err)
	}
	aliceUser, err := e.Members.Add(ctx, acme.ID, aliceEmail, "owner")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcpauth.New(mcpauth.Options{Store: e.Store, PublicURL: e.Config.Web.PublicURL})
	if err != nil {
		t.Fatal(err)
	}
	redirect := "https://agent.example/cb"
	clientID := e.registerClient(t, "Agent", redirect)
	e.oauthGrant(t, srv, clientID, redirect, acme.ID, aliceUser, "owner")
	e.oauthGrant(t, srv, clientID, redirect, acme.ID, bobUser, "member")
	grants, err := srv.Grants(ctx, acme.ID)
	if err != nil || len(grants) != 2 {
		t.Fatalf("grants: %+v %v", grants, err)
	}
	var alices, bobs uuid.UUID
	for _, g := range grants {
		if g.UserID == aliceUser.ID {
			alices = g.ID
		} else {
			bobs = g.ID
		}
	}

	bob := e.browser(t)
	bob.signIn(e, bobEmail, bobPass)
	page := bob.get("/oauth/grants")
	if page.Status != http.StatusOK || strings.Contains(page.Body, `action="/oauth/grants/`+alices.String()+`/revoke"`) ||
		!strings.Contains(page.Body, `action="/oauth/grants/`+bobs.String()+`/revoke"`) || !strings.Contains(page.Body, `disabled aria-describedby="owners-only"`) {
		t.Fatalf("the member's Connected apps page: %d %.3000s", page.Status, page.Body)
	}
	if p := bob.post("/oauth/grants/"+alices.String()+"/revoke", confirmed); p.Status != http.StatusForbidden {
		t.Errorf("member revokes the owner's grant: %d, want 403", p.Status)
	}
	if p := bob.post("/oauth/grants/"+bobs.String()+"/revoke", nil); p.Status != http.StatusOK || !strings.Contains(p.Body, "stops it at once") {
		t.Errorf("member revokes own grant, unconfirmed: %d %.500s", p.Status, p.Body)
	}
	if gs, _ := srv.Grants(ctx, acme.ID); len(gs) != 2 {
		t.Fatalf("an unconfirmed revocation revoked: %d grants left", len(gs))
	}
	if p := bob.post("/oauth/grants/"+bobs.String()+"/revoke", confirmed); p.Status != http.StatusOK || !strings.Contains(p.Body, "Revoked the access of “Agent”") {
		t.Errorf("member revokes own grant: %d %.500s", p.Status, p.Body)
	}
	if gs, _ := srv.Grants(ctx, acme.ID); len(gs) != 1 || gs[0].ID != alices {
		t.Fatalf("after the member's revocation the grants are %+v, want the owner's only", gs)
	}

	// The consent page names the member's own role; a cross-site post of its form is refused.
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect},
		"code_challenge": {strings.Repeat("A", 43)}, "code_challenge_method": {"S256"}, "resource": {e.URL + "/api/mcp"}}
	if p := bob.get("/oauth/authorize?" + q.Encode()); p.Status != http.StatusOK || !strings.Contains(p.Body, bobEmail+", member") ||
		!strings.Contains(p.Header.Get("Content-Security-Policy"), "form-action https://agent.example 'self'") {
		t.Fatalf("the member's consent page: %d %v %.2000s", p.Status, p.Header.Get("Content-Security-Policy"), p.Body)
	}
	form := url.Values{"decision": {"allow"}, "account_id": {acme.ID.String()}}
	for k, v := range q {
		form[k] = v
	}
	if p := bob.do(http.MethodPost, "/oauth/authorize", form, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}); p.Status != http.StatusForbidden {
		t.Errorf("a cross-site post of the consent form: %d, want 403", p.Status)
	}
	if p := bob.post("/oauth/authorize", form); p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, redirect+"?code=") {
		t.Errorf("the member's allow: %d %q, want the redirect with a code", p.Status, p.Location)
	}
}

// TestConsentRefusalsStayOnConsole: a GET of the consent page that is refused (bad PKCE, no or
// another resource, a wrong response_type, an unregistered redirect URI, an unknown client) is
// answered with a page on the console, never a redirect, even to the client's registered
// redirect URI (which anyone can register: a redirect there would be an open redirector);
// after the member acts on a valid request, Deny sends the browser back with access_denied.
// And a decision posted after the visitor switched to another account is refused with a page,
// issuing nothing.
func TestConsentRefusalsStayOnConsole(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", aliceEmail, "owner")
	redirect := "https://evil.example/landing"
	clientID := e.registerClient(t, "Redirector", redirect)
	valid := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect},
		"code_challenge": {strings.Repeat("A", 43)}, "code_challenge_method": {"S256"}, "resource": {e.URL + "/api/mcp"}, "state": {"s1"}}
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	alice.chooseAccount(acme.ID.String())
	for name, edit := range map[string]func(url.Values){
		"plain PKCE":            func(q url.Values) { q.Set("code_challenge_method", "plain") },
		"no PKCE":               func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") },
		"no resource":           func(q url.Values) { q.Del("resource") },
		"another resource":      func(q url.Values) { q.Set("resource", "https://other.example/api/mcp") },
		"token response type":   func(q url.Values) { q.Set("response_type", "token") },
		"no response type":      func(q url.Values) { q.Del("response_type") },
		"unregistered redirect": func(q url.Values) { q.Set("redirect_uri", "https://elsewhere.example/cb") },
		"unknown client":        func(q url.Values) { q.Set("client_id", "tgc_unknown") },
	} {
		q := url.Values{}
		for k, v := range valid {
			q[k] = append([]string(nil), v...)
		}
		edit(q)
		p := alice.get("/oauth/authorize?" + q.Encode())
		if p.Status != http.StatusBadRequest || p.Location != "" || strings.Contains(p.Body, `action="/oauth/authorize"`) {
			t.Errorf("%s: %d Location %q, want a 400 page on the console and no redirect", name, p.Status, p.Location)
		}
	}
	form := url.Values{"decision": {"deny"}, "account_id": {acme.ID.String()}}
	for k, v := range valid {
		form[k] = v
	}
	if p := alice.get("/oauth/authorize?" + valid.Encode()); p.Status != http.StatusOK || !strings.Contains(p.Body, `name="account_id" value="`+acme.ID.String()+`"`) {
		t.Fatalf("the consent page: %d, want it to carry the account it shows %.2000s", p.Status, p.Body)
	}
	if p := alice.post("/oauth/authorize", form); p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, redirect+"?") ||
		!strings.Contains(p.Location, "error=access_denied") {
		t.Errorf("Deny: %d %q, want the redirect with access_denied", p.Status, p.Location)
	}
	// The page was shown for acme; the visitor then switched to globex in another tab.
	alice.chooseAccount(globex.ID.String())
	form.Set("decision", "allow")
	if p := alice.post("/oauth/authorize", form); p.Status != http.StatusConflict || p.Location != "" || !strings.Contains(p.Body, "switched accounts") {
		t.Errorf("Allow after switching accounts: %d %q, want a 409 page", p.Status, p.Location)
	}
	srv, err := mcpauth.New(mcpauth.Options{Store: e.Store, PublicURL: e.Config.Web.PublicURL})
	if err != nil {
		t.Fatal(err)
	}
	for _, acct := range []uuid.UUID{acme.ID, globex.ID} {
		if gs, err := srv.Grants(context.Background(), acct); err != nil || len(gs) != 0 {
			t.Errorf("grants of %s: %d %v, want none", acct, len(gs), err)
		}
	}
	var codes int
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM oauth_codes`).Scan(&codes); err != nil || codes != 0 {
		t.Errorf("codes issued: %d %v, want none", codes, err)
	}
}

// TestStaleSignInConsentReauthenticates: a grant is a credential like a key, so a browser whose
// sign-in is older than web.reauth_after is sent to sign in again both when it opens the consent
// page and when it posts Allow (with the request kept, to come back to the consent page), and
// no code is issued meanwhile; Deny needs no fresh sign-in.
func TestStaleSignInConsentReauthenticates(t *testing.T) {
	const reauthAfter = 3 * time.Second
	e := start(t, func(w *config.Web) { w.ReauthAfter = reauthAfter })
	acme := e.account(t, "acme", aliceEmail, "owner")
	redirect := "https://agent.example/cb"
	clientID := e.registerClient(t, "Agent", redirect)
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect},
		"code_challenge": {strings.Repeat("A", 43)}, "code_challenge_method": {"S256"}, "resource": {e.URL + "/api/mcp"}}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	if p := b.get("/oauth/authorize?" + q.Encode()); p.Status != http.StatusOK {
		t.Fatalf("the consent page of a fresh sign-in: %d", p.Status)
	}
	time.Sleep(reauthAfter + 100*time.Millisecond)

	p := b.get("/oauth/authorize?" + q.Encode())
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, e.URL+"/signin?") || !strings.Contains(p.Location, "reauth=1") {
		t.Fatalf("a stale GET of the consent page: %d %s", p.Status, p.Location)
	}
	back, err := url.Parse(p.Location)
	if err != nil {
		t.Fatal(err)
	}
	next, err := url.Parse(back.Query().Get("next"))
	if err != nil || next.Path != "/oauth/authorize" || next.Query().Get("client_id") != clientID || next.Query().Get("code_challenge") != q.Get("code_challenge") {
		t.Fatalf("the sign-in does not come back to the consent page: %s", p.Location)
	}
	form := url.Values{"decision": {"allow"}, "account_id": {acme.ID.String()}}
	for k, v := range q {
		form[k] = v
	}
	if p := b.post("/oauth/authorize", form); p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "reauth=1") {
		t.Fatalf("a stale Allow: %d %s", p.Status, p.Location)
	}
	if grants, err := e.Store.ListOAuthGrants(context.Background(), acme.ID, time.Now()); err != nil || len(grants) != 0 {
		t.Fatalf("a stale sign-in was granted: %d grants (%v)", len(grants), err)
	}
	form.Set("decision", "deny")
	if p := b.post("/oauth/authorize", form); p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, redirect+"?error=access_denied") {
		t.Fatalf("a stale Deny: %d %s", p.Status, p.Location)
	}
}

// TestConsentWithoutRedirectURI: an authorization request that leaves redirect_uri out (its
// client registered one) is shown, and its form posts it back as it came, without one; Allow
// sends the browser to the registered URI with a code, which the token endpoint redeems without
// redirect_uri, as RFC 6749 section 4.1.3 allows when the authorization request carried none.
// Before, the page filled the URI in, and the token endpoint required it always.
func TestConsentWithoutRedirectURI(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	redirect := "https://agent.example/cb"
	clientID := e.registerClient(t, "Agent", redirect)
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	verifier := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"}, "resource": {e.URL + "/api/mcp"}, "state": {"st-1"}}
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	p := alice.get("/oauth/authorize?" + q.Encode())
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "agent.example") {
		t.Fatalf("the consent page: %d %.2000s", p.Status, p.Body)
	}
	form := url.Values{"decision": {"allow"}, "account_id": {acme.ID.String()}}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`).FindAllStringSubmatch(p.Body, -1) {
		if m[1] != "csrf" && m[1] != "account_id" {
			form.Set(m[1], html.UnescapeString(m[2]))
		}
	}
	if form.Has("redirect_uri") {
		t.Errorf("the consent form carries redirect_uri %q, which the request left out", form.Get("redirect_uri"))
	}
	p = alice.post("/oauth/authorize", form)
	to, err := url.Parse(p.Location)
	if p.Status != http.StatusSeeOther || err != nil || to.Scheme+"://"+to.Host+to.Path != redirect || to.Query().Get("code") == "" {
		t.Fatalf("Allow: %d %s, want the registered redirect URI with a code", p.Status, p.Location)
	}
	resp, err := http.PostForm(e.URL+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID},
		"code": {to.Query().Get("code")}, "code_verifier": {verifier}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out["access_token"] == nil {
		t.Fatalf("the token request without redirect_uri: %d %v (%v)", resp.StatusCode, out, err)
	}
}

// nextFieldRe finds the page the account choice's forms return to.
var nextFieldRe = regexp.MustCompile(`name="next" value="([^"]*)"`)

// chooseAccountThenAllow follows p, the redirect of a visitor without a current account, to the
// account choice, chooses account there as the person does (the form the page shows), and
// allows the client on the consent page it comes back to; it returns where Allow sends the
// browser.
func chooseAccountThenAllow(t *testing.T, b *browser, p page, account uuid.UUID, q url.Values) string {
	t.Helper()
	choice := b.get(p.Location)
	m := nextFieldRe.FindStringSubmatch(choice.Body)
	if choice.Status != http.StatusOK || m == nil {
		t.Fatalf("the account choice: %d %.500s", choice.Status, choice.Body)
	}
	chosen := b.post("/signin/account", url.Values{"account_id": {account.String()}, "next": {html.UnescapeString(m[1])}})
	consent := b.follow(chosen, nil)
	if consent.Status != http.StatusOK || !strings.Contains(consent.Body, `name="decision" value="allow"`) {
		t.Fatalf("after choosing the account (sent to %s): %d %.300s, want the consent page", chosen.Location, consent.Status, consent.Body)
	}
	form := url.Values{"decision": {"allow"}, "account_id": {account.String()}}
	for k, v := range q {
		form[k] = v
	}
	allowed := b.post("/oauth/authorize", form)
	if allowed.Status != http.StatusSeeOther {
		t.Fatalf("Allow: %d %.300s", allowed.Status, allowed.Body)
	}
	return allowed.Location
}

// TestAccountChoiceKeepsTheAuthorizationRequest: a person signed in (at the real provider)
// with two accounts and none chosen yet, whose MCP client opens the consent page, is sent to
// choose the account and then back to the consent page with the client's request, whose Allow
// returns a code and the client's state to the client. Before, the choice lost the request:
// the person landed on the home page and the client waited for ever.
func TestAccountChoiceKeepsTheAuthorizationRequest(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	e.account(t, "globex", aliceEmail, "member")
	redirect := "https://agent.example/cb"
	clientID := e.registerClient(t, "Agent", redirect)
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect}, "state": {"st-choose"},
		"code_challenge": {strings.Repeat("A", 43)}, "code_challenge_method": {"S256"}, "resource": {e.URL + "/api/mcp"}}
	b := e.browser(t)
	if p := b.signIn(e, aliceEmail, alicePass); p.Status != http.StatusOK || !strings.Contains(p.Body, "Choose the one to work in") {
		t.Fatalf("the sign-in of a member of two accounts: %d, want the account choice", p.Status)
	}
	p := b.get("/oauth/authorize?" + q.Encode())
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, e.URL+"/signin/account") {
		t.Fatalf("the consent page without an account chosen: %d %s", p.Status, p.Location)
	}
	to, err := url.Parse(chooseAccountThenAllow(t, b, p, acme.ID, q))
	if err != nil || !strings.HasPrefix(to.String(), redirect+"?") || to.Query().Get("code") == "" || to.Query().Get("state") != "st-choose" {
		t.Fatalf("Allow after the account choice sent the browser to %v, want %s with a code and the state", to, redirect)
	}
}

// TestLongAuthorizationRequestSurvivesSignIns: an MCP client's authorization request with a
// state of 3 KiB comes back to the consent page through a first sign-in at the real provider,
// through the account choice and through the re-authentication before a grant, and Allow
// returns the whole state to the client. Before, the console kept the page a sign-in returns
// to only up to 2 KiB, and the person landed on the home page instead: the client waited for
// ever.
func TestLongAuthorizationRequestSurvivesSignIns(t *testing.T) {
	const reauthAfter = 3 * time.Second
	e := start(t, func(w *config.Web) { w.ReauthAfter = reauthAfter })
	acme := e.account(t, "acme", aliceEmail, "owner")
	e.account(t, "globex", aliceEmail, "member")
	redirect := "https://agent.example/cb"
	clientID := e.registerClient(t, "Agent", redirect)
	raw := make([]byte, 2304)
	_, _ = rand.Read(raw)
	state := base64.RawURLEncoding.EncodeToString(raw) // 3 KiB
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect}, "state": {state},
		"code_challenge": {strings.Repeat("A", 43)}, "code_challenge_method": {"S256"}, "resource": {e.URL + "/api/mcp"}}
	allowedWithState := func(to string) {
		t.Helper()
		u, err := url.Parse(to)
		if err != nil || !strings.HasPrefix(to, redirect+"?") || u.Query().Get("code") == "" || u.Query().Get("state") != state {
			t.Fatalf("Allow sent the browser to %.200s, want %s with a code and the whole state", to, redirect)
		}
	}
	b := e.browser(t)
	// The first sign-in, from the consent page, then the choice of the account.
	p := b.get("/oauth/authorize?" + q.Encode())
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, e.URL+"/signin?") {
		t.Fatalf("the consent page signed out: %d %s", p.Status, p.Location)
	}
	begin := b.get(p.Location)
	if begin.Status != http.StatusFound || !strings.HasPrefix(begin.Location, e.IdP.Issuer()) {
		t.Fatalf("the sign-in: %d %s", begin.Status, begin.Location)
	}
	back := b.get(b.toCallback(begin.Location, e.IdP.Issuer(), aliceEmail, alicePass))
	if back.Status != http.StatusSeeOther || !strings.HasPrefix(back.Location, e.URL+"/signin/account?") {
		t.Fatalf("the sign-in's callback: %d %s, want the account choice", back.Status, back.Location)
	}
	allowedWithState(chooseAccountThenAllow(t, b, back, acme.ID, q))
	// The re-authentication before a grant, once the sign-in is older than reauth_after.
	time.Sleep(reauthAfter + 100*time.Millisecond)
	p = b.get("/oauth/authorize?" + q.Encode())
	if p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "reauth=1") {
		t.Fatalf("a stale consent page: %d %s", p.Status, p.Location)
	}
	begin = b.get(p.Location)
	if begin.Status != http.StatusFound || !strings.HasPrefix(begin.Location, e.IdP.Issuer()) {
		t.Fatalf("the re-authentication: %d %s", begin.Status, begin.Location)
	}
	consent := b.follow(b.get(b.toCallback(begin.Location, e.IdP.Issuer(), aliceEmail, alicePass)), nil)
	if consent.Status != http.StatusOK || !strings.Contains(consent.Body, `name="decision" value="allow"`) || !strings.Contains(consent.Body, state) {
		t.Fatalf("after the re-authentication: %d %.300s, want the consent page with the state", consent.Status, consent.Body)
	}
	form := url.Values{"decision": {"allow"}, "account_id": {acme.ID.String()}}
	for k, v := range q {
		form[k] = v
	}
	allowed := b.post("/oauth/authorize", form)
	if allowed.Status != http.StatusSeeOther {
		t.Fatalf("Allow after the re-authentication: %d %.300s", allowed.Status, allowed.Body)
	}
	allowedWithState(allowed.Location)
}
