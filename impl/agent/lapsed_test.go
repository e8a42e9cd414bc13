package agent_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/mcpauth"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/audit"
	"github.com/tollgate/tollgate/impl/web/members"
)

// endedEntry is the after of an agent.sessions_ended audit entry.
type endedEntry struct {
	Reason   string   `json:"reason"`
	Count    int      `json:"count"`
	Sessions []string `json:"sessions"`
}

// sessionsEnded returns the account's agent.sessions_ended audit entries, oldest first, with
// their targets.
func sessionsEnded(t *testing.T, w *world, account uuid.UUID) ([]string, []endedEntry) {
	t.Helper()
	entries, err := (&audit.Log{Store: w.store}).List(context.Background(), account, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	var out []endedEntry
	for _, e := range slices.Backward(entries) {
		if e.Action != audit.ActionAgentSessionsEnded {
			continue
		}
		var after endedEntry
		if err := json.Unmarshal(e.After.(json.RawMessage), &after); err != nil {
			t.Fatal(err)
		}
		if e.Actor != "tollgate" {
			t.Errorf("entry %+v: actor %q, want tollgate", e, e.Actor)
		}
		targets, out = append(targets, e.Target), append(out, after)
	}
	return targets, out
}

// checkEnded checks that the waiting session was, right away, stopped for reason, its state
// event last, and took no turn more.
func checkEnded(t *testing.T, svc *agent.Service, p auth.Principal, was agent.SessionView, reason string) {
	t.Helper()
	s := sessionNow(t, svc, p, was.ID)
	if s.State != agent.StateStopped || s.EndReason != reason || s.Turns != was.Turns {
		t.Fatalf("waiting session %+v, want stopped (%s) as it was", s, reason)
	}
	evs := allEvents(t, svc, p, was.ID)
	checkSeq(t, evs)
	if last := evs[len(evs)-1]; last.Kind != "state" || field(t, last, "to") != agent.StateStopped || field(t, last, "reason") != reason {
		t.Fatalf("the session's last event %s %s", last.Kind, last.Data)
	}
}

// TestDisabledOrExpiredKeyEndsItsWaitingSessions: a key's disabling (accounts.Service with the
// agents, as the console and `tollgate admin key disable` use it) ends, in its transaction, the
// sessions started with it that wait for a message (key_disabled), and a key's expiry, which
// nobody acts on, ends them within a sweep of the agents (key_expired): their slots take new
// sessions. Each ending is in the account's audit log, naming the key and the sessions.
// Enabling the key again revives nothing. Before, only a step checked the key, and a waiting
// session takes none: it kept its slot until a message or its maximum duration came.
func TestDisabledOrExpiredKeyEndsItsWaitingSessions(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	keys := &accounts.Service{Store: w.store, Config: w.accts.Config, Agents: svc}
	tn := w.tenant(n, "lapsing", 5_000_000)
	acct, console := tn.p.AccountID, auth.Principal{AccountID: tn.p.AccountID}
	if err := svc.AssignSlot(ctx, acct, "other"); err != nil {
		t.Fatal(err)
	}
	spawn := func(p auth.Principal, slot string) agent.SessionView {
		t.Helper()
		res, err := svc.Spawn(ctx, p, slot, "Say hello.", "")
		if err != nil {
			t.Fatal(err)
		}
		s := waitSession(t, svc, console, res.SessionID, agent.StateReady, agent.StateStopped, agent.StateFailed)
		if s.State != agent.StateReady {
			t.Fatalf("session in slot %s: %+v, want ready", slot, s)
		}
		return s
	}
	other := keyed(t, w, n, tn, accounts.KeyOptions{Name: "other"})
	first, second := spawn(tn.p, "main"), spawn(other, "other")

	calls := w.sim.TotalRequests()
	if _, err := keys.Disable(ctx, acct, tn.p.KeyID); err != nil {
		t.Fatal(err)
	}
	checkEnded(t, svc, console, first, agent.ReasonKeyDisabled)
	if s := sessionNow(t, svc, console, second.ID); s.State != agent.StateReady {
		t.Fatalf("the other key's session %+v after the disabling, want ready", s)
	}
	if _, err := keys.Enable(ctx, acct, tn.p.KeyID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // three sweeps
	checkEnded(t, svc, console, first, agent.ReasonKeyDisabled)
	third := spawn(tn.p, "main")

	// The other key expires (its expiry moved to the past, as time would move it).
	past := time.Now().Add(-time.Second)
	if _, err := w.store.SetAPIKeyLimits(ctx, acct, other.KeyID, store.KeyLimits{ExpiresAt: &past}); err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, console, second.ID, agent.StateStopped, agent.StateFailed)
	checkEnded(t, svc, console, second, agent.ReasonKeyExpired)
	if got := w.sim.TotalRequests() - calls; got != 1 {
		t.Fatalf("the simulator saw %d calls after the disabling, want the third session's one", got)
	}
	if s := sessionNow(t, svc, console, third.ID); s.State != agent.StateReady {
		t.Fatalf("the enabled key's new session %+v, want ready", s)
	}
	spawn(keyed(t, w, n, tn, accounts.KeyOptions{Name: "fresh"}), "other")

	targets, entries := sessionsEnded(t, w, acct)
	want := []endedEntry{{agent.ReasonKeyDisabled, 1, []string{first.ID}}, {agent.ReasonKeyExpired, 1, []string{s.ID}}}
	wantTargets := []string{"key " + tn.p.KeyID.String(), "key " + other.KeyID.String()}
	if !slices.EqualFunc(entries, want, func(a, b endedEntry) bool {
		return a.Reason == b.Reason && a.Count == b.Count && slices.Equal(a.Sessions, b.Sessions)
	}) || !slices.Equal(targets, wantTargets) {
		t.Fatalf("audit entries %v %+v, want %v %+v", targets, entries, wantTargets, want)
	}
}

// TestRevokedGrantEndsItsWaitingSessions: the revocation of a connected app's OAuth grant on
// the console (mcpauth.Server with the agents) ends, in its transaction, the waiting session
// its approved agent_spawn started (access_revoked), and a grant past its lifetime, which
// nobody revokes, has its session ended within a sweep of the agents: each slot takes a new
// session, and each ending is in the account's audit log, naming the grant and the session.
// Before, only a step checked the grant: a waiting session kept its slot.
func TestRevokedGrantEndsItsWaitingSessions(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "apps", 5_000_000)
	acct, console := tn.p.AccountID, auth.Principal{AccountID: tn.p.AccountID}
	if err := svc.AssignSlot(ctx, acct, "other"); err != nil {
		t.Fatal(err)
	}
	oauth, err := mcpauth.New(mcpauth.Options{Store: w.store, PublicURL: "https://gateway.example", Agents: svc})
	if err != nil {
		t.Fatal(err)
	}
	appSession := func(email string) (auth.Principal, agent.SessionView) {
		t.Helper()
		app := appPrincipal(t, w, tn, email)
		ap, err := svc.RequestSpawn(ctx, app, agent.SpawnAction{Purpose: "wait for a message"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Resolve(ctx, &acct, ap.ID, true, "owner@example.com"); err != nil {
			t.Fatal(err)
		}
		got := waitAction(t, svc, console, ap.ID)
		if got.ActionStatus != agent.ActionDone {
			t.Fatalf("the approved spawn: %+v", got)
		}
		s := waitSession(t, svc, console, got.SessionID, agent.StateReady, agent.StateStopped, agent.StateFailed)
		if s.State != agent.StateReady {
			t.Fatalf("the app's session %+v, want ready", s)
		}
		return app, s
	}
	carol, first := appSession("carol@example.com")
	dave, second := appSession("dave@example.com")

	if _, err := oauth.Revoke(ctx, acct, carol.OAuth.GrantID, "owner@example.com"); err != nil {
		t.Fatal(err)
	}
	checkEnded(t, svc, console, first, agent.ReasonAccessRevoked)
	if s := sessionNow(t, svc, console, second.ID); s.State != agent.StateReady {
		t.Fatalf("the other app's session %+v after the revocation, want ready", s)
	}

	// Dave's grant reaches the end of its lifetime.
	if _, err := w.store.Pool().Exec(ctx, `UPDATE oauth_grants SET expires_at = now() - interval '1 second' WHERE id = $1`,
		dave.OAuth.GrantID); err != nil {
		t.Fatal(err)
	}
	waitSession(t, svc, console, second.ID, agent.StateStopped, agent.StateFailed)
	checkEnded(t, svc, console, second, agent.ReasonAccessRevoked)
	for _, slot := range []string{"main", "other"} {
		res, err := svc.Spawn(ctx, tn.p, slot, "Say hello.", "")
		if err != nil {
			t.Fatalf("a spawn in the freed slot %s: %v", slot, err)
		}
		waitSession(t, svc, console, res.SessionID, agent.StateReady)
	}

	targets, entries := sessionsEnded(t, w, acct)
	wantTargets := []string{"grant " + carol.OAuth.GrantID.String(), "grant " + dave.OAuth.GrantID.String()}
	if !slices.Equal(targets, wantTargets) || len(entries) != 2 ||
		!slices.Equal(entries[0].Sessions, []string{first.ID}) || !slices.Equal(entries[1].Sessions, []string{second.ID}) ||
		entries[0].Reason != agent.ReasonAccessRevoked || entries[1].Count != 1 {
		t.Fatalf("audit entries %v %+v", targets, entries)
	}
}

// TestKeyRevocationStopsABusySession: a key revoked (accounts.Service with the agents) while
// its session's step is running moves the session to stopping at once (key_revoked); the step
// in flight finishes its model call, which is billed, and the session then stops without
// another call: one turn, one usage record in the ledger, its spend the call's, and the ending
// in the account's audit log.
func TestKeyRevocationStopsABusySession(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	keys := &accounts.Service{Store: w.store, Config: w.accts.Config, Agents: svc}
	tn := w.tenant(n, "busy", 5_000_000)
	p := keyed(t, w, n, tn, accounts.KeyOptions{Name: "busy"})
	before := w.sim.TotalRequests()
	// Every turn's call is held 600 ms by the simulator: the key is revoked during the first.
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
	if _, err := keys.Revoke(ctx, tn.p.AccountID, p.KeyID); err != nil {
		t.Fatal(err)
	}
	if s := sessionNow(t, svc, tn.p, res.SessionID); s.State != agent.StateStopping || s.EndReason != agent.ReasonKeyRevoked {
		t.Fatalf("the busy session right after the revocation: %+v, want stopping (key_revoked)", s)
	}
	s := waitSession(t, svc, tn.p, res.SessionID, agent.StateStopped, agent.StateFailed)
	if s.State != agent.StateStopped || s.EndReason != agent.ReasonKeyRevoked || s.Turns != 1 {
		t.Fatalf("session %+v, want stopped (key_revoked) after one turn", s)
	}
	if got := w.sim.TotalRequests() - before; got != 1 {
		t.Fatalf("the simulator saw %d calls, want the one in flight", got)
	}
	evs := allEvents(t, svc, tn.p, res.SessionID)
	checkSeq(t, evs)
	if last := evs[len(evs)-1]; field(t, last, "to") != agent.StateStopped || field(t, last, "reason") != agent.ReasonKeyRevoked {
		t.Fatalf("last event %s %s", last.Kind, last.Data)
	}
	usage := usageOf(t, w, tn.p, res.SessionID, s.SpentMicros)
	if len(usage) != 1 || s.SpentMicros <= 0 {
		t.Fatalf("%d usage records (spent %d) for the one call", len(usage), s.SpentMicros)
	}
	checkLedger(t, w, tn.p, usage)
	targets, entries := sessionsEnded(t, w, tn.p.AccountID)
	if !slices.Equal(targets, []string{"key " + p.KeyID.String()}) || len(entries) != 1 ||
		entries[0].Reason != agent.ReasonKeyRevoked || !slices.Equal(entries[0].Sessions, []string{res.SessionID}) {
		t.Fatalf("audit entries %v %+v", targets, entries)
	}
}

// TestMemberRemovalEndsTheirAppsSessions: a member's removal (members.Service.Remove with the
// agents) revokes the OAuth grants of the apps they allowed, and ends, in its transaction,
// the waiting session such an app's approved agent_spawn started (access_revoked), its slot
// free at once and the ending audited under the member's grants; another member's app's
// session runs on. Before, the session waited for the agents' sweep, or a message, to find
// its grant gone.
func TestMemberRemovalEndsTheirAppsSessions(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "apps-removal", 5_000_000)
	acct, console := tn.p.AccountID, auth.Principal{AccountID: tn.p.AccountID}
	if err := svc.AssignSlot(ctx, acct, "other"); err != nil {
		t.Fatal(err)
	}
	var started []agent.SessionView
	var users []uuid.UUID
	for _, email := range []string{"erin@example.com", "frank@example.com"} {
		app := appPrincipal(t, w, tn, email)
		ap, err := svc.RequestSpawn(ctx, app, agent.SpawnAction{Purpose: "wait for a message"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Resolve(ctx, &acct, ap.ID, true, "owner@example.com"); err != nil {
			t.Fatal(err)
		}
		got := waitAction(t, svc, console, ap.ID)
		s := waitSession(t, svc, console, got.SessionID, agent.StateReady, agent.StateStopped, agent.StateFailed)
		if s.State != agent.StateReady {
			t.Fatalf("%s's app's session %+v, want ready", email, s)
		}
		started, users = append(started, s), append(users, app.OAuth.UserID)
	}
	if _, err := (members.New(w.store, svc)).Remove(ctx, acct, "erin@example.com", false); err != nil {
		t.Fatal(err)
	}
	checkEnded(t, svc, console, started[0], agent.ReasonAccessRevoked)
	if s := sessionNow(t, svc, console, started[1].ID); s.State != agent.StateReady {
		t.Fatalf("the other member's app's session %+v, want ready", s)
	}
	targets, entries := sessionsEnded(t, w, acct)
	if !slices.Equal(targets, []string{"grants of member " + users[0].String()}) || len(entries) != 1 ||
		entries[0].Reason != agent.ReasonAccessRevoked || !slices.Equal(entries[0].Sessions, []string{started[0].ID}) {
		t.Fatalf("audit entries %v %+v", targets, entries)
	}
}

// TestLapsedSweepHasItsOwnInterval: the sweep of lapsed sessions runs every config
// agents.session_sweep, whatever agents.approval_sweep is: with the approvals' sweep an hour
// apart and the sessions' 100 ms, an expired key's waiting session ends within a few sweeps
// (key_expired). Before, the sessions' sweep ran every approval_sweep and had no key of its own.
func TestLapsedSweepHasItsOwnInterval(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		c.Agents.ApprovalSweep = time.Hour
		c.Agents.SessionSweep = 100 * time.Millisecond
	})
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "sweeping", 5_000_000)
	console := auth.Principal{AccountID: tn.p.AccountID}
	res, err := svc.Spawn(ctx, tn.p, "main", "Say hello.", "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, console, res.SessionID, agent.StateReady, agent.StateStopped, agent.StateFailed)
	if s.State != agent.StateReady {
		t.Fatalf("session %+v, want ready", s)
	}
	past := time.Now().Add(-time.Second)
	if _, err := w.store.SetAPIKeyLimits(ctx, tn.p.AccountID, tn.p.KeyID, store.KeyLimits{ExpiresAt: &past}); err != nil {
		t.Fatal(err)
	}
	waitSession(t, svc, console, s.ID, agent.StateStopped, agent.StateFailed)
	checkEnded(t, svc, console, s, agent.ReasonKeyExpired)
}
