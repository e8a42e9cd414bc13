package agent_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/members"
)

// consented is one redeemed consent of a connected app: its grant, and the code and refresh
// token it was redeemed with and for.
type consented struct {
	app     auth.Principal
	code    []byte
	refresh []byte
}

// consent redeems a new code of the member's client (the consent page's), with then for the
// grants the redemption revokes, as the token endpoint does.
func consent(t *testing.T, w *world, app auth.Principal, then store.GrantRevoked) consented {
	t.Helper()
	ctx := context.Background()
	code := store.OAuthCode{Hash: randomHash(), ClientID: app.OAuth.ClientID, AccountID: app.AccountID, UserID: app.OAuth.UserID,
		Role: members.RoleOwner, RedirectURI: "https://app.example/cb", CodeChallenge: "challenge",
		Resource: "https://gateway.example/api/mcp", Scope: "mcp", ExpiresAt: time.Now().Add(time.Minute)}
	if err := w.store.CreateOAuthCode(ctx, code); err != nil {
		t.Fatal(err)
	}
	refresh := randomHash()
	g, err := w.store.RedeemOAuthCode(ctx, code.Hash, func(store.OAuthCode) error { return nil }, store.OAuthTokens{
		AccessHash: randomHash(), AccessExpires: time.Now().Add(time.Hour),
		RefreshHash: refresh, RefreshExpires: time.Now().Add(24 * time.Hour), GrantLifetime: grantLifetime}, then)
	if err != nil {
		t.Fatal(err)
	}
	actor := *app.OAuth
	actor.GrantID = g.ID
	return consented{app: auth.Principal{AccountID: app.AccountID, OAuth: &actor}, code: code.Hash, refresh: refresh}
}

