package mcp

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestAgentInputSchemasComeFromTheContract checks that each agent tool's input schema is the
// OpenAPI component of the same contract, converted, that only agent_spawn and agent_prompt are
// not read-only, and that the tail bounds (500 lines, 30 seconds) are in the schema.
func TestAgentInputSchemasComeFromTheContract(t *testing.T) {
	components := map[string]string{
		ToolListAgentSessions: "ListAgentSessionsInput",
		ToolTailAgentSession:  "TailAgentSessionInput",
		ToolListAgentTickets:  "ListAgentTicketsInput",
		ToolAgentActionStatus: "AgentActionStatusInput",
		ToolAgentSpawn:        "AgentSpawnInput",
		ToolAgentPrompt:       "AgentPromptInput",
	}
	tools := AgentTools(nil)
	if len(tools) != len(components) {
		t.Fatalf("%d agent tools, want %d", len(tools), len(components))
	}
	for _, tool := range tools {
		name, ok := components[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %q", tool.Name)
			continue
		}
		want, err := ComponentSchema(name)
		if err != nil {
			t.Fatal(err)
		}
		if string(tool.InputSchema) != string(want) {
			t.Errorf("%s: input schema %s is not component %s %s", tool.Name, tool.InputSchema, name, want)
		}
		if _, err := newRegisteredTool(tool); err != nil {
			t.Errorf("%s: %v", tool.Name, err)
		}
		acts := tool.Name == ToolAgentSpawn || tool.Name == ToolAgentPrompt
		if tool.Annotations.ReadOnly == acts {
			t.Errorf("%s: read-only %v", tool.Name, tool.Annotations.ReadOnly)
		}
		if acts && (tool.Annotations.Destructive || tool.Annotations.Idempotent || tool.Annotations.OpenWorld) {
			t.Errorf("%s: annotations %+v", tool.Name, tool.Annotations)
		}
	}

	var tail struct {
		Required   []string                  `json:"required"`
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(mustComponentSchema("TailAgentSessionInput"), &tail); err != nil {
		t.Fatal(err)
	}
	if len(tail.Required) != 1 || tail.Required[0] != "session_id" {
		t.Errorf("tail required %v", tail.Required)
	}
	for prop, bounds := range map[string][2]float64{"max_lines": {1, TailMaxLines}, "max_seconds": {0, TailMaxSeconds}} {
		p := tail.Properties[prop]
		if p["type"] != "integer" || p["minimum"] != bounds[0] || p["maximum"] != bounds[1] {
			t.Errorf("%s = %v, want an integer in %v", prop, p, bounds)
		}
	}
	if c := tail.Properties["cursor"]; c["type"] != "integer" || c["minimum"] != 0.0 {
		t.Errorf("cursor = %v", c)
	}
}

// TestAgentToolArgumentsOutsideTheBoundsAreRefused: a tail above 500 lines or 30 seconds, a
// ticket state outside open|closed|all, and a missing required argument are refused by the
// schema, as tool errors naming the argument, before the service is asked (it is nil here).
func TestAgentToolArgumentsOutsideTheBoundsAreRefused(t *testing.T) {
	url := newTestServer(t, nil, Options{Tools: AgentTools(nil)})
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{ToolTailAgentSession, map[string]any{"session_id": "s", "max_lines": 501}, "max_lines: maximum: got 501, want 500"},
		{ToolTailAgentSession, map[string]any{"session_id": "s", "max_lines": 0}, "max_lines: minimum: got 0, want 1"},
		{ToolTailAgentSession, map[string]any{"session_id": "s", "max_seconds": 31}, "max_seconds: maximum: got 31, want 30"},
		{ToolTailAgentSession, map[string]any{"session_id": "s", "cursor": -1}, "cursor: minimum: got -1, want 0"},
		{ToolTailAgentSession, map[string]any{}, "missing property 'session_id'"},
		{ToolListAgentTickets, map[string]any{"state": "pending"}, "state: value must be one of"},
		{ToolAgentActionStatus, map[string]any{}, "missing property 'approval_id'"},
		{ToolAgentSpawn, map[string]any{"model": "service-flint"}, "missing property 'purpose'"},
		{ToolAgentSpawn, map[string]any{"purpose": "x", "max_spend": 0}, "max_spend: minimum: got 0, want 1"},
		{ToolAgentPrompt, map[string]any{"session_id": "s"}, "missing property 'prompt'"},
		{ToolAgentPrompt, map[string]any{"session_id": "s", "prompt": "p", "approve": true}, "additional properties 'approve' not allowed"},
	} {
		text, isError := callTool(t, url, "x", c.tool, c.args)
		if !isError || !strings.HasPrefix(text, "Error: invalid arguments for tool '"+c.tool+"'") || !strings.Contains(text, c.want) {
			t.Errorf("%s %v: %q (isError %v), want a refusal mentioning %q", c.tool, c.args, text, isError, c.want)
		}
	}
}

