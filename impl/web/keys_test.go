package web_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
)

var plainKeyRe = regexp.MustCompile(`value="(tgk_[^"]+)"`)

// confirmed is the form field that confirms a destructive action (impl/web/confirm.go).
var confirmed = url.Values{"confirm": {"yes"}}

// createKey creates a key on the page and returns the plain key shown.
func createKey(t *testing.T, b *browser, name string) string {
	t.Helper()
	if p := b.get("/keys/new"); p.Status != http.StatusOK {
		t.Fatalf("GET /keys/new: %d %s", p.Status, p.Location)
	}
	p := b.post("/keys", url.Values{"name": {name}, "rpm": {"30"}})
	if p.Status != http.StatusCreated {
		t.Fatalf("POST /keys: %d %s %.300s", p.Status, p.Location, p.Body)
	}
	m := plainKeyRe.FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no key shown: %.500s", p.Body)
	}
	return m[1]
}

// TestKeyShownOnce: a key created on the page is shown in that response only: it works on the
// API, the Keys page lists its prefix but never the key, only its hash is stored, and the
// creation is audited with its creator.
func TestKeyShownOnce(t *testing.T) {
	e := start(t, nil)
	acct := e.account(t, "acme", aliceEmail, "member")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	plain := createKey(t, b, "laptop")

	api := e.browser(t)
	if p := api.do("GET", "/v1/models", nil, map[string]string{"Authorization": "Bearer " + plain}); p.Status != http.StatusOK {
		t.Fatalf("the new key on /v1/models: %d %.200s", p.Status, p.Body)
	}
	for _, path := range []string{"/keys", "/", "/audit", "/sessions", "/keys/new"} {
		if p := b.get(path); strings.Contains(p.Body, plain) || strings.Contains(p.Body, plain[len(plain)-12:]) {
			t.Errorf("GET %s shows the key again", path)
		}
	}
	keys := b.get("/keys")
	if !strings.Contains(keys.Body, "laptop") || !strings.Contains(keys.Body, ">active<") ||
		!strings.Contains(keys.Body, "…"+plain[len(plain)-4:]+"</code>") {
		t.Errorf("keys page: %.600s", keys.Body)
	}
	var n int
	pool := e.Store.Pool()
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM web_sessions WHERE position($1::bytea in data) > 0`, []byte(plain)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the key is in a session: %d %v", n, err)
	}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE account_id = $1 AND action = 'key.created' AND actor = $2 AND after->>'name' = 'laptop' AND after->>'rpm_limit' = '30'`, acct.ID, aliceEmail).Scan(&n); err != nil || n != 1 {
		t.Fatalf("key.created audited: %d %v", n, err)
	}
	if p := b.get("/audit"); !strings.Contains(p.Body, "key.created") {
		t.Errorf("the audit page does not show the creation")
	}
}

// TestStaleSignInCreatingKeyReauthenticates: with a sign-in older than reauth_after, creating a
// key creates nothing and sends the browser through the provider with max_age=0 and
// prompt=login (which shows its login form again although its session is alive); afterwards
// the form comes back and the key is created.
//
// The provider states when it authenticated in whole seconds (the ID token's auth_time), so a
// sign-in can look up to a second older than it is: reauth_after is 3 s, which leaves the steps
// after re-authenticating at least 2 s on a loaded machine (with 1 s, a CI run on a busy host
// found the fresh sign-in already stale when the key was created).
func TestStaleSignInCreatingKeyReauthenticates(t *testing.T) {
	const reauthAfter = 3 * time.Second
	e := start(t, func(w *config.Web) { w.ReauthAfter = reauthAfter })
	acct := e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	time.Sleep(reauthAfter + 100*time.Millisecond)
	p := b.post("/keys", url.Values{"name": {"stale"}})
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, e.URL+"/signin?") || !strings.Contains(p.Location, "reauth=1") {
		t.Fatalf("stale POST /keys: %d %s", p.Status, p.Location)
	}
	if keys, _ := e.Store.ListAPIKeys(context.Background(), acct.ID); len(keys) != 0 {
		t.Fatalf("a stale sign-in created %d keys", len(keys))
	}
	if g := b.get("/keys/new"); g.Status != http.StatusSeeOther || !strings.Contains(g.Location, "reauth=1") {
		t.Fatalf("stale GET /keys/new: %d %s", g.Status, g.Location)
	}
	authz := b.get(p.Location)
	if authz.Status != http.StatusFound || !strings.Contains(authz.Location, "prompt=login") || !strings.Contains(authz.Location, "max_age=0") ||
		!strings.Contains(authz.Location, "login_hint="+url.QueryEscape(aliceEmail)) {
		t.Fatalf("re-authentication request: %d %s (want login_hint naming her: trial h6 found the form empty)", authz.Status, authz.Location)
	}
	form := b.follow(b.get(authz.Location), func(u string) bool { return strings.HasPrefix(u, e.URL) })
	if !authRequestRe.MatchString(form.Body) {
		t.Fatalf("the provider did not ask for the password again: %d %s", form.Status, form.Location)
	}
	if !strings.Contains(form.Body, `value="`+aliceEmail+`"`) {
		t.Errorf("the provider's form does not have her e-mail filled in")
	}
	back := b.follow(b.login(form, e.IdP.Issuer(), aliceEmail, alicePass), func(u string) bool { return strings.HasPrefix(u, e.URL+"/keys/new") })
	if back.Location != e.URL+"/keys/new" {
		t.Fatalf("after re-authentication: %d %s %.200s", back.Status, back.Location, back.Body)
	}
	createKey(t, b, "fresh")
}

