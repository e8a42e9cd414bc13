package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/config"
)

// TestAnotherAccountsDueApprovalIsNotWritten: a caller of another account who names an
// approval pending past its expiry (agent_action_status, or the console's approve and deny)
// gets not found and writes nothing to it: the approval is read by the caller's account before
// it is expired, so its row stays as it was until its own account, the operator or the sweep
// reads it. The sweep is slowed to an hour so that only the calls of the test can write.
func TestAnotherAccountsDueApprovalIsNotWritten(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		c.Agents.ApprovalTTL = time.Hour
		c.Agents.ApprovalSweep = time.Hour
	})
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	globex := w.tenant(n, "globex", 5_000_000)
	ap, err := svc.RequestSpawn(ctx, acme.p, agent.SpawnAction{Purpose: "acme's own work"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.Pool().Exec(ctx, `UPDATE agent_approvals SET expires_at = now() - interval '1 minute' WHERE id = $1`, ap.ID); err != nil {
		t.Fatal(err)
	}
	untouched := func(after string) {
		t.Helper()
		var state string
		var resolved *time.Time
		if err := w.store.Pool().QueryRow(ctx, `SELECT state, resolved_at FROM agent_approvals WHERE id = $1`, ap.ID).Scan(&state, &resolved); err != nil {
			t.Fatal(err)
		}
		if state != agent.ApprovalPending || resolved != nil {
			t.Fatalf("after %s, acme's approval is %s (resolved at %v): another account's call wrote to it", after, state, resolved)
		}
	}

	if _, err := svc.ApprovalStatus(ctx, globex.p, ap.ID); !errors.Is(err, agent.ErrNotFound) {
		t.Fatalf("globex's ApprovalStatus of acme's approval: %v, want not found", err)
	}
	untouched("globex's ApprovalStatus")
	for _, approve := range []bool{true, false} {
		if _, err := svc.Resolve(ctx, &globex.p.AccountID, ap.ID, approve, "web:mallory@globex"); !errors.Is(err, agent.ErrNotFound) {
			t.Fatalf("globex's Resolve (approve %v) of acme's approval: %v, want not found", approve, err)
		}
		untouched("globex's Resolve")
	}

	// Its own account's read expires it, as before.
	got, err := svc.ApprovalStatus(ctx, acme.p, ap.ID)
	if err != nil || got.State != agent.ApprovalExpired || got.ResolvedBy != "expiry" {
		t.Fatalf("acme's ApprovalStatus of its approval past its expiry: %+v, %v", got, err)
	}
}
