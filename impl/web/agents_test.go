package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
	"github.com/tollgate/tollgate/impl/config"
)

// agentSession writes a slot and a ready session of the account in it, as the agent service
// does when one is spawned, and returns the session's id.
func (e *env) agentSession(t *testing.T, account uuid.UUID, slot string) uuid.UUID {
	t.Helper()
	return e.agentSessionStartedBy(t, account, slot, uuid.Nil, uuid.Nil)
}

// agentSessionStartedBy is agentSession of a session that records who started it: the API
// key, or the member on the console (uuid.Nil: not that one; both: a console session from
// before migration 0029, which recorded nobody).
func (e *env) agentSessionStartedBy(t *testing.T, account uuid.UUID, slot string, key, user uuid.UUID) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	q := db.New(e.Store.Pool())
	s, err := q.InsertAgentSlot(ctx, db.InsertAgentSlotParams{AccountID: account, Name: slot})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := q.InsertAgentSession(ctx, db.InsertAgentSessionParams{ID: uuid.New(), AccountID: account,
		SlotID: pgtype.UUID{Bytes: s.ID, Valid: true}, SlotName: slot, Model: "sim-small", Purpose: "tidy the docs",
		MaxTurns: 10, MaxSpendMicros: 2_000_000, MaxDurationSeconds: 600,
		KeyID: pgtype.UUID{Bytes: key, Valid: key != uuid.Nil}, StartedByUser: pgtype.UUID{Bytes: user, Valid: user != uuid.Nil}})
	if err != nil {
		t.Fatal(err)
	}
	return sess.ID
}

