package browser_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestAgentFromTheConsole: a member gets to a working agent on the console alone (trial h6:
// the Agents page could only show sessions, so a person had to leave it for curl or an MCP
// client): from the home page's "Start an agent" (s11h3: a key was its only next step) to the
// Agents page, where the simulator's hint's link opens How a script plays the model (it only
// scrolled to the closed disclosure), and she starts a session in a free slot with a first message, lands on its
// page, sees the answer arrive in the live log, sends a second message, which the agent
// answers too, and stops the session. The audit log names both actions.
func TestAgentFromTheConsole(t *testing.T) {
	s := start(t)
	operator, err := agent.New(agent.Options{Store: s.GW.Store, Config: s.GW.Config})
	if err != nil {
		t.Fatal(err)
	}
	if err := operator.AssignSlot(context.Background(), s.Account.ID, "main"); err != nil {
		t.Fatal(err)
	}
	p := newTour(t)
	s.signIn(p)
	p.at(p.Follow("Start an agent"), http.StatusOK, s.URL+"/agents")
	// The page as a newcomer first sees it: a free slot, the form to start a session and the
	// simulator's hint with its link (docs/screenshots/agents.png).
	p.shot("agents")
	// The simulator's hint links to How a script plays the model, a disclosure below it:
	// following the link opens it (it scrolled to the closed disclosure and left it closed).
	if eval[bool](p, `document.getElementById("sim-script").open`) {
		t.Error("How a script plays the model is open before its link is followed")
	}
	p.Do(chromedp.Click(chromedp.CSS(`#simulated a[href="#sim-script"]`)))
	for deadline := time.Now().Add(5 * time.Second); !eval[bool](p, `document.getElementById("sim-script").open`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("after its link is followed, How a script plays the model is still closed")
		}
	}
	if got := p.Text("#sim-script p"); !strings.Contains(got, "The simulated model then calls the tools in order") {
		t.Errorf("the opened disclosure says %q", got)
	}
	p.Select("Slot", "main")
	p.Fill("First message", "Say hello to the console.")
	p.shot("agent-start")
	if status := p.Submit("Start"); status != http.StatusOK || !strings.HasPrefix(p.URL(), s.URL+"/agents/") {
		t.Fatalf("after Start: %d at %s:\n%s", status, p.URL(), p.Text("body"))
	}
	session := p.URL()
	waitEvents := func(what string, n int) {
		t.Helper()
		var events string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if events = p.Text("#events"); strings.Count(events, "message_out") >= n {
				return
			}
		}
		t.Fatalf("%s: the session's page shows %d answers, want %d:\n%s", what, strings.Count(events, "message_out"), n, events)
	}
	waitEvents("the first turn", 1)
	// The summary follows the live log (trial h6: it kept the state the page was loaded with),
	// its spend too: it said $0.00 beside a model call that cost $0.000204, which the console's
	// money never says of an amount spent ("< $0.01" for less than a cent).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if p.Text("#session-state") == "ready" && strings.HasPrefix(p.Text("#session-turns"), "1 /") && p.Text("#session-spend") == "< $0.01" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after the first turn the summary says %q, %q, spend %q", p.Text("#session-state"), p.Text("#session-turns"), p.Text("#session-spend"))
		}
	}
	if strings.Contains(p.Text("#events"), "state  →") {
		t.Errorf("the first state event names an empty state:\n%s", p.Text("#events"))
	}
	p.shot("agent-answered")

	p.Fill("Message", "Thanks! And once more.")
	p.at(p.Submit("Send"), http.StatusOK, session)
	if got := p.Text("[role=status]"); !strings.HasPrefix(got, "Message sent") {
		t.Errorf("after Send, the page says %q", got)
	}
	waitEvents("the second turn", 2)

	// Stopping asks first, saying what it ends.
	p.at(p.Submit("Stop the session"), http.StatusOK, session+"/stop")
	if got := p.Text("#confirm-what"); !strings.Contains(got, "stops: at once when it waits for a message") {
		t.Errorf("the confirmation says %q", got)
	}
	p.at(p.Submit("Stop the session"), http.StatusOK, session)
	if got := p.Text("main"); !strings.Contains(got, "Stopping") {
		t.Errorf("after Stop, the page says:\n%s", got)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		p.at(p.Navigate(session), http.StatusOK, session)
		if state := p.Text("#session-state"); strings.HasPrefix(state, "stopped") {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the session is %q 30 s after Stop", state)
		}
	}
	// The page's live updates may have written "stopped" into a page the server rendered while
	// the session was still stopping; a page rendered now shows it ended.
	p.at(p.Navigate(session), http.StatusOK, session)
	if strings.Contains(p.Text("main"), "Stop the session") {
		t.Error("an ended session still offers Stop")
	}
	p.shot("agent-stopped")
	p.at(p.Follow("Audit log"), http.StatusOK, s.URL+"/audit")
	if got := p.Text("main"); !strings.Contains(got, "Started an agent session") || !strings.Contains(got, "Stopped an agent session") {
		t.Errorf("the audit log does not name the start and the stop:\n%s", got)
	}
}

