package agent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
)

// TestApprovals (must-show 3): nothing runs before a person resolves an approval; many
// concurrent approvals of one request run its action once; denied and expired ones never
// run; an approval of another account is not found.
func TestApprovals(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Agents.ApprovalTTL = time.Hour })
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	other := w.tenant(n, "other", 5_000_000)

	sessions := func() int {
		list, err := svc.Sessions(ctx, acme.p)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}

	t.Run("an OAuth grant's request names the connected app", func(t *testing.T) {
		p := acme.p
		p.KeyID = uuid.Nil
		p.OAuth = &auth.OAuthActor{GrantID: uuid.New(), ClientID: "https://claude.ai/oauth/claude-code-client-metadata", ClientName: "Claude Code", UserEmail: "alice@example.com"}
		ap, err := svc.RequestSpawn(ctx, p, agent.SpawnAction{Purpose: "named"})
		if err != nil {
			t.Fatal(err)
		}
		if ap.KeyID != "" || ap.RequestedBy != "Claude Code (alice@example.com)" {
			t.Fatalf("requested through OAuth: key %q, requested by %q", ap.KeyID, ap.RequestedBy)
		}
		list, err := svc.ListApprovals(ctx, &p.AccountID, agent.ApprovalPending, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range list {
			if a.ID == ap.ID && a.RequestedBy != ap.RequestedBy {
				t.Errorf("listed with requested by %q", a.RequestedBy)
			}
		}
		if _, err := svc.Resolve(ctx, &p.AccountID, ap.ID, false, "test"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("spawn runs once under racing approvals", func(t *testing.T) {
		ap, err := svc.RequestSpawn(ctx, acme.p, agent.SpawnAction{Purpose: "Sum the sales. " + script(querySales), AgentName: "summer"})
		if err != nil {
			t.Fatal(err)
		}
		if ap.State != agent.ApprovalPending || ap.ActionStatus != "" || ap.ArgumentsHash == "" || ap.KeyID != acme.p.KeyID.String() {
			t.Fatalf("requested: %+v", ap)
		}
		time.Sleep(300 * time.Millisecond) // a runner that ran it anyway would have by now
		if n := sessions(); n != 0 {
			t.Fatalf("%d sessions before the approval", n)
		}
		if _, err := svc.ApprovalStatus(ctx, other.p, ap.ID); !errors.Is(err, agent.ErrNotFound) {
			t.Fatalf("another account's status: %v", err)
		}
		if _, err := svc.Resolve(ctx, &other.p.AccountID, ap.ID, true, "web:intruder"); !errors.Is(err, agent.ErrNotFound) {
			t.Fatalf("another account's resolution: %v", err)
		}
		const racers = 16
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, lost := 0, 0
		start := make(chan struct{})
		for range racers {
			wg.Go(func() {
				<-start
				_, err := svc.Resolve(ctx, nil, ap.ID, true, "operator")
				mu.Lock()
				defer mu.Unlock()
				var c *agent.ConflictError
				switch {
				case err == nil:
					won++
				case errors.As(err, &c):
					lost++
				default:
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		if won != 1 || lost != racers-1 {
			t.Fatalf("%d resolutions won, %d lost", won, lost)
		}
		ap = waitAction(t, svc, acme.p, ap.ID)
		if ap.ActionStatus != agent.ActionDone || ap.SessionID == "" {
			t.Fatalf("action: %+v", ap)
		}
		s := waitSession(t, svc, acme.p, ap.SessionID, agent.StateReady)
		if sessions() != 1 || s.AgentName != "summer" || s.Slot != "main" {
			t.Fatalf("%d sessions; %+v", sessions(), s)
		}
	})

	t.Run("prompt runs once under racing approvals", func(t *testing.T) {
		list, err := svc.Sessions(ctx, acme.p)
		if err != nil || len(list) == 0 {
			t.Fatalf("no session to prompt (%v)", err)
		}
		id := list[0].ID
		waitSession(t, svc, acme.p, id, agent.StateReady)
		before := len(allEvents(t, svc, acme.p, id))
		ap, err := svc.RequestPrompt(ctx, acme.p, id, "And the average?")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.RequestPrompt(ctx, other.p, id, "hijack"); !errors.Is(err, agent.ErrNotFound) {
			t.Fatalf("a prompt for another account's session: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
		if got := len(allEvents(t, svc, acme.p, id)); got != before {
			t.Fatalf("%d events before the approval, %d after the request", before, got)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for range 16 {
			wg.Go(func() {
				if _, err := svc.Resolve(ctx, &acme.p.AccountID, ap.ID, true, "web:owner"); err == nil {
					mu.Lock()
					won++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d approvals won", won)
		}
		ap = waitAction(t, svc, acme.p, ap.ID)
		if ap.ActionStatus != agent.ActionDone || ap.MessageID == "" || ap.SessionID != id {
			t.Fatalf("action: %+v", ap)
		}
		waitSession(t, svc, acme.p, id, agent.StateReady)
		ins := 0
		for _, e := range allEvents(t, svc, acme.p, id) {
			if e.Kind == "message_in" && field(t, e, "message_id") == ap.MessageID {
				ins++
			}
		}
		if ins != 1 {
			t.Fatalf("the approved prompt arrived %d times", ins)
		}
	})

	t.Run("denied never runs", func(t *testing.T) {
		before := sessions()
		ap, err := svc.RequestSpawn(ctx, acme.p, agent.SpawnAction{Purpose: "never"})
		if err != nil {
			t.Fatal(err)
		}
		if ap, err = svc.Resolve(ctx, nil, ap.ID, false, "operator"); err != nil || ap.State != agent.ApprovalDenied {
			t.Fatalf("deny: %+v %v", ap, err)
		}
		if _, err := svc.Resolve(ctx, nil, ap.ID, true, "operator"); !isConflict(err, "is already denied") {
			t.Fatalf("approve after deny: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
		if ap, _ = svc.ApprovalStatus(ctx, acme.p, ap.ID); ap.ActionStatus != "" || sessions() != before {
			t.Fatalf("a denied spawn ran: %+v", ap)
		}
	})
}

// TestApprovalExpiry (must-show 3): a pending approval expires after agents.approval_ttl
// (swept periodically) and never runs; approving it afterwards is refused.
func TestApprovalExpiry(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Agents.ApprovalTTL = 200 * time.Millisecond })
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	ap, err := svc.RequestSpawn(ctx, acme.p, agent.SpawnAction{Purpose: "too late"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		list, err := svc.ListApprovals(ctx, &acme.p.AccountID, agent.ApprovalExpired, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 && list[0].ID == ap.ID && list[0].ResolvedBy == "expiry" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not expired: %+v", list)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := svc.Resolve(ctx, nil, ap.ID, true, "operator"); !isConflict(err, "is already expired") {
		t.Fatalf("approve after expiry: %v", err)
	}
	if list, _ := svc.Sessions(ctx, acme.p); len(list) != 0 {
		t.Fatalf("an expired spawn ran: %+v", list)
	}
}
