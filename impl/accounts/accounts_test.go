package accounts_test

import (
	"context"
	"testing"
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