// TestOtherAccountKeyNotFound: every key action with another account's key id answers 404,
// exactly as an unknown id, and leaves the key alone.
func TestOtherAccountKeyNotFound(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	other := e.account(t, "globex", bobEmail, "owner")
	theirs, err := e.Accounts.CreateKey(context.Background(), other.ID, "theirs", 10)
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	for _, action := range []string{"revoke", "limits", "disable", "enable"} {
		for _, id := range []string{theirs.Key.ID.String(), "7b0c2f2e-0000-4000-8000-000000000000", "not-a-uuid"} {
			p := b.post("/keys/"+id+"/"+action, url.Values{"rpm": {"1"}})
			if p.Status != http.StatusNotFound {
				t.Errorf("POST /keys/%s/%s: %d", id, action, p.Status)
			}
		}
	}
	// Revoke all revokes only the account's own keys.
	if p := b.post("/keys/revoke-all", url.Values{"confirm": {"yes"}, "confirm_text": {"acme"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("revoke all: %d", p.Status)
	}
	got, err := e.Store.GetAPIKey(context.Background(), theirs.Key.ID)
	if err != nil || got.RevokedAt != nil || got.RPMLimit != 10 {
		t.Fatalf("the other account's key changed: %+v %v", got, err)
	}
	if p := b.get("/keys"); strings.Contains(p.Body, "theirs") || strings.Contains(p.Body, theirs.Key.ID.String()) {
		t.Fatal("the other account's key is listed")
	}
}

// TestKeyRevokeAndRevokeAll: revoking on the page makes the key refused by the API (401);
// revoke all is for owners. Each is confirmed first, on the server: the row's form answers with
// a page that names the key and what stops working, and changes nothing (as it would without
// JavaScript); only the confirmation's form revokes. Revoke all also asks for the account's
// name to be typed.
func TestKeyRevokeAndRevokeAll(t *testing.T) {
	e := start(t, nil)
	acct := e.account(t, "acme", aliceEmail, "owner")
	e.Members.Add(context.Background(), acct.ID, bobEmail, "member")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	plain := createKey(t, b, "one")
	createKey(t, b, "two")
	keys, _ := e.Store.ListAPIKeys(context.Background(), acct.ID)
	one := keys[0]
	if one.Name != "one" {
		t.Fatalf("the first key is %q", one.Name)
	}
	ask := b.post("/keys/"+one.ID.String()+"/revoke", nil)
	if ask.Status != http.StatusOK || !strings.Contains(ask.Body, "Revoking key “one” ("+one.DisplayPrefix+"…"+one.DisplaySuffix+") stops every client that uses it, at once") ||
		!strings.Contains(ask.Body, `<input type="hidden" name="confirm" value="yes">`) || !strings.Contains(ask.Body, `action="/keys/`+one.ID.String()+`/revoke"`) {
		t.Fatalf("revoke without confirmation: %d %.2000s", ask.Status, ask.Body)
	}
	if k, _ := e.Store.GetAPIKey(context.Background(), one.ID); k.RevokedAt != nil {
		t.Fatal("the key was revoked before the revocation was confirmed")
	}
	if p := b.post("/keys/"+one.ID.String()+"/revoke", url.Values{"confirm": {"yes"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("revoke: %d", p.Status)
	}
	api := e.browser(t)
	deadline := time.Now().Add(5 * time.Second)
	for api.do("GET", "/v1/models", nil, map[string]string{"Authorization": "Bearer " + plain}).Status != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatal("the revoked key still works")
		}
		time.Sleep(20 * time.Millisecond)
	}
	member := e.browser(t)
	member.signIn(e, bobEmail, bobPass)
	if p := member.post("/keys/revoke-all", url.Values{"confirm": {"yes"}, "confirm_text": {"acme"}}); p.Status != http.StatusForbidden {
		t.Fatalf("revoke all by a member: %d", p.Status)
	}
	ask = b.post("/keys/revoke-all", nil)
	if ask.Status != http.StatusOK || !strings.Contains(ask.Body, "Revoking all keys of acme stops every client and agent that uses any of its 1 keys") ||
		!strings.Contains(ask.Body, "<li>“two” (") || strings.Contains(ask.Body, "<li>“one” (") || !strings.Contains(ask.Body, `name="confirm_text"`) {
		t.Fatalf("revoke all without confirmation: %d %.2000s", ask.Status, ask.Body)
	}
	if p := b.post("/keys/revoke-all", url.Values{"confirm": {"yes"}, "confirm_text": {"acm"}}); p.Status != http.StatusUnprocessableEntity ||
		!strings.Contains(p.Body, "Type acme exactly to confirm. Nothing was changed.") {
		t.Fatalf("revoke all with the account's name mistyped: %d %.1000s", p.Status, p.Body)
	}
	if n, _ := e.Store.CountUnrevokedAPIKeys(context.Background(), acct.ID); n != 1 {
		t.Fatalf("%d keys left after unconfirmed revocations, want 1", n)
	}
	if p := b.post("/keys/revoke-all", url.Values{"confirm": {"yes"}, "confirm_text": {"acme"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("revoke all by the owner: %d", p.Status)
	}
	keys, _ = e.Store.ListAPIKeys(context.Background(), acct.ID)
	for _, k := range keys {
		if k.RevokedAt == nil {
			t.Errorf("key %s not revoked", k.Name)
		}
	}
}

// TestKeyLimitsOnThePage: a key made with a credit cap, a period, an expiry and a model subset
// shows them; disabling it makes the API refuse it (401) until it is enabled; limits changed
// on the page apply and are audited with before and after; invalid limits are refused on the
// form (422, with an alert).
func TestKeyLimitsOnThePage(t *testing.T) {
	e := start(t, nil)
	acct := e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	expires := time.Now().AddDate(0, 1, 0).UTC().Format("2006-01-02")
	p := b.post("/keys", url.Values{"name": {"capped"}, "rpm": {"60"}, "credit_cap": {"2.50"}, "cap_period": {"daily"},
		"expires": {expires}, "models": {"service-sonnet"}})
	if p.Status != http.StatusCreated {
		t.Fatalf("create: %d %.400s", p.Status, p.Body)
	}
	plain := plainKeyRe.FindStringSubmatch(p.Body)[1]
	keys, _ := e.Store.ListAPIKeys(context.Background(), acct.ID)
	k := keys[0]
	if k.CreditCapMicros == nil || *k.CreditCapMicros != 2_500_000 || k.CapPeriod != "daily" || k.ExpiresAt == nil ||
		len(k.Models) != 1 || k.Models[0] != "service-sonnet" || k.RPMLimit != 60 || k.CreatedBy != aliceEmail {
		t.Fatalf("key as stored: %+v", k)
	}
	list := b.get("/keys").Body
	for _, want := range []string{`<span class="money">$2.50</span>`, "(daily)", "service-sonnet", aliceEmail, expires} {
		if !strings.Contains(list, want) {
			t.Errorf("keys page lacks %q", want)
		}
	}
	bearer := map[string]string{"Authorization": "Bearer " + plain}
	api := e.browser(t)
	waitStatus := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			got := api.do("GET", "/v1/models", nil, bearer).Status
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/v1/models: %d, want %d", got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitStatus(http.StatusOK)
	if p := b.post("/keys/"+k.ID.String()+"/disable", nil); p.Status != http.StatusOK || !strings.Contains(p.Body, "Disabling key “capped”") {
		t.Fatalf("disable without confirmation: %d %.1000s", p.Status, p.Body)
	}
	waitStatus(http.StatusOK)
	if p := b.post("/keys/"+k.ID.String()+"/disable", url.Values{"confirm": {"yes"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("disable: %d", p.Status)
	}
	waitStatus(http.StatusUnauthorized)
	if !strings.Contains(b.get("/keys").Body, ">disabled<") {
		t.Error("the page does not show the key disabled")
	}
	if p := b.post("/keys/"+k.ID.String()+"/enable", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("enable: %d", p.Status)
	}
	waitStatus(http.StatusOK)
	if p := b.post("/keys/"+k.ID.String()+"/limits", url.Values{"rpm": {"90"}, "credit_cap": {""}, "cap_period": {"none"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("limits: %d %.300s", p.Status, p.Body)
	}
	k2, _ := e.Store.GetAPIKey(context.Background(), k.ID)
	if k2.RPMLimit != 90 || k2.CreditCapMicros != nil || k2.ExpiresAt == nil || len(k2.Models) != 1 {
		t.Fatalf("after the limits change: %+v", k2)
	}
	var n int
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'limits.changed'
		AND before->>'rpm_limit' = '60' AND after->>'rpm_limit' = '90' AND before ? 'credit_cap_micros' AND NOT after ? 'credit_cap_micros'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("limits change audited: %d %v", n, err)
	}
	for _, form := range []url.Values{
		{"rpm": {"-1"}}, {"credit_cap": {"lots"}}, {"expires": {"yesterday"}}, {"models": {"no-such-model"}},
		{"expires": {"2001-01-01"}}, {"credit_cap": {"-1"}}, {"credit_cap": {"1.0000001"}},
	} {
		if p := b.post("/keys", form); p.Status != http.StatusUnprocessableEntity || !strings.Contains(p.Body, `role="alert"`) {
			t.Errorf("create with %v: %d", form, p.Status)
		}
	}
}

// TestKeyFormSentTwice: the new-key form sent again (a reload of the page that showed the key,
// whose resubmit question a person answers "Continue") creates no second key: the answer
// names the key the form created and says its secret was shown once. A new showing of the
// form creates a new key. Newcomer trial: a reload made a second active key of the same name.
func TestKeyFormSentTwice(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "member")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	formID := regexp.MustCompile(`name="form_id" value="([^"]+)"`)
	send := func() (first, again page) {
		t.Helper()
		m := formID.FindStringSubmatch(b.get("/keys/new").Body)
		if m == nil {
			t.Fatal("the form has no form_id")
		}
		form := url.Values{"form_id": {m[1]}, "name": {"reload-test"}}
		return b.post("/keys", form), b.post("/keys", form)
	}
	first, again := send()
	if first.Status != http.StatusCreated || !plainKeyRe.MatchString(first.Body) {
		t.Fatalf("POST /keys: %d %.300s", first.Status, first.Body)
	}
	if again.Status != http.StatusConflict || plainKeyRe.MatchString(again.Body) ||
		!strings.Contains(html.UnescapeString(again.Body), "This form was sent already: it created the key “reload-test”") {
		t.Errorf("the form sent again: %d %.1500s", again.Status, again.Body)
	}
	if n := strings.Count(b.get("/keys").Body, ">reload-test<"); n != 1 {
		t.Errorf("%d keys named reload-test after the form was sent twice, want 1", n)
	}
	if first, _ := send(); first.Status != http.StatusCreated {
		t.Errorf("a new showing of the form: %d", first.Status)
	}
	if n := strings.Count(b.get("/keys").Body, ">reload-test<"); n != 2 {
		t.Errorf("%d keys named reload-test after a second form, want 2", n)
	}
}

// TestKeyFormSaysTheNameIsOptional (last session's newcomer walk): the new-key form's Name field did
// not say it may be left empty, though a key without a name is made (as `tollgate admin key
// create` without -name makes one). The label now says "(optional)", and a hint the field
// points to says what an empty name gives: a key the Keys page lists as (unnamed), known by its
// prefix and last four. A form sent with the name empty creates such a key.
func TestKeyFormSaysTheNameIsOptional(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "member")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	form := html.UnescapeString(b.get("/keys/new").Body)
	for _, want := range []string{`<label for="name">Name (optional)</label>`, `aria-describedby="name-help"`,
		`<span id="name-help" class="help">Empty: the key has no name; the Keys page lists it as (unnamed), known by its prefix and last four characters. At most 100 characters.</span>`} {
		if !strings.Contains(form, want) {
			t.Errorf("the new-key form lacks %q:\n%.2500s", want, form)
		}
	}
	plain := createKey(t, b, "")
	keys := b.get("/keys").Body
	if !strings.Contains(keys, "(unnamed)") || !strings.Contains(keys, "…"+plain[len(plain)-4:]+"</code>") {
		t.Errorf("the Keys page after a key made without a name:\n%.2500s", keys)
	}
	// The form refused for its name still points at both the hint and the error.
	b.get("/keys/new")
	p := b.post("/keys", url.Values{"name": {strings.Repeat("n", 101)}})
	if p.Status != http.StatusUnprocessableEntity || !strings.Contains(p.Body, `aria-describedby="name-help form-error"`) {
		t.Errorf("a name of 101 characters: %d %.2500s", p.Status, p.Body)
	}
}

// TestKeyCreatedNamesItsNamesakes (last session's newcomer walk): a key made on the console
// with the name of another key of the account that is not revoked was shown with no word of
// the other, while `tollgate admin key create` names its namesakes. The key-created page now
// warns, naming the other keys of the name (whatever its letter case) by their prefix and last
// four, and the new key's last four; the key is made all the same. A revoked key, another
// account's key and a key without a name are not named.
func TestKeyCreatedNamesItsNamesakes(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	rival := e.account(t, "rival", "", "")
	if _, err := e.Accounts.CreateKey(context.Background(), rival.ID, "ci", -1); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	// create makes a key named name on the page and returns its last four and the page.
	create := func(name string) (string, string) {
		t.Helper()
		b.get("/keys/new")
		p := b.post("/keys", url.Values{"name": {name}})
		m := plainKeyRe.FindStringSubmatch(p.Body)
		if p.Status != http.StatusCreated || m == nil {
			t.Fatalf("create %q: %d %.500s", name, p.Status, p.Body)
		}
		return m[1][len(m[1])-4:], html.UnescapeString(p.Body)
	}
	const warning = `<p class="warning" role="note" id="namesakes">Warning: `
	first, page := create("ci")
	if strings.Contains(page, warning) {
		t.Errorf("the account's first ci warns:\n%.3000s", page)
	}
	second, page := create("ci")
	for _, want := range []string{warning + "the account has 1 other key named “ci” that is not revoked: “ci” (tgk_",
		"…" + first + ")", "The new key ends …" + second + ".", "revoke one of them on the Keys page"} {
		if !strings.Contains(page, want) {
			t.Errorf("the second ci's page lacks %q:\n%.3000s", want, page)
		}
	}
	if _, page := create("CI"); !strings.Contains(page, "2 other keys named “CI” that are not revoked") ||
		!strings.Contains(page, "…"+first+")") || !strings.Contains(page, "…"+second+")") {
		t.Errorf("CI beside two ci:\n%.3000s", page)
	}
	if _, page := create(""); strings.Contains(page, warning) {
		t.Errorf("a key without a name warns:\n%.3000s", page)
	}
	if _, page := create("deploy"); strings.Contains(page, warning) {
		t.Errorf("a key named deploy warns:\n%.3000s", page)
	}
	keys, err := e.Accounts.ListKeys(context.Background(), acme.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.DisplaySuffix == first {
			if _, err := e.Accounts.Revoke(context.Background(), k.AccountID, k.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, page := create("ci"); strings.Contains(page, "…"+first+")") || !strings.Contains(page, "2 other keys named “ci”") {
		t.Errorf("ci after the first ci's revocation, want it left out:\n%.3000s", page)
	}
}
