package web_test

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
)

// uploadForm posts a dataset upload as the page's form does (multipart, same origin).
func (b *browser) upload(fields map[string]string, fileName string, content []byte) page {
	b.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	// The page's form begins with the account it was shown in (the session's current one).
	if id, named := fields["account_id"]; named {
		_ = mw.WriteField("account_id", id)
	} else if id := b.currentAccount(); id != "" {
		_ = mw.WriteField("account_id", id)
	}
	for k, v := range fields {
		if k != "account_id" {
			_ = mw.WriteField(k, v)
		}
	}
	fw, err := mw.CreateFormFile("file", fileName)
	if err != nil {
		b.t.Fatal(err)
	}
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
	return page{Status: resp.StatusCode, Location: resp.Header.Get("Location"), Body: string(raw), Header: resp.Header}
}

// chooseAccount makes the account with id the browser's current one.
func (b *browser) chooseAccount(id string) {
	b.t.Helper()
	if p := b.post("/signin/account", url.Values{"account_id": {id}}); p.Status != http.StatusSeeOther {
		b.t.Fatalf("choose account %s: %d", id, p.Status)
	}
}

const salesCSV = "region,amount\nnorth,3\nsouth,4\n"

// TestDatasetsUploadListDelete: an owner uploads a CSV file, the page lists it (name, format,
// size), a member sees it but can neither delete nor replace it, an owner deletes it; each
// change is audited. A name, a format or a file content that is not a dataset's is refused
// with a message, and so is a file over the configured limit (413, nothing stored).
func TestDatasetsUploadListDelete(t *testing.T) {
	e := start(t, func(w *config.Web) { w.DatasetUploadMaxBytes = 4096 })
	acme := e.account(t, "acme", aliceEmail, "owner")
	if _, err := e.Members.Add(context.Background(), acme.ID, bobEmail, "member"); err != nil {
		t.Fatal(err)
	}
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)

	if p := alice.get("/datasets"); p.Status != http.StatusOK || !strings.Contains(p.Body, "No datasets yet") || !strings.Contains(p.Body, "at most 4 KiB") ||
		!strings.Contains(p.Body, `data-max-bytes="4096"`) || !strings.Contains(p.Body, `src="/static/dataset-upload.js"`) {
		t.Fatalf("empty datasets page: %d %.500s", p.Status, p.Body)
	}
	if p := alice.get("/static/dataset-upload.js"); p.Status != http.StatusOK || !strings.Contains(p.Body, "maxBytes") {
		t.Fatalf("the upload script: %d", p.Status)
	}
	p := alice.upload(map[string]string{"format": "auto"}, "sales.csv", []byte(salesCSV))
	if p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "/datasets?uploaded=sales") {
		t.Fatalf("upload: %d %s %.500s", p.Status, p.Location, p.Body)
	}
	list := alice.get("/datasets")
	for _, want := range []string{`<th scope="row">sales</th>`, "<td>csv</td>", "<td>30 B</td>", "Delete dataset sales"} {
		if !strings.Contains(list.Body, want) {
			t.Errorf("the list lacks %q: %.1500s", want, list.Body)
		}
	}
	// A JSON lines file under a chosen name, in the chosen format.
	if p := alice.upload(map[string]string{"name": "events-2026", "format": "jsonl"}, "dump.txt", []byte("{\"a\":1}\n{\"a\":2}\n")); p.Status != http.StatusSeeOther {
		t.Fatalf("jsonl upload: %d %.500s", p.Status, p.Body)
	}

	refused := []struct {
		name    string
		fields  map[string]string
		file    string
		content []byte
		status  int
		message string
	}{
		{"bad name", map[string]string{"name": "../etc"}, "x.csv", []byte(salesCSV), http.StatusUnprocessableEntity, "is not a dataset name"},
		{"unknown format", nil, "sales.xlsx", []byte(salesCSV), http.StatusUnprocessableEntity, "Cannot tell the format"},
		{"not parquet", nil, "broken.parquet", []byte("this is not parquet"), http.StatusUnprocessableEntity, "The file is not usable"},
		{"empty", nil, "empty.csv", nil, http.StatusUnprocessableEntity, "is empty"},
		{"too large", nil, "big.csv", bytes.Repeat([]byte("a,b\n"), 1300), http.StatusRequestEntityTooLarge, "larger than the upload limit of 4 KiB"},
	}
	for _, c := range refused {
		p := alice.upload(c.fields, c.file, c.content)
		if p.Status != c.status || !strings.Contains(p.Body, c.message) {
			t.Errorf("%s: %d, want %d with %q: %.800s", c.name, p.Status, c.status, c.message, p.Body)
		}
		if strings.Contains(p.Body, "tollgate-upload-") {
			t.Errorf("%s: the message shows the temporary file", c.name)
		}
	}
	list = alice.get("/datasets")
	for _, gone := range []string{"big", "broken", "empty", "etc"} {
		if strings.Contains(list.Body, `<th scope="row">`+gone) {
			t.Errorf("refused upload %s is listed", gone)
		}
	}

	// A member lists, may not replace or delete.
	bob := e.browser(t)
	bob.signIn(e, bobEmail, bobPass)
	mp := bob.get("/datasets")
	if mp.Status != http.StatusOK || !strings.Contains(mp.Body, `<th scope="row">sales</th>`) || !strings.Contains(mp.Body, `disabled aria-describedby="datasets-owners-only"`) {
		t.Fatalf("member's datasets page: %d %.1500s", mp.Status, mp.Body)
	}
	if p := bob.post("/datasets/sales/delete", confirmed); p.Status != http.StatusForbidden {
		t.Errorf("member delete: %d", p.Status)
	}
	if p := bob.upload(nil, "sales.csv", []byte("x\n1\n")); p.Status != http.StatusUnprocessableEntity || !strings.Contains(p.Body, "only the account&#39;s owners may replace it") {
		t.Errorf("member replace: %d %.600s", p.Status, p.Body)
	}
	if p := bob.upload(nil, "mine.csv", []byte("x\n1\n")); p.Status != http.StatusSeeOther {
		t.Errorf("member upload of a new dataset: %d %.600s", p.Status, p.Body)
	}

	// The owner deletes, once she has confirmed it (the first post says what stops working and
	// deletes nothing); deleting again is not found.
	ask := alice.post("/datasets/sales/delete", nil)
	if ask.Status != http.StatusOK || !strings.Contains(ask.Body, "Deleting dataset “sales” (CSV, 30 B, stored ") ||
		!strings.Contains(ask.Body, "can no longer load or query it") {
		t.Fatalf("delete without confirmation: %d %.1500s", ask.Status, ask.Body)
	}
	if p := alice.get("/datasets"); !strings.Contains(p.Body, `<th scope="row">sales</th>`) {
		t.Fatal("the dataset was deleted before the deletion was confirmed")
	}
	del := alice.post("/datasets/sales/delete", confirmed)
	if del.Status != http.StatusSeeOther {
		t.Fatalf("delete: %d %.300s", del.Status, del.Body)
	}
	if p := alice.follow(del, nil); strings.Contains(p.Body, `<th scope="row">sales</th>`) || !strings.Contains(p.Body, "Dataset sales deleted.") {
		t.Errorf("after delete: %.1000s", p.Body)
	}
	if p := alice.post("/datasets/sales/delete", confirmed); p.Status != http.StatusNotFound {
		t.Errorf("delete again: %d", p.Status)
	}
	var n int
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE account_id = $1 AND actor = $2
		AND ((action = 'dataset.uploaded' AND target = 'dataset sales' AND after->>'format' = 'csv' AND before IS NULL)
		  OR (action = 'dataset.deleted' AND target = 'dataset sales' AND before->>'size_bytes' = '30' AND after IS NULL))`,
		acme.ID, aliceEmail).Scan(&n); err != nil || n != 2 {
		t.Fatalf("audited upload and delete: %d %v", n, err)
	}
}

// TestDatasetsOtherAccountNotFound: a dataset of another account cannot be listed or deleted
// by its short or full name: 404, exactly as a name that does not exist, and it stays.
func TestDatasetsOtherAccountNotFound(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", bobEmail, "owner")
	bob := e.browser(t)
	bob.signIn(e, bobEmail, bobPass)
	if p := bob.upload(nil, "secret.csv", []byte(salesCSV)); p.Status != http.StatusSeeOther {
		t.Fatalf("upload: %d %.300s", p.Status, p.Body)
	}
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	if p := alice.get("/datasets"); strings.Contains(p.Body, "secret") {
		t.Fatal("another account's dataset is listed")
	}
	full := url.PathEscape("tenant/" + globex.ID.String() + "/secret")
	for _, name := range []string{"secret", full, "nosuch", "..%2F" + globex.ID.String()} {
		if p := alice.post("/datasets/"+name+"/delete", confirmed); p.Status != http.StatusNotFound {
			t.Errorf("delete %s: %d", name, p.Status)
		}
	}
	if p := bob.get("/datasets"); !strings.Contains(p.Body, `<th scope="row">secret</th>`) {
		t.Fatal("the dataset is gone")
	}
}

// TestDatasetsAccountQuota: what an account stores through the Datasets page is bounded in all,
// by number and by total size (web.dataset_account_max_count, _bytes): past either the upload
// is refused saying so, nothing is stored, and replacing a dataset counts only the new file.
// Trial h11 D10: any member could fill the storage every account shares.
func TestDatasetsAccountQuota(t *testing.T) {
	e := start(t, func(w *config.Web) { w.DatasetAccountMaxCount = 2; w.DatasetAccountMaxBytes = 100 })
	e.account(t, "acme", aliceEmail, "owner")
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	for _, name := range []string{"one", "two"} {
		if p := alice.upload(map[string]string{"name": name}, "s.csv", []byte(salesCSV)); p.Status != http.StatusSeeOther {
			t.Fatalf("upload %s: %d %.300s", name, p.Status, p.Body)
		}
	}
	if p := alice.upload(map[string]string{"name": "three"}, "s.csv", []byte(salesCSV)); p.Status != http.StatusConflict || !strings.Contains(p.Body, "holds 2 datasets") {
		t.Errorf("a third dataset: %d %.300s", p.Status, p.Body)
	}
	// 30 + 30 bytes stored; 80 in place of "two" would make 110 of 100.
	big := []byte("region,amount\n" + strings.Repeat("north,3\n", 8) + "south,42\n")
	if p := alice.upload(map[string]string{"name": "two", "replace": "yes"}, "s.csv", big); p.Status != http.StatusRequestEntityTooLarge || !strings.Contains(p.Body, "above its 100 B") {
		t.Errorf("a replacement past the bytes: %d %.300s", p.Status, p.Body)
	}
	if p := alice.upload(map[string]string{"name": "two", "replace": "yes"}, "s.csv", []byte(salesCSV)); p.Status != http.StatusSeeOther {
		t.Errorf("a replacement within the quota: %d %.300s", p.Status, p.Body)
	}
	if list := alice.get("/datasets"); strings.Contains(list.Body, "three") {
		t.Errorf("a refused upload was stored")
	}
}

// TestDatasetUploadsOfOneNameAtOnce: uploads of one new name sent at once store one file: the
// first is stored, the others find the name taken (409, nothing replaced without the form's
// replace box). Trial h11 D5: each passed the check before any stored, and replaced the others.
func TestDatasetUploadsOfOneNameAtOnce(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	const n = 6
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			statuses[i] = alice.upload(map[string]string{"name": "same"}, "s.csv", []byte(salesCSV)).Status
		})
	}
	wg.Wait()
	stored := 0
	for _, s := range statuses {
		switch s {
		case http.StatusSeeOther:
			stored++
		case http.StatusConflict:
		default:
			t.Errorf("an upload answered %d", s)
		}
	}
	if stored != 1 {
		t.Errorf("%d of %d uploads of one new name were stored (%v), want 1", stored, n, statuses)
	}
}
