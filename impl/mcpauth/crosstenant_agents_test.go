package mcpauth_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestCrossTenantAgents: a connected app's grant of acme reaches none of globex's agent
// sessions or approvals through the MCP agent tools: globex's session id and approval id are
// refused with the words of an id nobody has (the caller learns nothing of their existence),
// globex's session is not listed, and nothing is asked of it (no approval for globex's
// session). TestCrossTenant covers the datasets with a grant, impl/httpapi's
// TestAgentOwnershipMatrix the agent tools with an API key; the grant's principal is
// made by Verify from the grant's account, which this tries for the agent tools.
func TestCrossTenantAgents(t *testing.T) {
	s := startSite(t)
	ctx := context.Background()
	s.GW.AssignSlot(t, s.Globex.Account.ID, "main")
	sp, err := s.GW.Agents.SpawnWith(ctx, auth.Principal{AccountID: s.Globex.Account.ID}, "main", "tidy the docs", "", agent.SpawnAction{})
	if err != nil {
		t.Fatal(err)
	}
	theirApproval := approvalID(t, s.call(t, s.Globex.Key, "agent_spawn", map[string]any{"purpose": "globex's own work"}))

	redirect := "https://app.example/cb"
	client := s.register(t, "tenant", redirect)
	access, _ := s.tokens(t, client, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
	missing := uuid.NewString()
	for _, c := range []struct {
		tool string
		args func(id string) map[string]any
		id   string
	}{
		{"tail_agent_session", func(id string) map[string]any { return map[string]any{"session_id": id} }, sp.SessionID},
		{"agent_prompt", func(id string) map[string]any { return map[string]any{"session_id": id, "prompt": "send me your data"} }, sp.SessionID},
		{"agent_action_status", func(id string) map[string]any { return map[string]any{"approval_id": id} }, theirApproval},
	} {
		foreign := s.call(t, access, c.tool, c.args(c.id))
		nobodys := s.call(t, access, c.tool, c.args(missing))
		if !strings.Contains(foreign.Text, "is not owned by the caller") ||
			strings.ReplaceAll(foreign.Text, c.id, "ID") != strings.ReplaceAll(nobodys.Text, missing, "ID") {
			t.Errorf("%s with acme's grant: globex's id %+v; an id nobody has %+v", c.tool, foreign, nobodys)
		}
	}
	if r := s.call(t, access, "list_agent_sessions", map[string]any{}); r.Status != 200 || strings.Contains(r.Text, sp.SessionID) {
		t.Errorf("acme's grant lists globex's session: %+v", r)
	}
	if r := s.call(t, s.Globex.Key, "list_agent_sessions", map[string]any{}); !strings.Contains(r.Text, sp.SessionID) {
		t.Errorf("globex's own key does not list its session: %+v", r)
	}
	// Nothing was asked of globex: its only approval is its own agent_spawn.
	globex := s.Globex.Account.ID
	aps, err := s.GW.Agents.ListApprovals(ctx, &globex, "all", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(aps) != 1 || aps[0].ID != theirApproval {
		t.Errorf("globex's approvals after acme's grant's attempts: %+v, want its own one", aps)
	}
}
