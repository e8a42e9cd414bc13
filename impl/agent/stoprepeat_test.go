package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
)

// TestSecondStopChangesNothing: a stop of a session that is stopping already answers the stop
// under way (its command id, status stopping) and changes nothing: no second command, no
// second stop job, no second move to stopping; without an Idempotency-Key, with a new one
// (which keeps that answer: the same key again replays it) and from the console's StopSession,
// while the first stop waits for the step boundary of a model call in flight. The session then
// ends once, stopped by the user, its first stop command done. A session stopping whose stop
// command failed (its job lost: a ready session that nothing else would end) is not left so: a
// second stop is carried out as a new one and ends it. Before, every stop of a stopping session
// queued another command and stop job (a second commandId for the API, a second audited stop on
// the console), and one of a ready session's lost stop never ended it.
func TestSecondStopChangesNothing(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	pool := w.store.Pool()
	count := func(sql string, args ...any) int {
		t.Helper()
		var c int
		if err := pool.QueryRow(ctx, sql, args...).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}

	// A busy session whose model call is in flight (the simulator stalls it).
	calls := w.sim.TotalRequests()
	spawn, err := svc.Spawn(ctx, acme.p, "main", "Sum. [[sim fault=stall_before ms=1500]] "+script(querySales), "")
	if err != nil {
		t.Fatal(err)
	}
	waitSession(t, svc, acme.p, spawn.SessionID, agent.StateBusy)
	for w.sim.TotalRequests() == calls {
		time.Sleep(5 * time.Millisecond)
	}
	first, err := svc.Stop(ctx, acme.p, "main", "")
	if err != nil || first.Status != agent.StateStopping || first.Repeated {
		t.Fatalf("first stop: %+v, %v", first, err)
	}
	want := first
	want.Repeated = true
	for _, key := range []string{"", "again-1", "again-1", ""} {
		if again, err := svc.Stop(ctx, acme.p, "main", key); err != nil || again != want {
			t.Errorf("stop again (Idempotency-Key %q): %+v, %v; want the first's %+v", key, again, err, want)
		}
	}
	if again, err := svc.StopSession(ctx, acme.p, "main", uuidOf(spawn.SessionID)); err != nil || again != want {
		t.Errorf("the console's stop again: %+v, %v; want the first's %+v", again, err, want)
	}
	const ownAnswer = `SELECT count(*) FROM agent_commands WHERE session_id = $1 AND kind = 'stop' AND answer->>'CommandID' = id::text`
	if c := count(ownAnswer, spawn.SessionID); c != 1 {
		t.Errorf("%d stop commands were recorded, want the first alone", c)
	}
	if c := count(`SELECT count(*) FROM agent_commands WHERE session_id = $1 AND idempotency_key = 'again-1' AND answer->>'CommandID' = $2`,
		spawn.SessionID, first.CommandID); c != 1 {
		t.Errorf("the Idempotency-Key of a repeated stop keeps the first's answer: %d rows", c)
	}
	if c := count(`SELECT count(*) FROM river_job WHERE kind = 'agent_stop' AND args->>'session_id' = $1`, spawn.SessionID); c != 1 {
		t.Errorf("%d stop jobs were queued, want 1", c)
	}
	s := waitSession(t, svc, acme.p, spawn.SessionID, agent.StateStopped, agent.StateFailed)
	if s.State != agent.StateStopped || s.EndReason != agent.ReasonUserStop || s.Turns != 1 {
		t.Fatalf("the stopped session: %+v", s)
	}
	waitCommand(t, w, first.CommandID, agent.CommandDone)
	stopping := 0
	for _, e := range allEvents(t, svc, acme.p, spawn.SessionID) {
		if e.Kind == "state" && field(t, e, "to") == agent.StateStopping {
			stopping++
		}
	}
	if stopping != 1 {
		t.Errorf("%d moves to stopping, want 1", stopping)
	}

	// A ready session whose stop's command failed, its job lost: stopping, and nothing to end
	// it. A stop is carried out again.
	if err := svc.AssignSlot(ctx, acme.p.AccountID, "spare"); err != nil {
		t.Fatal(err)
	}
	ready, err := svc.Spawn(ctx, acme.p, "spare", "Hello there.", "")
	if err != nil {
		t.Fatal(err)
	}
	for s := waitSession(t, svc, acme.p, ready.SessionID, agent.StateReady); s.Turns < 1; {
		time.Sleep(20 * time.Millisecond)
		s = waitSession(t, svc, acme.p, ready.SessionID, agent.StateReady)
	}
	lost := uuid.New()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var seq int64
	if err := tx.QueryRow(ctx, `UPDATE agent_sessions SET state = 'stopping', end_reason = 'user_stop', next_seq = next_seq + 1
		WHERE id = $1 AND state = 'ready' RETURNING next_seq - 1`, ready.SessionID).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO agent_events (session_id, seq, account_id, kind, data)
		VALUES ($1, $2, $3, 'state', '{"from": "ready", "to": "stopping", "reason": "user_stop"}')`, ready.SessionID, seq, acme.p.AccountID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO agent_commands (id, account_id, session_id, kind, status) VALUES ($1, $2, $3, 'stop', 'failed')`,
		lost, acme.p.AccountID, ready.SessionID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := svc.Stop(ctx, acme.p, "spare", "")
	if err != nil || again.Repeated || again.CommandID == lost.String() || again.Status != agent.StateStopping {
		t.Fatalf("stop after a failed stop: %+v, %v", again, err)
	}
	if s := waitSession(t, svc, acme.p, ready.SessionID, agent.StateStopped); s.EndReason != agent.ReasonUserStop {
		t.Fatalf("the session whose stop was lost: %+v", s)
	}
	waitCommand(t, w, again.CommandID, agent.CommandDone)
}
