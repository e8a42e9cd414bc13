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

// TestMemberActsOnlyOnTheSessionsTheyStarted: on the console a member sends messages to and
// stops only the agent sessions they started there; owners act on any session of the account,
// as on Connected apps (owners revoke any grant, members the ones they allowed). Carol, a
// member, is refused (403, saying who may act) a message and a stop, confirmed or not, of
// Bob's session, of a session an API key started and of a console session from before
// migration 0029 (no starter recorded): nothing is queued, nothing stops and nothing is
// audited. Their pages show her who started them and that she cannot act, without the forms;
// her forged approval of a prompt to Bob's session is refused too (approvals are the owners').
// She messages and stops her own session; Alice, an owner, messages and stops the others.
// Before, any member messaged and stopped any session of the account.
func TestMemberActsOnlyOnTheSessionsTheyStarted(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, "owner")
	bobUser, err := e.Members.Add(ctx, acme.ID, bobEmail, "member")
	if err != nil {
		t.Fatal(err)
	}
	carolUser, err := e.Members.Add(ctx, acme.ID, carolEmail, "member")
	if err != nil {
		t.Fatal(err)
	}
	key, err := e.Accounts.CreateKey(ctx, acme.ID, "ci-bot", 0)
	if err != nil {
		t.Fatal(err)
	}
	bobs := e.agentSessionStartedBy(t, acme.ID, "bobs", uuid.Nil, bobUser.ID)
	keys := e.agentSessionStartedBy(t, acme.ID, "ci", key.Key.ID, uuid.Nil)
	old := e.agentSessionStartedBy(t, acme.ID, "old", uuid.Nil, uuid.Nil)
	carols := e.agentSessionStartedBy(t, acme.ID, "carols", uuid.Nil, carolUser.ID)
	prompt := e.pendingApproval(t, acme.ID, key.Key.ID, "prompt", `{"session_id":"`+bobs.String()+`","prompt":"go on"}`)

	// counts is how many messages, stop commands and audited stops the session has.
	counts := func(session uuid.UUID) (messages, stops, audited int) {
		t.Helper()
		pool := e.Store.Pool()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM agent_messages WHERE session_id = $1`, session).Scan(&messages); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM agent_sessions WHERE id = $1 AND state <> 'provisioning'`, session).Scan(&stops); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE account_id = $1 AND action = 'agent.stopped' AND target = $2`,
			acme.ID, "agent session "+session.String()).Scan(&audited); err != nil {
			t.Fatal(err)
		}
		return messages, stops, audited
	}
	others := []struct {
		name      string
		id        uuid.UUID
		starter   string // as the page names who started it
		readOnly  string // what the page says instead of its forms
		refusedBy string // what a refused message or stop says
	}{
		{"Bob's session", bobs, bobEmail, "Only the member who started this session (bob@example.com) or an owner of the account may send it messages or stop it.", "or an owner of the account"},
		{"the key's session", keys, "the API key ci-bot (", "This session was started with the API key ci-bot (", "only the account's owners may"},
		{"the session from before 0029", old, "not recorded", "Who started this session was not recorded", "only the account's owners may"},
	}

	carol := e.browser(t)
	carol.signIn(e, carolEmail, carolPass)
	for _, s := range others {
		id := s.id.String()
		p := carol.get("/agents/" + id)
		body := html.UnescapeString(p.Body)
		if p.Status != http.StatusOK || !strings.Contains(body, `id="session-starter">`+s.starter) ||
			!strings.Contains(body, s.readOnly) || !strings.Contains(body, "You are a member.") ||
			strings.Contains(p.Body, `action="/agents/`+id+`/message"`) || strings.Contains(p.Body, `action="/agents/`+id+`/stop"`) {
			t.Errorf("%s: carol's page (%d) does not show it read-only, started by %q:\n%.3000s", s.name, p.Status, s.starter, p.Body)
		}
		for _, try := range []struct {
			path string
			form url.Values
		}{
			{"/agents/" + id + "/message", url.Values{"text": {"hello from carol"}}},
			{"/agents/" + id + "/stop", url.Values{}},
			{"/agents/" + id + "/stop", confirmed},
		} {
			if p := carol.post(try.path, try.form); p.Status != http.StatusForbidden || !strings.Contains(html.UnescapeString(p.Body), s.refusedBy) {
				t.Errorf("%s: carol's POST %s %v: %d, want 403 saying %q: %.500s", s.name, try.path, try.form, p.Status, s.refusedBy, p.Body)
			}
		}
		if m, st, a := counts(s.id); m != 0 || st != 0 || a != 0 {
			t.Errorf("%s: after carol's refused attempts it has %d messages, %d stops, %d audited stops", s.name, m, st, a)
		}
	}
	if p := carol.post("/approvals/"+prompt+"/approve", nil); p.Status != http.StatusForbidden {
		t.Errorf("carol approves a prompt to bob's session: %d", p.Status)
	}
	if st := e.approvalState(t, prompt); st != "pending" {
		t.Errorf("after carol's attempt the prompt's approval is %s", st)
	}

	// Her own session: the page offers its forms, and she messages and stops it.
	p := carol.get("/agents/" + carols.String())
	if !strings.Contains(p.Body, `id="session-starter">you<`) || !strings.Contains(p.Body, `action="/agents/`+carols.String()+`/message"`) ||
		strings.Contains(p.Body, `id="session-read-only"`) {
		t.Errorf("carol's own session's page does not offer its forms:\n%.3000s", p.Body)
	}
	if p := carol.post("/agents/"+carols.String()+"/message", url.Values{"text": {"hello"}}); p.Status != http.StatusSeeOther {
		t.Errorf("carol messages her own session: %d %.500s", p.Status, p.Body)
	}
	if p := carol.post("/agents/"+carols.String()+"/stop", confirmed); p.Status != http.StatusSeeOther {
		t.Errorf("carol stops her own session: %d %.500s", p.Status, p.Body)
	}
	if m, st, a := counts(carols); m != 1 || st != 1 || a != 1 {
		t.Errorf("carol's own session has %d messages, %d stops, %d audited stops; want 1 each", m, st, a)
	}

	// An owner acts on any session of the account.
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	for _, s := range others {
		id := s.id.String()
		if p := alice.get("/agents/" + id); !strings.Contains(p.Body, `action="/agents/`+id+`/stop"`) || strings.Contains(p.Body, `id="session-read-only"`) {
			t.Errorf("%s: the owner's page does not offer its forms:\n%.3000s", s.name, p.Body)
		}
		if p := alice.post("/agents/"+id+"/message", url.Values{"text": {"hello from alice"}}); p.Status != http.StatusSeeOther {
			t.Errorf("%s: the owner's message: %d %.500s", s.name, p.Status, p.Body)
		}
		if p := alice.post("/agents/"+id+"/stop", confirmed); p.Status != http.StatusSeeOther {
			t.Errorf("%s: the owner's stop: %d %.500s", s.name, p.Status, p.Body)
		}
		if m, st, a := counts(s.id); m != 1 || st != 1 || a != 1 {
			t.Errorf("%s: after the owner's message and stop it has %d messages, %d stops, %d audited stops; want 1 each", s.name, m, st, a)
		}
	}
}
