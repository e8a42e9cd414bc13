package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestMemberRemovalStandsWhenEndingFails: the agents never undo a member's removal. With the
// test's PostgreSQL refusing every change of a session's state (a trigger), the removal of the
// member who started a session on the console commits all the same, the failed ending counted
// (agent.Service.EndingsLeft); the session stays ready while the database refuses, and once it
// lets it end, the sweep of lapsed sessions ends it (member_removed). Before, the ending's
// failure undid the removal, and the sweep did not look for a removed member's sessions.
func TestMemberRemovalStandsWhenEndingFails(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	people := members.New(w.store, svc)
	tn := w.tenant(n, "refused", 5_000_000)
	console := auth.Principal{AccountID: tn.p.AccountID}
	alice, err := people.Add(ctx, tn.p.AccountID, "alice@example.com", members.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.SpawnForMember(ctx, console, alice.ID, "main", "Say hello.")
	if err != nil {
		t.Fatal(err)
	}
	mine := waitSession(t, svc, console, res.SessionID, agent.StateReady, agent.StateStopped, agent.StateFailed)
	if mine.State != agent.StateReady {
		t.Fatalf("session %+v, want ready", mine)
	}

	pool := w.store.Pool()
	if _, err := pool.Exec(ctx, `
CREATE FUNCTION test_refuse_ending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the test refuses to change the state of agent session %', OLD.id; END $$;
CREATE TRIGGER test_refuse_ending BEFORE UPDATE ON agent_sessions FOR EACH ROW
WHEN (NEW.state IS DISTINCT FROM OLD.state) EXECUTE FUNCTION test_refuse_ending();`); err != nil {
		t.Fatal(err)
	}
	if _, err := people.Remove(ctx, tn.p.AccountID, alice.Email, false); err != nil {
		t.Fatalf("the removal, the endings refused: %v", err)
	}
	if _, err := w.store.GetMembership(ctx, alice.ID, tn.p.AccountID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("alice's membership after her removal: %v, want none", err)
	}
	if got := svc.EndingsLeft(); got != 1 {
		t.Fatalf("EndingsLeft is %d, want the removal's ending", got)
	}
	time.Sleep(300 * time.Millisecond) // three sweeps, refused as well
	if s := sessionNow(t, svc, console, mine.ID); s.State != agent.StateReady {
		t.Fatalf("the session while the database refuses its ending: %+v, want ready", s)
	}

	if _, err := pool.Exec(ctx, `DROP TRIGGER test_refuse_ending ON agent_sessions`); err != nil {
		t.Fatal(err)
	}
	waitSession(t, svc, console, mine.ID, agent.StateStopped, agent.StateFailed)
	checkEnded(t, svc, console, mine, agent.ReasonMemberRemoved)
	targets, entries := sessionsEnded(t, w, tn.p.AccountID)
	if len(targets) != 1 || targets[0] != "member "+alice.ID.String() || entries[0].Reason != agent.ReasonMemberRemoved {
		t.Fatalf("audit entries %v %+v, want the sweep's one naming alice", targets, entries)
	}
}