// agentEvent appends the session's next event (seq), as the agent service does, and moves
// the session to the state the event says (turns and spend for a model call).
func (e *env) agentEvent(t *testing.T, account, session uuid.UUID, seq int64, kind string, data map[string]any) {
	t.Helper()
	ctx := context.Background()
	raw, _ := json.Marshal(data)
	tx, err := e.Store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	q := db.New(tx)
	s, err := q.GetAgentSessionForUpdate(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.InsertAgentEvent(ctx, db.InsertAgentEventParams{SessionID: session, Seq: seq, AccountID: account, Kind: kind, Data: raw}); err != nil {
		t.Fatal(err)
	}
	up := db.UpdateAgentSessionParams{ID: session, State: s.State, EndReason: s.EndReason, Turns: s.Turns, SpentMicros: s.SpentMicros,
		Step: s.Step, NextSeq: seq + 1, ReadyAt: s.ReadyAt, EndedAt: s.EndedAt}
	now := time.Now()
	switch kind {
	case "state":
		up.State = data["to"].(string)
		if r, ok := data["reason"].(string); ok {
			up.EndReason = r
		}
		if up.State == "ready" && up.ReadyAt == nil {
			up.ReadyAt = &now
		}
		if up.State == "stopped" || up.State == "failed" {
			up.EndedAt = &now
		}
	case "model_call":
		up.Turns++
		up.SpentMicros += int64(data["cost_micros"].(int))
	}
	if err := q.UpdateAgentSession(ctx, up); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAgentsPages: a member sees the account's slot and session (state, model, turns of the
// maximum, spend of the maximum, end reason) and the session's event log, server-rendered with
// the live tail's script and its cursor; another account's session is not found on the page
// and on the tail, as an unknown or malformed id.
func TestAgentsPages(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "member")
	globex := e.account(t, "globex", bobEmail, "owner")
	sess := e.agentSession(t, acme.ID, "main")
	e.agentEvent(t, acme.ID, sess, 1, "state", map[string]any{"from": "provisioning", "to": "ready"})
	e.agentEvent(t, acme.ID, sess, 2, "message_in", map[string]any{"message_id": uuid.NewString(), "text": "please tidy <docs>"})
	e.agentEvent(t, acme.ID, sess, 3, "model_call", map[string]any{"turn": 1, "model": "sim-small", "expert": "sim-small",
		"input_tokens": 120, "output_tokens": 40, "cost_micros": 1500, "request_id": "agt_x_1"})
	theirs := e.agentSession(t, globex.ID, "main")
	// A message with a right-to-left override shows it as its escape, as the Approvals page
	// does, so that it cannot reorder the line (trial h11 D4).
	e.agentEvent(t, acme.ID, sess, 4, "message_in", map[string]any{"message_id": uuid.NewString(), "text": "abc\u202e =cmd"})

	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	p := b.get("/agents")
	for _, want := range []string{`<th scope="row">main</th>`, `href="/agents/` + sess.String() + `"`, "<td>ready</td>", "<td>sim-small</td>",
		"<td>1 / 10</td>", `<td><span class="money" title="$0.001500">&lt; $0.01</span> / <span class="money">$2.00</span></td>`, "tidy the docs"} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("agents page lacks %q", want)
		}
	}
	if p.Status != http.StatusOK || strings.Contains(p.Body, theirs.String()) {
		t.Fatalf("agents page: %d %.3000s", p.Status, p.Body)
	}
	p = b.get("/agents/" + sess.String())
	if strings.Contains(p.Body, "\u202e") {
		t.Errorf("the session page shows a right-to-left override as it is")
	}
	for _, want := range []string{`<li value="1">`, "provisioning → ready", "message: please tidy &lt;docs&gt;", `message: abc\u202e =cmd`,
		"turn 1: sim-small, 120 input and 40 output tokens, $0.001500", `data-tail="/agents/` + sess.String() + `/events?after=4"`,
		`src="/static/agent-tail.js"`, `href="/agents/` + sess.String() + `?after=0">Refresh`} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("session page lacks %q", want)
		}
	}
	if p.Status != http.StatusOK {
		t.Fatalf("session page: %d %.3000s", p.Status, p.Body)
	}
	// Events that follow each other within a minute are told apart: their times have seconds.
	if !regexp.MustCompile(`<li value="1"><time datetime="[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time>`).MatchString(p.Body) {
		t.Errorf("the event's time lacks seconds: %.2000s", p.Body)
	}
	// The after= cursor pages the log without JavaScript.
	if p := b.get("/agents/" + sess.String() + "?after=2"); strings.Contains(p.Body, `<li value="2">`) || !strings.Contains(p.Body, `<li value="3">`) {
		t.Errorf("after=2: %.2000s", p.Body)
	}
	if p := b.get("/static/agent-tail.js"); p.Status != http.StatusOK || !strings.Contains(p.Body, "EventSource") {
		t.Errorf("the tail script: %d", p.Status)
	}
	for _, id := range []string{theirs.String(), uuid.NewString(), "not-a-uuid"} {
		if p := b.get("/agents/" + id); p.Status != http.StatusNotFound {
			t.Errorf("GET /agents/%s: %d", id, p.Status)
		}
		if p := b.get("/agents/" + id + "/events"); p.Status != http.StatusNotFound {
			t.Errorf("GET /agents/%s/events: %d", id, p.Status)
		}
	}
}

// sseEvent is one server-sent event as read.
type sseEvent struct{ ID, Event, Data string }

