package mcpauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/web/members"
)

// approvalID reads the approval that agent_spawn or agent_prompt created from the tool's
// answer, whose second line is the approval as JSON.
func approvalID(t *testing.T, r mcpResult) string {
	t.Helper()
	_, line, _ := strings.Cut(r.Text, "\n")
	var ap struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(line), &ap); err != nil || ap.ID == "" || ap.State != "pending" {
		t.Fatalf("the tool answered %+v, want a pending approval", r)
	}
	return ap.ID
}

// grantOf is the grant in force of the member's app in the account (the one the test made).
func (s *site) grantOf(t *testing.T, account uuid.UUID, email string) uuid.UUID {
	t.Helper()
	grants, err := s.OAuth.Grants(context.Background(), account)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range grants {
		if g.UserEmail == email {
			return g.ID
		}
	}
	t.Fatalf("no grant of %s in force among %+v", email, grants)
	return uuid.Nil
}

// refusedApproval fails the test unless approving the approval, on the console (for the
// account) and with the operator's CLI (for any account), is a conflict that says the app lost
// its access; it then denies the approval, which works.
func refusedApproval(t *testing.T, svc *agent.Service, account uuid.UUID, id, what string) {
	t.Helper()
	ctx := context.Background()
	for _, scope := range []*uuid.UUID{&account, nil} {
		var conflict *agent.ConflictError
		_, err := svc.Resolve(ctx, scope, id, true, "alice@example.com")
		if !errors.As(err, &conflict) || !strings.Contains(err.Error(), "the connected app that asked for it lost its access since") {
			t.Fatalf("%s: approving it (account scope %v) answered %v, want a conflict saying the app lost its access", what, scope != nil, err)
		}
	}
	if got, err := svc.ApprovalStatus(ctx, auth.Principal{AccountID: account}, id); err != nil || got.State != agent.ApprovalPending {
		t.Fatalf("%s: after the refused approvals: %+v, %v, want it still pending", what, got, err)
	}
	if got, err := svc.Resolve(ctx, &account, id, false, "alice@example.com"); err != nil || got.State != agent.ApprovalDenied {
		t.Fatalf("%s: denying it: %+v, %v", what, got, err)
	}
}

