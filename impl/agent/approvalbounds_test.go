package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/apierror"
)

// TestApprovalRequestsAreBounded: what an approval may hold is bounded before it is recorded.
// A spawn may lower its profile's max_turns and max_spend but not raise them (a value past the
// database's integer, 2^31, was stored cut to 1 or refused on every run of the approved action);
// a purpose, a prompt or a name over its size is refused naming the field; and an account with
// MaxPendingApprovals pending gets a conflict until a person resolves some. Nothing refused made
// an approval.
func TestApprovalRequestsAreBounded(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	big := strings.Repeat("x", agent.MaxApprovalText+1)
	for _, c := range []struct {
		name  string
		a     agent.SpawnAction
		param string
	}{
		{"max_turns past int32", agent.SpawnAction{Purpose: "p", MaxTurns: new(int(1) << 31)}, "max_turns"},
		{"max_turns above the profile", agent.SpawnAction{Purpose: "p", MaxTurns: new(21)}, "max_turns"},
		{"max_spend above the profile", agent.SpawnAction{Purpose: "p", MaxSpend: new(int64(2_000_001))}, "max_spend"},
		{"purpose too long", agent.SpawnAction{Purpose: big}, "purpose"},
		{"agent name too long", agent.SpawnAction{Purpose: "p", AgentName: strings.Repeat("n", agent.MaxApprovalName+1)}, "agent_name"},
	} {
		_, err := svc.RequestSpawn(ctx, acme.p, c.a)
		if e := apierror.As(err); e == nil || e.Kind != apierror.KindInvalidRequest || e.Param != c.param {
			t.Errorf("%s: %v, want a 400 naming %s", c.name, err, c.param)
		}
	}
	lower, err := svc.RequestSpawn(ctx, acme.p, agent.SpawnAction{Purpose: "p", MaxTurns: new(20), MaxSpend: new(int64(1))})
	if err != nil {
		t.Fatalf("a spawn at the profile's bounds: %v", err)
	}
	res, err := svc.Spawn(ctx, acme.p, "main", "Say hello.", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RequestPrompt(ctx, acme.p, res.SessionID, big); apierror.As(err).Param != "prompt" {
		t.Errorf("a prompt too long: %v", err)
	}

	for i := 1; i < agent.MaxPendingApprovals; i++ {
		if _, err := svc.RequestPrompt(ctx, acme.p, res.SessionID, "hello"); err != nil {
			t.Fatalf("approval %d of %d: %v", i+1, agent.MaxPendingApprovals, err)
		}
	}
	if _, err := svc.RequestPrompt(ctx, acme.p, res.SessionID, "one more"); !isConflict(err, "approvals pending") {
		t.Fatalf("an approval beyond %d pending: %v", agent.MaxPendingApprovals, err)
	}
	if _, err := svc.Resolve(ctx, &acme.p.AccountID, lower.ID, false, "operator"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RequestPrompt(ctx, acme.p, res.SessionID, "one more"); err != nil {
		t.Fatalf("an approval once one was denied: %v", err)
	}
	all, err := svc.ListApprovals(ctx, &acme.p.AccountID, "all", 500)
	if err != nil || len(all) != agent.MaxPendingApprovals+1 {
		t.Fatalf("%d approvals (%v), want %d", len(all), err, agent.MaxPendingApprovals+1)
	}
}

// TestApprovedActionRefusedByTheDatabaseFails: an approved action whose data the database
// refuses (a check violation, which it would raise on every run) fails at once with a failure
// that says so, instead of being retried until River discards it with its status "queued" for
// ever.
func TestApprovedActionRefusedByTheDatabaseFails(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	for _, sql := range []string{
		`CREATE FUNCTION refuse_sessions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'test: session refused' USING ERRCODE = 'check_violation';
END $$`,
		`CREATE TRIGGER refuse_sessions BEFORE INSERT ON agent_sessions FOR EACH ROW EXECUTE FUNCTION refuse_sessions()`,
	} {
		if _, err := w.store.Pool().Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = w.store.Pool().Exec(ctx, `DROP TRIGGER IF EXISTS refuse_sessions ON agent_sessions; DROP FUNCTION IF EXISTS refuse_sessions()`)
	})
	ap, err := svc.RequestSpawn(ctx, acme.p, agent.SpawnAction{Purpose: "Say hello."})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Resolve(ctx, nil, ap.ID, true, "operator"); err != nil {
		t.Fatal(err)
	}
	got := waitAction(t, svc, acme.p, ap.ID)
	if got.ActionStatus != agent.ActionFailed || !strings.Contains(got.Failure, "refused") {
		t.Fatalf("the approved action: %+v", got)
	}
}

// TestSpawnApprovalNeedsASlot: an account without an agent slot is refused an agent_spawn
// approval at once, saying so, rather than given one that can only fail after a person approves
// it, with a failure that said every slot was busy (trial h9 D10).
func TestSpawnApprovalNeedsASlot(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	if err := svc.UnassignSlot(ctx, acme.p.AccountID, "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RequestSpawn(ctx, acme.p, agent.SpawnAction{Purpose: "p"}); !isConflict(err, "this account has no agent slot") {
		t.Errorf("a spawn approval without a slot: %v", err)
	}
}
