package members_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/members"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func setup(t *testing.T) (*members.Service, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), pgtest.ConnString(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return members.New(st, nil), st
}

// TestSignInClaims: a member added by e-mail is claimed by the first sign-in with that
// verified address (any case), and only then: an unverified address, or another subject of
// the same issuer with the same address, gets a user of its own without the memberships; a
// subject of a newly configured issuer claims the user bound to the old one.
func TestSignInClaims(t *testing.T) {
	ctx := context.Background()
	svc, st := setup(t)
	acct, err := st.CreateAccount(ctx, "acme", "default")
	if err != nil {
		t.Fatal(err)
	}
	added, err := svc.Add(ctx, acct.ID, "Alice@Example.com", members.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	accountsOf := func(u members.User) int {
		ms, err := svc.Memberships(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(ms)
	}
	unverified, err := svc.SignIn(ctx, members.Identity{Issuer: "https://idp", Subject: "mallory", Email: "alice@example.com"})
	if err != nil || unverified.ID == added.ID || accountsOf(unverified) != 0 || unverified.Email != "" {
		t.Fatalf("unverified e-mail: %+v %v", unverified, err)
	}
	alice, err := svc.SignIn(ctx, members.Identity{Issuer: "https://idp", Subject: "alice", Email: "alice@example.com", EmailVerified: true, Name: "Alice"})
	if err != nil || alice.ID != added.ID || accountsOf(alice) != 1 || alice.Subject != "alice" || alice.LastSignIn == nil {
		t.Fatalf("claim: %+v %v", alice, err)
	}
	again, err := svc.SignIn(ctx, members.Identity{Issuer: "https://idp", Subject: "alice", Email: "alice@example.com", EmailVerified: true})
	if err != nil || again.ID != alice.ID {
		t.Fatalf("second sign-in: %+v %v", again, err)
	}
	other, err := svc.SignIn(ctx, members.Identity{Issuer: "https://idp", Subject: "eve", Email: "ALICE@example.com", EmailVerified: true})
	if err != nil || other.ID == alice.ID || accountsOf(other) != 0 {
		t.Fatalf("another subject with the address: %+v %v", other, err)
	}
	moved, err := svc.SignIn(ctx, members.Identity{Issuer: "https://new-idp", Subject: "a-1", Email: "alice@example.com", EmailVerified: true})
	if err != nil || moved.ID != alice.ID || accountsOf(moved) != 1 {
		t.Fatalf("new issuer: %+v %v", moved, err)
	}
	if _, err := svc.Membership(ctx, other.ID, acct.ID); !errors.Is(err, members.ErrNotFound) {
		t.Fatalf("membership of a stranger: %v", err)
	}
}

// TestRemoveNeedsTheAgents: a removal by a service built without the agents that end the
// member's agent sessions (members.New with a nil Sessions) is refused, and the member stays;
// by one built with them, it removes. The agents are New's argument, so no construction
// leaves them out unseen (s10h4: they were an argument of Add and Remove that Add let be nil). Before, the
// agents were a field of Service that a construction could leave unset, and such a removal
// silently left the member's sessions running.
func TestRemoveNeedsTheAgents(t *testing.T) {
	ctx := context.Background()
	svc, st := setup(t)
	acct, err := st.CreateAccount(ctx, "acme", "default")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Add(ctx, acct.ID, "alice@example.com", members.RoleOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Remove(ctx, acct.ID, "alice@example.com", false); err == nil || !strings.Contains(err.Error(), "needs the agents") {
		t.Fatalf("a removal without the agents: %v, want it refused", err)
	}
	if list, err := svc.List(ctx, acct.ID); err != nil || len(list) != 1 {
		t.Fatalf("members after the refused removal: %+v %v, want alice", list, err)
	}
	agents, err := agent.New(agent.Options{Store: st, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := members.New(st, agents).Remove(ctx, acct.ID, "alice@example.com", false); err != nil {
		t.Fatal(err)
	}
	if list, err := svc.List(ctx, acct.ID); err != nil || len(list) != 0 {
		t.Fatalf("members after the removal: %+v %v, want none", list, err)
	}
}