// TestApprovalOfARevokedAppsRequest: an agent_spawn or agent_prompt that a connected app (an
// MCP client signed in with OAuth) asked for cannot be approved once the app lost its access:
// its grant revoked on the console's Connected apps, its member removed from the account, or
// the member's role lowered below the one they allowed the app with. Approving is a conflict
// that says why, on the console and with the operator's CLI; denying still works. Before, the
// approval recorded no key and so nobody to check: it was approved and its action ran.
func TestApprovalOfARevokedAppsRequest(t *testing.T) {
	s := startSite(t)
	ctx := context.Background()
	acme := s.Acme.Account.ID
	s.GW.AssignSlot(t, acme, "main")
	svc := s.GW.Agents
	redirect := "https://app.example/cb"
	client := s.register(t, "Claude Code", redirect)

	// The grant revoked on the console's Connected apps.
	access, _ := s.tokens(t, client, redirect, acme, s.Alice, members.RoleOwner)
	spawn := approvalID(t, s.call(t, access, "agent_spawn", map[string]any{"purpose": "asked, then the app's access was revoked"}))
	if _, err := s.OAuth.Revoke(ctx, acme, s.grantOf(t, acme, "alice@example.com"), "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	refusedApproval(t, svc, acme, spawn, "a spawn of a revoked grant")

	// The member removed from the account: their app's prompt to a session of the account.
	started, err := svc.Spawn(ctx, auth.Principal{AccountID: acme, KeyID: s.Acme.KeyID}, "main", "", "")
	if err != nil {
		t.Fatal(err)
	}
	carol, err := s.members.Add(ctx, acme, "carol@example.com", members.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	access, _ = s.tokens(t, client, redirect, acme, carol, members.RoleOwner)
	prompt := approvalID(t, s.call(t, access, "agent_prompt", map[string]any{"session_id": started.SessionID, "prompt": "asked, then the member left"}))
	if _, err := s.members.Remove(ctx, acme, "carol@example.com", false); err != nil {
		t.Fatal(err)
	}
	refusedApproval(t, svc, acme, prompt, "a prompt of a removed member's app")

	// The member's role lowered below the one they allowed the app with.
	dave, err := s.members.Add(ctx, acme, "dave@example.com", members.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	access, _ = s.tokens(t, client, redirect, acme, dave, members.RoleOwner)
	spawn = approvalID(t, s.call(t, access, "agent_spawn", map[string]any{"purpose": "asked, then the member's role was lowered"}))
	if _, err := s.members.Add(ctx, acme, "dave@example.com", members.RoleMember); err != nil {
		t.Fatal(err)
	}
	refusedApproval(t, svc, acme, spawn, "a spawn of a lowered member's app")

	// An app whose access still works has its request approved.
	access, _ = s.tokens(t, client, redirect, acme, s.Alice, members.RoleOwner)
	prompt = approvalID(t, s.call(t, access, "agent_prompt", map[string]any{"session_id": started.SessionID, "prompt": "asked by an app in good standing"}))
	if got, err := svc.Resolve(ctx, &acme, prompt, true, "alice@example.com"); err != nil || got.State != agent.ApprovalApproved {
		t.Fatalf("approving the request of an app whose access works: %+v, %v", got, err)
	}
}

// TestAppSessionEndsWhenItsAccessIsRevoked: a session that a connected app's approved
// agent_spawn started acts for the app's grant: once the grant is revoked on the console, the
// session ends with access_revoked before any further model call, as a revoked key's session
// ends with key_revoked. Before, such a session had no key and acted for its account alone, so
// revoking the app never stopped it.
func TestAppSessionEndsWhenItsAccessIsRevoked(t *testing.T) {
	s := startSite(t)
	ctx := context.Background()
	acme := s.Acme.Account.ID
	s.GW.AssignSlot(t, acme, "main")
	svc := s.GW.Agents
	redirect := "https://app.example/cb"
	client := s.register(t, "Claude Code", redirect)
	access, _ := s.tokens(t, client, redirect, acme, s.Alice, members.RoleOwner)
	id := approvalID(t, s.call(t, access, "agent_spawn", map[string]any{"purpose": "say hello"}))
	account := auth.Principal{AccountID: acme}
	session := approvedSpawn(t, svc, acme, id)
	// The first turn (the purpose) is answered while the app's access works.
	first := waitSession(t, svc, account, session, func(v agent.SessionView) bool { return v.State == agent.StateReady })
	if first.Turns != 1 {
		t.Fatalf("the session is ready after %d turns, want 1", first.Turns)
	}

	if _, err := s.OAuth.Revoke(ctx, acme, s.grantOf(t, acme, "alice@example.com"), "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	// A message from the account's key makes the session take another step: it ends instead
	// of calling the model again.
	if _, err := svc.SendMessage(ctx, auth.Principal{AccountID: acme, KeyID: s.Acme.KeyID}, "main", "say it again", ""); err != nil {
		t.Fatal(err)
	}
	got := waitSession(t, svc, account, session, func(v agent.SessionView) bool {
		return v.State == agent.StateStopped || v.State == agent.StateFailed || v.Turns > first.Turns
	})
	if got.State != agent.StateStopped || got.EndReason != agent.ReasonAccessRevoked || got.Turns != first.Turns {
		t.Fatalf("after the app's access was revoked the session is %s (%q) after %d turns, want stopped (access_revoked) after %d",
			got.State, got.EndReason, got.Turns, first.Turns)
	}
}

// waitSession waits until the session of the account satisfies done and returns it.
func waitSession(t *testing.T, svc *agent.Service, p auth.Principal, id string, done func(agent.SessionView) bool) agent.SessionView {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last agent.SessionView
	for time.Now().Before(deadline) {
		list, err := svc.Sessions(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range list {
			if v.ID == id {
				if last = v; done(v) {
					return v
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("session %s is %s (%q) after %d turns: it did not get where the test waits for", id, last.State, last.EndReason, last.Turns)
	return last
}

// TestReplayedRefreshEndsTheAppsSessions: a rotated refresh token presented again after the
// grace, at the token endpoint, revokes its grant, and the session the app's approved
// agent_spawn started, waiting for a message, ends in that transaction (access_revoked), with
// the agents' sweep off. Before, the replay's revocation ended no session: it waited for the
// sweep, holding its slot.
func TestReplayedRefreshEndsTheAppsSessions(t *testing.T) {
	s := startSite(t, func(c *config.Config) { c.Agents.SessionSweep = time.Hour })
	ctx := context.Background()
	acme := s.Acme.Account.ID
	s.GW.AssignSlot(t, acme, "main")
	svc := s.GW.Agents
	redirect := "https://app.example/cb"
	client := s.register(t, "Claude Code", redirect)
	access, first := s.tokens(t, client, redirect, acme, s.Alice, members.RoleOwner)
	id := approvalID(t, s.call(t, access, "agent_spawn", map[string]any{"purpose": "say hello"}))
	account := auth.Principal{AccountID: acme}
	session := approvedSpawn(t, svc, acme, id)
	waitSession(t, svc, account, session, func(v agent.SessionView) bool { return v.State == agent.StateReady })
	refresh := func() (int, map[string]any) {
		return s.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {first}, "resource": {s.URL + "/api/mcp"}})
	}
	if status, out := refresh(); status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, out)
	}
	if _, err := s.GW.Store.Pool().Exec(ctx, `UPDATE oauth_tokens SET used_at = used_at - interval '1 minute' WHERE used_at IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if status, out := refresh(); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("the rotated refresh token again: %d %v, want invalid_grant", status, out)
	}
	list, err := svc.Sessions(ctx, account)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range list {
		if v.ID == session && (v.State != agent.StateStopped || v.EndReason != agent.ReasonAccessRevoked) {
			t.Fatalf("right after the replay the session is %s (%q), want stopped (access_revoked)", v.State, v.EndReason)
		}
	}
}

// approvedSpawn approves, as alice, the agent_spawn approval id of the account acme and returns
// the id of the session it started, once the spawn is done (within 20 s).
func approvedSpawn(t *testing.T, svc *agent.Service, acme uuid.UUID, id string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := svc.Resolve(ctx, &acme, id, true, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	account := auth.Principal{AccountID: acme}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ap, err := svc.ApprovalStatus(ctx, account, id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ap.ActionStatus == agent.ActionDone:
			return ap.SessionID
		case ap.ActionStatus == agent.ActionFailed || time.Now().After(deadline):
			t.Fatalf("the approved spawn: %+v", ap)
		}
	}
}