// TestMemberSessionReadOnlyInTheBrowser: a member sees another person's agent session but
// cannot drive it, and drives their own; an owner drives any. Alice (an owner) starts a session
// on the Agents page; Bob, a member, opens it: the page says Alice started it and that only she
// or an owner may send it messages or stop it, and offers neither Send nor Stop (before, it
// offered both to any member, and both worked). Bob starts his own session, whose page says he
// started it, and sends it a message. Alice opens Bob's session and stops it (confirmed).
func TestMemberSessionReadOnlyInTheBrowser(t *testing.T) {
	s := startWithBob(t)
	offers := func(p *tour) (send, stop bool) {
		t.Helper()
		return eval[bool](p, `[...document.querySelectorAll("main button")].some((b) => b.textContent.trim() === "Send")`),
			eval[bool](p, `[...document.querySelectorAll("main button")].some((b) => b.textContent.trim() === "Stop the session")`)
	}

	ap := newNamedTour(t, "alice")
	s.signIn(ap)
	alices := s.startAgentSession(ap, "main", "Say hello to the console.")

	bp := newNamedTour(t, "bob")
	s.signInAs(bp, bob)
	bp.at(bp.Navigate(alices), http.StatusOK, alices)
	if send, stop := offers(bp); send || stop {
		t.Errorf("Alice's session's page offers Bob Send (%v) or Stop the session (%v)", send, stop)
	}
	if got := bp.Text("#session-starter"); got != "Alice (alice@example.com)" {
		t.Errorf("Bob reads that Alice's session was started by %q", got)
	}
	if got := bp.Text("#session-read-only"); !strings.Contains(got, "Only the member who started this session (Alice (alice@example.com)) or an owner of the account may send it messages or stop it.") ||
		!strings.Contains(got, "You are a member.") {
		t.Errorf("Alice's session's page tells Bob %q", got)
	}
	bp.shot("member-read-only")

	bobs := s.startAgentSession(bp, "bobs", "Say hello to Bob.")
	if got := bp.Text("#session-starter"); got != "you" {
		t.Errorf("Bob's own session says it was started by %q", got)
	}
	if send, stop := offers(bp); !send || !stop {
		t.Fatalf("Bob's own session's page offers Send %v, Stop the session %v", send, stop)
	}
	bp.Fill("Message", "And once more.")
	bp.at(bp.Submit("Send"), http.StatusOK, bobs)
	if got := bp.Text("[role=status]"); !strings.HasPrefix(got, "Message sent") {
		t.Errorf("after Bob's Send, the page says %q", got)
	}

	ap.at(ap.Navigate(bobs), http.StatusOK, bobs)
	if got := ap.Text("#session-starter"); got != "Bob (bob@example.com)" {
		t.Errorf("Alice reads that Bob's session was started by %q", got)
	}
	ap.at(ap.Submit("Stop the session"), http.StatusOK, bobs+"/stop")
	ap.at(ap.Submit("Stop the session"), http.StatusOK, bobs)
	if got := ap.Text("main"); !strings.Contains(got, "Stopping") {
		t.Errorf("after the owner's Stop, the page says:\n%s", got)
	}
}

