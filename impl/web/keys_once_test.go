package web_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestKeyFormSentAtOnce: the same new-key form posted many times at the same instant (a double
// click, a client that retries) creates exactly one key: one post answers 201 with the key,
// every other 409 naming that key (or saying the form is being sent), and the account has one
// key of the name. Before, the session's record of used forms was read by each post before any
// saved it, and the posts made a key each. A form refused for an invalid field gives its claim
// back: the same form, corrected, then creates its key.
func TestKeyFormSentAtOnce(t *testing.T) {
	e := start(t, nil)
	acct := e.account(t, "acme", aliceEmail, "member")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	m := regexp.MustCompile(`name="form_id" value="([^"]+)"`).FindStringSubmatch(b.get("/keys/new").Body)
	if m == nil {
		t.Fatal("the form has no form_id")
	}
	form := url.Values{"form_id": {m[1]}, "name": {"double-click"}, "account_id": {b.currentAccount()}}.Encode()

	const posts = 12
	type answer struct {
		status int
		body   string
		err    error
	}
	answers := make([]answer, posts)
	var ready, done sync.WaitGroup
	begin := make(chan struct{})
	for i := range posts {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			req, err := http.NewRequest(http.MethodPost, b.app+"/keys", strings.NewReader(form))
			if err != nil {
				answers[i].err = err
				ready.Done()
				return
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", b.app)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			ready.Done()
			<-begin
			resp, err := b.c.Do(req)
			if err != nil {
				answers[i].err = err
				return
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			answers[i] = answer{status: resp.StatusCode, body: html.UnescapeString(string(raw)), err: err}
		}()
	}
	ready.Wait()
	close(begin)
	done.Wait()

	created := 0
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("post %d: %v", i, a.err)
		case a.status == http.StatusCreated && plainKeyRe.MatchString(a.body):
			created++
		case a.status == http.StatusConflict && !plainKeyRe.MatchString(a.body) &&
			(strings.Contains(a.body, "This form was sent already: it created the key “double-click”") ||
				strings.Contains(a.body, "This form is being sent already")):
		default:
			t.Errorf("post %d: %d %.600s", i, a.status, a.body)
		}
	}
	if created != 1 {
		t.Errorf("%d of %d posts of one form created a key, want 1", created, posts)
	}
	keys, err := e.Accounts.ListKeys(context.Background(), acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 {
		t.Errorf("the account has %d keys after %d posts of one form, want 1", len(keys), posts)
	}

	// Refused for an invalid field, the form is not used up: corrected, it creates its key.
	m = regexp.MustCompile(`name="form_id" value="([^"]+)"`).FindStringSubmatch(b.get("/keys/new").Body)
	if m == nil {
		t.Fatal("the form has no form_id")
	}
	if p := b.post("/keys", url.Values{"form_id": {m[1]}, "name": {"fixed"}, "rpm": {"many"}}); p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("an invalid RPM: %d %.300s", p.Status, p.Body)
	}
	if p := b.post("/keys", url.Values{"form_id": {m[1]}, "name": {"fixed"}, "rpm": {"10"}}); p.Status != http.StatusCreated {
		t.Errorf("the same form corrected: %d %.600s", p.Status, p.Body)
	}
}
