package web_test

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// TestCreationFormsBindTheShownAccount: a member of two accounts opens the new-key form in
// one, switches to the other in another tab, then sends the form: it is refused (409, a page
// saying so) and no key is created in either account (before, the key was created in the
// account switched to, which the form never named: trial h3 of 2026-12-06). Sent again from a
// page shown in the current account, it creates the key there. A form without the field is
// refused too (before, it was taken as sent in the current account).
func TestCreationFormsBindTheShownAccount(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	if r := b.post("/signin/account", url.Values{"account_id": {acme.ID.String()}}); r.Status != http.StatusSeeOther {
		t.Fatalf("choose acme: %d", r.Status)
	}
	fields := regexp.MustCompile(`name="(form_id|account_id)" value="([^"]+)"`)
	shown := func() url.Values {
		v := url.Values{}
		for _, m := range fields.FindAllStringSubmatch(b.get("/keys/new").Body, -1) {
			v.Set(m[1], m[2])
		}
		return v
	}
	form := shown()
	if form.Get("account_id") != acme.ID.String() || form.Get("form_id") == "" {
		t.Fatalf("the new-key form's fields %v, want its form_id and acme's id", form)
	}
	// The other tab: the visitor is in globex now.
	if r := b.post("/signin/account", url.Values{"account_id": {globex.ID.String()}}); r.Status != http.StatusSeeOther {
		t.Fatalf("choose globex: %d", r.Status)
	}
	form.Set("name", "made-in-acme's-page")
	p := b.post("/keys", form)
	if p.Status != http.StatusConflict || !strings.Contains(p.Body, "This page was for acme; you are now working in globex") {
		t.Fatalf("the form shown in acme, sent in globex: %d %.500s", p.Status, p.Body)
	}
	named := func(name string) (n int) {
		for _, id := range []uuid.UUID{acme.ID, globex.ID} {
			keys, err := e.Accounts.ListKeys(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if k.Name == name {
					n++
				}
			}
		}
		return n
	}
	if n := named("made-in-acme's-page"); n != 0 {
		t.Fatalf("%d keys created by the refused form", n)
	}
	form = shown()
	if form.Get("account_id") != globex.ID.String() {
		t.Fatalf("the form shown now names %s, want globex", form.Get("account_id"))
	}
	form.Set("name", "made-in-globex")
	if p := b.post("/keys", form); p.Status != http.StatusCreated {
		t.Fatalf("the form shown in globex, sent in globex: %d %.500s", p.Status, p.Body)
	}
	keys, err := e.Accounts.ListKeys(context.Background(), globex.ID)
	if err != nil || len(keys) != 1 || keys[0].Name != "made-in-globex" {
		t.Fatalf("globex's keys %v (%v), want the one made there", keys, err)
	}
	// A form that names no account is refused too (before, it was taken as in the account
	// the visitor was in).
	form = shown()
	form.Del("account_id")
	form.Set("name", "older-page")
	if p := b.postRaw("/keys", form); p.Status != http.StatusConflict || named("older-page") != 0 ||
		!strings.Contains(p.Body, "This page was for no account") {
		t.Fatalf("a form without account_id: %d, %d keys: %.500s", p.Status, named("older-page"), p.Body)
	}
}

