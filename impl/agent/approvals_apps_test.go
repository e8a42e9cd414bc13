package agent_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/members"
)

// appPrincipal allows a connected app for a new owner (email) of the tenant's account, as the
// console's consent page records it (a registered client, a member and their grant), and
// returns the principal the app's access tokens stand for, as mcpauth.Verify makes it: the
// account, no key, and the grant with its member and client. The grant lasts grantLifetime, as
// the authorization server's do.
func appPrincipal(t *testing.T, w *world, tn tenant, email string) auth.Principal {
	t.Helper()
	ctx := context.Background()
	user, err := (members.New(w.store, nil)).Add(ctx, tn.p.AccountID, email, members.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	client, err := w.store.CreateOAuthClient(ctx, store.OAuthClient{ID: "tgc_" + strings.ReplaceAll(email, "@", "_"), Name: "Claude Code",
		RedirectURIs: []string{"https://app.example/cb"}})
	if err != nil {
		t.Fatal(err)
	}
	// The consent page's code, redeemed for the grant and its first tokens.
	code := store.OAuthCode{Hash: randomHash(), ClientID: client.ID, AccountID: tn.p.AccountID, UserID: user.ID,
		Role: members.RoleOwner, RedirectURI: "https://app.example/cb", CodeChallenge: "challenge",
		Resource: "https://gateway.example/api/mcp", Scope: "mcp", ExpiresAt: time.Now().Add(time.Minute)}
	if err := w.store.CreateOAuthCode(ctx, code); err != nil {
		t.Fatal(err)
	}
	g, err := w.store.RedeemOAuthCode(ctx, code.Hash, func(store.OAuthCode) error { return nil }, store.OAuthTokens{
		AccessHash: randomHash(), AccessExpires: time.Now().Add(time.Hour),
		RefreshHash: randomHash(), RefreshExpires: time.Now().Add(24 * time.Hour), GrantLifetime: grantLifetime}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return auth.Principal{AccountID: tn.p.AccountID, OAuth: &auth.OAuthActor{GrantID: g.ID, UserID: user.ID, UserEmail: email,
		ClientID: client.ID, ClientName: client.Name}}
}

// randomHash is a hash of a code or a token nobody holds: SHA-256 of a random text.
func randomHash() []byte {
	h := sha256.Sum256([]byte(rand.Text()))
	return h[:]
}

// grantLifetime is the absolute lifetime of the grants appPrincipal makes:
// mcpauth.DefaultGrantLifetime, the one the gateway gives them.
const grantLifetime = 90 * 24 * time.Hour

// TestApprovalOfAnAppWhoseGrantExpired: a grant past its absolute lifetime counts as gone, as
// a revoked one does (none of its tokens works after it): the approval it asked for cannot be
// approved (a conflict that says why; denying it still works), and one approved while it
// lasted fails when its action would run, starting nothing. The grant is aged as time would
// age it, its approval and its end moved back by more than its lifetime. Before, the approvals'
// check (OAuthGrantActive) looked at revocation and membership only: the approval was approved.
func TestApprovalOfAnAppWhoseGrantExpired(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Agents.ApprovalTTL = time.Hour })
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "acme", 5_000_000)
	age := func(app auth.Principal) {
		t.Helper()
		if _, err := w.store.Pool().Exec(ctx, `UPDATE oauth_grants SET created_at = created_at - interval '91 days',
			expires_at = expires_at - interval '91 days' WHERE id = $1`, app.OAuth.GrantID); err != nil {
			t.Fatal(err)
		}
	}

	app := appPrincipal(t, w, tn, "carol@example.com")
	ap, err := svc.RequestSpawn(ctx, app, agent.SpawnAction{Purpose: "asked, then the grant ran out"})
	if err != nil {
		t.Fatal(err)
	}
	age(app)
	refusedThenDenied(t, svc, tn, ap.ID, "an app whose grant is past its lifetime")

	// Approved while the grant lasted, expired before the action ran: the action fails.
	app = appPrincipal(t, w, tn, "dave@example.com")
	ap, err = svc.RequestSpawn(ctx, app, agent.SpawnAction{Purpose: "approved, then the grant ran out"})
	if err != nil {
		t.Fatal(err)
	}
	n.stop()
	approveAsOperator(t, w, ap.ID)
	age(app)
	got := waitActionFailed(t, w.start().gw.Agents, tn.p, ap.ID)
	if !strings.Contains(got.Failure, "the connected app that asked for it lost its access since") {
		t.Errorf("the action failed with %q, want it to say the app lost its access", got.Failure)
	}
}

