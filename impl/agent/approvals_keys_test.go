package agent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
)

// TestApprovalOfARevokedKeysRequest: an approval asked with an API key that was revoked since
// cannot be approved (a conflict that says why; denying it still works), and one approved
// before the key was revoked fails when its action would run, starting nothing. Trial h13 D7:
// a revoked key's prompt ran a billed turn in another key's session, its spawn "succeeded".
func TestApprovalOfARevokedKeysRequest(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Agents.ApprovalTTL = time.Hour })
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "acme", 5_000_000)
	leaked := keyed(t, w, n, tn, accounts.KeyOptions{Name: "leaked"})

	ap, err := svc.RequestSpawn(ctx, leaked, agent.SpawnAction{Purpose: "asked, then the key leaked"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.accts.Revoke(ctx, tn.p.AccountID, leaked.KeyID); err != nil {
		t.Fatal(err)
	}
	var conflict *agent.ConflictError
	if _, err := svc.Resolve(ctx, &tn.p.AccountID, ap.ID, true, "test"); !errors.As(err, &conflict) {
		t.Fatalf("approving a revoked key's request: %v", err)
	}
	if got, err := svc.Resolve(ctx, &tn.p.AccountID, ap.ID, false, "test"); err != nil || got.State != agent.ApprovalDenied {
		t.Fatalf("denying it: %+v, %v", got, err)
	}

	// Approved while the key was valid, revoked before the action ran: the action fails.
	other := keyed(t, w, n, tn, accounts.KeyOptions{Name: "other"})
	ap, err = svc.RequestSpawn(ctx, other, agent.SpawnAction{Purpose: "approved, then revoked"})
	if err != nil {
		t.Fatal(err)
	}
	// No node runs the action while it is approved and the key revoked: the node is stopped,
	// an operator's service (which runs no jobs, as `tollgate admin approval approve`'s)
	// approves, and a second node runs the action.
	n.stop()
	operator, err := agent.New(agent.Options{Store: w.store, Config: w.cfg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := operator.Resolve(ctx, nil, ap.ID, true, "operator"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.accts.Revoke(ctx, tn.p.AccountID, other.KeyID); err != nil {
		t.Fatal(err)
	}
	waitActionFailed(t, w.start().gw.Agents, tn.p, ap.ID)
}

// TestPendingApprovalsBoundHoldsUnderConcurrency: requests for approvals sent at once never
// leave more than MaxPendingApprovals pending (trial h13 D2: 130 at once left 118).
func TestPendingApprovalsBoundHoldsUnderConcurrency(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Agents.ApprovalTTL = time.Hour })
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "acme", 5_000_000)
	var wg sync.WaitGroup
	for range agent.MaxPendingApprovals + 30 {
		wg.Go(func() { _, _ = svc.RequestSpawn(ctx, tn.p, agent.SpawnAction{Purpose: "flood"}) })
	}
	wg.Wait()
	list, err := svc.ListApprovals(ctx, &tn.p.AccountID, agent.ApprovalPending, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != agent.MaxPendingApprovals {
		t.Errorf("%d approvals pending, want exactly %d", len(list), agent.MaxPendingApprovals)
	}
}

// waitActionFailed waits until the approved action of approval id has failed and returns the
// approval; it fails the test when the action is done instead, or neither within 20 s, and
// when the failed action started a session.
func waitActionFailed(t *testing.T, svc *agent.Service, p auth.Principal, id string) agent.Approval {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := svc.ApprovalStatus(context.Background(), p, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.ActionStatus == agent.ActionFailed {
			if got.SessionID != "" {
				t.Errorf("the failed action started session %s", got.SessionID)
			}
			return got
		}
		if got.ActionStatus == agent.ActionDone || time.Now().After(deadline) {
			t.Fatalf("the approved action: %+v, want it failed", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