// TestAgentStartBindsTheShownAccount: the Agents page's start form carries the account it was
// shown in, and sent after the visitor switched accounts it starts nothing (409).
func TestAgentStartBindsTheShownAccount(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", aliceEmail, "owner")
	for _, id := range []uuid.UUID{acme.ID, globex.ID} {
		if _, err := db.New(e.Store.Pool()).InsertAgentSlot(context.Background(), db.InsertAgentSlotParams{AccountID: id, Name: "main"}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	b.post("/signin/account", url.Values{"account_id": {acme.ID.String()}})
	page := b.get("/agents")
	m := regexp.MustCompile(`action="/agents/start"[^>]*>\s*<input type="hidden" name="account_id" value="([^"]+)">`).FindStringSubmatch(page.Body)
	if m == nil || m[1] != acme.ID.String() {
		t.Fatalf("the start form does not carry acme's id: %.2000s", page.Body)
	}
	b.post("/signin/account", url.Values{"account_id": {globex.ID.String()}})
	p := b.post("/agents/start", url.Values{"account_id": {m[1]}, "slot": {"main"}, "prompt": {"tidy the docs"}})
	if p.Status != http.StatusConflict || !strings.Contains(p.Body, "This page was for acme; you are now working in globex") {
		t.Fatalf("the form shown in acme, sent in globex: %d %.500s", p.Status, p.Body)
	}
	for _, id := range []uuid.UUID{acme.ID, globex.ID} {
		var n int
		if err := e.Store.Pool().QueryRow(context.Background(), "SELECT count(*) FROM agent_sessions WHERE account_id = $1", id).Scan(&n); err != nil || n != 0 {
			t.Fatalf("account %s has %d agent sessions (%v), want none", id, n, err)
		}
	}
}

// TestDatasetUploadBindsTheShownAccount: the Datasets page's upload form carries the account it
// was shown in, before its file; sent after the visitor switched accounts in another tab, it is
// refused (409) as soon as that field is read, before the file has been sent in full, and
// stores nothing in either account (before, the file was stored in the account switched to). A
// form whose field comes after the file (a client that orders the parts otherwise) names no
// account in its first part and is refused too, before its file is read. Sent from a page shown in the current account, the
// upload is stored there.
func TestDatasetUploadBindsTheShownAccount(t *testing.T) {
	e := start(t, nil)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the upload's temporary file goes (after start: not the database's)
	acme := e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	b.chooseAccount(acme.ID.String())
	shownIn := func() string {
		t.Helper()
		page := b.get("/datasets")
		m := regexp.MustCompile(`<form method="post" action="/datasets" enctype="multipart/form-data"[^>]*>\s*<input type="hidden" name="account_id" value="([^"]+)">`).FindStringSubmatch(page.Body)
		if m == nil {
			t.Fatalf("the upload form does not begin with the account's id: %.3000s", page.Body)
		}
		return m[1]
	}
	shown := shownIn()
	if shown != acme.ID.String() {
		t.Fatalf("the upload form names %s, want acme %s", shown, acme.ID)
	}
	b.chooseAccount(globex.ID.String()) // the other tab

	// The form's parts in the page's order, the file still being sent when the answer comes.
	pr, pw := io.Pipe()
	defer pw.Close()
	mw := multipart.NewWriter(pw)
	req, err := http.NewRequest(http.MethodPost, b.app+"/datasets", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Origin", b.app)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	go func() {
		_ = mw.WriteField("account_id", shown)
		_ = mw.WriteField("name", "sales")
		fw, err := mw.CreateFormFile("file", "sales.csv")
		if err != nil {
			return
		}
		_, _ = fw.Write([]byte(salesCSV))
		// The rest of the file is never sent: only a refusal that does not wait for it answers.
	}()
	type answer struct {
		status int
		body   string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := b.c.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		done <- answer{status: resp.StatusCode, body: string(raw)}
	}()
	select {
	case a := <-done:
		if a.err != nil || a.status != http.StatusConflict || !strings.Contains(a.body, "This page was for acme; you are now working in globex") {
			t.Fatalf("the form shown in acme, sent in globex: %d %v %.500s", a.status, a.err, a.body)
		}
	case <-time.After(5 * time.Second):
		// The old code reads the whole file first: finish the form, and see where it went.
		_ = mw.Close()
		_ = pw.Close()
		a := <-done
		t.Fatalf("no refusal before the file was sent in full; once it was: %d %v %.300s", a.status, a.err, a.body)
	}

	// The field after the file: the first part names no account, refused all the same, and no
	// temporary file is left.
	var body bytes.Buffer
	mw2 := multipart.NewWriter(&body)
	fw, _ := mw2.CreateFormFile("file", "sales.csv")
	_, _ = fw.Write([]byte(salesCSV))
	_ = mw2.WriteField("account_id", shown)
	_ = mw2.Close()
	req2, _ := http.NewRequest(http.MethodPost, b.app+"/datasets", &body)
	req2.Header.Set("Content-Type", mw2.FormDataContentType())
	req2.Header.Set("Origin", b.app)
	req2.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := b.c.Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(raw), "This page was for no account") {
		t.Fatalf("the field after the file, shown in acme, sent in globex: %d %.500s", resp.StatusCode, raw)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "tollgate-upload-*")); len(left) != 0 {
		t.Errorf("temporary upload files left: %v", left)
	}

	for _, id := range []uuid.UUID{acme.ID, globex.ID} {
		b.chooseAccount(id.String())
		if p := b.get("/datasets"); !strings.Contains(p.Body, "No datasets yet") {
			t.Fatalf("account %s stores a dataset after the refused uploads: %.2000s", id, p.Body)
		}
	}

	// Shown in globex, sent in globex: stored there.
	if now := shownIn(); now != globex.ID.String() {
		t.Fatalf("the upload form names %s now, want globex", now)
	} else if p := b.upload(map[string]string{"account_id": now, "name": "sales"}, "sales.csv", []byte(salesCSV)); p.Status != http.StatusSeeOther {
		t.Fatalf("the form shown in globex, sent in globex: %d %.500s", p.Status, p.Body)
	}
	if p := b.get("/datasets"); !strings.Contains(p.Body, `<th scope="row">sales</th>`) {
		t.Fatalf("globex does not store sales: %.2000s", p.Body)
	}
}

