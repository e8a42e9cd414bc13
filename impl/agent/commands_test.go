package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/config"
)

// TestCommands: stop (a ready session at once, a busy one at its next step boundary, with the
// step's model call recorded), the conflicts (spawn on a live slot names the session; a
// message or stop after the end names the end), Idempotency-Key (same request: the first
// answer; another request: a conflict), a message while busy is queued and taken by the next
// turn, another tenant's slot is not found, and max_duration ends a ready session.
func TestCommands(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		c.Agents.Profiles = map[string]config.AgentProfile{
			"standard": {MaxTurns: 10, MaxSpendMicros: 1_000_000, MaxDuration: time.Hour},
			"brief":    {MaxTurns: 10, MaxSpendMicros: 1_000_000, MaxDuration: time.Second},
		}
	})
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	other := w.tenant(n, "other", 5_000_000)

	// A slot of another tenant is indistinguishable from one that does not exist.
	for _, slot := range []string{"main", "nope"} {
		if _, err := svc.Spawn(ctx, other.p, slot+"x", "hi", ""); !errors.Is(err, agent.ErrNotFound) {
			t.Fatalf("spawn on %q: %v", slot+"x", err)
		}
	}
	if _, err := svc.SendMessage(ctx, acme.p, "main", "hello", ""); !isConflict(err, "slot 'main' has no session") {
		t.Fatalf("message before any session: %v", err)
	}

	// Idempotent spawn: the same key and request answer the first answer again.
	calls := w.sim.TotalRequests()
	first, err := svc.Spawn(ctx, acme.p, "main", "Sum. [[sim fault=stall_before ms=800]] "+script(querySales, querySales), "key-1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.Spawn(ctx, acme.p, "main", "Sum. [[sim fault=stall_before ms=800]] "+script(querySales, querySales), "key-1")
	if err != nil || again != first {
		t.Fatalf("replayed spawn: %+v, %v (first %+v)", again, err, first)
	}
	if _, err := svc.Spawn(ctx, acme.p, "main", "something else", "key-1"); !isConflict(err, "Idempotency-Key 'key-1'") {
		t.Fatalf("key reused for another request: %v", err)
	}
	if _, err := svc.Spawn(ctx, acme.p, "main", "second", ""); !isConflict(err, "already runs session "+first.SessionID) {
		t.Fatalf("spawn on a live slot: %v", err)
	}
	// While busy (the model call in flight): a message is queued; stop waits for the step
	// boundary, and the step in flight is recorded.
	waitSession(t, svc, acme.p, first.SessionID, agent.StateBusy)
	for w.sim.TotalRequests() == calls {
		time.Sleep(5 * time.Millisecond)
	}
	msg, err := svc.SendMessage(ctx, acme.p, "main", "also this", "")
	if err != nil || !msg.Queued {
		t.Fatalf("message while busy: %+v, %v", msg, err)
	}
	stop, err := svc.Stop(ctx, acme.p, "main", "stop-1")
	if err != nil || stop.Status != agent.StateStopping || stop.SessionID != first.SessionID {
		t.Fatalf("stop: %+v, %v", stop, err)
	}
	if again, err := svc.Stop(ctx, acme.p, "main", "stop-1"); err != nil || again != stop {
		t.Fatalf("replayed stop: %+v, %v", again, err)
	}
	s := waitSession(t, svc, acme.p, first.SessionID, agent.StateStopped)
	if s.EndReason != agent.ReasonUserStop || s.Turns != 1 {
		t.Fatalf("stopped busy session: %+v", s)
	}
	for _, c := range []string{first.CommandID, stop.CommandID} {
		waitCommand(t, w, c, agent.CommandDone)
	}
	evs := allEvents(t, svc, acme.p, first.SessionID)
	checkSeq(t, evs)
	if k := kinds(evs); k[len(k)-1] != "state" || field(t, evs[len(evs)-1], "reason") != agent.ReasonUserStop {
		t.Fatalf("events of the stopped session: %v", k)
	}
	if _, err := svc.SendMessage(ctx, acme.p, "main", "late", ""); !isConflict(err, "has ended (stopped: user_stop)") {
		t.Fatalf("message after stop: %v", err)
	}
	if _, err := svc.Stop(ctx, acme.p, "main", ""); !isConflict(err, "has ended (stopped: user_stop)") {
		t.Fatalf("stop after stop: %v", err)
	}

	// A ready session stops at once; a queued message is taken by the next turn.
	second, err := svc.Spawn(ctx, acme.p, "main", "Hello there.", "")
	if err != nil {
		t.Fatal(err)
	}
	waitSession(t, svc, acme.p, second.SessionID, agent.StateReady)
	if _, err := svc.Stop(ctx, acme.p, "main", ""); err != nil {
		t.Fatal(err)
	}
	if s := waitSession(t, svc, acme.p, second.SessionID, agent.StateStopped); s.EndReason != agent.ReasonUserStop || s.Turns != 1 {
		t.Fatalf("stopped ready session: %+v", s)
	}

	// max_duration ends a ready session at its deadline.
	ap, err := svc.RequestSpawn(ctx, acme.p, agent.SpawnAction{Purpose: "Say hello.", ResourceProfile: "brief"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Resolve(ctx, nil, ap.ID, true, "operator"); err != nil {
		t.Fatal(err)
	}
	ap = waitAction(t, svc, acme.p, ap.ID)
	if s := waitSession(t, svc, acme.p, ap.SessionID, agent.StateStopped); s.EndReason != agent.ReasonMaxDuration {
		t.Fatalf("brief session: %+v", s)
	}

	// The overview shows the slot with its last session; the other tenant sees only its own.
	over, err := svc.Overview(ctx, acme.p)
	if err != nil || len(over) != 1 || over[0].Session == nil || over[0].Session.ID != ap.SessionID {
		t.Fatalf("overview: %+v, %v", over, err)
	}
	if _, err := svc.Events(ctx, other.p, first.SessionID, 0, 10); !errors.Is(err, agent.ErrNotFound) {
		t.Fatalf("another tenant's events: %v", err)
	}
	if _, err := svc.Tail(ctx, other.p, first.SessionID, 0, 10, 0); !errors.Is(err, agent.ErrNotFound) {
		t.Fatalf("another tenant's tail: %v", err)
	}
}

// waitCommand waits until a command has the status.
func waitCommand(t *testing.T, w *world, id, status string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got string
		if err := w.store.Pool().QueryRow(context.Background(), "SELECT status FROM agent_commands WHERE id = $1", id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("command %s is %s, not %s", id, got, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
