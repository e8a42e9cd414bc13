package httpapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestPromptApprovalForAnEndedSession: a session's end cancels the agent_prompt approvals still
// pending for it (what they ask could never be sent): the approval is cancelled, resolved by "the
// session ended", and approving it afterwards is a conflict; a new agent_prompt for the ended
// session is refused at once; the session's log gains no message.
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
	st, err := g.Agents.ApprovalStatus(ctx, p, ap.ID)
	if err != nil || st.State != agent.ApprovalCancelled || st.ActionStatus != "" {
		t.Fatalf("the pending prompt of the ended session: %+v %v", st, err)
	}
	var ce *agent.ConflictError
	if _, err := g.Agents.Resolve(ctx, &tn.Account.ID, ap.ID, true, "owner@example.com"); !errors.As(err, &ce) {
		t.Fatalf("approving a cancelled approval: %v", err)
	}
	if _, err := g.Agents.RequestPrompt(ctx, p, sp.SessionID, "and another"); !errors.As(err, &ce) || !strings.Contains(err.Error(), "has ended") {
		t.Fatalf("a prompt for the ended session: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // a wrongly queued action would have run by now
	after, err := g.Agents.Events(ctx, p, sp.SessionID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("the ended session's log grew from %d to %d events", len(before), len(after))
	}
}