// appSession starts, through the app's approved agent_spawn, a session that waits for a
// message.
func appSession(t *testing.T, svc *agent.Service, app auth.Principal) agent.SessionView {
	t.Helper()
	ctx := context.Background()
	acct, console := app.AccountID, auth.Principal{AccountID: app.AccountID}
	ap, err := svc.RequestSpawn(ctx, app, agent.SpawnAction{Purpose: "wait for a message"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Resolve(ctx, &acct, ap.ID, true, "owner@example.com"); err != nil {
		t.Fatal(err)
	}
	got := waitAction(t, svc, console, ap.ID)
	s := waitSession(t, svc, console, got.SessionID, agent.StateReady, agent.StateStopped, agent.StateFailed)
	if s.State != agent.StateReady {
		t.Fatalf("the app's session %+v, want ready", s)
	}
	return s
}

// noSweep keeps the agents' sweep of lapsed sessions from running in a test: what ends a
// session there is the revocation's own transaction.
func noSweep(c *config.Config) { c.Agents.SessionSweep = time.Hour }

// checkGrantEnded checks that the waiting session ended right away (access_revoked) and that
// the account's last agent.sessions_ended entry names the grant and the session.
func checkGrantEnded(t *testing.T, w *world, svc *agent.Service, s agent.SessionView, app auth.Principal) {
	t.Helper()
	checkEnded(t, svc, auth.Principal{AccountID: app.AccountID}, s, agent.ReasonAccessRevoked)
	targets, entries := sessionsEnded(t, w, app.AccountID)
	if len(entries) == 0 || targets[len(targets)-1] != "grant "+app.OAuth.GrantID.String() ||
		!slices.Equal(entries[len(entries)-1].Sessions, []string{s.ID}) || entries[len(entries)-1].Reason != agent.ReasonAccessRevoked {
		t.Fatalf("audit entries %v %+v", targets, entries)
	}
}

// TestReplayRevocationEndsItsAppsSessions: a replayed authorization code, or a rotated refresh
// token used again after the grace, revokes its grant, and the sessions the grant's app
// started end in that transaction (access_revoked, audited), another app's run on. Before, the
// replay's revocation took no callback: the session waited for the agents' sweep holding its
// slot.
func TestReplayRevocationEndsItsAppsSessions(t *testing.T) {
	w := newWorld(t, noSweep)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "replays", 5_000_000)
	if err := svc.AssignSlot(ctx, tn.p.AccountID, "other"); err != nil {
		t.Fatal(err)
	}
	then := func(tx *store.AgentTx, accountID, grant uuid.UUID) error {
		return svc.EndGrantSessions(ctx, tx, accountID, grant)
	}
	byCode := consent(t, w, appPrincipal(t, w, tn, "carol@example.com"), then)
	byRefresh := consent(t, w, appPrincipal(t, w, tn, "dave@example.com"), then)
	first, second := appSession(t, svc, byCode.app), appSession(t, svc, byRefresh.app)

	_, err := w.store.RedeemOAuthCode(ctx, byCode.code, func(store.OAuthCode) error { return nil }, store.OAuthTokens{
		AccessHash: randomHash(), AccessExpires: time.Now().Add(time.Hour)}, then)
	if !errors.Is(err, store.ErrOAuthReplay) {
		t.Fatalf("the code replayed: %v, want ErrOAuthReplay", err)
	}
	checkGrantEnded(t, w, svc, first, byCode.app)
	if s := sessionNow(t, svc, auth.Principal{AccountID: tn.p.AccountID}, second.ID); s.State != agent.StateReady {
		t.Fatalf("the other app's session %+v after the code's replay, want ready", s)
	}

	rotate := func() error {
		_, err := w.store.RefreshOAuthTokens(ctx, byRefresh.refresh, time.Now(), func(store.OAuthGrant) error { return nil }, store.OAuthTokens{
			AccessHash: randomHash(), AccessExpires: time.Now().Add(time.Hour), RefreshHash: randomHash(),
			RefreshExpires: time.Now().Add(24 * time.Hour), GrantLifetime: grantLifetime}, then)
		return err
	}
	if err := rotate(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.Pool().Exec(ctx, `UPDATE oauth_tokens SET used_at = now() - interval '1 minute' WHERE token_hash = $1`,
		byRefresh.refresh); err != nil {
		t.Fatal(err)
	}
	if err := rotate(); !errors.Is(err, store.ErrOAuthReplay) {
		t.Fatalf("the rotated refresh token reused: %v, want ErrOAuthReplay", err)
	}
	checkGrantEnded(t, w, svc, second, byRefresh.app)
}

// TestSupersededGrantEndsItsAppsSessions: the eleventh consent of a member to one client
// revokes the oldest of their grants to it (store.MaxOAuthGrantsPerClient), and the sessions
// that grant's app started end in the redemption's transaction (access_revoked, audited).
// Before, they waited for the agents' sweep.
func TestSupersededGrantEndsItsAppsSessions(t *testing.T) {
	w := newWorld(t, noSweep)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "superseded", 5_000_000)
	then := func(tx *store.AgentTx, accountID, grant uuid.UUID) error {
		return svc.EndGrantSessions(ctx, tx, accountID, grant)
	}
	oldest := appPrincipal(t, w, tn, "erin@example.com")
	s := appSession(t, svc, oldest)
	for range store.MaxOAuthGrantsPerClient - 1 {
		consent(t, w, oldest, then)
	}
	if got := sessionNow(t, svc, auth.Principal{AccountID: tn.p.AccountID}, s.ID); got.State != agent.StateReady {
		t.Fatalf("the session %+v with its grant still among the newest ten, want ready", got)
	}
	consent(t, w, oldest, then)
	checkGrantEnded(t, w, svc, s, oldest)
}

// TestLoweredRoleEndsItsAppsSessions: a member's role lowered (members.Service.Add, as
// `tollgate admin member add` runs it) revokes the grants they made with the higher one, and
// the sessions those apps started end in the change's transaction (access_revoked, audited);
// without the agents such a change is refused and undone. Before, the change took no
// callback and the sessions waited for the agents' sweep.
func TestLoweredRoleEndsItsAppsSessions(t *testing.T) {
	w := newWorld(t, noSweep)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "lowered", 5_000_000)
	app := appPrincipal(t, w, tn, "frank@example.com")
	s := appSession(t, svc, app)
	people := members.New(w.store, svc)
	if _, err := members.New(w.store, nil).Add(ctx, tn.p.AccountID, "frank@example.com", members.RoleMember); err == nil {
		t.Fatal("a role lowered without the agents went through")
	}
	if got := sessionNow(t, svc, auth.Principal{AccountID: tn.p.AccountID}, s.ID); got.State != agent.StateReady {
		t.Fatalf("the session %+v after a refused change, want ready", got)
	}
	if _, err := people.Add(ctx, tn.p.AccountID, "frank@example.com", members.RoleMember); err != nil {
		t.Fatal(err)
	}
	checkGrantEnded(t, w, svc, s, app)
}
