package web_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
)

// signupCounts returns how many accounts alice is a member of, and how many starting-credit
// grants those accounts got.
func signupCounts(t *testing.T, e *env) (accounts, grants int) {
	t.Helper()
	if err := e.Store.Pool().QueryRow(context.Background(),
		`SELECT count(DISTINCT m.account_id), count(l.id)
		 FROM memberships m JOIN users u ON u.id = m.user_id
		 LEFT JOIN credit_ledger l ON l.account_id = m.account_id AND l.idempotency_key = 'starting-credit'
		 WHERE u.email = $1`, aliceEmail).Scan(&accounts, &grants); err != nil {
		t.Fatal(err)
	}
	return accounts, grants
}

// TestSignupOnceUnderConcurrency: a user without an account who sends the sign-up form many
// times at once (parallel requests of one session) gets one account, so one plan's starting
// credit, not one per request; every request answers (none waits on a held connection), and
// each is sent on (to the account, or to the account choice while it is being made).
func TestSignupOnceUnderConcurrency(t *testing.T) {
	e := start(t, func(w *config.Web) { w.SignupPlan = "demo" })
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	const n = 12
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); statuses[i] = b.post("/signin/signup", nil).Status }()
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusSeeOther {
			t.Errorf("sign-up %d answered %d, want 303", i, s)
		}
	}
	if accounts, grants := signupCounts(t, e); accounts != 1 || grants != 1 {
		t.Fatalf("%d concurrent sign-ups made %d accounts with %d starting-credit grants, want 1 and 1", n, accounts, grants)
	}
}

// TestSignupOnceEvenAfterLeaving: a user whose sign-up made an account, and who is then
// removed from it, gets no second account (and no second starting credit) by signing up again.
func TestSignupOnceEvenAfterLeaving(t *testing.T) {
	e := start(t, func(w *config.Web) { w.SignupPlan = "demo" })
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	if p := b.post("/signin/signup", nil); p.Status != http.StatusSeeOther || p.Location != e.URL+"/" {
		t.Fatalf("sign-up: %d %s", p.Status, p.Location)
	}
	if _, err := e.Store.Pool().Exec(context.Background(),
		`DELETE FROM memberships WHERE user_id = (SELECT id FROM users WHERE email = $1)`, aliceEmail); err != nil {
		t.Fatal(err)
	}
	if p := b.post("/signin/signup", nil); p.Status != http.StatusSeeOther || p.Location != e.URL+"/signin/account" {
		t.Fatalf("second sign-up: %d %s", p.Status, p.Location)
	}
	var made int
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM accounts WHERE name LIKE 'alice-%'`).Scan(&made); err != nil {
		t.Fatal(err)
	}
	if made != 1 {
		t.Fatalf("sign-ups made %d accounts, want 1", made)
	}
}
