package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/config"
)

// TestCrashRecovery (must-show 4): two gateway processes on one database. The first takes
// the session's step and is stopped abruptly (its River client cancels the step's model call
// in flight: the simulator holds every answer 1.5 s); the second runs the step again, with the
// same request id, and finishes the session. Every turn has exactly one usage record and one
// ledger entry, and their sum is the session's spend: nothing billed twice.
func TestCrashRecovery(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Agents.StopGrace = -1 }) // stop = cancel at once
	a := w.start()
	ctx := context.Background()
	acme := w.tenant(a, "acme", 5_000_000)
	before := w.sim.TotalRequests()
	res, err := a.gw.Agents.Spawn(ctx, acme.p, "main", "Sum the sales. [[sim fault=stall_before ms=1500]] "+script(querySales), "")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.sim.TotalRequests() == before {
		if time.Now().After(deadline) {
			t.Fatal("the first step's model call never reached the simulator")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t0 := time.Now()
	b := w.start()
	t.Logf("b started after %s", time.Since(t0))
	a.stop() // mid-call: the step's context is cancelled, its reservation released
	t.Logf("a stopped after %s", time.Since(t0))
	svc := b.gw.Agents
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateReady, agent.StateFailed, agent.StateStopped)
	t.Logf("session ready after %s", time.Since(t0))
	if s.State != agent.StateReady || s.Turns != 2 {
		t.Fatalf("session after the crash: %+v", s)
	}
	evs := allEvents(t, svc, acme.p, res.SessionID)
	checkSeq(t, evs)
	calls := 0
	for _, e := range evs {
		if e.Kind == "model_call" {
			calls++
		}
	}
	if calls != 2 {
		t.Fatalf("%d model_call events for 2 turns: %v", calls, kinds(evs))
	}
	if got := w.sim.TotalRequests() - before; got < 3 {
		t.Fatalf("the simulator saw %d calls: the first turn's was not made again", got)
	}
	usage := usageOf(t, w, acme.p, res.SessionID, s.SpentMicros)
	if len(usage) != 2 {
		t.Fatalf("%d usage records for 2 turns", len(usage))
	}
	checkLedger(t, w, acme.p, usage)
}
