package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/config"
)

// TestApprovedActionRunsOnceWhenItsJobRunsTwice (security review): River may run an approved
// action's job again while its first run is still alive. Here eight jobs of one approved
// agent_prompt run at once on two processes; the approval row is locked and each status move
// is conditional, so the prompt reaches its session once, the action ends done with that
// message, and every job completes.
func TestApprovedActionRunsOnceWhenItsJobRunsTwice(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Agents.ApprovalTTL = time.Hour })
	n := w.start()
	w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	res, err := svc.Spawn(ctx, acme.p, "main", "Hello.", "")
	if err != nil {
		t.Fatal(err)
	}
	waitSession(t, svc, acme.p, res.SessionID, agent.StateReady)
	const prompt = "And the average?"
	ap, err := svc.RequestPrompt(ctx, acme.p, res.SessionID, prompt)
	if err != nil {
		t.Fatal(err)
	}
	const runs = 8
	if err := svc.ApproveWithJobs(ctx, ap.ID, runs); err != nil {
		t.Fatal(err)
	}
	ap = waitAction(t, svc, acme.p, ap.ID)
	if ap.ActionStatus != agent.ActionDone || ap.MessageID == "" || ap.SessionID != res.SessionID {
		t.Fatalf("action: %+v", ap)
	}

	conn, err := pgx.Connect(ctx, w.conn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var completed int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'agent_action' AND state = 'completed'`).Scan(&completed); err != nil {
			t.Fatal(err)
		}
		if completed == runs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d action jobs completed", completed, runs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var sent int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM agent_messages WHERE session_id = $1 AND text = $2`, uuidOf(res.SessionID), prompt).Scan(&sent); err != nil {
		t.Fatal(err)
	}
	if sent != 1 {
		t.Fatalf("the approved prompt was sent %d times", sent)
	}
	if again, err := svc.ApprovalStatus(ctx, acme.p, ap.ID); err != nil || again.ActionStatus != agent.ActionDone || again.MessageID != ap.MessageID {
		t.Fatalf("after every run: %+v %v", again, err)
	}
}
