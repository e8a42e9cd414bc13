package web_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
)

// TestStaleSignupClaim: a sign-up that failed and could not give its claim back (the database
// gone between the two) leaves the user claimed with no account. Once the claim is
// store.SignupClaimStale old, the user's next sign-up claims it again and makes the account;
// a younger claim still holds (it may be a sign-up still running), and sends the user to the
// account choice as before. Should the stale claim's own sign-up still be running and finish
// second, it makes nothing: the user keeps one account (store.ErrSignupMade). Before, such a
// claim was kept for good, and the user could never sign up.
func TestStaleSignupClaim(t *testing.T) {
	ctx := context.Background()
	e := start(t, func(w *config.Web) { w.SignupPlan = "demo" })
	pool := e.Store.Pool()
	userID := func(email string) uuid.UUID {
		t.Helper()
		var id uuid.UUID
		if err := pool.QueryRow(ctx, `SELECT id FROM users WHERE email = $1`, email).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	claimAgo := func(email, ago string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE users SET signup_claimed_at = now() - $2::interval WHERE email = $1`, email, ago); err != nil {
			t.Fatal(err)
		}
	}

	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	claimAgo(aliceEmail, "11 minutes")
	if p := alice.post("/signin/signup", nil); p.Status != http.StatusSeeOther || p.Location != e.URL+"/" {
		t.Fatalf("sign-up over a claim 11 minutes old with no account: %d %s, want 303 to the home page", p.Status, p.Location)
	}
	if accounts, grants := signupCounts(t, e); accounts != 1 || grants != 1 {
		t.Errorf("alice is a member of %d accounts with %d starting-credit grants, want 1 and 1", accounts, grants)
	}

	// The stale claim's own sign-up finishing now makes nothing.
	_, err := e.Store.CreateSignupAccount(ctx, "alice-late", "demo", store.PlanSetup{StartingCreditMicros: 10_000_000,
		CreditKey: "starting-credit", CreditNote: "starting credit of plan demo"}, userID(aliceEmail))
	if !errors.Is(err, store.ErrSignupMade) {
		t.Errorf("a second sign-up account for alice: %v, want ErrSignupMade", err)
	}
	if accounts, grants := signupCounts(t, e); accounts != 1 || grants != 1 {
		t.Errorf("after the late sign-up alice is a member of %d accounts with %d starting-credit grants, want 1 and 1", accounts, grants)
	}
	var late int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM accounts WHERE name = 'alice-late'`).Scan(&late); err != nil {
		t.Fatal(err)
	}
	if late != 0 {
		t.Error("the late sign-up's account was kept")
	}

	// A claim one minute old may be a sign-up still running: it holds.
	bob := e.browser(t)
	bob.signIn(e, bobEmail, bobPass)
	claimAgo(bobEmail, "1 minute")
	if p := bob.post("/signin/signup", nil); p.Status != http.StatusSeeOther || p.Location != e.URL+"/signin/account" {
		t.Fatalf("sign-up over a claim 1 minute old: %d %s, want 303 to the account choice", p.Status, p.Location)
	}
	var bobAccounts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM memberships m JOIN users u ON u.id = m.user_id WHERE u.email = $1`,
		bobEmail).Scan(&bobAccounts); err != nil {
		t.Fatal(err)
	}
	if bobAccounts != 0 {
		t.Errorf("bob is a member of %d accounts, want none", bobAccounts)
	}
}
