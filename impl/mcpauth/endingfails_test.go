package mcpauth_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/mcpauth"
	"github.com/tollgate/tollgate/impl/web/members"
)

// refuseEndings makes the test's PostgreSQL refuse every change of an agent session's state,
// with a trigger, until the function it returns drops it: the ending of sessions that a
// revocation runs then fails for real, in the database, as a lock timeout or a failing insert
// of River's would make it fail.
func refuseEndings(t *testing.T, s *site) (allow func()) {
	t.Helper()
	ctx := context.Background()
	pool := s.GW.Store.Pool()
	if _, err := pool.Exec(ctx, `
CREATE FUNCTION test_refuse_ending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the test refuses to change the state of agent session %', OLD.id; END $$;
CREATE TRIGGER test_refuse_ending BEFORE UPDATE ON agent_sessions FOR EACH ROW
WHEN (NEW.state IS DISTINCT FROM OLD.state) EXECUTE FUNCTION test_refuse_ending();`); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if _, err := pool.Exec(ctx, `DROP TRIGGER test_refuse_ending ON agent_sessions`); err != nil {
			t.Fatal(err)
		}
	}
}

// newGrant makes a new grant of alice's app in acme and returns its tokens and id (the grant in
// force that was not before).
func (s *site) newGrant(t *testing.T, client, redirect string) (access, refresh string, grant uuid.UUID) {
	t.Helper()
	acme := s.Acme.Account.ID
	before, err := s.OAuth.Grants(context.Background(), acme)
	if err != nil {
		t.Fatal(err)
	}
	access, refresh = s.tokens(t, client, redirect, acme, s.Alice, members.RoleOwner)
	after, err := s.OAuth.Grants(context.Background(), acme)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range after {
		known := false
		for _, b := range before {
			known = known || b.ID == g.ID
		}
		if !known {
			return access, refresh, g.ID
		}
	}
	t.Fatalf("no new grant among %+v", after)
	return "", "", uuid.Nil
}

// TestRevocationStandsWhenEndingItsSessionsFails: the agents never undo a revocation. With the
// database refusing to end the app's sessions, a rotated refresh token presented again after
// the grace still revokes its grant and is answered invalid_grant, and a revocation on the
// console still revokes the other grant; the sessions those apps started stay ready meanwhile,
// each failure is counted (agent.Service.EndingsLeft), and once the database lets them end, the
// sweep of lapsed sessions ends them (access_revoked). Before, the ending's failure rolled the
// whole revocation back: the replay answered 500 with the grant still in force, and the
// console's revocation failed.
func TestRevocationStandsWhenEndingItsSessionsFails(t *testing.T) {
	s := startSite(t, func(c *config.Config) { c.Agents.SessionSweep = 100 * time.Millisecond })
	ctx := context.Background()
	acme := s.Acme.Account.ID
	s.GW.AssignSlot(t, acme, "main")
	s.GW.AssignSlot(t, acme, "second")
	svc := s.GW.Agents
	console, err := mcpauth.New(mcpauth.Options{Store: s.GW.Store, PublicURL: s.URL + "/", Agents: svc})
	if err != nil {
		t.Fatal(err)
	}
	redirect := "https://app.example/cb"
	client := s.register(t, "Claude Code", redirect)
	access, first, replayed := s.newGrant(t, client, redirect)
	otherAccess, _, revoked := s.newGrant(t, client, redirect)
	account := auth.Principal{AccountID: acme}
	sessions := []string{
		approvedSpawn(t, svc, acme, approvalID(t, s.call(t, access, "agent_spawn", map[string]any{"purpose": "say hello"}))),
		approvedSpawn(t, svc, acme, approvalID(t, s.call(t, otherAccess, "agent_spawn", map[string]any{"purpose": "say hello"}))),
	}
	for _, id := range sessions {
		waitSession(t, svc, account, id, func(v agent.SessionView) bool { return v.State == agent.StateReady })
	}
	refresh := func() (int, map[string]any) {
		return s.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {first}, "resource": {s.URL + "/api/mcp"}})
	}
	if status, out := refresh(); status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, out)
	}
	if _, err := s.GW.Store.Pool().Exec(ctx, `UPDATE oauth_tokens SET used_at = used_at - interval '1 minute' WHERE used_at IS NOT NULL`); err != nil {
		t.Fatal(err)
	}

	allow := refuseEndings(t, s)
	if status, out := refresh(); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("the rotated refresh token again, the endings refused: %d %v, want invalid_grant", status, out)
	}
	if _, err := console.Revoke(ctx, acme, revoked, "alice@example.com"); err != nil {
		t.Fatalf("the console's revocation, the endings refused: %v", err)
	}
	for _, g := range []uuid.UUID{replayed, revoked} {
		if got, err := s.GW.Store.GetOAuthGrant(ctx, acme, g); err != nil || got.RevokedAt == nil {
			t.Fatalf("grant %s after its revocation: %+v, %v, want revoked", g, got, err)
		}
	}
	if status, out := s.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {first},
		"resource": {s.URL + "/api/mcp"}}); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("the replayed refresh token once more: %d %v, want invalid_grant", status, out)
	}
	if n := svc.EndingsLeft(); n != 2 {
		t.Fatalf("EndingsLeft is %d, want the two revocations' endings", n)
	}
	time.Sleep(300 * time.Millisecond) // three sweeps, refused as well
	for _, id := range sessions {
		waitSession(t, svc, account, id, func(v agent.SessionView) bool { return v.State == agent.StateReady })
	}

	allow()
	for _, id := range sessions {
		got := waitSession(t, svc, account, id, func(v agent.SessionView) bool { return v.State != agent.StateReady })
		if got.State != agent.StateStopped || got.EndReason != agent.ReasonAccessRevoked {
			t.Fatalf("session %s after the sweep: %s (%q), want stopped (access_revoked)", id, got.State, got.EndReason)
		}
	}
}