// tail opens the session's live tail with the browser's session cookie (Last-Event-ID when
// lastID is not empty) and returns a channel of its events, closed when the stream ends, and a
// function that closes the connection.
func (b *browser) tail(t *testing.T, session uuid.UUID, lastID string) (<-chan sseEvent, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.app+"/agents/"+session.String()+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := (&http.Client{Jar: b.c.Jar}).Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		t.Fatalf("tail: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Data != "" || ev.Event != "" {
					select {
					case out <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return out, stop
}

// next reads the tail's next event (failing after a while: the stream stopped sending).
func next(t *testing.T, events <-chan sseEvent) (sseEvent, bool) {
	t.Helper()
	select {
	case ev, ok := <-events:
		return ev, ok
	case <-time.After(30 * time.Second):
		t.Fatal("no event from the tail for 30 s")
	}
	return sseEvent{}, false
}

// TestAgentTailResumes: the live tail sends the events after the cursor, each with its
// sequence number as the id; a reconnection with Last-Event-ID gets the events written while
// it was away, then the new ones as they are written, with no gap and no duplicate; after the
// final state event it says "end" and closes; a reconnection after the end ends at once.
func TestAgentTailResumes(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "member")
	sess := e.agentSession(t, acme.ID, "main")
	e.agentEvent(t, acme.ID, sess, 1, "state", map[string]any{"from": "provisioning", "to": "ready"})
	e.agentEvent(t, acme.ID, sess, 2, "message_in", map[string]any{"message_id": uuid.NewString(), "text": "hello"})
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)

	var seen []int64
	take := func(events <-chan sseEvent) sseEvent {
		t.Helper()
		ev, ok := next(t, events)
		if !ok {
			t.Fatalf("the tail ended after %v", seen)
		}
		if ev.Event == "" {
			var row struct {
				Seq     int64  `json:"seq"`
				Kind    string `json:"kind"`
				Summary string `json:"summary"`
			}
			if err := json.Unmarshal([]byte(ev.Data), &row); err != nil {
				t.Fatalf("event data %q: %v", ev.Data, err)
			}
			if ev.ID != strconv.FormatInt(row.Seq, 10) || row.Kind == "" || row.Summary == "" {
				t.Fatalf("event %+v: %+v", ev, row)
			}
			seen = append(seen, row.Seq)
		}
		return ev
	}

	events, stop := b.tail(t, sess, "")
	take(events)
	take(events)
	// Written while the tail is open: it is woken for it.
	e.agentEvent(t, acme.ID, sess, 3, "message_out", map[string]any{"turn": 1, "text": "hi"})
	last := take(events)
	stop()
	// Written while nobody follows.
	e.agentEvent(t, acme.ID, sess, 4, "message_in", map[string]any{"message_id": uuid.NewString(), "text": "again"})
	e.agentEvent(t, acme.ID, sess, 5, "model_call", map[string]any{"turn": 2, "model": "sim-small", "input_tokens": 1, "output_tokens": 1, "cost_micros": 10})

	events, _ = b.tail(t, sess, last.ID)
	take(events)
	take(events)
	e.agentEvent(t, acme.ID, sess, 6, "state", map[string]any{"from": "ready", "to": "stopping", "reason": "user_stop"})
	take(events)
	e.agentEvent(t, acme.ID, sess, 7, "state", map[string]any{"from": "stopping", "to": "stopped", "reason": "user_stop"})
	take(events)
	if ev := take(events); ev.Event != "end" {
		t.Fatalf("after the final state: %+v", ev)
	}
	if _, ok := next(t, events); ok {
		t.Fatal("the tail goes on after its end")
	}
	if got, want := fmt.Sprint(seen), "[1 2 3 4 5 6 7]"; got != want {
		t.Fatalf("events received %s, want %s (no gap, no duplicate)", got, want)
	}
	// A browser reconnecting after the end is told at once.
	events, _ = b.tail(t, sess, "7")
	if ev := take(events); ev.Event != "end" {
		t.Fatalf("reconnecting after the end: %+v", ev)
	}
}

// TestAgentsPageOffersASimulatorScript: when the sessions' model is played by the built-in
// simulator (the default configuration, as under make run), the Agents page says that a plain
// question gets placeholder words and offers a first message with a script, which calls a tool
// of every account; when an upstream of the model is a real provider, the form is as before
// (newcomer trial h1: a first session started on the console with a plain question answered
// "signal river drift jasper …", and nothing said why). The hint links to a disclosure on the
// page that says how a script plays the model (last session's newcomer walk: the hint named
// "docs/agents.md" as plain text, which the console does not serve).
func TestAgentsPageOffersASimulatorScript(t *testing.T) {
	const example = `Which datasets does this account have? [[sim script: call list_storage_datasets {}]]`
	for _, c := range []struct {
		name      string
		tune      func(*config.Config)
		simulated bool
	}{
		{"simulated", func(*config.Config) {}, true},
		{"one real expert", func(cfg *config.Config) {
			m, _ := cfg.Model(cfg.Agents.Model(cfg))
			cfg.Providers[slices.IndexFunc(cfg.Providers, func(p config.Provider) bool { return p.Name == m.Experts[0].Provider })].BaseURL = "https://api.example.com/v1"
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := startConfig(t, c.tune)
			acme := e.account(t, "acme", aliceEmail, "owner")
			if _, err := db.New(e.Store.Pool()).InsertAgentSlot(context.Background(), db.InsertAgentSlotParams{AccountID: acme.ID, Name: "main"}); err != nil {
				t.Fatal(err)
			}
			b := e.browser(t)
			b.signIn(e, aliceEmail, alicePass)
			p := b.get("/agents")
			if p.Status != http.StatusOK || !strings.Contains(p.Body, `name="prompt"`) {
				t.Fatalf("agents page: %d %.3000s", p.Status, p.Body)
			}
			offered := strings.Contains(p.Body, `aria-describedby="simulated">`+html.EscapeString(example)+`</textarea>`)
			said := strings.Contains(p.Body, "played by the built-in upstream simulator")
			if offered != c.simulated || said != c.simulated {
				t.Errorf("the example offered: %v, the simulator named: %v; want %v:\n%.4000s", offered, said, c.simulated, p.Body)
			}
			// How a script plays the model is on the page, which the hint links to; the
			// documents are named as files of tollgate's source, not as a bare path.
			body := html.UnescapeString(p.Body)
			explained := strings.Contains(body, `…]]</code>: <a href="#sim-script">how a script plays the model</a>)`) &&
				strings.Contains(body, `<details id="sim-script"><summary>How a script plays the model</summary>`) &&
				strings.Contains(body, `then answers “Answer from <tool>: …”, quoting the last tool's result`) &&
				strings.Contains(body, "<code>docs/agents.md</code> and <code>impl/sim/doc.go</code> in tollgate's source")
			if explained != c.simulated || strings.Contains(body, ", docs/agents.md)") {
				t.Errorf("the script explained on the page: %v, want %v; a bare docs path: %v\n%.5000s", explained, c.simulated,
					strings.Contains(body, ", docs/agents.md)"), body)
			}
		})
	}
}