// TestApprovalTextSaysTheActionsStatus: agent_action_status says an approved action's status in
// words. A failed one read "the action is failed: no free slot: …" on the newcomer's trial of
// 2026-12-06; it says "the action failed: …", and the other statuses "the action is …".
func TestApprovalTextSaysTheActionsStatus(t *testing.T) {
	for _, c := range []struct {
		ap   AgentApproval
		want string
	}{
		{AgentApproval{ID: "a1", Action: "spawn", State: "approved", ActionStatus: "failed", Failure: "no free slot: every agent slot of the account runs a session"},
			"Approval a1 (agent_spawn) was approved; the action failed: no free slot: every agent slot of the account runs a session.\n"},
		{AgentApproval{ID: "a2", Action: "spawn", State: "approved", ActionStatus: "done", SessionID: "s1"},
			"Approval a2 (agent_spawn) was approved; the action is done, session s1.\n"},
		{AgentApproval{ID: "a3", Action: "prompt", State: "approved", ActionStatus: "queued"},
			"Approval a3 (agent_prompt) was approved; the action is queued.\n"},
	} {
		if got := approvalText(c.ap, false); !strings.HasPrefix(got, c.want) {
			t.Errorf("approvalText(%+v) begins %q, want %q", c.ap, strings.SplitAfter(got, "\n")[0], c.want)
		}
	}
}

// TestApprovalCreatedSaysWhereToApprove: the answer to agent_spawn and agent_prompt says where a
// person approves the action: the web console's Approvals page, or tollgate admin approval
// approve with its id. It said "the operator or the web application" (newcomer walk s11h3: an
// MCP client relays the answer to a person, who then had to find the page).
func TestApprovalCreatedSaysWhereToApprove(t *testing.T) {
	ap := AgentApproval{ID: "a1", Action: "spawn", State: "pending", ExpiresAt: time.Date(2026, 12, 8, 6, 5, 47, 0, time.UTC)}
	const want = "Approval a1 created: agent_spawn waits until 2026-12-08T06:05:47Z for a person to approve it, " +
		"on the web console's Approvals page or with tollgate admin approval approve a1; nothing runs before. " +
		"Poll agent_action_status with approval_id a1.\n"
	if got := approvalText(ap, true); !strings.HasPrefix(got, want) {
		t.Errorf("approvalText of a new approval begins %q, want %q", strings.SplitAfter(got, "\n")[0], want)
	}
}

// TestApprovalCreatedSaysNoSlotIsFree: a spawn's approval made while every slot of the account
// ran a session says so after where to approve it, with what to do; one made with a slot free,
// and any approval read later, say nothing of it (newcomer walk s11h3: only the console's
// Approvals page warned, and the spawn failed once approved).
func TestApprovalCreatedSaysNoSlotIsFree(t *testing.T) {
	ap := AgentApproval{ID: "a1", Action: "spawn", State: "pending", ExpiresAt: time.Date(2026, 12, 8, 6, 5, 47, 0, time.UTC), NoFreeSlot: true}
	const want = "Poll agent_action_status with approval_id a1. No slot is free now: every agent slot of the account runs a session, " +
		"so approved now the spawn would fail. Stop a session first (DELETE /v1/agents/{slot}, or Stop the session on the web console's Agents page) " +
		"or wait for one to end, then have it approved.\n"
	if got := approvalText(ap, true); !strings.Contains(got, want) {
		t.Errorf("approvalText of a spawn with no free slot begins %q, want it to hold %q", strings.SplitAfter(got, "\n")[0], want)
	}
	free := ap
	free.NoFreeSlot = false
	for _, got := range []string{approvalText(free, true), approvalText(ap, false)} {
		if strings.Contains(got, "No slot is free") {
			t.Errorf("approvalText says no slot is free where it need not: %q", strings.SplitAfter(got, "\n")[0])
		}
	}
}
