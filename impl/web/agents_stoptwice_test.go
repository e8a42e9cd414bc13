package web_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestStopOfAStoppingSessionChangesNothing: on the console, stopping a session that is
// stopping already (its first stop waits for the step in flight: another tab, a second click)
// goes back to the session's page saying it was stopping already, without a confirmation page,
// and changes nothing: no second stop command, no second stop job, no second agent.stopped in
// the audit log. Before, it asked again and then queued another stop and audited it (303 to
// ?stopping=1).
func TestStopOfAStoppingSessionChangesNothing(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, "owner")
	bobUser, err := e.Members.Add(ctx, acme.ID, bobEmail, "member")
	if err != nil {
		t.Fatal(err)
	}
	sess := e.agentSessionStartedBy(t, acme.ID, "main", uuid.Nil, bobUser.ID)
	e.agentEvent(t, acme.ID, sess, 1, "state", map[string]any{"from": "provisioning", "to": "ready"})
	e.agentEvent(t, acme.ID, sess, 2, "state", map[string]any{"from": "ready", "to": "busy"})
	id := sess.String()

	// counts is how many stop commands, stop jobs and audited stops the session has.
	counts := func() (commands, jobs, audited int) {
		t.Helper()
		pool := e.Store.Pool()
		for _, q := range []struct {
			sql  string
			arg  any
			into *int
		}{
			{`SELECT count(*) FROM agent_commands WHERE session_id = $1 AND kind = 'stop'`, sess, &commands},
			{`SELECT count(*) FROM river_job WHERE kind = 'agent_stop' AND args->>'session_id' = $1`, id, &jobs},
			{`SELECT count(*) FROM audit_log WHERE action = 'agent.stopped' AND target = $1`, "agent session " + id, &audited},
		} {
			if err := pool.QueryRow(ctx, q.sql, q.arg).Scan(q.into); err != nil {
				t.Fatal(err)
			}
		}
		return commands, jobs, audited
	}

	bob := e.browser(t)
	bob.signIn(e, bobEmail, bobPass)
	if p := bob.post("/agents/"+id+"/stop", confirmed); p.Status != http.StatusSeeOther || !strings.HasSuffix(p.Location, "/agents/"+id+"?stopping=1") {
		t.Fatalf("the first stop: %d to %q: %.500s", p.Status, p.Location, p.Body)
	}
	if c, j, a := counts(); c != 1 || j != 1 || a != 1 {
		t.Fatalf("after the first stop: %d stop commands, %d stop jobs, %d audited stops; want 1 each", c, j, a)
	}

	// Stopped again from a page shown before (unconfirmed: no confirmation page), confirmed,
	// and by the owner.
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	for _, again := range []struct {
		who  string
		b    *browser
		form url.Values
	}{{"bob, unconfirmed", bob, url.Values{}}, {"bob, confirmed", bob, confirmed}, {"alice, confirmed", alice, confirmed}} {
		p := again.b.post("/agents/"+id+"/stop", again.form)
		if p.Status != http.StatusSeeOther || !strings.HasSuffix(p.Location, "/agents/"+id+"?stopping=already") {
			t.Errorf("%s: stop again: %d to %q, want 303 to the session's page saying it was stopping: %.500s", again.who, p.Status, p.Location, p.Body)
			continue
		}
		page := again.b.get(p.Location)
		if body := html.UnescapeString(page.Body); !strings.Contains(body, `<p role="status">This session was stopping already`) {
			t.Errorf("%s: the session's page does not say it was stopping already:\n%.3000s", again.who, page.Body)
		}
	}
	if c, j, a := counts(); c != 1 || j != 1 || a != 1 {
		t.Errorf("after stopping again: %d stop commands, %d stop jobs, %d audited stops; want the first's alone", c, j, a)
	}
}
