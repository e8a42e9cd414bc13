package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
)

// TestAgentSurfaceRefusesAZeroAccount (security review): every method of the agent service
// that takes a principal or an account refuses a zero account id (as a caller that forgot to
// set it would pass) as not found; none answers every account's slots, sessions, tickets or
// approvals. The operator's "every account" stays reachable only through a nil account.
func TestAgentSurfaceRefusesAZeroAccount(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Agents.ApprovalTTL = time.Hour })
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	tk, err := svc.OpenTicket(ctx, acme.p.AccountID, nil, "acme's ticket", "private", "operator")
	if err != nil {
		t.Fatal(err)
	}
	ap, err := svc.RequestSpawn(ctx, acme.p, agent.SpawnAction{Purpose: "private"})
	if err != nil {
		t.Fatal(err)
	}

	var nobody auth.Principal
	zero := uuid.Nil
	notFound := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, agent.ErrNotFound) {
			t.Errorf("%s without an account: %v, want not found", what, err)
		}
	}
	slots, err := svc.Overview(ctx, nobody)
	notFound("Overview", err)
	tickets, err := svc.Tickets(ctx, nobody, "all", 50)
	notFound("Tickets", err)
	sessions, err := svc.Sessions(ctx, nobody)
	notFound("Sessions", err)
	if len(slots) != 0 || len(tickets) != 0 || len(sessions) != 0 {
		t.Fatalf("a caller without an account sees %d slots, %d tickets and %d sessions of other accounts", len(slots), len(tickets), len(sessions))
	}
	_, err = svc.SlotSession(ctx, nobody, "main")
	notFound("SlotSession", err)
	_, err = svc.ApprovalStatus(ctx, nobody, ap.ID)
	notFound("ApprovalStatus", err)
	_, err = svc.Spawn(ctx, nobody, "main", "hello", "")
	notFound("Spawn", err)
	_, err = svc.SendMessage(ctx, nobody, "main", "hello", "")
	notFound("SendMessage", err)
	_, err = svc.Stop(ctx, nobody, "main", "")
	notFound("Stop", err)
	_, err = svc.RequestSpawn(ctx, nobody, agent.SpawnAction{Purpose: "x"})
	notFound("RequestSpawn", err)
	_, err = svc.OpenTicket(ctx, zero, nil, "t", "b", "operator")
	notFound("OpenTicket", err)
	notFound("AssignSlot", svc.AssignSlot(ctx, zero, "other"))
	notFound("UnassignSlot", svc.UnassignSlot(ctx, zero, "main"))

	ls, err := svc.ListSlots(ctx, &zero)
	notFound("ListSlots", err)
	lt, err := svc.ListTickets(ctx, &zero, "all", 50)
	notFound("ListTickets", err)
	la, err := svc.ListApprovals(ctx, &zero, "all", 50)
	notFound("ListApprovals", err)
	if len(ls) != 0 || len(lt) != 0 || len(la) != 0 {
		t.Fatalf("a zero account lists %d slots, %d tickets and %d approvals", len(ls), len(lt), len(la))
	}
	_, err = svc.CloseTicket(ctx, &zero, tk.ID)
	notFound("CloseTicket", err)
	_, err = svc.Resolve(ctx, &zero, ap.ID, true, "web:nobody")
	notFound("Resolve", err)

	// The operator's explicit path (a nil account) still sees every account.
	if ls, err = svc.ListSlots(ctx, nil); err != nil || len(ls) != 1 {
		t.Fatalf("the operator's slots: %v %+v", err, ls)
	}
	if lt, err = svc.ListTickets(ctx, nil, "all", 50); err != nil || len(lt) != 1 {
		t.Fatalf("the operator's tickets: %v %+v", err, lt)
	}
	if la, err = svc.ListApprovals(ctx, nil, "all", 50); err != nil || len(la) != 1 || la[0].State != agent.ApprovalPending {
		t.Fatalf("the operator's approvals: %v %+v", err, la)
	}
}
