package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestPromptApprovalForAnEndedSession: an agent_prompt approved after its session ended runs
// nothing: its action fails with a reason naming the end, the session's log gains no message,
// and the approval is not left queued or running.
func TestPromptApprovalForAnEndedSession(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	a := newAgentsClient(t, g, tn.Key)
	sp := a.spawn("main", scriptPrompt)
	a.waitState("main", "ready")
	p := auth.Principal{AccountID: tn.Account.ID, KeyID: tn.KeyID}
	ap, err := g.Agents.RequestPrompt(ctx, p, sp.SessionID, "one more thing")
	if err != nil {
		t.Fatal(err)
	}
	a.json("DELETE", "/v1/agents/main", "", 202, nil)
	a.waitState("main", "stopped")
	before, err := g.Agents.Events(ctx, p, sp.SessionID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Agents.Resolve(ctx, &tn.Account.ID, ap.ID, true, "owner@example.com"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := g.Agents.ApprovalStatus(ctx, p, ap.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.ActionStatus == agent.ActionFailed {
			if !strings.Contains(st.Failure, "ended") || st.MessageID != "" {
				t.Fatalf("the failed action: %+v", st)
			}
			break
		}
		if st.ActionStatus == agent.ActionDone || time.Now().After(deadline) {
			t.Fatalf("a prompt approved after its session ended: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	after, err := g.Agents.Events(ctx, p, sp.SessionID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("the ended session's log grew from %d to %d events", len(before), len(after))
	}
}
