package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestConsoleSessionEndsWhenItsMemberIsRemoved: a session a member started on the console
// (SpawnForMember, the Agents page's Start) records the member, and the step after the member
// was removed from the account ends it (member_removed) before any further model call: the
// simulator sees no other request, and the session keeps the one turn and its usage record.
// Before, such a session recorded nobody and kept taking its turns, up to its bounds. A member
// whose role was lowered keeps their session: starting one needs only a membership.
func TestConsoleSessionEndsWhenItsMemberIsRemoved(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	people := members.New(w.store, keepSessions{})
	for _, c := range []struct {
		name   string
		change func(t *testing.T, tn tenant, email string)
		want   string // the end reason; "" for a session that runs to its answer
	}{
		{"removed", func(t *testing.T, tn tenant, email string) {
			// Removed with no agents ending the session at the removal (as a removal before
			// they did): the step's own check ends it.
			if _, err := people.Remove(ctx, tn.p.AccountID, email, false); err != nil {
				t.Fatal(err)
			}
		}, agent.ReasonMemberRemoved},
		{"lowered", func(t *testing.T, tn tenant, email string) {
			if _, err := people.Add(ctx, tn.p.AccountID, email, members.RoleMember); err != nil {
				t.Fatal(err)
			}
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := w.tenant(n, "console-"+c.name, 5_000_000)
			email := "starter-" + c.name + "@example.com"
			user, err := people.Add(ctx, tn.p.AccountID, email, members.RoleOwner)
			if err != nil {
				t.Fatal(err)
			}
			p := auth.Principal{AccountID: tn.p.AccountID}
			before := w.sim.TotalRequests()
			// Every turn's call is held 600 ms by the simulator: the member changes during the first.
			res, err := svc.SpawnForMember(ctx, p, user.ID, "main", "Sum the sales, again and again. [[sim fault=stall_before ms=600]] "+
				script(querySales, querySales, querySales))
			if err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); w.sim.TotalRequests() == before; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the first step's model call never reached the simulator")
				}
			}
			c.change(t, tn, email)
			if c.want == "" {
				s := waitSession(t, svc, p, res.SessionID, agent.StateReady, agent.StateStopped, agent.StateFailed)
				if s.State != agent.StateReady || s.Turns != 4 {
					t.Fatalf("the lowered member's session %+v, want ready after its 4 turns", s)
				}
				return
			}
			s := waitSession(t, svc, p, res.SessionID, agent.StateStopped, agent.StateFailed)
			if s.State != agent.StateStopped || s.EndReason != c.want || s.Turns != 1 {
				t.Fatalf("the removed member's session %+v, want stopped (%s) after 1 turn", s, c.want)
			}
			if got := w.sim.TotalRequests() - before; got != 1 {
				t.Fatalf("the simulator saw %d calls, want the one in flight", got)
			}
			evs := allEvents(t, svc, p, res.SessionID)
			checkSeq(t, evs)
			if last := evs[len(evs)-1]; field(t, last, "to") != agent.StateStopped || field(t, last, "reason") != c.want {
				t.Fatalf("last event %s %s", last.Kind, last.Data)
			}
			if usage := usageOf(t, w, p, res.SessionID, s.SpentMicros); len(usage) != 1 || s.SpentMicros <= 0 {
				t.Fatalf("%d usage records (spent %d) for the one call", len(usage), s.SpentMicros)
			}
		})
	}
}

// keepSessions is a members.Sessions that ends nothing: a removal through it leaves the
// member's sessions to their steps' own check.
type keepSessions struct{}

func (keepSessions) EndMemberSessions(context.Context, *store.AgentTx, uuid.UUID, uuid.UUID) error {
	return nil
}

func (keepSessions) EndKeySessions(context.Context, *store.AgentTx, uuid.UUID, []uuid.UUID) error {
	return nil
}

func (keepSessions) EndGrantSessions(context.Context, *store.AgentTx, uuid.UUID, uuid.UUID) error {
	return nil
}
