package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/store"
)

// TestMemberCannotLiftOwnersLimits (security review): a member of the account may not lift a
// limit an owner set, nor act on keys others created: a key an owner capped and disabled keeps
// its cap and stays disabled, and an owner's active key is neither disabled nor revoked; each
// attempt answers 403 with the reason, and the Keys page shows those buttons disabled.
func TestMemberCannotLiftOwnersLimits(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, "owner")
	if _, err := e.Members.Add(ctx, acme.ID, bobEmail, "member"); err != nil {
		t.Fatal(err)
	}
	capMicros := int64(1_000_000)
	capped, err := e.Accounts.CreateKeyWith(ctx, acme.ID, accounts.KeyOptions{Name: "ci", RPM: -1, CreditCapMicros: &capMicros,
		CapPeriod: store.CapPeriodMonthly, CreatedBy: aliceEmail})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Accounts.Disable(ctx, acme.ID, capped.Key.ID); err != nil {
		t.Fatal(err)
	}
	active, err := e.Accounts.CreateKeyWith(ctx, acme.ID, accounts.KeyOptions{Name: "prod", RPM: -1, CreatedBy: aliceEmail})
	if err != nil {
		t.Fatal(err)
	}
	bob := e.browser(t)
	bob.signIn(e, bobEmail, bobPass)
	id := capped.Key.ID.String()
	for _, try := range []struct {
		path string
		form url.Values
		want string
	}{
		{"/keys/" + id + "/limits", url.Values{"rpm": {"0"}, "credit_cap": {""}}, "owners"},
		{"/keys/" + id + "/enable", nil, "owners"},
		{"/keys/" + id + "/revoke", confirmed, "only the keys they created"},
		{"/keys/" + active.Key.ID.String() + "/disable", confirmed, "only the keys they created"},
		{"/keys/" + active.Key.ID.String() + "/revoke", confirmed, "only the keys they created"},
	} {
		if p := bob.post(try.path, try.form); p.Status != http.StatusForbidden || !strings.Contains(p.Body, try.want) {
			t.Errorf("member POST %s: %d, want 403 saying %q: %.300s", try.path, p.Status, try.want, p.Body)
		}
	}
	got, err := e.Store.GetAPIKey(ctx, capped.Key.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.CreditCapMicros == nil || *got.CreditCapMicros != capMicros || got.DisabledAt == nil || got.RevokedAt != nil {
		t.Fatalf("a member changed the owner's capped key: cap %v, disabled %v, revoked %v", got.CreditCapMicros, got.DisabledAt, got.RevokedAt)
	}
	if got, err := e.Store.GetAPIKey(ctx, active.Key.ID); err != nil || got.DisabledAt != nil || got.RevokedAt != nil {
		t.Fatalf("a member stopped the owner's key: %+v %v", got, err)
	}
	page := bob.get("/keys")
	if page.Status != http.StatusOK || !strings.Contains(page.Body, `id="owners-only"`) ||
		strings.Contains(page.Body, `action="/keys/`+id+`/enable"`) || strings.Contains(page.Body, `action="/keys/`+id+`/limits"`) ||
		strings.Contains(page.Body, `action="/keys/`+active.Key.ID.String()+`/revoke"`) || !strings.Contains(page.Body, `disabled aria-describedby="owners-only"`) {
		t.Fatalf("the member's Keys page offers the owners' actions: %d %.2000s", page.Status, page.Body)
	}
}

// TestMemberStopsOwnKey: a member may disable and revoke a key they created, but not enable
// it again once disabled (nor change its limits): that is the owners'. An owner may act on it.
func TestMemberStopsOwnKey(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, "owner")
	if _, err := e.Members.Add(ctx, acme.ID, bobEmail, "member"); err != nil {
		t.Fatal(err)
	}
	mine, err := e.Accounts.CreateKeyWith(ctx, acme.ID, accounts.KeyOptions{Name: "bob's", RPM: -1, CreatedBy: bobEmail})
	if err != nil {
		t.Fatal(err)
	}
	id := mine.Key.ID.String()
	bob := e.browser(t)
	bob.signIn(e, bobEmail, bobPass)
	if page := bob.get("/keys"); !strings.Contains(page.Body, `action="/keys/`+id+`/disable"`) || !strings.Contains(page.Body, `action="/keys/`+id+`/revoke"`) {
		t.Fatalf("the member's own key has no disable or revoke: %.2000s", page.Body)
	}
	if p := bob.post("/keys/"+id+"/disable", nil); p.Status != http.StatusOK || !strings.Contains(p.Body, "An owner of the account can enable it again") {
		t.Fatalf("member disables own key, unconfirmed: %d %.1000s", p.Status, p.Body)
	}
	if p := bob.post("/keys/"+id+"/disable", confirmed); p.Status != http.StatusSeeOther {
		t.Fatalf("member disables own key: %d %.300s", p.Status, p.Body)
	}
	if p := bob.post("/keys/"+id+"/enable", nil); p.Status != http.StatusForbidden {
		t.Fatalf("member enables own disabled key: %d, want 403", p.Status)
	}
	if p := bob.post("/keys/"+id+"/limits", url.Values{"rpm": {"5"}}); p.Status != http.StatusForbidden {
		t.Fatalf("member changes own key's limits: %d, want 403", p.Status)
	}
	if got, err := e.Store.GetAPIKey(ctx, mine.Key.ID); err != nil || got.DisabledAt == nil {
		t.Fatalf("after the member's enable: %+v %v", got, err)
	}
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	if p := alice.post("/keys/"+id+"/enable", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("owner enables the member's key: %d", p.Status)
	}
	if p := bob.post("/keys/"+id+"/revoke", confirmed); p.Status != http.StatusSeeOther {
		t.Fatalf("member revokes own key: %d %.300s", p.Status, p.Body)
	}
	if got, err := e.Store.GetAPIKey(ctx, mine.Key.ID); err != nil || got.RevokedAt == nil {
		t.Fatalf("after the member's revoke: %+v %v", got, err)
	}
}

// TestMemberOwnKeyFollowsTheUserNotTheEmail: a member's power over the keys they created follows
// them, by user id, when the provider changes their e-mail (and would not pass to whoever the
// old address is given to). Trial h11 D9: it was matched on the e-mail.
func TestMemberOwnKeyFollowsTheUserNotTheEmail(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, "owner")
	if _, err := e.Members.Add(ctx, acme.ID, bobEmail, "member"); err != nil {
		t.Fatal(err)
	}
	bob := e.browser(t)
	bob.signIn(e, bobEmail, bobPass)
	var bobID uuid.UUID
	if err := e.Store.Pool().QueryRow(ctx, `SELECT id FROM users WHERE email = $1`, bobEmail).Scan(&bobID); err != nil {
		t.Fatal(err)
	}
	mine, err := e.Accounts.CreateKeyWith(ctx, acme.ID, accounts.KeyOptions{Name: "bob's", RPM: -1, CreatedBy: bobEmail, CreatedByUser: bobID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.Pool().Exec(ctx, `UPDATE users SET email = 'bob.renamed@example.com' WHERE id = $1`, bobID); err != nil {
		t.Fatal(err)
	}
	if p := bob.post("/keys/"+mine.Key.ID.String()+"/disable", confirmed); p.Status != http.StatusSeeOther {
		t.Fatalf("the member, renamed at the provider, disables the key they created: %d %.300s", p.Status, p.Body)
	}
}
