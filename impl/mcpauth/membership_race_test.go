package mcpauth_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gen/db"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestCodeRedeemedDuringARemovalIsRefused: the client redeems its code while the member's
// removal is under way: the removal's transaction has locked the membership and deleted it
// (with the statement that revokes the member's grants), and has not committed. The redemption
// waits for it and then refuses the code (invalid_grant), and no grant is in force once the
// member is added back. Before, the redemption read the membership as it stood before the
// removal and made a grant that the removal's statement, which had run already, never saw:
// the grant came back to life when the member was added again (TestCodeOfAFormerMemberIsRefused
// is the same without the race).
func TestCodeRedeemedDuringARemovalIsRefused(t *testing.T) {
	s := startSite(t)
	ctx := context.Background()
	redirect := "https://app.example/cb"
	client := s.register(t, "racing", redirect)
	acme := s.Acme.Account.ID
	erin, err := s.members.Add(ctx, acme, "erin@example.com", members.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	verifier, challenge := pkce()
	code := s.authorize(t, s.request(client, redirect, challenge), acme, erin, members.RoleMember)

	// The removal, as store.DeleteMembership runs it, stopped before its commit.
	tx, err := s.GW.Store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	q := db.New(tx)
	if _, err := q.LockMembershipForChange(ctx, db.LockMembershipForChangeParams{AccountID: acme, UserID: erin.ID}); err != nil {
		t.Fatal(err)
	}
	if n, err := q.DeleteMembership(ctx, db.DeleteMembershipParams{AccountID: acme, UserID: erin.ID}); err != nil || n != 1 {
		t.Fatalf("delete the membership: %d %v", n, err)
	}

	type answer struct {
		status int
		body   []byte
		err    error
	}
	done := make(chan answer, 1)
	c := s.GW.Client(t) // checks the answer against the OpenAPI document
	form := s.codeGrant(client, code, verifier, redirect).Encode()
	go func() {
		req, err := http.NewRequest(http.MethodPost, s.URL+"/oauth/token", strings.NewReader(form))
		if err != nil {
			done <- answer{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := c.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		done <- answer{resp.StatusCode, raw, err}
	}()
	select {
	case a := <-done:
		t.Logf("the redemption answered before the removal committed: %d %s", a.status, a.body)
		done <- a
	case <-time.After(500 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	var out map[string]any
	if err := json.Unmarshal(a.body, &out); err != nil {
		t.Fatalf("token: %d %s", a.status, a.body)
	}
	if _, err := s.members.Add(ctx, acme, "erin@example.com", members.RoleMember); err != nil {
		t.Fatal(err)
	}
	if access, _ := out["access_token"].(string); access != "" {
		r := s.call(t, access, "list_storage_datasets", nil)
		t.Fatalf("the code was redeemed during the removal (%d); once the member was added back its token answered %d: %.200s", a.status, r.Status, r.Text)
	}
	if desc, _ := out["error_description"].(string); a.status != http.StatusBadRequest || out["error"] != "invalid_grant" || !strings.Contains(desc, "no longer in the account") {
		t.Fatalf("the code redeemed during the removal: %d %v, want invalid_grant saying the member is no longer in the account", a.status, out)
	}
	grants, err := s.OAuth.Grants(ctx, acme)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range grants {
		if g.UserID == erin.ID {
			t.Fatalf("a grant of erin is in force: %+v", g)
		}
	}
}
