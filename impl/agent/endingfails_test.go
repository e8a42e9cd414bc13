package agent_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

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
	console, alice, mine := memberSession(t, people, svc, tn.p.AccountID, "alice")

	pool := w.store.Pool()
	refuseEndings(t, pool, "")
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

// TestSweepGoesOnPastAGroupItCannotEnd: the sweep of lapsed sessions ends each account's
// sessions whatever another account's ending does. Two accounts' members are removed while the
// database refuses every ending (their sessions left to the sweep); then it refuses only the
// sessions of the account the sweep reaches first (it takes them by account). The other
// account's session ends at the next sweep, and the first's once the database lets it. Before,
// the sweep stopped at its first failure, and every account after one whose ending kept failing
// kept its sessions running.
func TestSweepGoesOnPastAGroupItCannotEnd(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	people := members.New(w.store, svc)
	type started struct {
		console auth.Principal
		member  members.User
		session agent.SessionView
	}
	var two []started
	for _, name := range []string{"first", "second"} {
		tn := w.tenant(n, name, 5_000_000)
		console, m, s := memberSession(t, people, svc, tn.p.AccountID, name)
		two = append(two, started{console, m, s})
	}
	if bytes.Compare(two[0].console.AccountID[:], two[1].console.AccountID[:]) > 0 {
		two[0], two[1] = two[1], two[0] // two[0] is the account the sweep reaches first
	}
	pool := w.store.Pool()
	refuseEndings(t, pool, "test_refused")
	for _, s := range two {
		if _, err := people.Remove(ctx, s.console.AccountID, s.member.Email, false); err != nil {
			t.Fatalf("the removal, the endings refused: %v", err)
		}
	}
	if got := svc.EndingsLeft(); got != 2 {
		t.Fatalf("EndingsLeft is %d, want both removals' endings", got)
	}
	// From now on only the first account's sessions are refused.
	if _, err := pool.Exec(ctx, `UPDATE test_refused SET account_id = $1`, two[0].console.AccountID); err != nil {
		t.Fatal(err)
	}
	waitSession(t, svc, two[1].console, two[1].session.ID, agent.StateStopped, agent.StateFailed)
	checkEnded(t, svc, two[1].console, two[1].session, agent.ReasonMemberRemoved)
	if s := sessionNow(t, svc, two[0].console, two[0].session.ID); s.State != agent.StateReady {
		t.Fatalf("the first account's session while the database refuses its ending: %+v, want ready", s)
	}
	if _, err := pool.Exec(ctx, `DROP TRIGGER test_refuse_ending ON agent_sessions`); err != nil {
		t.Fatal(err)
	}
	waitSession(t, svc, two[0].console, two[0].session.ID, agent.StateStopped, agent.StateFailed)
	checkEnded(t, svc, two[0].console, two[0].session, agent.ReasonMemberRemoved)
}

