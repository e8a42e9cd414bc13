package agent_test

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestKeyRevocationEndsItsWaitingSessions: revoking a key (accounts.Service with the agents, as
// the console's Keys page and `tollgate admin key revoke` and `revoke-all` use it, and a
// member's removal, which revokes the keys they made) ends the sessions started with it that
// wait for a message, in the revocation's transaction: each is stopped (key_revoked, its state
// event last) when the revocation returns, nothing more is called, and its slot takes a new
// session. Before, a waiting session took no step, so nothing checked its key: it stayed ready
// and held its slot until a message or its maximum duration came. The sessions of the keys not
// revoked keep running and answer messages.
func TestKeyRevocationEndsItsWaitingSessions(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	keys := &accounts.Service{Store: w.store, Config: w.accts.Config, Agents: svc}
	people := members.New(w.store, svc)
	tn := w.tenant(n, "revocation", 5_000_000)
	acct, console := tn.p.AccountID, auth.Principal{AccountID: tn.p.AccountID}
	for _, slot := range []string{"other", "alices"} {
		if err := svc.AssignSlot(ctx, acct, slot); err != nil {
			t.Fatal(err)
		}
	}
	alice, err := people.Add(ctx, acct, "alice@example.com", members.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	other := keyed(t, w, n, tn, accounts.KeyOptions{Name: "other"})
	alices := keyed(t, w, n, tn, accounts.KeyOptions{Name: "alice's", CreatedBy: alice.Email, CreatedByUser: alice.ID})
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
	ended := func(was agent.SessionView, whose string) {
		t.Helper()
		s := sessionNow(t, svc, console, was.ID)
		if s.State != agent.StateStopped || s.EndReason != agent.ReasonKeyRevoked || s.Turns != was.Turns || s.SpentMicros != was.SpentMicros {
			t.Fatalf("%s waiting session %+v right after the revocation, want stopped (key_revoked) as it was", whose, s)
		}
		evs := allEvents(t, svc, console, was.ID)
		checkSeq(t, evs)
		if last := evs[len(evs)-1]; last.Kind != "state" || field(t, last, "to") != agent.StateStopped || field(t, last, "reason") != agent.ReasonKeyRevoked {
			t.Fatalf("%s session's last event %s %s", whose, last.Kind, last.Data)
		}
	}
	running := func(p auth.Principal, slot string, was agent.SessionView) agent.SessionView {
		t.Helper()
		if _, err := svc.SendSessionMessage(ctx, p, slot, uuidOf(was.ID), "Say hello once more."); err != nil {
			t.Fatalf("a message to the session in slot %s: %v", slot, err)
		}
		s := waitSession(t, svc, console, was.ID, agent.StateReady, agent.StateStopped, agent.StateFailed)
		if s.State != agent.StateReady || s.Turns != was.Turns+1 {
			t.Fatalf("the session in slot %s after a message: %+v, want ready after one more turn", slot, s)
		}
		return s
	}
	first, second, third := spawn(tn.p, "main"), spawn(other, "other"), spawn(alices, "alices")

	// One key revoked, as on the Keys page or with `admin key revoke`.
	calls := w.sim.TotalRequests()
	if _, err := keys.Revoke(ctx, acct, tn.p.KeyID); err != nil {
		t.Fatal(err)
	}
	ended(first, "the revoked key's")
	if got := w.sim.TotalRequests() - calls; got != 0 {
		t.Fatalf("the simulator saw %d calls after the revocation, want none", got)
	}
	second, third = running(other, "other", second), running(alices, "alices", third)

	// The removal of a member revokes the keys they made, and ends those keys' sessions.
	if _, err := people.Remove(ctx, acct, alice.Email, false); err != nil {
		t.Fatal(err)
	}
	ended(third, "the removed member's key's")
	second = running(other, "other", second)

	// Revoking all the account's keys ends the last one's session; the freed slot takes a new one.
	if _, err := keys.RevokeAll(ctx, acct); err != nil {
		t.Fatal(err)
	}
	ended(second, "the last key's")
	spawn(keyed(t, w, n, tn, accounts.KeyOptions{Name: "fresh"}), "other")

	// Each revocation that ended a session is in the audit log, naming its key and the session.
	targets, entries := sessionsEnded(t, w, acct)
	if len(entries) != 3 || targets[0] != "key "+tn.p.KeyID.String() || targets[1] != "key "+alices.KeyID.String() {
		t.Fatalf("audit entries %v %+v, want three: the first key's, alice's key's and the revocation of all", targets, entries)
	}
	for i, s := range []agent.SessionView{first, third, second} {
		if e := entries[i]; e.Reason != agent.ReasonKeyRevoked || e.Count != 1 || len(e.Sessions) != 1 || e.Sessions[0] != s.ID {
			t.Errorf("audit entry %d %+v, want session %s (key_revoked)", i, e, s.ID)
		}
	}
}
