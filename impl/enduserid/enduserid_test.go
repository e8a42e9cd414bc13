package enduserid

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestIdentifiers: an account's identifiers are stable, of the providers' charset and length,
// shared with no other account, and open back to the account; a raw value is confirmed.
func TestIdentifiers(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, 32)
	k, err := New(secret)
	if err != nil {
		t.Fatal(err)
	}
	alpha, beta := uuid.New(), uuid.New()
	a, b := k.Account(alpha), k.Account(beta)
	form := regexp.MustCompile(`^tg_[a-z2-7]{26}(_[a-z2-7]{26})?$`)
	for _, id := range []string{a.ID(), b.ID(), a.User("alice@example.com"), b.User("alice@example.com"), a.User("")} {
		if !form.MatchString(id) || len(id) > MaxLen {
			t.Errorf("identifier %q: not of the form %s, or longer than %d", id, form, MaxLen)
		}
	}
	if a.User("alice@example.com") != k.Account(alpha).User("alice@example.com") {
		t.Error("the same value of the same account gave two identifiers")
	}
	if a.User("alice@example.com") == b.User("alice@example.com") || a.ID() == b.ID() {
		t.Error("two accounts share an identifier")
	}
	if strings.Contains(a.User("alice@example.com"), "alice") {
		t.Error("the raw value shows")
	}
	other, _ := New(bytes.Repeat([]byte{8}, 32))
	if other.Account(alpha).ID() == a.ID() {
		t.Error("another secret gave the same identifier")
	}

	for _, tc := range []struct {
		id      string
		account uuid.UUID
		user    bool
	}{{a.ID(), alpha, false}, {a.User("x"), alpha, true}, {strings.ToUpper(b.User("x")), beta, true}} {
		p, err := Parse(tc.id)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.id, err)
		}
		if got := k.Open(p); got != tc.account || p.EndUser() != tc.user {
			t.Errorf("Open(%q) = %s (end user %v), want %s (%v)", tc.id, got, p.EndUser(), tc.account, tc.user)
		}
	}
	p, _ := Parse(a.User("alice@example.com"))
	if !k.Confirm(p, "alice@example.com") || k.Confirm(p, "bob@example.com") {
		t.Error("Confirm does not tell the end user's value from another")
	}
	for _, bad := range []string{"", "tg_", "user_123", a.ID() + "_", a.ID()[:20], a.ID() + "_" + strings.Repeat("1", 26), "xx" + a.ID()[2:]} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) took it", bad)
		}
	}
}