// TestReAddedMemberRevivesNoSession: a member removed while the database refuses to end their
// console session, and added back before the sweep of lapsed sessions ends it, does not get it
// back: the session recorded who started it and when, and a membership that began after it did
// is not the one it ran under, so the sweep (and the step's own check) ends it, member_removed.
// Before, the new membership looked like the old one, and the session ran on, against
// agents.md's rule that adding a member back revives nothing.
func TestReAddedMemberRevivesNoSession(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	people := members.New(w.store, svc)
	tn := w.tenant(n, "readded", 5_000_000)
	console, alice, mine := memberSession(t, people, svc, tn.p.AccountID, "alice")
	pool := w.store.Pool()
	refuseEndings(t, pool, "")
	if _, err := people.Remove(ctx, tn.p.AccountID, alice.Email, false); err != nil {
		t.Fatalf("the removal, the endings refused: %v", err)
	}
	if got := svc.EndingsLeft(); got != 1 {
		t.Fatalf("EndingsLeft is %d, want the removal's ending", got)
	}
	if _, err := people.Add(ctx, tn.p.AccountID, alice.Email, members.RoleOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DROP TRIGGER test_refuse_ending ON agent_sessions`); err != nil {
		t.Fatal(err)
	}
	if s := waitSession(t, svc, console, mine.ID, agent.StateStopped, agent.StateFailed); s.State != agent.StateStopped {
		t.Fatalf("the session after alice was removed and added back: %+v, want stopped", s)
	}
	checkEnded(t, svc, console, mine, agent.ReasonMemberRemoved)
}

// TestEndingsLeftCountRevocationsAndSessions: what the counters of endings left to the sweep
// count. A member with two console sessions is removed while the database refuses every
// ending: one revocation left to the sweep (EndingsLeft, tollgate_agent_endings_left_total)
// and two sessions left running until it ends them (SessionsLeft,
// tollgate_agent_sessions_left_total). Removing a member without a session meanwhile has no
// ending to fail: neither moves. Before, only the revocations were counted, and the
// operations page spoke of them as sessions.
func TestEndingsLeftCountRevocationsAndSessions(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	people := members.New(w.store, svc)
	tn := w.tenant(n, "counted", 5_000_000)
	if err := svc.AssignSlot(ctx, tn.p.AccountID, "second"); err != nil {
		t.Fatal(err)
	}
	console := auth.Principal{AccountID: tn.p.AccountID}
	alice, err := people.Add(ctx, tn.p.AccountID, "alice@example.com", members.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := people.Add(ctx, tn.p.AccountID, "bob@example.com", members.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	var hers []agent.SessionView
	for _, slot := range []string{"main", "second"} {
		res, err := svc.SpawnForMember(ctx, console, alice.ID, slot, "Say hello.")
		if err != nil {
			t.Fatal(err)
		}
		s := waitSession(t, svc, console, res.SessionID, agent.StateReady, agent.StateStopped, agent.StateFailed)
		if s.State != agent.StateReady {
			t.Fatalf("session %+v, want ready", s)
		}
		hers = append(hers, s)
	}
	refuseEndings(t, w.store.Pool(), "")
	if _, err := people.Remove(ctx, tn.p.AccountID, bob.Email, false); err != nil {
		t.Fatalf("removing bob, who has no session: %v", err)
	}
	if e, s := svc.EndingsLeft(), svc.SessionsLeft(); e != 0 || s != 0 {
		t.Fatalf("after removing a member without a session: EndingsLeft %d, SessionsLeft %d; want 0 and 0", e, s)
	}
	if _, err := people.Remove(ctx, tn.p.AccountID, alice.Email, false); err != nil {
		t.Fatalf("the removal, the endings refused: %v", err)
	}
	if e, s := svc.EndingsLeft(), svc.SessionsLeft(); e != 1 || s != 2 {
		t.Fatalf("after alice's removal: EndingsLeft %d, SessionsLeft %d; want 1 revocation and her 2 sessions", e, s)
	}
	if _, err := w.store.Pool().Exec(ctx, `DROP TRIGGER test_refuse_ending ON agent_sessions`); err != nil {
		t.Fatal(err)
	}
	for _, s := range hers {
		waitSession(t, svc, console, s.ID, agent.StateStopped, agent.StateFailed)
		checkEnded(t, svc, console, s, agent.ReasonMemberRemoved)
	}
	if e, s := svc.EndingsLeft(), svc.SessionsLeft(); e != 1 || s != 2 {
		t.Fatalf("after the sweep: EndingsLeft %d, SessionsLeft %d; want them unchanged (counters)", e, s)
	}
}

// memberSession adds name@example.com to account as an owner and starts a console session
// for them, ready: the person, and the session with its console principal.
func memberSession(t *testing.T, people *members.Service, svc *agent.Service, account uuid.UUID, name string) (auth.Principal, members.User, agent.SessionView) {
	t.Helper()
	ctx := context.Background()
	console := auth.Principal{AccountID: account}
	m, err := people.Add(ctx, account, name+"@example.com", members.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.SpawnForMember(ctx, console, m.ID, "main", "Say hello.")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, console, res.SessionID, agent.StateReady, agent.StateStopped, agent.StateFailed)
	if s.State != agent.StateReady {
		t.Fatalf("session %+v, want ready", s)
	}
	return console, m, s
}

// refuseEndings makes the test's PostgreSQL refuse every change of an agent session's state
// (the trigger test_refuse_ending, which a test drops to let them through). With table named,
// it refuses only the sessions of the accounts listed in that new table, and every session
// while it holds a NULL, which it holds to begin with.
func refuseEndings(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	body := `RAISE EXCEPTION 'the test refuses to change the state of agent session %', OLD.id;`
	setup := ""
	if table != "" {
		setup = `CREATE TABLE ` + table + ` (account_id uuid); INSERT INTO ` + table + ` VALUES (NULL);`
		body = `IF EXISTS (SELECT 1 FROM ` + table + ` WHERE account_id IS NULL OR account_id = NEW.account_id) THEN
    RAISE EXCEPTION 'the test refuses to change the state of agent session %', OLD.id;
  END IF;
  RETURN NEW;`
	}
	if _, err := pool.Exec(context.Background(), setup+`
CREATE FUNCTION test_refuse_ending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  `+body+`
END $$;
CREATE TRIGGER test_refuse_ending BEFORE UPDATE ON agent_sessions FOR EACH ROW
WHEN (NEW.state IS DISTINCT FROM OLD.state) EXECUTE FUNCTION test_refuse_ending();`); err != nil {
		t.Fatal(err)
	}
}
