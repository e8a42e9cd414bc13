package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/config"
)

// twoAttempts makes a step job's attempts 2 (config agents.step_attempts).
func twoAttempts(c *config.Config) { c.Agents.StepAttempts = 2 }

// refuseEvents makes PostgreSQL refuse the account's agent events of the given kinds (a
// trigger raising an error: a fault of the database that a step cannot get past), until the
// returned function drops it.
func refuseEvents(t *testing.T, w *world, tn tenant, kinds ...string) func() {
	t.Helper()
	ctx := context.Background()
	fn := fmt.Sprintf(`CREATE FUNCTION refuse_agent_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.account_id = '%s' AND NEW.kind IN ('%s') THEN
		RAISE EXCEPTION 'test: agent event %% refused', NEW.kind;
	END IF;
	RETURN NEW;
END $$`, tn.p.AccountID, strings.Join(kinds, "','"))
	for _, sql := range []string{fn, `CREATE TRIGGER refuse_agent_events BEFORE INSERT ON agent_events FOR EACH ROW EXECUTE FUNCTION refuse_agent_events()`} {
		if _, err := w.store.Pool().Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	drop := func() {
		if _, err := w.store.Pool().Exec(ctx, `DROP TRIGGER IF EXISTS refuse_agent_events ON agent_events; DROP FUNCTION IF EXISTS refuse_agent_events()`); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(drop)
	return drop
}

// stepJobs returns the state and attempt of every step job of the session, by step.
func stepJobs(t *testing.T, w *world, sessionID string) map[int]string {
	t.Helper()
	rows, err := w.store.Pool().Query(context.Background(),
		`SELECT (args->>'step')::int, state::text, attempt FROM river_job WHERE kind = 'agent_step' AND args->>'session_id' = $1`, sessionID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]string{}
	for rows.Next() {
		var step, attempt int
		var state string
		if err := rows.Scan(&step, &state, &attempt); err != nil {
			t.Fatal(err)
		}
		out[step] = fmt.Sprintf("%s/%d", state, attempt)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// lastError returns the text of the session's last event, which must be the error event just
// before its final state event.
func lastError(t *testing.T, evs []agent.Event) string {
	t.Helper()
	if len(evs) < 3 || evs[len(evs)-1].Kind != "state" || evs[len(evs)-2].Kind != "error" {
		t.Fatalf("events end with %v", kinds(evs))
	}
	if field(t, evs[len(evs)-1], "to") != agent.StateFailed || field(t, evs[len(evs)-1], "reason") != agent.ReasonError {
		t.Fatalf("final state event %s", evs[len(evs)-1].Data)
	}
	text, _ := field(t, evs[len(evs)-2], "text").(string)
	return text
}

// TestStepUpstreamFaultFailsSession: an upstream that keeps failing (a simulator fault for
// more requests than the attempts) fails the session after the step job's attempts
// (agents.step_attempts, River's MaxAttempts of the job): failed with error, an error event
// with the route's message, nothing spent, and the job completed on its last attempt.
func TestStepUpstreamFaultFailsSession(t *testing.T) {
	w := newWorld(t, twoAttempts)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	res, err := svc.Spawn(ctx, acme.p, "main", "Sum the sales. [[sim fault=500 times=1000]] "+script(querySales), "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateFailed, agent.StateStopped, agent.StateReady)
	if s.State != agent.StateFailed || s.EndReason != agent.ReasonError || s.Turns != 0 || s.SpentMicros != 0 {
		t.Fatalf("session %+v", s)
	}
	evs := allEvents(t, svc, acme.p, res.SessionID)
	checkSeq(t, evs)
	if text := lastError(t, evs); text == "" || text == "internal error" {
		t.Fatalf("error event %q", text)
	}
	if jobs := stepJobs(t, w, res.SessionID); fmt.Sprint(jobs) != "map[1:completed/2]" {
		t.Fatalf("step jobs %v", jobs)
	}
}

// TestStepLastAttemptFailsSession: a step that fails after its model call (the database
// refuses its events) runs again, and its last attempt's failure fails the session in one
// transaction with an error event (no internal text) and the job's completion, instead of
// leaving it busy; the model call, made on each attempt with the same request id, is billed
// once.
func TestStepLastAttemptFailsSession(t *testing.T) {
	w := newWorld(t, twoAttempts)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	refuseEvents(t, w, acme, "model_call")
	before := w.sim.TotalRequests()
	res, err := svc.Spawn(ctx, acme.p, "main", "Sum the sales. "+script(querySales), "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateFailed, agent.StateStopped, agent.StateReady)
	if s.State != agent.StateFailed || s.EndReason != agent.ReasonError || s.Turns != 0 {
		t.Fatalf("session %+v", s)
	}
	evs := allEvents(t, svc, acme.p, res.SessionID)
	checkSeq(t, evs)
	if text := lastError(t, evs); text != "internal error" {
		t.Fatalf("error event %q", text)
	}
	if jobs := stepJobs(t, w, res.SessionID); fmt.Sprint(jobs) != "map[1:completed/2]" {
		t.Fatalf("step jobs %v", jobs)
	}
	if got := w.sim.TotalRequests() - before; got != 2 {
		t.Fatalf("the simulator saw %d calls, want one an attempt", got)
	}
	// The call's usage record is written by the meter in batches: wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, err := w.store.UsageRecords(ctx, acme.p.AccountID, 100)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range recs {
			if r.AgentSessionID == uuidOf(res.SessionID) && r.CostMicros > 0 {
				ids = append(ids, r.RequestID)
			}
		}
		if len(ids) == 1 && ids[0] == agent.RequestID(uuidOf(res.SessionID), 1) {
			break
		}
		if len(ids) > 1 || time.Now().After(deadline) {
			t.Fatalf("billed usage records of the session: %v", ids)
		}
		time.Sleep(50 * time.Millisecond)
	}
	entries, err := w.store.LedgerEntries(ctx, acme.p.AccountID, 100)
	if err != nil {
		t.Fatal(err)
	}
	charges := 0
	for _, e := range entries {
		if e.AmountMicros < 0 {
			charges++
		}
	}
	if charges != 1 {
		t.Fatalf("%d charges in the ledger for one call made twice", charges)
	}
}

// TestDiscardedStepSwept: when even failing the session cannot be written on the last attempt
// (the database refuses the error event too), River discards the step job; once the database
// takes events again, the sweep of discarded jobs fails the session (error, with an error
// event naming the attempts) and deletes the job, so no session stays busy for ever.
func TestDiscardedStepSwept(t *testing.T) {
	w := newWorld(t, twoAttempts)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	drop := refuseEvents(t, w, acme, "model_call", "error")
	res, err := svc.Spawn(ctx, acme.p, "main", "Sum the sales. "+script(querySales), "")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for fmt.Sprint(stepJobs(t, w, res.SessionID)) != "map[1:discarded/2]" {
		if time.Now().After(deadline) {
			t.Fatalf("step jobs %v", stepJobs(t, w, res.SessionID))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := waitSession(t, svc, acme.p, res.SessionID, agent.StateBusy); s.State != agent.StateBusy {
		t.Fatalf("session %+v", s)
	}
	drop()
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateFailed, agent.StateStopped, agent.StateReady)
	if s.State != agent.StateFailed || s.EndReason != agent.ReasonError {
		t.Fatalf("session %+v", s)
	}
	evs := allEvents(t, svc, acme.p, res.SessionID)
	checkSeq(t, evs)
	if text := lastError(t, evs); text != "the step failed 2 times" {
		t.Fatalf("error event %q", text)
	}
	if jobs := stepJobs(t, w, res.SessionID); len(jobs) != 0 {
		t.Fatalf("step jobs after the sweep %v", jobs)
	}
}

// TestCutAnswerRetriedIsBilled: a step whose model call's answer is cut off (the upstream drops
// the connection mid-answer) runs again, and the call that delivers is billed under the turn's
// request id: the undelivered attempt's record (nothing billed) is written under an id of its
// own, so it does not take the id the ledger bills once. The session's spend, its usage records
// and the ledger agree, and the spend is not zero. The model has one expert: a fusion model's
// call fails over to its next expert at once (impl/httpapi TestFusionFailsOverOnAnUnusableAnswer).
func TestCutAnswerRetriedIsBilled(t *testing.T) {
	w := newWorld(t, twoAttempts)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	res, err := svc.SpawnWith(ctx, acme.p, "main", "Tell a story. [[sim fault=drop after=2 times=1]] [[sim words=400]]", "",
		agent.SpawnAction{Model: "service-flint-base"})
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateReady, agent.StateFailed, agent.StateStopped)
	if s.State != agent.StateReady || s.Turns != 1 || s.SpentMicros <= 0 {
		t.Fatalf("session %+v", s)
	}
	if jobs := stepJobs(t, w, res.SessionID); fmt.Sprint(jobs) != "map[1:completed/2]" {
		t.Fatalf("step jobs %v (want the turn's job completed on its second attempt)", jobs)
	}
	usage := usageOf(t, w, acme.p, res.SessionID, s.SpentMicros)
	turn := agent.RequestID(uuidOf(res.SessionID), 1)
	if r, ok := usage[turn]; !ok || r.CostMicros != s.SpentMicros || r.Status != "ok" || r.OutputTokens == 0 {
		t.Fatalf("the turn's usage record %+v (in %v), want it to bill the session's spend %d", r, usage, s.SpentMicros)
	}
	undelivered := 0
	for id, r := range usage {
		if strings.HasPrefix(id, turn+"_undelivered_") && r.CostMicros == 0 && r.Status == "upstream_read_failed" {
			undelivered++
		}
	}
	if undelivered != 1 || len(usage) != 2 {
		t.Fatalf("usage records %v, want the turn's and one undelivered attempt's", usage)
	}
	checkLedger(t, w, acme.p, usage)
}
