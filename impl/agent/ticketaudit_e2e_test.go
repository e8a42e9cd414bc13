package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/web/audit"
)

// TestAgentTicketIsAudited: a ticket an agent opens with open_ticket is in its account's audit
// log as the operator's are (ticket.opened, the target the ticket, after it its title, state
// and session, not its text), its actor the agent as the ticket's opened_by names it; a call
// refused for its arguments opens nothing and records nothing, and another account's log stays
// empty. Before, an agent's ticket left no entry.
func TestAgentTicketIsAudited(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	acme := w.tenant(n, "acme", 5_000_000)
	other := w.tenant(n, "other", 5_000_000)
	ctx := context.Background()
	res, err := svc.Spawn(ctx, acme.p, "main", "File it. "+script(
		`call open_ticket {"title":"no body"}`,
		`call open_ticket {"title":"quota","body":"the details"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateReady, agent.StateFailed, agent.StateStopped)
	if s.State != agent.StateReady {
		t.Fatalf("session: %+v", s)
	}
	tickets, err := svc.Tickets(ctx, acme.p, "all", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(tickets) != 1 {
		t.Fatalf("tickets: %+v, want one", tickets)
	}
	log := &audit.Log{Store: w.store}
	entries, err := log.List(ctx, acme.p.AccountID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("audit entries: %+v, want the ticket's one", entries)
	}
	e := entries[0]
	if e.Actor != tickets[0].OpenedBy || e.Actor != "agent:"+res.SessionID || e.Action != audit.ActionTicketOpened ||
		e.Target != "ticket "+tickets[0].ID || e.Before != nil {
		t.Errorf("entry: %+v, want ticket.opened by agent:%s of ticket %s", e, res.SessionID, tickets[0].ID)
	}
	var after map[string]string
	if err := json.Unmarshal(e.After.(json.RawMessage), &after); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"title": "quota", "state": "open", "session": res.SessionID}
	if len(after) != len(want) || after["title"] != want["title"] || after["state"] != want["state"] || after["session"] != want["session"] {
		t.Errorf("after: %v, want %v", after, want)
	}
	theirs, err := log.List(ctx, other.p.AccountID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(theirs) != 0 {
		t.Errorf("the other account's audit log: %+v, want nothing", theirs)
	}
}
