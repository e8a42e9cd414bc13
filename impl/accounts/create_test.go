package accounts_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/tollgate/tollgate/impl/store"
)

// TestCreateAccountIsAllOrNothing: an account's row, its plan's models and its plan's starting
// credit are made in one transaction. When the starting credit's grant fails (here a real
// refusal of the database: a constraint that refuses the plan's ledger entry), or a model's
// grant does (a model id the database refuses), no account is left behind, the name stays free
// and no model access of it remains; a normal creation grants the plan's credit exactly once.
// Before, the account's row was committed on its own, and a failure after it left an account
// on the plan without its credit (and, for the web's sign-up, a claim that kept the user from
// trying again).
func TestCreateAccountIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, 0)
	const credit = 10_000_000
	plan, _ := svc.Config.Plan("default")
	planModels := plan.Models
	for i := range svc.Config.Plans {
		if svc.Config.Plans[i].Name == "default" {
			svc.Config.Plans[i].StartingCreditMicros = credit
		}
	}
	pool := svc.Store.Pool()
	if _, err := pool.Exec(ctx, `ALTER TABLE credit_ledger ADD CONSTRAINT refuse_starting_credit CHECK (note NOT LIKE 'starting credit%')`); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateAccount(ctx, "acme", "default"); err == nil {
		t.Fatal("the account was created although its starting credit could not be granted")
	}
	noAccount := func(when string) {
		t.Helper()
		if a, err := svc.Store.GetAccountByName(ctx, "acme"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: account %+v is left behind (%v), want none", when, a, err)
		}
		var accounts, access, ledger int
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM accounts), (SELECT count(*) FROM model_access), (SELECT count(*) FROM credit_ledger)`).
			Scan(&accounts, &access, &ledger); err != nil {
			t.Fatal(err)
		}
		if accounts != 0 || access != 0 || ledger != 0 {
			t.Errorf("%s: %d accounts, %d model grants, %d ledger entries left, want none", when, accounts, access, ledger)
		}
	}
	noAccount("after a failed credit grant")

	// A model the database refuses (an empty id) fails the creation the same way.
	if _, err := pool.Exec(ctx, `ALTER TABLE credit_ledger DROP CONSTRAINT refuse_starting_credit`); err != nil {
		t.Fatal(err)
	}
	setModels := func(extra ...string) {
		for i := range svc.Config.Plans {
			if svc.Config.Plans[i].Name == "default" {
				svc.Config.Plans[i].Models = append(slices.Clip(planModels), extra...)
			}
		}
	}
	setModels("")
	if _, err := svc.CreateAccount(ctx, "acme", "default"); err == nil {
		t.Fatal("the account was created although one of its models could not be granted")
	}
	noAccount("after a failed model grant")

	// Without a failure the same name is free, and the credit is granted once.
	setModels()
	acct, err := svc.CreateAccount(ctx, "acme", "default")
	if err != nil {
		t.Fatal(err)
	}
	if acct.BalanceMicros != credit {
		t.Errorf("balance %d, want the plan's starting credit %d", acct.BalanceMicros, credit)
	}
	entries, err := svc.Store.LedgerEntries(ctx, acct.ID, 10)
	if err != nil || len(entries) != 1 || entries[0].AmountMicros != credit || entries[0].Reason != store.ReasonGrant {
		t.Errorf("ledger %+v (%v), want one grant of %d", entries, err, credit)
	}
	if sum, err := svc.Store.LedgerSum(ctx, acct.ID); err != nil || sum != credit {
		t.Errorf("ledger sum %d (%v), want %d", sum, err, credit)
	}
	models, err := svc.Store.AccountModels(ctx, acct.ID)
	if err != nil || len(models) != len(planModels) {
		t.Errorf("models %v (%v), want the plan's %v", models, err, planModels)
	}
}
