package accounts_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/store"
)

// TestAccountNamesAreNotReadOtherwise: a name that parses as an account id, has spaces at an
// end, or holds a control or bidi character is refused; a reference that is one account's id
// and (from before the check) another's name is refused as ambiguous, not resolved to either.
// Trial h16 D7: an account named with another's id, and the money commands given that name
// acted on the other account.
func TestAccountNamesAreNotReadOtherwise(t *testing.T) {
	svc := newService(t, 0)
	ctx := context.Background()
	acme := newAccount(t, svc, "acme")
	for _, name := range []string{acme.String(), "{" + acme.String() + "}", " acme2", "acme2 ", "ac\u202eme", "a\x00b", ""} {
		if _, err := svc.CreateAccount(ctx, name, "default"); err == nil {
			t.Errorf("account name %q accepted", name)
		}
	}
	if got, err := svc.ResolveAccount(ctx, acme.String()); err != nil || got.ID != acme {
		t.Errorf("acme by its id: %v %v", got.ID, err)
	}
	// An account named with acme's id, as made before names were checked.
	if _, err := svc.Store.CreateAccount(ctx, acme.String(), "default"); err != nil {
		t.Fatal(err)
	}
	if got, err := svc.ResolveAccount(ctx, acme.String()); err == nil {
		t.Errorf("an id that is another account's name resolved to %s", got.Name)
	}
}

// TestAccountNamesDifferByMoreThanCase: an account name that differs from another's only in
// letter case is refused, from the service (a *NameTakenError, a store.ErrConflict, whose
// message names the account that has the name) and from the database itself (the store
// alone); the exact same name keeps its plain message. Before, "Acme" beside "acme" was a
// second tenant that commands could not tell from the first.
func TestAccountNamesDifferByMoreThanCase(t *testing.T) {
	svc := newService(t, 0)
	ctx := context.Background()
	newAccount(t, svc, "acme")
	_, err := svc.CreateAccount(ctx, "Acme", "default")
	var taken *accounts.NameTakenError
	if !errors.As(err, &taken) || !errors.Is(err, store.ErrConflict) || taken.Existing != "acme" ||
		err.Error() != `account "Acme" cannot be created: account "acme" already exists, and account names that differ only in letter case are the same name; choose another name` {
		t.Fatalf("creating Acme beside acme: %v", err)
	}
	if _, err := svc.CreateAccount(ctx, "acme", "default"); !errors.Is(err, store.ErrConflict) || err.Error() != `account "acme" already exists` {
		t.Errorf("creating acme again: %v", err)
	}
	if _, err := svc.Store.CreateAccount(ctx, "ACME", "default"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("the store created ACME beside acme: %v", err)
	}
	accts, err := svc.Store.ListAccounts(ctx)
	if err != nil || len(accts) != 1 {
		t.Errorf("%d accounts after the refusals, want 1 (%v)", len(accts), err)
	}
	// Another name still works, and the lookup by exact name is unchanged.
	newAccount(t, svc, "acme-eu")
	if _, err := svc.ResolveAccount(ctx, "ACME"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ACME resolved: %v", err)
	}
}