// TestDatasetDeleteBindsTheShownAccount: a dataset is deleted by its name, which another
// account may use too. A member of two accounts that both hold "sales" asks to delete acme's,
// switches to globex in another tab, then confirms on the page acme's request showed: the
// deletion is refused (409) and both datasets stay (before, globex's "sales" was deleted, an
// account whose deletion the person never saw named). The Datasets page's Delete button is
// bound the same way. Confirmed in the account it was shown in, it deletes there only.
func TestDatasetDeleteBindsTheShownAccount(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	for _, id := range []uuid.UUID{acme.ID, globex.ID} {
		b.chooseAccount(id.String())
		if p := b.upload(map[string]string{"account_id": id.String(), "name": "sales"}, "sales.csv", []byte(salesCSV)); p.Status != http.StatusSeeOther {
			t.Fatalf("upload sales to %s: %d %.500s", id, p.Status, p.Body)
		}
	}
	hidden := regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)
	// formOf is the hidden fields of the form posting to action on a page, as a browser sends them.
	formOf := func(body, action string) url.Values {
		t.Helper()
		i := strings.Index(body, `action="`+action+`"`)
		if i < 0 {
			t.Fatalf("no form posting to %s: %.3000s", action, body)
		}
		form := body[i:]
		form = form[:strings.Index(form, "</form>")]
		v := url.Values{}
		for _, m := range hidden.FindAllStringSubmatch(form, -1) {
			v.Set(m[1], m[2])
		}
		return v
	}
	stored := func(id uuid.UUID) bool {
		t.Helper()
		b.chooseAccount(id.String())
		return strings.Contains(b.get("/datasets").Body, `<th scope="row">sales</th>`)
	}

	b.chooseAccount(acme.ID.String())
	button := formOf(b.get("/datasets").Body, "/datasets/sales/delete")
	ask := b.post("/datasets/sales/delete", button)
	if ask.Status != http.StatusOK || !strings.Contains(ask.Body, "Deleting dataset “sales”") {
		t.Fatalf("the deletion's confirmation in acme: %d %.1500s", ask.Status, ask.Body)
	}
	confirm := formOf(ask.Body, "/datasets/sales/delete")
	if confirm.Get("confirm") != "yes" {
		t.Fatalf("the confirmation's fields %v, want confirm=yes", confirm)
	}
	b.chooseAccount(globex.ID.String()) // the other tab
	p := b.post("/datasets/sales/delete", confirm)
	if p.Status != http.StatusConflict || !strings.Contains(p.Body, "This page was for acme; you are now working in globex") {
		t.Fatalf("acme's confirmation sent in globex: %d %.800s", p.Status, p.Body)
	}
	if p := b.post("/datasets/sales/delete", button); p.Status != http.StatusConflict {
		t.Fatalf("acme's Delete button sent in globex: %d %.800s", p.Status, p.Body)
	}
	if !stored(acme.ID) || !stored(globex.ID) {
		t.Fatalf("a dataset was deleted by a confirmation shown in another account: acme %v, globex %v", stored(acme.ID), stored(globex.ID))
	}

	// Asked and confirmed in globex: globex's is deleted, acme's stays.
	b.chooseAccount(globex.ID.String())
	ask = b.post("/datasets/sales/delete", formOf(b.get("/datasets").Body, "/datasets/sales/delete"))
	if p := b.post("/datasets/sales/delete", formOf(ask.Body, "/datasets/sales/delete")); p.Status != http.StatusSeeOther {
		t.Fatalf("globex's confirmation sent in globex: %d %.800s", p.Status, p.Body)
	}
	if stored(globex.ID) || !stored(acme.ID) {
		t.Fatalf("after deleting globex's: acme %v (want true), globex %v (want false)", stored(acme.ID), stored(globex.ID))
	}
}
