package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
)

// TestSignupIsAllOrNothing: the console's sign-up makes the account, its plan's models and
// starting credit, the user's membership as its owner and its record as the user's sign-up
// account in one transaction. When the membership cannot be stored (here a real refusal of the
// database: a constraint, added in the test's throwaway database, that refuses an owner), the
// sign-up fails and nothing is left: no account, model access, ledger entry or membership, and
// the user's sign-up claim is given back. Once the database accepts the membership again, the
// same user signs up (a retry, not the account choice), gets one account as its owner and the
// plan's credit once. Before, the membership was its own statement after the account's
// transaction: its failure left the account with its credit and no owner (nobody could ever
// sign in to it), and the claim kept the user from signing up again.
func TestSignupIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	e := start(t, func(w *config.Web) { w.SignupPlan = "demo" })
	pool := e.Store.Pool()
	rows := func() (accounts, access, ledger, memberships int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM accounts), (SELECT count(*) FROM model_access),
			(SELECT count(*) FROM credit_ledger), (SELECT count(*) FROM memberships)`).Scan(&accounts, &access, &ledger, &memberships); err != nil {
			t.Fatal(err)
		}
		return accounts, access, ledger, memberships
	}
	a0, m0, l0, s0 := rows()

	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	if _, err := pool.Exec(ctx, `ALTER TABLE memberships ADD CONSTRAINT refuse_owner CHECK (role <> 'owner')`); err != nil {
		t.Fatal(err)
	}
	if p := b.post("/signin/signup", nil); p.Status != http.StatusServiceUnavailable {
		t.Fatalf("sign-up whose membership is refused: %d %s, want 503", p.Status, p.Location)
	}
	if a, m, l, s := rows(); a != a0 || m != m0 || l != l0 || s != s0 {
		t.Errorf("after the failed sign-up: %d accounts, %d model grants, %d ledger entries, %d memberships; want %d, %d, %d, %d (nothing made)",
			a, m, l, s, a0, m0, l0, s0)
	}
	var claimed bool
	if err := pool.QueryRow(ctx, `SELECT signup_claimed_at IS NOT NULL OR signup_account_id IS NOT NULL FROM users WHERE email = $1`,
		aliceEmail).Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	if claimed {
		t.Error("after the failed sign-up the user's sign-up is still claimed: signing up again is refused")
	}

	// The database takes memberships again: the user's retry makes the account.
	if _, err := pool.Exec(ctx, `ALTER TABLE memberships DROP CONSTRAINT refuse_owner`); err != nil {
		t.Fatal(err)
	}
	if p := b.post("/signin/signup", nil); p.Status != http.StatusSeeOther || p.Location != e.URL+"/" {
		t.Fatalf("sign-up again: %d %s, want 303 to the home page", p.Status, p.Location)
	}
	home := b.get("/")
	if home.Status != http.StatusOK || !strings.Contains(home.Body, "(owner)") || !strings.Contains(home.Body, "$10.00") {
		t.Fatalf("home after the sign-up: %d %.400s", home.Status, home.Body)
	}
	if accounts, grants := signupCounts(t, e); accounts != 1 || grants != 1 {
		t.Errorf("the user is a member of %d accounts with %d starting-credit grants, want 1 and 1", accounts, grants)
	}
	if a, _, l, s := rows(); a != a0+1 || l != l0+1 || s != s0+1 {
		t.Errorf("after the sign-up: %d accounts, %d ledger entries, %d memberships; want %d, %d, %d", a, l, s, a0+1, l0+1, s0+1)
	}
	var recorded bool
	if err := pool.QueryRow(ctx, `SELECT signup_account_id = (SELECT account_id FROM memberships m WHERE m.user_id = u.id AND m.role = 'owner')
		FROM users u WHERE email = $1`, aliceEmail).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if !recorded {
		t.Error("the account is not recorded as the user's sign-up account")
	}
}