// TestApprovalOfAnAppThatLostItsAccess: an approval a connected app (an MCP client signed in
// with OAuth) asked for cannot be approved once the app's grant is gone, even when its row was
// deleted (with its user, say): a conflict that says why, and denying it still works. One
// approved while the grant worked fails when its action would run if the grant stopped working
// in between (here: the member removed from the account), starting nothing, as a revoked key's
// does (TestApprovalOfARevokedKeysRequest). Before, the approval recorded no key and so nobody
// to check: it was approved and its action ran.
func TestApprovalOfAnAppThatLostItsAccess(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Agents.ApprovalTTL = time.Hour })
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "acme", 5_000_000)

	app := appPrincipal(t, w, tn, "alice@example.com")
	ap, err := svc.RequestSpawn(ctx, app, agent.SpawnAction{Purpose: "asked, then the grant was deleted"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.Pool().Exec(ctx, `DELETE FROM oauth_grants WHERE id = $1`, app.OAuth.GrantID); err != nil {
		t.Fatal(err)
	}
	refusedThenDenied(t, svc, tn, ap.ID, "an app whose grant was deleted")

	// Approved while the grant worked, the member removed before the action ran: the action
	// fails. No node runs the action in between, as in TestApprovalOfARevokedKeysRequest.
	app = appPrincipal(t, w, tn, "bob@example.com")
	ap, err = svc.RequestSpawn(ctx, app, agent.SpawnAction{Purpose: "approved, then the member left"})
	if err != nil {
		t.Fatal(err)
	}
	n.stop()
	approveAsOperator(t, w, ap.ID)
	operator, err := agent.New(agent.Options{Store: w.store, Config: w.cfg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (members.New(w.store, operator)).Remove(ctx, tn.p.AccountID, "bob@example.com", false); err != nil {
		t.Fatal(err)
	}
	got := waitActionFailed(t, w.start().gw.Agents, tn.p, ap.ID)
	if !strings.Contains(got.Failure, "the connected app that asked for it lost its access since") {
		t.Errorf("the action failed with %q, want it to say the app lost its access", got.Failure)
	}
}

// refusedThenDenied asserts that the pending approval id, asked for by a connected app that has
// lost its access (what says how), cannot be approved (a conflict that says why) and can still
// be denied.
func refusedThenDenied(t *testing.T, svc *agent.Service, tn tenant, id, what string) {
	t.Helper()
	ctx := context.Background()
	var conflict *agent.ConflictError
	if _, err := svc.Resolve(ctx, &tn.p.AccountID, id, true, "test"); !errors.As(err, &conflict) ||
		!strings.Contains(err.Error(), "the connected app that asked for it lost its access since") {
		t.Fatalf("approving the request of %s: %v", what, err)
	}
	if got, err := svc.Resolve(ctx, &tn.p.AccountID, id, false, "test"); err != nil || got.State != agent.ApprovalDenied {
		t.Fatalf("denying it: %+v, %v", got, err)
	}
}

// approveAsOperator approves the approval id as the operator does (the admin command: no
// account), through a service of its own, while no node runs actions.
func approveAsOperator(t *testing.T, w *world, id string) {
	t.Helper()
	operator, err := agent.New(agent.Options{Store: w.store, Config: w.cfg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := operator.Resolve(context.Background(), nil, id, true, "operator"); err != nil {
		t.Fatal(err)
	}
}
