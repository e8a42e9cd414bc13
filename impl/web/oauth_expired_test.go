package web_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/mcpauth"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/members"
)

// storedGrant makes a grant the way the token endpoint does (a code issued by the consent
// page's Approve, redeemed in the store) with the tokens' expiries and the grant's lifetime
// given, so that a grant whose tokens have all expired can be made without waiting 30 days.
func (e *env) storedGrant(t *testing.T, srv *mcpauth.Server, clientID, redirect string, account uuid.UUID, user members.User, accessExpires, refreshExpires time.Time, lifetime time.Duration) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	c, err := srv.CheckAuthorize(ctx, mcpauth.AuthorizeRequest{ResponseType: "code", ClientID: clientID, RedirectURI: redirect,
		CodeChallenge: strings.Repeat("A", 43), CodeChallengeMethod: "S256", Resource: e.URL + "/api/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	to, err := srv.Approve(ctx, c, account, user.ID, members.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(to)
	code := sha256.Sum256([]byte(u.Query().Get("code")))
	random := func() []byte {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return b
	}
	g, err := e.Store.RedeemOAuthCode(ctx, code[:], func(store.OAuthCode) error { return nil }, store.OAuthTokens{
		AccessHash: random(), AccessExpires: accessExpires, RefreshHash: random(), RefreshExpires: refreshExpires, GrantLifetime: lifetime}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g.ID
}

// TestConnectedAppsListsUsableGrantsOnly: Connected apps lists the grants a client can still
// use, and no grant that can do nothing more though nobody revoked it: one whose refresh token
// and access token have expired (its client was away longer than the refresh token's 30 days),
// and one past its absolute lifetime. Another account's grant is never listed. Before, every
// grant not revoked was listed as connected, with its Revoke button, however long ago its
// last token expired.
func TestConnectedAppsListsUsableGrantsOnly(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", bobEmail, "owner")
	alice, err := e.Members.Add(ctx, acme.ID, aliceEmail, "owner")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := e.Members.Add(ctx, globex.ID, bobEmail, "owner")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcpauth.New(mcpauth.Options{Store: e.Store, PublicURL: e.Config.Web.PublicURL})
	if err != nil {
		t.Fatal(err)
	}
	redirect := "https://agent.example/cb"
	e.oauthGrant(t, srv, e.registerClient(t, "Live", redirect), redirect, acme.ID, alice, "owner")
	now := time.Now()
	e.storedGrant(t, srv, e.registerClient(t, "Lapsed", redirect), redirect, acme.ID, alice, now.Add(-time.Hour), now.Add(-time.Minute), mcpauth.DefaultGrantLifetime)
	e.storedGrant(t, srv, e.registerClient(t, "Aged", redirect), redirect, acme.ID, alice, now.Add(time.Hour), now.Add(time.Hour), time.Millisecond)
	e.oauthGrant(t, srv, e.registerClient(t, "Globex app", redirect), redirect, globex.ID, bob, "owner")
	time.Sleep(50 * time.Millisecond) // past the lifetime of "Aged", whose tokens end with it

	gs, err := srv.Grants(ctx, acme.ID)
	if err != nil || len(gs) != 1 || gs[0].ClientName != "Live" {
		t.Errorf("acme's grants: %+v %v, want the live one only", gs, err)
	}
	if gs, err := srv.Grants(ctx, globex.ID); err != nil || len(gs) != 1 || gs[0].ClientName != "Globex app" {
		t.Errorf("globex's grants: %+v %v, want its own only", gs, err)
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	p := b.get("/oauth/grants")
	if !strings.Contains(p.Body, "“Live”") || strings.Contains(p.Body, "Lapsed") || strings.Contains(p.Body, "Aged") ||
		strings.Contains(p.Body, "Globex app") || !strings.Contains(p.Body, "(1)</caption>") {
		t.Errorf("acme's Connected apps: %d, want “Live” alone %.3000s", p.Status, p.Body)
	}
}
