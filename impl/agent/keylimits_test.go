package agent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/clocktest"
	"github.com/tollgate/tollgate/impl/store"
)

// keyed makes a key of the tenant's account with o, and returns its principal as the gateway's
// authentication reads it (with its limits), which is what a spawn through the API acts for.
func keyed(t *testing.T, w *world, n *node, tn tenant, o accounts.KeyOptions) auth.Principal {
	t.Helper()
	ctx := context.Background()
	o.RPM = 0
	k, err := w.accts.CreateKeyWith(ctx, tn.p.AccountID, o)
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.gw.Auth.KeyPrincipal(ctx, tn.p.AccountID, k.Key.ID)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAgentKeyCreditCap: a session started with a key that has a small credit cap, whose script
// needs more than the cap, ends with key_limit when the key's cap refuses a call's worst case
// (as the key's HTTP requests get 402); the key's spend in the period, the session's spend and
// its usage records never pass the cap, although the session's own max_spend is far above it.
// A session spawned by an approved agent_spawn of the key keeps to the cap the same way.
func TestAgentKeyCreditCap(t *testing.T) {
	// The sessions spend against daily caps, and the budget is read for the day the test ends in:
	// one day, not two.
	clocktest.NotAcrossMidnight(t, time.Minute)
	w := newWorld(t, func(c *config.Config) {
		c.Agents.Profiles = map[string]config.AgentProfile{
			"standard": {MaxTurns: 50, MaxSpendMicros: 1_000_000, MaxDuration: time.Hour},
		}
	})
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	many := script(querySales, querySales, querySales, querySales, querySales, querySales, querySales, querySales,
		querySales, querySales, querySales, querySales)
	const capMicros = 30_000 // a few turns at the worst case of service-flint (input at a one-hour cache write)

	check := func(t *testing.T, p auth.Principal, sessionID string) {
		t.Helper()
		s := waitSession(t, svc, p, sessionID, agent.StateStopped, agent.StateFailed)
		if s.State != agent.StateStopped || s.EndReason != agent.ReasonKeyLimit || s.Turns < 1 || s.SpentMicros > capMicros {
			t.Fatalf("session %+v", s)
		}
		evs := allEvents(t, svc, p, sessionID)
		checkSeq(t, evs)
		if last := evs[len(evs)-1]; field(t, last, "to") != agent.StateStopped || field(t, last, "reason") != agent.ReasonKeyLimit {
			t.Fatalf("last event %s %s", last.Kind, last.Data)
		}
		usage := usageOf(t, w, p, sessionID, s.SpentMicros)
		if len(usage) != s.Turns {
			t.Fatalf("%d usage records for %d turns", len(usage), s.Turns)
		}
		for _, r := range usage {
			if r.APIKeyID != p.KeyID {
				t.Fatalf("usage record %s of key %s, want %s", r.RequestID, r.APIKeyID, p.KeyID)
			}
		}
		checkLedger(t, w, p, usage)
		budget, err := w.store.GetKeyBudget(ctx, p.KeyID, store.CapPeriodDaily.Start(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		if budget.SpentMicros != s.SpentMicros || budget.SpentMicros > capMicros || budget.ReservedMicros != 0 {
			t.Fatalf("the key's budget %+v, the session spent %d, the cap is %d", budget, s.SpentMicros, capMicros)
		}
		t.Logf("%d turns, %d of the key's cap of %d spent", s.Turns, s.SpentMicros, capMicros)
	}

	t.Run("spawn", func(t *testing.T) {
		tn := w.tenant(n, "capped", 5_000_000)
		p := keyed(t, w, n, tn, accounts.KeyOptions{Name: "capped", CreditCapMicros: new(int64(capMicros)), CapPeriod: store.CapPeriodDaily})
		res, err := svc.Spawn(ctx, p, "main", "Query again and again. "+many, "")
		if err != nil {
			t.Fatal(err)
		}
		check(t, p, res.SessionID)
	})

	t.Run("approved agent_spawn", func(t *testing.T) {
		tn := w.tenant(n, "capped-mcp", 5_000_000)
		p := keyed(t, w, n, tn, accounts.KeyOptions{Name: "capped", CreditCapMicros: new(int64(capMicros)), CapPeriod: store.CapPeriodDaily})
		ap, err := svc.RequestSpawn(ctx, p, agent.SpawnAction{Purpose: "Query again and again. " + many})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Resolve(ctx, nil, ap.ID, true, "operator"); err != nil {
			t.Fatal(err)
		}
		ap = waitAction(t, svc, p, ap.ID)
		if ap.ActionStatus != agent.ActionDone {
			t.Fatalf("approved spawn %+v", ap)
		}
		check(t, p, ap.SessionID)
	})
}

// TestAgentKeyRevokedMidSession: the key that started a session is revoked (disabled, expired,
// or its model subset loses the session's model) while the session's first model call is in
// flight; that call is billed, and the next step ends the session (key_revoked, key_disabled,
// key_expired, or key_limit for the model subset) before any further model call: the simulator sees no other request,
// and the session has one turn and one usage record.
func TestAgentKeyRevokedMidSession(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	cases := []struct {
		name   string
		reason string
		change func(t *testing.T, account, key uuid.UUID)
	}{
		{"revoked", agent.ReasonKeyRevoked, func(t *testing.T, account, key uuid.UUID) {
			if _, err := w.accts.Revoke(ctx, account, key); err != nil {
				t.Fatal(err)
			}
		}},
		{"disabled", agent.ReasonKeyDisabled, func(t *testing.T, account, key uuid.UUID) {
			if _, err := w.accts.Disable(ctx, account, key); err != nil {
				t.Fatal(err)
			}
		}},
		{"expired", agent.ReasonKeyExpired, func(t *testing.T, account, key uuid.UUID) {
			past := time.Now().Add(-time.Second)
			if _, err := w.store.SetAPIKeyLimits(ctx, account, key, store.KeyLimits{ExpiresAt: &past}); err != nil {
				t.Fatal(err)
			}
		}},
		{"model subset", agent.ReasonKeyLimit, func(t *testing.T, account, key uuid.UUID) {
			if _, err := w.store.SetAPIKeyLimits(ctx, account, key, store.KeyLimits{Models: []string{"another-model"}}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tn := w.tenant(n, "acme-"+c.name, 5_000_000)
			p := keyed(t, w, n, tn, accounts.KeyOptions{Name: c.name})
			before := w.sim.TotalRequests()
			// Every turn's call is held 600 ms by the simulator: the key changes during the first.
			res, err := svc.Spawn(ctx, p, "main", "Sum the sales, again and again. [[sim fault=stall_before ms=600]] "+
				script(querySales, querySales, querySales, querySales), "")
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for w.sim.TotalRequests() == before {
				if time.Now().After(deadline) {
					t.Fatal("the first step's model call never reached the simulator")
				}
				time.Sleep(5 * time.Millisecond)
			}
			c.change(t, tn.p.AccountID, p.KeyID)
			s := waitSession(t, svc, p, res.SessionID, agent.StateStopped, agent.StateFailed)
			if s.State != agent.StateStopped || s.EndReason != c.reason || s.Turns != 1 {
				t.Fatalf("session %+v", s)
			}
			if got := w.sim.TotalRequests() - before; got != 1 {
				t.Fatalf("the simulator saw %d calls, want the one in flight", got)
			}
			evs := allEvents(t, svc, p, res.SessionID)
			checkSeq(t, evs)
			if last := evs[len(evs)-1]; field(t, last, "to") != agent.StateStopped || field(t, last, "reason") != c.reason {
				t.Fatalf("last event %s %s", last.Kind, last.Data)
			}
			usage := usageOf(t, w, p, res.SessionID, s.SpentMicros)
			if len(usage) != 1 || s.SpentMicros <= 0 {
				t.Fatalf("%d usage records (spent %d) for the one call", len(usage), s.SpentMicros)
			}
			checkLedger(t, w, p, usage)
		})
	}
}

// TestAgentSessionWithoutKey: a session started for an account without a key (the web app's
// principal carries none) runs on the account alone: it answers, and its usage records carry
// no key.
func TestAgentSessionWithoutKey(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "keyless", 5_000_000)
	p := auth.Principal{AccountID: tn.p.AccountID}
	res, err := svc.Spawn(ctx, p, "main", "What is the total of the sales? "+script(querySales), "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, p, res.SessionID, agent.StateReady, agent.StateStopped, agent.StateFailed)
	if s.State != agent.StateReady || s.Turns != 2 || s.SpentMicros <= 0 {
		t.Fatalf("session %+v", s)
	}
	usage := usageOf(t, w, p, res.SessionID, s.SpentMicros)
	for _, r := range usage {
		if r.APIKeyID != uuid.Nil {
			t.Fatalf("usage record %s of key %s", r.RequestID, r.APIKeyID)
		}
	}
	checkLedger(t, w, p, usage)
}

// TestLimitedKeyDrivesOnlyItsOwnSessions: a key with limits (a credit cap, here)
// cannot send messages, nor ask through MCP to prompt, a session another key of its account
// started, whose turns run under that key's limits and are billed to it: it is refused with 403
// and the session takes no turn. A key without limits may message any session of its account,
// and the limited key may message the session it started itself.
func TestLimitedKeyDrivesOnlyItsOwnSessions(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "acme", 5_000_000)
	if err := svc.AssignSlot(ctx, tn.p.AccountID, "second"); err != nil {
		t.Fatal(err)
	}
	open := keyed(t, w, n, tn, accounts.KeyOptions{Name: "open"})
	limited := keyed(t, w, n, tn, accounts.KeyOptions{Name: "limited", CreditCapMicros: new(int64(1_000_000)), CapPeriod: store.CapPeriodDaily})

	res, err := svc.Spawn(ctx, open, "main", "Say hello.", "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, open, res.SessionID, agent.StateReady)
	_, err = svc.SendMessage(ctx, limited, "main", "Write a long story.", "")
	if e := apierror.As(err); e == nil || e.Kind != apierror.KindForbidden || !strings.Contains(e.Message, "not started by this key") {
		t.Fatalf("the limited key's message to another key's session: %v", err)
	}
	if _, err := svc.RequestPrompt(ctx, limited, res.SessionID, "Write a long story."); apierror.As(err).Kind != apierror.KindForbidden {
		t.Fatalf("the limited key's agent_prompt to another key's session: %v", err)
	}
	if after := waitSession(t, svc, open, res.SessionID, agent.StateReady); after.Turns != s.Turns {
		t.Fatalf("the refused message started a turn: %+v", after)
	}
	// Nor may it stop that session (trial h13 D3), or replay, with another key's
	// Idempotency-Key, the answer that key got.
	if _, err := svc.Stop(ctx, limited, "main", ""); apierror.As(err) == nil || apierror.As(err).Kind != apierror.KindForbidden ||
		!strings.Contains(err.Error(), "it may stop only the sessions it started") {
		t.Fatalf("the limited key's stop of another key's session: %v (want a 403 saying it may stop only its own)", err)
	}
	// Its spawn on that slot is a conflict that neither names the session, which the key does
	// not see, nor tells it to stop it, which it may not (the newcomer's trial of 2026-12-06:
	// it named the session and said "stop it first with DELETE /v1/agents/main").
	var busy *agent.ConflictError
	if _, err := svc.Spawn(ctx, limited, "main", "Say hello.", ""); !errors.As(err, &busy) ||
		strings.Contains(err.Error(), res.SessionID) || strings.Contains(err.Error(), "DELETE") {
		t.Fatalf("the limited key's spawn on the slot of another key's session: %v", err)
	}
	if _, err := svc.SendMessage(ctx, open, "main", "Hello from open.", "k1"); err != nil {
		t.Fatal(err)
	}
	var conflict *agent.ConflictError
	if _, err := svc.SendMessage(ctx, limited, "main", "Hello from open.", "k1"); !errors.As(err, &conflict) {
		t.Fatalf("the limited key replaying another key's Idempotency-Key: %v", err)
	}
	if _, err := svc.SendMessage(ctx, tn.p, "main", "And goodbye.", ""); err != nil {
		t.Fatalf("a key without limits messaging another key's session: %v", err)
	}

	// Once that session has ended, the limited key's message to its slot is a conflict that
	// does not read that session's end to it (it named its state and reason).
	if _, err := svc.Stop(ctx, open, "main", ""); err != nil {
		t.Fatal(err)
	}
	waitSession(t, svc, open, res.SessionID, agent.StateStopped)
	var ended *agent.ConflictError
	if _, err := svc.SendMessage(ctx, limited, "main", "Anyone there?", ""); !errors.As(err, &ended) ||
		strings.Contains(err.Error(), agent.ReasonUserStop) || strings.Contains(err.Error(), "stopped") {
		t.Fatalf("the limited key's message to the slot of another key's ended session: %v", err)
	}
	if _, err := svc.SendMessage(ctx, open, "main", "Anyone there?", ""); !errors.As(err, &ended) || !strings.Contains(err.Error(), agent.ReasonUserStop) {
		t.Fatalf("the open key's message to its ended session: %v, want the conflict naming its end", err)
	}

	own, err := svc.Spawn(ctx, limited, "second", "Say hello.", "")
	if err != nil {
		t.Fatal(err)
	}
	waitSession(t, svc, limited, own.SessionID, agent.StateReady)
	if _, err := svc.SendMessage(ctx, limited, "second", "Again.", ""); err != nil {
		t.Fatalf("the limited key messaging its own session: %v", err)
	}
}

// TestAgentRetriedCallCountsAgainstTheKeysCap: a capped key's session whose model call's answer
// is cut off (the upstream drops the connection mid-answer) runs the step again under the
// turn's request id, and the call that delivers is billed under it (TestCutAnswerRetriedIsBilled).
// The key's cap must count that call as the ledger bills it: the key's budget is what the key's
// usage records charge, and nothing stays reserved. (It counted nothing: the undelivered
// attempt's settlement at 0 marked the turn's request id as counted, and the retry was served
// against no cap, so a capped key's agent could pass its cap one cut answer at a time.)
func TestAgentRetriedCallCountsAgainstTheKeysCap(t *testing.T) {
	clocktest.NotAcrossMidnight(t, time.Minute)
	w := newWorld(t, twoAttempts)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "capped", 5_000_000)
	p := keyed(t, w, n, tn, accounts.KeyOptions{Name: "capped", CreditCapMicros: new(int64(4_000_000)), CapPeriod: store.CapPeriodDaily})
	res, err := svc.SpawnWith(ctx, p, "main", "Tell a story. [[sim fault=drop after=2 times=1 tag=capped-retry]] [[sim words=400]]", "",
		agent.SpawnAction{Model: "service-flint-base"})
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, p, res.SessionID, agent.StateReady, agent.StateFailed, agent.StateStopped)
	if s.State != agent.StateReady || s.Turns != 1 || s.SpentMicros <= 0 {
		t.Fatalf("session %+v", s)
	}
	if jobs := stepJobs(t, w, res.SessionID); fmt.Sprint(jobs) != "map[1:completed/2]" {
		t.Fatalf("step jobs %v (want the turn's job completed on its second attempt)", jobs)
	}
	usage := usageOf(t, w, p, res.SessionID, s.SpentMicros)
	checkLedger(t, w, p, usage)
	budget, err := w.store.GetKeyBudget(ctx, p.KeyID, store.CapPeriodDaily.Start(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if budget.SpentMicros != s.SpentMicros || budget.ReservedMicros != 0 {
		t.Fatalf("the key's budget %+v, its usage records charge %d", budget, s.SpentMicros)
	}
}

// TestLimitedKeySeesOnlyItsOwnSessions: a key with limits (a model subset, here) sees only the
// sessions it started, their events and the tickets they opened, and the approvals it asked
// for. Another key's session is left out of its listings (list_agent_sessions, GET /v1/agents,
// list_agent_tickets) and is unknown to it by id (tail_agent_session, the events), as another
// account's; following the slot of another key's session (the events stream) is refused; and
// another key's approval is unknown to agent_action_status. A key without limits sees all of
// them. (The limited key read every session, event, ticket and approval of its account.)
func TestLimitedKeySeesOnlyItsOwnSessions(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "acme", 5_000_000)
	if err := svc.AssignSlot(ctx, tn.p.AccountID, "second"); err != nil {
		t.Fatal(err)
	}
	open := keyed(t, w, n, tn, accounts.KeyOptions{Name: "open"})
	limited := keyed(t, w, n, tn, accounts.KeyOptions{Name: "limited", Models: []string{"service-flint"}})

	theirs, err := svc.Spawn(ctx, open, "main", "File it. "+script(`call open_ticket {"title":"the open key's ticket","body":"private"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	waitSession(t, svc, open, theirs.SessionID, agent.StateReady)
	theirApproval, err := svc.RequestSpawn(ctx, open, agent.SpawnAction{Purpose: "The open key's secret plan."})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := svc.Spawn(ctx, limited, "second", "File mine. "+script(`call open_ticket {"title":"the limited key's ticket","body":"mine"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	waitSession(t, svc, limited, mine.SessionID, agent.StateReady)
	myApproval, err := svc.RequestSpawn(ctx, limited, agent.SpawnAction{Purpose: "My plan."})
	if err != nil {
		t.Fatal(err)
	}

	sessionIDs := func(p auth.Principal) []string {
		t.Helper()
		list, err := svc.Sessions(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range list {
			ids = append(ids, s.ID)
		}
		return ids
	}
	if got := sessionIDs(limited); fmt.Sprint(got) != fmt.Sprint([]string{mine.SessionID}) {
		t.Errorf("the limited key lists sessions %v, want only its own %s", got, mine.SessionID)
	}
	if got := sessionIDs(open); len(got) != 2 {
		t.Errorf("the key without limits lists sessions %v, want both", got)
	}
	if _, err := svc.Tail(ctx, limited, theirs.SessionID, 0, 10, 0); !errors.Is(err, agent.ErrNotFound) {
		t.Errorf("the limited key's tail of another key's session: %v, want ErrNotFound", err)
	}
	if _, err := svc.Events(ctx, limited, theirs.SessionID, 0, 10); !errors.Is(err, agent.ErrNotFound) {
		t.Errorf("the limited key's events of another key's session: %v, want ErrNotFound", err)
	}
	if tail, err := svc.Tail(ctx, limited, mine.SessionID, 0, 10, 0); err != nil || len(tail.Events) == 0 {
		t.Errorf("the limited key's tail of its own session: %+v, %v", tail, err)
	}
	if _, err := svc.Tail(ctx, open, mine.SessionID, 0, 10, 0); err != nil {
		t.Errorf("the key without limits' tail of the limited key's session: %v", err)
	}

	slots, err := svc.Overview(ctx, limited)
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range slots {
		switch {
		case sl.Slot == "main" && sl.Session != nil:
			t.Errorf("the limited key's GET /v1/agents shows the other key's session %+v", *sl.Session)
		case sl.Slot == "second" && (sl.Session == nil || sl.Session.ID != mine.SessionID):
			t.Errorf("the limited key's GET /v1/agents does not show its own session: %+v", sl)
		}
	}
	if _, err := svc.SlotSession(ctx, limited, "main"); apierror.As(err) == nil || apierror.As(err).Kind != apierror.KindForbidden {
		t.Errorf("the limited key following the slot of another key's session: %v, want 403", err)
	}
	if s, err := svc.SlotSession(ctx, limited, "second"); err != nil || s.ID != mine.SessionID {
		t.Errorf("the limited key following its own slot: %+v, %v", s, err)
	}
	if s, err := svc.SlotSession(ctx, open, "second"); err != nil || s.ID != mine.SessionID {
		t.Errorf("the key without limits following the limited key's slot: %+v, %v", s, err)
	}

	titles := func(p auth.Principal) []string {
		t.Helper()
		list, err := svc.Tickets(ctx, p, "all", 50)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tk := range list {
			out = append(out, tk.Title)
		}
		slices.Sort(out)
		return out
	}
	if got := titles(limited); fmt.Sprint(got) != "[the limited key's ticket]" {
		t.Errorf("the limited key's tickets %q, want only its session's", got)
	}
	if got := titles(open); len(got) != 2 {
		t.Errorf("the key without limits' tickets %q, want both", got)
	}

	if _, err := svc.ApprovalStatus(ctx, limited, theirApproval.ID); !errors.Is(err, agent.ErrNotFound) {
		t.Errorf("the limited key's agent_action_status of another key's approval: %v, want ErrNotFound", err)
	}
	if _, err := svc.ApprovalStatus(ctx, limited, myApproval.ID); err != nil {
		t.Errorf("the limited key's agent_action_status of its own approval: %v", err)
	}
	if _, err := svc.ApprovalStatus(ctx, open, myApproval.ID); err != nil {
		t.Errorf("the key without limits' agent_action_status of the limited key's approval: %v", err)
	}
}