// TestAgentsListSaysWhoStartedEach: the Agents page's list of sessions says who started each,
// so that a member sees which are theirs to act on (before, only a session's own page said
// it). Alice, an owner, starts a session; Bob, a member, starts one in another slot: on his
// Agents page Alice's row reads "Alice (alice@example.com)" and his "you", and on hers his
// reads "Bob (bob@example.com)". At a phone's width (375 CSS pixels) the page is no wider than
// the screen (the table scrolls within itself, TestNarrowScreen).
func TestAgentsListSaysWhoStartedEach(t *testing.T) {
	s := startWithBob(t)
	startSession := func(p *tour, slot, message string) string {
		t.Helper()
		return strings.TrimPrefix(s.startAgentSession(p, slot, message), s.URL+"/agents/")
	}
	// startedBy is the Started by column of the Agents list, by session id.
	startedBy := func(p *tour) map[string]string {
		t.Helper()
		p.at(p.Navigate(s.URL+"/agents"), http.StatusOK, s.URL+"/agents")
		rows := eval[[][]string](p, `(() => {
			const table = [...document.querySelectorAll("main table")].find((t) => t.caption && t.caption.textContent.startsWith("Sessions"));
			const col = [...table.tHead.rows[0].cells].findIndex((c) => c.textContent.trim() === "Started by");
			return [...table.tBodies[0].rows].map((r) => [r.querySelector("a").title, col < 0 ? "(no Started by column)" : r.cells[col].textContent.trim()]);
		})()`)
		out := map[string]string{}
		for _, r := range rows {
			out[r[0]] = r[1]
		}
		return out
	}

	ap := newNamedTour(t, "alice")
	s.signIn(ap)
	alices := startSession(ap, "main", "Say hello to the console.")
	bp := newNamedTour(t, "bob")
	s.signInAs(bp, bob)
	bobs := startSession(bp, "bobs", "Say hello to Bob.")

	if got := startedBy(bp); got[alices] != "Alice (alice@example.com)" || got[bobs] != "you" {
		t.Errorf("Bob's Agents list says the sessions were started by %v; want Alice's by Alice (alice@example.com) and his by you", got)
	}
	bp.shot("agents-started-by")
	if got := startedBy(ap); got[alices] != "you" || got[bobs] != "Bob (bob@example.com)" {
		t.Errorf("Alice's Agents list says the sessions were started by %v; want hers by you and Bob's by Bob (bob@example.com)", got)
	}
	bp.Do(chromedp.EmulateViewport(375, 800))
	bp.at(bp.Navigate(s.URL+"/agents"), http.StatusOK, s.URL+"/agents")
	if width := bp.width(); width > 375 {
		bp.shot("agents-narrow")
		t.Errorf("the Agents page with its Started by column is %d pixels wide on a 375-pixel screen", width)
	}
}

