package web_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/web/audit"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestAgentsPageSaysWhyASessionEnded: the Agents page and a session's page say why a session
// ended in words a member reads (a key disabled, expired, a connected app's access lost), the
// recorded reason in the title, and the Audit log page names the entry of the sessions a
// cause ended; so does the session's event log (its state event's summary, which the live tail
// sends too). Before, the pages showed the codes (key_revoked for a disabled key too), and the
// event log showed them after the pages said words.
func TestAgentsPageSaysWhyASessionEnded(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, members.RoleOwner)
	cases := map[string]string{
		agent.ReasonKeyDisabled:   "the API key that started it was disabled",
		agent.ReasonKeyExpired:    "the API key that started it expired",
		agent.ReasonAccessRevoked: "the connected app that started it lost its access",
		agent.ReasonMemberRemoved: "the member who started it left the account",
	}
	sessions := map[string]string{}
	for reason := range cases {
		s := e.agentSession(t, acme.ID, "slot-"+reason)
		e.agentEvent(t, acme.ID, s, 1, "state", map[string]any{"from": "provisioning", "to": "ready"})
		e.agentEvent(t, acme.ID, s, 2, "state", map[string]any{"from": "ready", "to": "stopped", "reason": reason})
		sessions[reason] = s.String()
	}
	after, _ := json.Marshal(map[string]any{"reason": agent.ReasonKeyDisabled, "count": 1, "sessions": []string{sessions[agent.ReasonKeyDisabled]}})
	if err := (&audit.Log{Store: e.Store}).Record(context.Background(), audit.Entry{AccountID: acme.ID, Actor: "tollgate",
		Action: audit.ActionAgentSessionsEnded, Target: "key 7f1c0a52-0000-4000-8000-000000000001", After: json.RawMessage(after)}); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	p := b.get("/agents")
	if p.Status != http.StatusOK {
		t.Fatalf("GET /agents: %d %.500s", p.Status, p.Body)
	}
	for reason, words := range cases {
		want := `<span title="` + reason + `">` + words + `</span>`
		if n := strings.Count(p.Body, want); n != 2 {
			t.Errorf("the agents page has %q %d times, want in both tables", want, n)
		}
		s := b.get("/agents/" + sessions[reason])
		if !strings.Contains(s.Body, `<dd id="session-state">stopped (`+want+`)</dd>`) {
			t.Errorf("the session page of one ended with %s lacks its words: %.1500s", reason, s.Body)
		}
		if logged := `<span class="summary">ready → stopped (` + words + `)</span>`; !strings.Contains(html.UnescapeString(s.Body), logged) {
			t.Errorf("the event log of one ended with %s lacks %q: %.3000s", reason, logged, s.Body)
		}
	}
	a := b.get("/audit")
	if body := html.UnescapeString(a.Body); a.Status != http.StatusOK || !strings.Contains(body, `Ended agent sessions <code class="help">agent.sessions_ended</code>`) {
		t.Errorf("the audit log lacks the ending's entry: %d %.3000s", a.Status, body)
	}
}
