package agent_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestMemberRemovalEndsTheirWaitingSessions: removing a member (members.Service.Remove with the
// agents, as the console and `tollgate admin member remove` do) ends the session they started
// on the console that waits for a message, in the removal's transaction: it is stopped
// (member_removed, its state event last) when Remove returns, its slot takes a new session, and
// adding the member back does not revive it (a message to it is refused, nothing more is
// called or billed). Before, a waiting session did not step, so nothing checked its member: it
// stayed ready, held its slot, and took the next message once the member was back. Another
// member's session and a key's session in the account keep running and answer messages.
func TestMemberRemovalEndsTheirWaitingSessions(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	people := members.New(w.store, svc)
	tn := w.tenant(n, "removal", 5_000_000)
	console := auth.Principal{AccountID: tn.p.AccountID}
	for _, slot := range []string{"bob", "keyed"} {
		if err := svc.AssignSlot(ctx, tn.p.AccountID, slot); err != nil {
			t.Fatal(err)
		}
	}
	alice, err := people.Add(ctx, tn.p.AccountID, "alice@example.com", members.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := people.Add(ctx, tn.p.AccountID, "bob@example.com", members.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	spawn := func(res agent.SpawnResult, err error) agent.SessionView {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return waitSession(t, svc, console, res.SessionID, agent.StateReady, agent.StateStopped, agent.StateFailed)
	}
	mine := spawn(svc.SpawnForMember(ctx, console, alice.ID, "main", "Say hello."))
	bobs := spawn(svc.SpawnForMember(ctx, console, bob.ID, "bob", "Say hello."))
	keyed := spawn(svc.Spawn(ctx, tn.p, "keyed", "Say hello.", ""))
	for _, s := range []agent.SessionView{mine, bobs, keyed} {
		if s.State != agent.StateReady {
			t.Fatalf("session %+v, want ready", s)
		}
	}

	calls := w.sim.TotalRequests()
	if _, err := people.Remove(ctx, tn.p.AccountID, alice.Email, false); err != nil {
		t.Fatal(err)
	}
	s := sessionNow(t, svc, console, mine.ID)
	if s.State != agent.StateStopped || s.EndReason != agent.ReasonMemberRemoved || s.Turns != mine.Turns || s.SpentMicros != mine.SpentMicros {
		t.Fatalf("the removed member's waiting session %+v right after the removal, want stopped (member_removed) as it was", s)
	}
	evs := allEvents(t, svc, console, mine.ID)
	checkSeq(t, evs)
	if last := evs[len(evs)-1]; last.Kind != "state" || field(t, last, "to") != agent.StateStopped || field(t, last, "reason") != agent.ReasonMemberRemoved {
		t.Fatalf("last event %s %s", last.Kind, last.Data)
	}
	// The removal's ending is in the audit log, naming the member and the session.
	targets, entries := sessionsEnded(t, w, tn.p.AccountID)
	if !slices.Equal(targets, []string{"member " + alice.ID.String()}) || len(entries) != 1 || entries[0].Reason != agent.ReasonMemberRemoved ||
		entries[0].Count != 1 || !slices.Equal(entries[0].Sessions, []string{mine.ID}) {
		t.Fatalf("audit entries %v %+v, want one of alice's removal naming her session", targets, entries)
	}

	// Back in the account, the member finds the session ended; the slot is free for a new one.
	if _, err := people.Add(ctx, tn.p.AccountID, alice.Email, members.RoleOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SendSessionMessage(ctx, console, "main", uuidOf(mine.ID), "Are you there?"); !isConflict(err, "has ended") {
		t.Fatalf("a message to the ended session after the member was added back: %v", err)
	}
	if got := w.sim.TotalRequests() - calls; got != 0 {
		t.Fatalf("the simulator saw %d calls after the removal, want none", got)
	}
	if usage := usageOf(t, w, console, mine.ID, mine.SpentMicros); len(usage) != mine.Turns {
		t.Fatalf("%d usage records for %d turns", len(usage), mine.Turns)
	}
	next := spawn(svc.SpawnForMember(ctx, console, alice.ID, "main", "Say hello again."))
	if next.State != agent.StateReady {
		t.Fatalf("a new session in the freed slot: %+v", next)
	}

	// Bob's session and the key's run on.
	for _, c := range []struct {
		slot string
		s    agent.SessionView
	}{{"bob", bobs}, {"keyed", keyed}} {
		if _, err := svc.SendSessionMessage(ctx, tn.p, c.slot, uuidOf(c.s.ID), "Say hello once more."); err != nil {
			t.Fatalf("a message to the session in slot %s: %v", c.slot, err)
		}
		if s := waitSession(t, svc, console, c.s.ID, agent.StateReady, agent.StateStopped, agent.StateFailed); s.State != agent.StateReady || s.Turns != c.s.Turns+1 {
			t.Fatalf("the session in slot %s after a message: %+v, want ready after one more turn", c.slot, s)
		}
	}
}

// sessionNow is the session id as it is now.
func sessionNow(t *testing.T, svc *agent.Service, p auth.Principal, id string) agent.SessionView {
	t.Helper()
	list, err := svc.Sessions(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no session %s", id)
	return agent.SessionView{}
}
