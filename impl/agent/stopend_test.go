package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/config"
)

// TestStopCommandsEndWithTheSession: when a session ends, every stop command of it still
// accepted or running ends too: done when the session ended stopped by the user (the stop took
// effect, whichever command carried it out), failed when it ended for another cause first (its
// reason is the session's end reason). The commands left under way are put there by hand, as a
// stop whose job was discarded before it ran leaves its command accepted, and one whose job ran
// leaves it running. Before, only running stop commands were marked, and always done: an
// accepted one stayed accepted for ever after its session had ended, and a running one of a
// session that ended at max_turns was done.
func TestStopCommandsEndWithTheSession(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		c.Agents.Profiles = map[string]config.AgentProfile{
			"standard": {MaxTurns: 2, MaxSpendMicros: 1_000_000, MaxDuration: time.Hour},
		}
	})
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	pool := w.store.Pool()

	// busy starts a session in slot whose first model call stalls, and waits for that call.
	busy := func(slot, prompt string) string {
		t.Helper()
		calls := w.sim.TotalRequests()
		spawn, err := svc.Spawn(ctx, acme.p, slot, prompt, "")
		if err != nil {
			t.Fatal(err)
		}
		waitSession(t, svc, acme.p, spawn.SessionID, agent.StateBusy)
		for w.sim.TotalRequests() == calls {
			time.Sleep(5 * time.Millisecond)
		}
		return spawn.SessionID
	}
	// underWay records a stop command of session in status, with no job to carry it out.
	underWay := func(session, status string) string {
		t.Helper()
		id := uuid.NewString()
		if _, err := pool.Exec(ctx, `INSERT INTO agent_commands (id, account_id, session_id, kind, status) VALUES ($1, $2, $3, 'stop', $4)`,
			id, acme.p.AccountID, session, status); err != nil {
			t.Fatal(err)
		}
		return id
	}

	t.Run("stopped by the user", func(t *testing.T) {
		session := busy("main", "Sum. [[sim fault=stall_before ms=1500]] "+script(querySales))
		discarded := underWay(session, agent.CommandAccepted)
		stop, err := svc.Stop(ctx, acme.p, "main", "")
		if err != nil || stop.Repeated {
			t.Fatalf("stop: %+v, %v", stop, err)
		}
		if s := waitSession(t, svc, acme.p, session, agent.StateStopped, agent.StateFailed); s.State != agent.StateStopped || s.EndReason != agent.ReasonUserStop {
			t.Fatalf("the session: %+v", s)
		}
		waitCommand(t, w, stop.CommandID, agent.CommandDone)
		waitCommand(t, w, discarded, agent.CommandDone)
	})

	t.Run("ended for another cause first", func(t *testing.T) {
		if err := svc.AssignSlot(ctx, acme.p.AccountID, "spare"); err != nil {
			t.Fatal(err)
		}
		session := busy("spare", "Query again and again. [[sim fault=stall_before ms=1500]] "+script(querySales, querySales, querySales, querySales))
		discarded := underWay(session, agent.CommandAccepted)
		running := underWay(session, agent.CommandRunning)
		if s := waitSession(t, svc, acme.p, session, agent.StateStopped, agent.StateFailed); s.State != agent.StateStopped || s.EndReason != agent.ReasonMaxTurns {
			t.Fatalf("the session: %+v", s)
		}
		waitCommand(t, w, discarded, agent.CommandFailed)
		waitCommand(t, w, running, agent.CommandFailed)
	})
}