// TestStoppingSessionPage: a session stopping (its stop waiting for the model call in flight,
// which the simulator stalls) offers neither Send nor Stop: its page says it is stopping and
// waiting for the step in flight in their place, and the Agents list shows it stopping with no
// action; once stopped, the page shows neither the forms nor that line. Before, the page of a
// stopping session still offered Stop (which changed nothing) and Send (which is refused).
func TestStoppingSessionPage(t *testing.T) {
	s := start(t)
	operator, err := agent.New(agent.Options{Store: s.GW.Store, Config: s.GW.Config})
	if err != nil {
		t.Fatal(err)
	}
	if err := operator.AssignSlot(context.Background(), s.Account.ID, "main"); err != nil {
		t.Fatal(err)
	}
	p := newTour(t)
	s.signIn(p)
	p.at(p.Navigate(s.URL+"/agents"), http.StatusOK, s.URL+"/agents")
	p.Select("Slot", "main")
	p.Fill("First message", "Take your time. [[sim fault=stall_before ms=6000]]")
	calls := s.GW.Sim.TotalRequests()
	if status := p.Submit("Start"); status != http.StatusOK || !strings.HasPrefix(p.URL(), s.URL+"/agents/") {
		t.Fatalf("after Start: %d at %s:\n%s", status, p.URL(), p.Text("body"))
	}
	session := p.URL()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		p.at(p.Navigate(session), http.StatusOK, session)
		if p.Text("#session-state") == agent.StateBusy {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the session is %q, not busy", p.Text("#session-state"))
		}
	}
	// Its model call in flight (a stop before the call would end it at the step's start).
	for deadline := time.Now().Add(30 * time.Second); s.GW.Sim.TotalRequests() == calls; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the session's model call did not start")
		}
	}
	p.at(p.Submit("Stop the session"), http.StatusOK, session+"/stop")
	p.at(p.Submit("Stop the session"), http.StatusOK, session)
	if state := p.Text("#session-state"); !strings.HasPrefix(state, agent.StateStopping) {
		t.Fatalf("after Stop the session is %q (the model call should still be in flight)", state)
	}
	forms := func() int {
		return eval[int](p, `document.querySelectorAll('main form[action$="/stop"], main form[action$="/message"]').length`)
	}
	// A page rendered while stopping, not only the one Stop went back to.
	p.at(p.Navigate(session), http.StatusOK, session)
	if state := p.Text("#session-state"); !strings.HasPrefix(state, agent.StateStopping) {
		t.Fatalf("the session is %q before the model call's stall ended", state)
	}
	if n := forms(); n != 0 {
		t.Errorf("the page of a stopping session offers %d forms (Send, Stop):\n%s", n, p.Text("main"))
	}
	if got := waitText(p, "#session-stopping"); got != "Stopping… (waiting for the step in flight)" {
		t.Errorf("the page of a stopping session says %q", got)
	}
	p.at(p.Navigate(s.URL+"/agents"), http.StatusOK, s.URL+"/agents")
	if got := p.Text("main table.named tbody tr"); !strings.Contains(got, agent.StateStopping) {
		t.Errorf("the Agents list's slot row says %q, not stopping", got)
	}
	if n := eval[int](p, `document.querySelectorAll('main form[action$="/stop"]').length`); n != 0 {
		t.Errorf("the Agents list offers %d Stop forms for a stopping session", n)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		p.at(p.Navigate(session), http.StatusOK, session)
		if state := p.Text("#session-state"); strings.HasPrefix(state, agent.StateStopped) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the session is %q 30 s after Stop", state)
		}
	}
	if n := forms(); n != 0 {
		t.Errorf("the page of a stopped session offers %d forms", n)
	}
	if n := eval[int](p, `document.querySelectorAll("#session-stopping").length`); n != 0 {
		t.Errorf("the page of a stopped session still says it is stopping: %q", p.Text("main"))
	}
}

// startWithBob is the site of start with the agent slots "main" and "bobs" assigned to its
// account and Bob added to it as a member, for the tests of who may act on whose session.
func startWithBob(t *testing.T) *site {
	t.Helper()
	s := start(t)
	ctx := context.Background()
	operator, err := agent.New(agent.Options{Store: s.GW.Store, Config: s.GW.Config})
	if err != nil {
		t.Fatal(err)
	}
	for _, slot := range []string{"main", "bobs"} {
		if err := operator.AssignSlot(ctx, s.Account.ID, slot); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := members.New(s.GW.Store, nil).Add(ctx, s.Account.ID, bob.Email, members.RoleMember); err != nil {
		t.Fatal(err)
	}
	return s
}

// startAgentSession starts a session in slot from the Agents page of p with its first
// message, and returns the URL of the session's page, where Start leads.
func (s *site) startAgentSession(p *tour, slot, message string) string {
	p.t.Helper()
	p.at(p.Navigate(s.URL+"/agents"), http.StatusOK, s.URL+"/agents")
	p.Select("Slot", slot)
	p.Fill("First message", message)
	if status := p.Submit("Start"); status != http.StatusOK || !strings.HasPrefix(p.URL(), s.URL+"/agents/") {
		p.t.Fatalf("after Start in slot %s: %d at %s:\n%s", slot, status, p.URL(), p.Text("body"))
	}
	return p.URL()
}
