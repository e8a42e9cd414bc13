package web_test

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/web"
)

// unboundPosts are the console's POST routes that act on no account and so need not name one
// (docs/web.md, "Forms bound to the account they were shown in"): the account switch names the
// account it goes to, sign-up makes a new account, sign-out must work from any stale page, and
// the Sessions page's ends the person's own sessions, the same list in every account.
var unboundPosts = []string{"POST /signout", "POST /signin/account", "POST /signin/signup",
	"POST /sessions/{id}/end", "POST /sessions/end-all"}

// TestEveryPostIsBoundToTheShownAccount lists the console's routes from its router (so that a
// route added later is checked too) and, as a member and owner of two accounts working in the
// second, posts to every state-changing route but unboundPosts twice: without account_id and
// naming the first account. Each is refused with the 409 page naming both accounts (or saying
// the form named none), and nothing changes: no key is made or changed in either account and
// neither audits anything. Before, a form without account_id acted in the account switched to.
func TestEveryPostIsBoundToTheShownAccount(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", aliceEmail, "owner")
	ctx := context.Background()
	key, err := e.Accounts.CreateKey(ctx, globex.ID, "globex-key", 0)
	if err != nil {
		t.Fatal(err)
	}
	app, err := web.New(web.Options{Store: e.Store, Config: e.Config})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	b.chooseAccount(globex.ID.String())

	audited := func() (n int) {
		if err := e.Store.Pool().QueryRow(ctx, "SELECT count(*) FROM audit_log WHERE account_id = ANY($1)",
			[]uuid.UUID{acme.ID, globex.ID}).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	auditedBefore := audited()
	wildcard := regexp.MustCompile(`\{[^}]+\}`)
	var bound, unbound []string
	for _, pattern := range app.RoutePatterns() {
		method, path, hasMethod := strings.Cut(pattern, " ")
		if !hasMethod || method == http.MethodGet || method == http.MethodHead {
			continue // "/" (no such page) and the pages
		}
		if slices.Contains(unboundPosts, pattern) {
			unbound = append(unbound, pattern)
			continue
		}
		bound = append(bound, pattern)
		path = wildcard.ReplaceAllString(path, key.Key.ID.String())
		fields := url.Values{"confirm": {"yes"}, "confirm_text": {"REVOKE"}, "name": {"made-after-a-switch"},
			"decision": {"allow"}, "slot": {"main"}, "prompt": {"x"}, "message": {"x"}}
		for _, shown := range []string{"", acme.ID.String()} {
			var p page
			if path == "/datasets" {
				p = b.uploadRaw(shown, []byte("a,b\n1,2\n"))
			} else {
				form := url.Values{}
				for k, v := range fields {
					form[k] = v
				}
				if shown != "" {
					form.Set("account_id", shown)
				}
				p = b.postRaw(path, form)
			}
			was := "no account"
			if shown != "" {
				was = "acme"
			}
			if p.Status != http.StatusConflict || !strings.Contains(p.Body, "This page was for "+was) ||
				!strings.Contains(p.Body, "you are now working in globex") {
				t.Errorf("%s %s with account_id %q: %d, want 409 naming %s and globex: %.400s", method, path, shown, p.Status, was, p.Body)
			}
		}
	}
	if len(bound) < 15 {
		t.Errorf("only %d bound routes found: %v", len(bound), bound)
	}
	if len(unbound) != len(unboundPosts) {
		t.Errorf("unbound routes registered %v, want %v", unbound, unboundPosts)
	}
	for _, id := range []uuid.UUID{acme.ID, globex.ID} {
		keys, err := e.Accounts.ListKeys(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k.Name != "globex-key" || k.Status != "active" {
				t.Errorf("account %s has key %s (%s) after the refused posts", id, k.Name, k.Status)
			}
		}
	}
	if n := audited(); n != auditedBefore {
		t.Errorf("%d audit entries after the refused posts, want %d", n, auditedBefore)
	}
}

// uploadRaw posts a dataset upload whose form names shown first ("": no account_id part).
func (b *browser) uploadRaw(shown string, content []byte) page {
	b.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if shown != "" {
		_ = mw.WriteField("account_id", shown)
	}
	_ = mw.WriteField("name", "made-after-a-switch")
	fw, _ := mw.CreateFormFile("file", "x.csv")
	_, _ = fw.Write(content)
	_ = mw.Close()
	req, err := http.NewRequest(http.MethodPost, b.app+"/datasets", &body)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Origin", b.app)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return page{Status: resp.StatusCode, Body: string(raw)}
}
