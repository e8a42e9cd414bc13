package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
)

// script is the simulator's deterministic agent script: one call of each step per model
// call, then a text answer quoting the last tool result.
func script(calls ...string) string {
	return "[[sim script: " + strings.Join(calls, "; ") + "]]"
}

const querySales = `call query_data {"dataset":"sales","sql":"SELECT sum(amount) AS total FROM sales"}`

// checkLedger checks that every usage record of the session has exactly one usage entry in the
// ledger, of its cost.
func checkLedger(t *testing.T, w *world, p auth.Principal, usage map[string]store.UsageRecord) {
	t.Helper()
	entries, err := w.store.LedgerEntries(context.Background(), p.AccountID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string][]int64{}
	for _, e := range entries {
		byKey[e.IdempotencyKey] = append(byKey[e.IdempotencyKey], e.AmountMicros)
	}
	for rid, r := range usage {
		got := byKey[store.UsageLedgerKey(rid)]
		if len(got) != 1 || got[0] != -r.CostMicros {
			t.Errorf("ledger entries of %s: %v, want one of %d", rid, got, -r.CostMicros)
		}
	}
}

// TestAgentAnswersOverDataset (must-show 2): spawned on a slot, the agent answers a question
// over a dataset with a query_data call through the simulator; the events show every step in
// order without gaps; the usage records (route agent, tagged with the session, one per turn's
// request id) and the ledger carry exactly the session's spend; a message to a ready session
// starts a turn, and Tail returns what followed a cursor, waiting for it.
func TestAgentAnswersOverDataset(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	acme := w.tenant(n, "acme", 5_000_000)
	ctx := context.Background()

	res, err := svc.Spawn(ctx, acme.p, "main", "What is the total of the sales? "+script(querySales), "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agent.StateProvisioning || res.Slot != "main" || res.SessionID == "" || res.CommandID == "" {
		t.Fatalf("spawn answered %+v", res)
	}
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateReady)
	if s.Turns != 2 || s.SpentMicros <= 0 || s.SpentMicros > s.MaxSpendMicros {
		t.Fatalf("session after its answer: %+v", s)
	}
	evs := allEvents(t, svc, acme.p, res.SessionID)
	checkSeq(t, evs)
	want := []string{"state", "state", "state", "message_in", "model_call", "tool_call", "tool_result", "model_call", "message_out", "state"}
	if fmt.Sprint(kinds(evs)) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", kinds(evs), want)
	}
	if got := field(t, evs[5], "name"); got != "query_data" {
		t.Fatalf("tool call of %v", got)
	}
	result := field(t, evs[6], "text").(string)
	if !strings.Contains(result, "49") || field(t, evs[6], "is_error") != false {
		t.Fatalf("tool result %q", result)
	}
	answer := field(t, evs[8], "text").(string)
	if !strings.Contains(answer, "Answer from query_data") || !strings.Contains(answer, "49") {
		t.Fatalf("answer %q", answer)
	}
	if got := field(t, evs[9], "to"); got != agent.StateReady {
		t.Fatalf("last state event to %v", got)
	}
	usage := usageOf(t, w, acme.p, res.SessionID, s.SpentMicros)
	if len(usage) != 2 {
		t.Fatalf("%d usage records, want 2", len(usage))
	}
	for turn := 1; turn <= 2; turn++ {
		r, ok := usage[agent.RequestID(uuidOf(res.SessionID), turn)]
		if !ok || r.Route != "agent" || r.APIKeyID != acme.p.KeyID || r.Model != "service-flint" {
			t.Fatalf("usage of turn %d: %+v (found %v)", turn, r, ok)
		}
	}
	checkLedger(t, w, acme.p, usage)

	// A message to the ready session starts a turn; Tail waits for it from the cursor.
	cursor := evs[len(evs)-1].Seq
	tailed := make(chan agent.Tail, 1)
	go func() {
		tl, err := svc.Tail(ctx, acme.p, res.SessionID, cursor, 500, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		tailed <- tl
	}()
	time.Sleep(100 * time.Millisecond)
	msg, err := svc.SendMessage(ctx, acme.p, "main", "Thanks. Anything else?", "")
	if err != nil {
		t.Fatal(err)
	}
	if msg.Queued || msg.SessionID != res.SessionID {
		t.Fatalf("message to a ready session: %+v", msg)
	}
	tl := <-tailed
	if len(tl.Events) == 0 || tl.Events[0].Seq != cursor+1 || tl.Cursor != tl.Events[len(tl.Events)-1].Seq {
		t.Fatalf("tail after %d: %d events, cursor %d", cursor, len(tl.Events), tl.Cursor)
	}
	s = waitSession(t, svc, acme.p, res.SessionID, agent.StateReady)
	evs = allEvents(t, svc, acme.p, res.SessionID)
	checkSeq(t, evs)
	if s.Turns != 3 {
		t.Fatalf("turns %d after the second message", s.Turns)
	}
	checkLedger(t, w, acme.p, usageOf(t, w, acme.p, res.SessionID, s.SpentMicros))
}