// TestAgentStartRecordsTheMember: a session started on the Agents page records the member who
// started it (agent_sessions.started_by_user), which each of its steps checks is still in the
// account (impl/agent's TestConsoleSessionEndsWhenItsMemberIsRemoved). Before, it recorded
// nobody and outlived a removed member.
func TestAgentStartRecordsTheMember(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "member")
	ctx := context.Background()
	if _, err := db.New(e.Store.Pool()).InsertAgentSlot(ctx, db.InsertAgentSlotParams{AccountID: acme.ID, Name: "main"}); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	if p := b.post("/agents/start", url.Values{"account_id": {acme.ID.String()}, "slot": {"main"}, "prompt": {"tidy the docs"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("starting a session: %d %.500s", p.Status, p.Body)
	}
	var starter, alice uuid.UUID
	if err := e.Store.Pool().QueryRow(ctx, "SELECT started_by_user FROM agent_sessions WHERE account_id = $1", acme.ID).Scan(&starter); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.Pool().QueryRow(ctx, "SELECT id FROM users WHERE email = $1", aliceEmail).Scan(&alice); err != nil {
		t.Fatal(err)
	}
	if starter != alice {
		t.Fatalf("the session records %s as its starter, want alice (%s)", starter, alice)
	}
}

// TestAgentsPageSaysWhyNoSessionCanStart: when every slot of the account runs a session, the
// Agents page has no form to start one, and says so with what to do: open the slot's session
// to message it, or stop it there to start another. Before, the form just vanished (newcomer
// walk s11h3: after a first session in make run's one slot, the page offered nothing to start
// and said nothing about why); with a slot free, the form is there and the sentence is not.
func TestAgentsPageSaysWhyNoSessionCanStart(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	sess := e.agentSession(t, acme.ID, "main")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	const why = `<p id="no-free-slot">Every slot runs a session, so none can be started now: open a slot's session below to send it a message, or stop it there to start a new one in its slot.</p>`
	p := b.get("/agents")
	if p.Status != http.StatusOK || strings.Contains(p.Body, `name="prompt"`) || !strings.Contains(p.Body, why) ||
		!strings.Contains(p.Body, `href="/agents/`+sess.String()+`"`) {
		t.Fatalf("every slot busy: the agents page (%d) does not say why no session can start:\n%.3000s", p.Status, p.Body)
	}
	if _, err := db.New(e.Store.Pool()).InsertAgentSlot(context.Background(), db.InsertAgentSlotParams{AccountID: acme.ID, Name: "spare"}); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/agents"); !strings.Contains(p.Body, `name="prompt"`) || strings.Contains(p.Body, `id="no-free-slot"`) {
		t.Errorf("a slot free: the agents page lacks the form or says none can start:\n%.3000s", p.Body)
	}
}
