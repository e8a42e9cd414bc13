package web_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
)

// TestAgentTailEndsAtSignOut: a live tail opened by a signed-in visitor sends nothing more and
// ends once the visitor signs out (or the session is ended on the Sessions page): an event
// written after the sign-out wakes the tail, which checks the web session before sending it.
func TestAgentTailEndsAtSignOut(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	sess := e.agentSession(t, acme.ID, "main")
	e.agentEvent(t, acme.ID, sess, 1, "state", map[string]any{"from": "provisioning", "to": "ready"})
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	events, stop := b.tail(t, sess, "")
	defer stop()
	if ev, ok := next(t, events); !ok || ev.ID != "1" {
		t.Fatalf("the tail's first event: %+v %v", ev, ok)
	}
	if p := b.post("/signout", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", p.Status)
	}
	e.agentEvent(t, acme.ID, sess, 2, "message_in", map[string]any{"message_id": uuid.NewString(), "text": "after the sign-out"})
	if ev, ok := next(t, events); ok {
		t.Fatalf("the tail of a signed-out visitor sent %+v", ev)
	}
}
