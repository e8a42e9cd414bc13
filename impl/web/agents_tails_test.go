package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
)

// TestAgentLiveTailsAreBoundedOnTheConsole: the console's live views of an account's sessions
// count against agents.max_live_tails (1 here) as the API's events streams do: with one tail
// open, another is refused with 429, Retry-After and a page saying so; once the first browser
// leaves, its tail is given back and a new one is served.
func TestAgentLiveTailsAreBoundedOnTheConsole(t *testing.T) {
	e := startConfig(t, func(c *config.Config) { c.Agents.MaxLiveTails = 1 })
	acme := e.account(t, "acme", aliceEmail, "owner")
	sess := e.agentSession(t, acme.ID, "main")
	e.agentEvent(t, acme.ID, sess, 1, "state", map[string]any{"from": "provisioning", "to": "ready"})
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	events, stop := b.tail(t, sess, "")
	if ev, ok := next(t, events); !ok || ev.ID != "1" {
		t.Fatalf("the tail's first event: %+v %v", ev, ok)
	}
	p := b.do(http.MethodGet, "/agents/"+sess.String()+"/events", nil, map[string]string{"Accept": "text/event-stream"})
	if p.Status != http.StatusTooManyRequests || p.Header.Get("Retry-After") == "" || !strings.Contains(p.Body, "agents.max_live_tails") {
		t.Fatalf("a second tail: %d Retry-After %q %.500s, want 429 naming the bound", p.Status, p.Header.Get("Retry-After"), p.Body)
	}
	stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodGet, b.app+"/agents/"+sess.String()+"/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "text/event-stream")
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close() // the headers say whether it is served
		if resp.StatusCode == http.StatusOK {
			break
		}
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("a tail after the first browser left: %d, want 200 within 10 s", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
