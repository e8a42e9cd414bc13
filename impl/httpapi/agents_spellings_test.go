package httpapi_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/sse"
)

// TestAgentIDsOfAnotherAccountInEverySpelling (security review s14h4): TestAgentOwnershipMatrix
// tries another account's slot, session and approval ids as they are written; here they are
// spelt as the routes could read them as the same: a session or approval id in capitals, in
// braces, as a URN or without hyphens (uuid.Parse takes each), a slot name in another case,
// percent-encoded, or with a space or a line feed after it. Each is answered as a name or id
// nobody has (the same 403 on the REST routes, the same tool error on MCP, but for the name),
// and an events stream resumed with Last-Event-ID (or ?after) naming the other account's
// session streams the caller's own session from its start, never the other's events.
func TestAgentIDsOfAnotherAccountInEverySpelling(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	owner := g.NewTenant(t, "owner", 0, 5_000_000)
	intruder := g.NewTenant(t, "intruder", 0, 5_000_000)
	g.AssignSlot(t, owner.Account.ID, "secret")
	g.AssignSlot(t, intruder.Account.ID, "mine")
	oa := newAgentsClient(t, g, owner.Key)
	theirs := oa.spawn("secret", scriptPrompt)
	oa.waitState("secret", "ready")
	text, _ := mcpText(t, mcpSession(t, g, owner.Key), "agent_spawn", map[string]any{"purpose": "owner's plan"})
	approval := regexp.MustCompile(`^Approval (\S+) created`).FindStringSubmatch(text)
	if approval == nil {
		t.Fatalf("agent_spawn: %s", text)
	}
	before, err := g.Agents.Events(ctx, auth.Principal{AccountID: owner.Account.ID}, theirs.SessionID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	ia := newAgentsClient(t, g, intruder.Key)
	mine := ia.spawn("mine", scriptPrompt)
	ia.waitState("mine", "ready")

	// REST: the owner's slot name in other spellings, and a name nobody has.
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/agents/%s/messages", `{"text":"hi"}`},
		{"DELETE", "/v1/agents/%s", ""},
		{"GET", "/v1/agents/%s/events", ""},
	} {
		answer := func(slot string) (int, string) {
			t.Helper()
			status, _, b := ia.do(r.method, strings.Replace(r.path, "%s", slot, 1), r.body, nil)
			return status, string(b)
		}
		ns, nb := answer("nowhere")
		for _, c := range []struct{ path, name string }{
			{"SECRET", "SECRET"}, {"Secret", "Secret"}, {"%73ecret", "secret"}, {"secret%20", "secret "}, {"secret%0A", `secret\n`},
		} {
			s, b := answer(c.path)
			if env := errorEnvelopeOf([]byte(b)); s != http.StatusForbidden || env.Error.Type != "permission_error" ||
				s != ns || strings.Replace(b, c.name, "nowhere", 1) != nb {
				t.Errorf("%s %s: the owner's slot spelt %q: %d %s; a slot nobody has: %d %s", r.method, r.path, c.path, s, b, ns, nb)
			}
		}
	}

	// MCP: the owner's session and approval ids in every spelling, and an id nobody has.
	ics := mcpSession(t, g, intruder.Key)
	for _, c := range []struct {
		tool string
		args func(id string) map[string]any
		id   string
	}{
		{"tail_agent_session", func(id string) map[string]any { return map[string]any{"session_id": id} }, theirs.SessionID},
		{"agent_prompt", func(id string) map[string]any { return map[string]any{"session_id": id, "prompt": "hi"} }, theirs.SessionID},
		{"agent_action_status", func(id string) map[string]any { return map[string]any{"approval_id": id} }, approval[1]},
	} {
		nobodys := uuid.NewString()
		missing, _ := mcpText(t, ics, c.tool, c.args(nobodys))
		for _, id := range []string{strings.ToUpper(c.id), "{" + c.id + "}", "urn:uuid:" + c.id, strings.ReplaceAll(c.id, "-", "")} {
			text, isErr := mcpText(t, ics, c.tool, c.args(id))
			if !isErr || !strings.Contains(text, "is not owned by the caller") || strings.ReplaceAll(text, id, "ID") != strings.ReplaceAll(missing, nobodys, "ID") {
				t.Errorf("%s with the owner's id spelt %s: %q; an id nobody has: %q", c.tool, id, text, missing)
			}
		}
	}

	// The intruder's own stream, resumed at the owner's session: its own session from the start.
	for _, resume := range []struct{ query, header string }{{"?after=" + theirs.SessionID + ":1", ""}, {"", theirs.SessionID + ":1"}} {
		rctx, cancel := context.WithCancel(ctx)
		var h map[string]string
		if resume.header != "" {
			h = map[string]string{"Last-Event-ID": resume.header}
		}
		res := ia.openEvents(rctx, "mine", resume.query, h)
		evs, err := readEvents(t, sse.NewReader(res.Body), 1)
		cancel()
		res.Body.Close()
		if err != nil || len(evs) != 1 || evs[0].SessionID != mine.SessionID || evs[0].Seq != 1 {
			t.Errorf("the intruder's stream resumed at the owner's session (%+v): %+v %v", resume, evs, err)
		}
	}

	// Nothing of the owner's changed: its session has the same events, its approval is pending.
	after, err := g.Agents.Events(ctx, auth.Principal{AccountID: owner.Account.ID}, theirs.SessionID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("the owner's session has %d events, had %d", len(after), len(before))
	}
	if s := oa.waitState("secret", "ready"); s.Session.ID != theirs.SessionID {
		t.Errorf("the owner's slot now runs %+v", *s.Session)
	}
	if text, _ := mcpText(t, mcpSession(t, g, owner.Key), "agent_action_status", map[string]any{"approval_id": approval[1]}); !strings.Contains(text, "is pending") {
		t.Errorf("the owner's approval: %s", text)
	}
}
