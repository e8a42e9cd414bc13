package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/store"
)

// TestNULInAStepIsStoredWithoutIt: a session whose model opens a ticket titled with U+0000,
// reads a dataset value holding one and answers with it. PostgreSQL refuses U+0000 in text and
// jsonb; before, the step's events failed to commit after its model call was billed, and the
// step ran again (three times by default), each later call unbilled since a retry keeps the
// turn's request id: the operator paid the provider for calls no tenant was billed for, as
// often as a tenant re-spawned such a session. Now the character is dropped: the session
// finishes, each turn makes one upstream call, and the usage records carry the session's spend;
// a message holding U+0000 is taken as well.
func TestNULInAStepIsStoredWithoutIt(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	acme := w.tenant(n, "acme", 5_000_000)
	ctx := context.Background()
	before := w.sim.TotalRequests()
	res, err := svc.Spawn(ctx, acme.p, "main", "File it. "+script(
		`call open_ticket {"title":"a\u0000b","body":"c\u0000d"}`,
		`call query_data {"dataset":"sales","sql":"SELECT 'x' || chr(0) || 'y' AS v"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateReady, agent.StateFailed, agent.StateStopped)
	if s.State != agent.StateReady || s.Turns != 3 {
		t.Fatalf("session: %+v", s)
	}
	if calls := w.sim.TotalRequests() - before; calls != 3 {
		t.Errorf("the simulator saw %d calls for 3 turns: a step ran again", calls)
	}
	usage := usageOf(t, w, acme.p, res.SessionID, s.SpentMicros)
	if len(usage) != 3 {
		t.Errorf("%d usage records for 3 turns", len(usage))
	}
	checkLedger(t, w, acme.p, usage)
	tickets, err := svc.Tickets(ctx, acme.p, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(tickets) != 1 || tickets[0].Title != "ab" || tickets[0].Body != "cd" {
		t.Errorf("tickets: %+v, want one titled ab with body cd", tickets)
	}
	// A message holding U+0000 is taken too, and starts a turn.
	if _, err := svc.SendMessage(ctx, acme.p, "main", "Thanks.\x00", ""); err != nil {
		t.Fatal(err)
	}
	s = waitSession(t, svc, acme.p, res.SessionID, agent.StateReady, agent.StateFailed, agent.StateStopped)
	if s.State != agent.StateReady || s.Turns != 4 {
		t.Fatalf("session after the message: %+v", s)
	}
	evs := allEvents(t, svc, acme.p, res.SessionID)
	checkSeq(t, evs)
	var sawResult bool
	for _, e := range evs {
		text := string(e.Data)
		var data any
		if err := json.Unmarshal(e.Data, &data); err != nil {
			t.Fatalf("event %s: %v", e.Kind, err)
		}
		if strings.ContainsRune(fmt.Sprint(data), 0) {
			t.Errorf("event %s still holds U+0000: %s", e.Kind, text)
		}
		// The value is shown without U+0000: as "xy", or as the JSON string "x\u0000y" that
		// query_data writes for a text value holding a control character.
		if e.Kind == "tool_result" && (strings.Contains(text, "xy") || strings.Contains(fmt.Sprint(data), `x\u0000y`)) {
			sawResult = true
		}
	}
	if !sawResult {
		t.Errorf("no tool_result holds the dataset's value without U+0000: %v", kinds(evs))
	}
}

// TestStepRefusedByTheDatabaseFailsAtOnce: a step whose results the database refuses for
// their data (here a CHECK constraint on tickets' titles, in the real database) fails the
// session on its first attempt. Run again, it would call the model again under the turn's
// request id, unbilled, and be refused the same way: before, three calls were made and one
// billed.
func TestStepRefusedByTheDatabaseFailsAtOnce(t *testing.T) {
	w := newWorld(t, nil)
	if _, err := w.store.Pool().Exec(context.Background(),
		`ALTER TABLE agent_tickets ADD CONSTRAINT test_no_refused_title CHECK (title <> 'refused')`); err != nil {
		t.Fatal(err)
	}
	n := w.start()
	svc := n.gw.Agents
	acme := w.tenant(n, "acme", 5_000_000)
	ctx := context.Background()
	before := w.sim.TotalRequests()
	res, err := svc.Spawn(ctx, acme.p, "main", "File it. "+script(`call open_ticket {"title":"refused","body":""}`), "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateReady, agent.StateFailed, agent.StateStopped)
	if s.State != agent.StateFailed {
		t.Fatalf("session: %+v, want failed", s)
	}
	if calls := w.sim.TotalRequests() - before; calls != 1 {
		t.Errorf("the simulator saw %d calls: the refused step ran again", calls)
	}
	// The one call is billed: its usage record and ledger entry exist.
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, err := w.store.UsageRecords(ctx, acme.p.AccountID, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 1 && recs[0].CostMicros > 0 {
			checkLedger(t, w, acme.p, map[string]store.UsageRecord{recs[0].RequestID: recs[0]})
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage records: %+v, want the one call's", recs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
