package agent_test

import (
	"context"
	"encoding/json"
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

// TestRetriedStepCountsWhatWasBilled: a step's model call is billed, then its process is
// stopped abruptly during the step's tool call; the second process runs the step again, whose
// model call (the same request id) reads the prompt cache the first one wrote and costs less.
// The ledger bills the request id once, at the first call's cost, and the session's spend and
// its model_call event count that: the sum of the session's usage records is its spend. Trial
// h13 D4: the session counted the retry's cost, so a cheaper retry let it pass max_spend.
func TestRetriedStepCountsWhatWasBilled(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Agents.StopGrace = -1 })
	a := w.start()
	ctx := context.Background()
	acme := w.tenant(a, "acme", 5_000_000)
	slow := `call query_data {"dataset":"sales","sql":"SELECT sum(hash(t.range)) AS h FROM range(300000000) t"}`
	res, err := a.gw.Agents.Spawn(ctx, acme.p, "main", "Hash a range, then sum the sales. [[sim cache_min=64]] "+script(slow, querySales), "")
	if err != nil {
		t.Fatal(err)
	}
	// The first turn's model call is billed (its record written) while its tool call runs.
	deadline := time.Now().Add(20 * time.Second)
	var billed int64
	for billed == 0 {
		recs, err := w.store.UsageRecords(ctx, acme.p.AccountID, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.AgentSessionID == uuidOf(res.SessionID) {
				billed = r.CostMicros
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the first turn's model call was never billed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	b := w.start()
	a.stop() // mid-tool: the step is run again by b
	svc := b.gw.Agents
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateReady, agent.StateFailed, agent.StateStopped)
	if s.State != agent.StateReady {
		t.Fatalf("session after the crash: %+v", s)
	}
	usage := usageOf(t, w, acme.p, res.SessionID, s.SpentMicros)
	checkLedger(t, w, acme.p, usage)
	first := usage[agent.RequestID(uuidOf(res.SessionID), 1)]
	if first.CostMicros != billed {
		t.Errorf("turn 1 billed %d, then %d", billed, first.CostMicros)
	}
	var retried bool
	for _, e := range allEvents(t, svc, acme.p, res.SessionID) {
		var call struct {
			Turn    int   `json:"turn"`
			Cost    int64 `json:"cost_micros"`
			Earlier bool  `json:"billed_by_earlier_attempt"`
		}
		if e.Kind != "model_call" || json.Unmarshal(e.Data, &call) != nil || !call.Earlier {
			continue
		}
		retried = true
		if call.Turn != 1 || call.Cost != billed {
			t.Errorf("the retried call's event says %s; turn 1 was billed %d", e.Data, billed)
		}
	}
	if !retried {
		t.Error("no model_call event says its turn was billed by the earlier attempt")
	}
}