// TestAgentBounds (must-show 2): max_turns and max_spend end sessions with their reasons, and
// are never exceeded: the turns stop at max_turns, and the spend (the sum of the session's
// usage records) stays within max_spend.
func TestAgentBounds(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		c.Agents.Profiles = map[string]config.AgentProfile{
			"standard": {MaxTurns: 2, MaxSpendMicros: 1_000_000, MaxDuration: time.Hour},
			// A few turns: a turn reserves its input at the dearest input kind (service-flint's
			// sim-coder expert is priced as claude-sonnet-4-5, whose one-hour cache write is $6).
			"thrifty": {MaxTurns: 50, MaxSpendMicros: 30_000, MaxDuration: time.Hour},
		}
	})
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	many := script(querySales, querySales, querySales, querySales, querySales, querySales, querySales, querySales)

	t.Run("max_turns", func(t *testing.T) {
		acme := w.tenant(n, "turns", 5_000_000)
		res, err := svc.Spawn(ctx, acme.p, "main", "Query again and again. "+many, "")
		if err != nil {
			t.Fatal(err)
		}
		s := waitSession(t, svc, acme.p, res.SessionID, agent.StateStopped, agent.StateFailed)
		if s.State != agent.StateStopped || s.EndReason != agent.ReasonMaxTurns || s.Turns != 2 {
			t.Fatalf("session %+v", s)
		}
		evs := allEvents(t, svc, acme.p, res.SessionID)
		checkSeq(t, evs)
		if last := evs[len(evs)-1]; field(t, last, "to") != agent.StateStopped || field(t, last, "reason") != agent.ReasonMaxTurns {
			t.Fatalf("last event %s %s", last.Kind, last.Data)
		}
		if usage := usageOf(t, w, acme.p, res.SessionID, s.SpentMicros); len(usage) != 2 {
			t.Fatalf("%d usage records for 2 turns", len(usage))
		}
		if _, err := svc.SendMessage(ctx, acme.p, "main", "more", ""); !isConflict(err, "has ended (stopped: max_turns)") {
			t.Fatalf("message after the end: %v", err)
		}
	})

	t.Run("max_spend", func(t *testing.T) {
		acme := w.tenant(n, "spend", 5_000_000)
		// An approved agent_spawn names the thrifty profile (REST spawns take the default one).
		ap, err := svc.RequestSpawn(ctx, acme.p, agent.SpawnAction{Purpose: "Query again and again. " + many, ResourceProfile: "thrifty"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Resolve(ctx, nil, ap.ID, true, "operator"); err != nil {
			t.Fatal(err)
		}
		ap = waitAction(t, svc, acme.p, ap.ID)
		s := waitSession(t, svc, acme.p, ap.SessionID, agent.StateStopped, agent.StateFailed)
		if s.State != agent.StateStopped || s.EndReason != agent.ReasonMaxSpend || s.SpentMicros > s.MaxSpendMicros || s.Turns < 1 {
			t.Fatalf("session %+v", s)
		}
		usage := usageOf(t, w, acme.p, ap.SessionID, s.SpentMicros)
		if len(usage) != s.Turns {
			t.Fatalf("%d usage records for %d turns", len(usage), s.Turns)
		}
		checkLedger(t, w, acme.p, usage)
	})
}

// waitAction waits until an approved action has run.
func waitAction(t *testing.T, svc *agent.Service, p auth.Principal, id string) agent.Approval {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		a, err := svc.ApprovalStatus(context.Background(), p, id)
		if err != nil {
			t.Fatal(err)
		}
		if a.ActionStatus == agent.ActionDone || a.ActionStatus == agent.ActionFailed {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("approval %s: %+v", id, a)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
