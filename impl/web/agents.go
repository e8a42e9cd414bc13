package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/plaintext"
	"github.com/tollgate/tollgate/impl/sse"
)

// The Agents page: the account's slots and sessions (state, model, turns, spend, end reason),
// and a page per session with its event log. The log is server-rendered (a "refresh" link and
// an after= cursor work without JavaScript); static/agent-tail.js follows the session's live
// tail, GET /agents/{session}/events, a text/event-stream behind the same web session:
// each event carries its sequence number as the SSE id, so a reconnecting EventSource resumes
// with Last-Event-ID, without a gap and without a duplicate.

func (a *App) agentsRoutes(mux *router) {
	mux.Handle("GET /agents", a.member(a.agentsPage))
	mux.Handle("POST /agents/start", a.member(a.startAgent))
	mux.Handle("GET /agents/{session}", a.member(a.agentSessionPage))
	mux.Handle("GET /agents/{session}/events", a.member(a.agentTail))
	mux.Handle("POST /agents/{session}/message", a.member(a.messageAgent))
	mux.Handle("POST /agents/{session}/stop", a.member(a.stopAgent))
}

// Audited actions of the agent controls.
const (
	actionAgentStarted = "agent.started"
	actionAgentStopped = "agent.stopped"
)

// startAgent starts a session in the form's slot with its first message (the page's "Start a
// session"), as POST /v1/agents does for a key, and opens the session's page. The member acts
// for the account with no key: no key's limits bind the session, as for the member's other
// actions on the console; the session's own bounds (turns, spend, duration) hold. The session
// records the member, and ends (member_removed) at its next step once they leave the account.
func (a *App) startAgent(w http.ResponseWriter, r *http.Request, v *Visitor) {
	if a.agents == nil {
		a.fail(w, r, v, http.StatusNotFound, "Agents are not available on this gateway.")
		return
	}
	slot, prompt := strings.TrimSpace(r.PostFormValue("slot")), r.PostFormValue("prompt")
	res, err := a.agents.SpawnForMember(r.Context(), principal(v), v.User.ID, slot, prompt)
	if err != nil {
		a.failAgentAction(w, r, v, "start an agent session", err)
		return
	}
	a.record(r, v, actionAgentStarted, "agent session "+res.SessionID, nil, map[string]any{"slot": res.Slot})
	http.Redirect(w, r, "/agents/"+res.SessionID, http.StatusSeeOther)
}

// messageAgent sends the form's text to the {session}, which must be its slot's live session.
func (a *App) messageAgent(w http.ResponseWriter, r *http.Request, v *Visitor) {
	s, ok := a.liveSession(w, r, v)
	if !ok {
		return
	}
	if _, err := a.agents.SendSessionMessage(r.Context(), principal(v), s.Slot, uuid.MustParse(s.ID), r.PostFormValue("text")); err != nil {
		a.failAgentAction(w, r, v, "send an agent message", err)
		return
	}
	http.Redirect(w, r, "/agents/"+s.ID+"?sent=1", http.StatusSeeOther)
}

// stopAgent asks the {session} to stop (at once when it waits, at its next step when busy).
func (a *App) stopAgent(w http.ResponseWriter, r *http.Request, v *Visitor) {
	s, ok := a.liveSession(w, r, v)
	if !ok {
		return
	}
	// A session stopping already ends whatever is confirmed, so it is not asked about: the
	// service answers the stop under way and changes nothing, or, when none is (a bound or a
	// revocation stops the session, or a stop's command failed), carries this one out.
	if s.State == agent.StateStopping {
		a.requestStop(w, r, v, s)
		return
	}
	// Confirmed first, as a key's revocation is (newcomer trial: Stop acted on one click).
	what := "The session in slot " + s.Slot + " (" + s.Model
	if s.Purpose != "" {
		what += ": " + s.Purpose
	}
	if !a.confirmed(w, r, v, confirmation{Title: "Stop the session in slot " + s.Slot + "?", Action: "/agents/" + s.ID + "/stop",
		Button: "Stop the session", Back: "/agents/" + s.ID, Consequences: []string{
			what + ") stops: at once when it waits for a message, else when its turn in progress ends; it makes no further model call.",
			"A stopped session cannot be started again: its slot takes a new session. What it spent (" + moneyText(s.SpentMicros) + ") stays billed.",
		}}) {
		return
	}
	a.requestStop(w, r, v, s)
}

// requestStop asks the service to stop session s and goes back to its page: a stop that changed
// nothing (the session was stopping already, with a stop under way: another tab's, or the
// API's) says so and is not audited, as nothing was done; any other is audited
// (agent.stopped).
func (a *App) requestStop(w http.ResponseWriter, r *http.Request, v *Visitor, s agent.SessionView) {
	res, err := a.agents.StopSession(r.Context(), principal(v), s.Slot, uuid.MustParse(s.ID))
	if err != nil {
		a.failAgentAction(w, r, v, "stop an agent session", err)
		return
	}
	if res.Repeated {
		http.Redirect(w, r, "/agents/"+s.ID+"?stopping=already", http.StatusSeeOther)
		return
	}
	a.record(r, v, actionAgentStopped, "agent session "+s.ID, map[string]any{"state": s.State}, map[string]any{"state": "stopping"})
	http.Redirect(w, r, "/agents/"+s.ID+"?stopping=1", http.StatusSeeOther)
}

// liveSession is the {session} of the visitor's account when the visitor may act on it
// (mayControlSession) and it is its slot's live session; otherwise it answers (not found, 403
// saying who may act on it, or a conflict naming the state) and reports false.
func (a *App) liveSession(w http.ResponseWriter, r *http.Request, v *Visitor) (agent.SessionView, bool) {
	if a.agents == nil {
		a.noSession(w, r, v)
		return agent.SessionView{}, false
	}
	s, err := a.findSession(r.Context(), principal(v), r.PathValue("session"))
	if err != nil {
		a.failAgent(w, r, v, "agent session", err)
		return agent.SessionView{}, false
	}
	if !mayControlSession(s, v) {
		a.fail(w, r, v, http.StatusForbidden, a.sessionControlOf(r, s, v).Refusal)
		return agent.SessionView{}, false
	}
	if agent.Ended(s.State) {
		a.fail(w, r, v, http.StatusConflict, "This session has ended ("+endReasonText(s.EndReason)+"); start a new one on the Agents page.")
		return agent.SessionView{}, false
	}
	return s, true
}

// mayControlSession reports whether the visitor may send messages to session s and stop it on
// the console: owners any session of the account, members only the sessions they started on
// the console (agent_sessions.started_by_user), as on Connected apps owners revoke any grant and
// members the ones they allowed. A session started with an API key or by a connected app, and
// a console session from before migration 0029 (which recorded nobody), is the owners' alone
// on the console; a member sees it (its page and its live tail) but cannot act on it. The API
// routes are not the console's: there a key's own rules apply (impl/agent's mayDrive).
func mayControlSession(s agent.SessionView, v *Visitor) bool {
	return v.Owner() || s.StartedByUser != uuid.Nil && v.User != nil && s.StartedByUser == v.User.ID
}

// sessionControl is who started a session and what the visitor may do with it, as the
// session's page says it.
type sessionControl struct {
	// StartedBy names who started the session: "you", a member, an API key, a connected app,
	// or that it was not recorded.
	StartedBy string
	// May is mayControlSession: the visitor may send the session messages and stop it.
	May bool
	// Refusal says, when the visitor may not, who may: the session's page shows it in place
	// of its forms, and a refused message or stop answers it (403).
	Refusal string
}

// sessionControlOf is the visitor's sessionControl of s, naming its starter from the account's
// members, keys and connected apps.
func (a *App) sessionControlOf(r *http.Request, s agent.SessionView, v *Visitor) sessionControl {
	c := sessionControl{May: mayControlSession(s, v), StartedBy: a.starterNames(r, v).of(s)}
	const act = "only the account's owners may send it messages or stop it on this console"
	switch {
	case s.StartedByUser != uuid.Nil:
		c.Refusal = "Only the member who started this session (" + c.StartedBy + ") or an owner of the account may send it messages or stop it."
	case s.StartedByKey != uuid.Nil:
		c.Refusal = "This session was started with " + c.StartedBy + ": " + act + "."
	case s.StartedByGrant != uuid.Nil:
		c.Refusal = "This session was started by " + c.StartedBy + ": " + act + "."
	default:
		c.Refusal = "Who started this session was not recorded (it was started before tollgate recorded it): " + act + "."
	}
	if !c.May && v.Account != nil {
		c.Refusal += " You are a " + v.Account.Role + "."
	}
	return c
}

// starterNamer names who started sessions as the pages say it (sessionControl.StartedBy):
// "you", a member, an API key by name and prefix, a connected app and who allowed it, or that
// it was not recorded. It reads each member, the account's keys and each grant once, however
// many sessions of the Agents list it names.
type starterNamer struct {
	a      *App
	r      *http.Request
	v      *Visitor
	users  map[uuid.UUID]string
	keys   keyNamer
	grants map[uuid.UUID]string
}

// starterNames is a starterNamer for the visitor's account.
func (a *App) starterNames(r *http.Request, v *Visitor) *starterNamer {
	return &starterNamer{a: a, r: r, v: v, users: map[uuid.UUID]string{}, grants: map[uuid.UUID]string{}}
}

// of names who started s.
func (n *starterNamer) of(s agent.SessionView) string {
	switch {
	case s.StartedByUser != uuid.Nil:
		if n.v.User != nil && s.StartedByUser == n.v.User.ID {
			return "you"
		}
		if name, ok := n.users[s.StartedByUser]; ok {
			return name
		}
		name := "user " + s.StartedByUser.String()
		if u, err := n.a.members.User(n.r.Context(), s.StartedByUser); err == nil {
			name = personName(&u)
		}
		n.users[s.StartedByUser] = name
		return name
	case s.StartedByKey != uuid.Nil:
		if n.keys == nil {
			if keys, err := n.a.keyNames(n.r, n.v.Account.AccountID); err == nil {
				n.keys = keys
			} else {
				return "the API key " + s.StartedByKey.String()
			}
		}
		return "the API key " + n.keys.name(s.StartedByKey.String())
	case s.StartedByGrant != uuid.Nil:
		if name, ok := n.grants[s.StartedByGrant]; ok {
			return name
		}
		name := "a connected app"
		if n.a.oauth != nil {
			if g, err := n.a.oauth.Grant(n.r.Context(), n.v.Account.AccountID, s.StartedByGrant); err == nil {
				row := grantRowOf(g, n.v)
				name = "the connected app " + row.Client + ", allowed by " + row.Member
			}
		}
		n.grants[s.StartedByGrant] = name
		return name
	}
	return "not recorded (started on this console before tollgate recorded who starts a session)"
}

// failAgentAction answers an error of an agent command in the page's words: the request's
// fault (400) or a conflict (409) says what the service said, anything else is internal.
func (a *App) failAgentAction(w http.ResponseWriter, r *http.Request, v *Visitor, what string, err error) {
	var conflict *agent.ConflictError
	switch {
	case errors.As(err, &conflict):
		a.fail(w, r, v, http.StatusConflict, conflict.Message+".")
	case errors.Is(err, agent.ErrNotFound):
		a.fail(w, r, v, http.StatusNotFound, "There is no such agent slot or session.")
	default:
		if e := apierror.As(err); e.Kind.Status() < 500 {
			a.fail(w, r, v, e.Kind.Status(), e.Message)
			return
		}
		a.failInternal(w, r, v, what, err)
	}
}

// The live tail's bounds.
const (
	// eventsShown is how many events the session page lists at once.
	eventsShown = 200
	// tailBatch is how many events the tail reads from the database at once.
	tailBatch = 500
	// tailHeartbeat is how often an idle tail sends a comment (and looks for events it was
	// not woken for).
	tailHeartbeat = 15 * time.Second
	// tailMaxDuration ends a tail; the browser reconnects (with Last-Event-ID), so a tab left
	// open is checked against its web session again.
	tailMaxDuration = 10 * time.Minute
)

// tailWriteWait is how long one write of a tail waits for its browser: four heartbeat
// intervals, as the API's streams. A browser that takes no byte for that long (a tab frozen
// with its connection open) is let go; tailMaxDuration alone did not bound it, being read only
// between writes. A variable for the tests.
var tailWriteWait = 4 * tailHeartbeat

// tails lets a shutdown end the live tails (EndStreams): they are the application's only
// long requests.
type tails struct {
	once sync.Once
	done chan struct{}
}

func newTails() tails { return tails{done: make(chan struct{})} }

// EndStreams ends every live tail in flight, and any that starts later (the process is
// shutting down; the browsers reconnect elsewhere).
func (a *App) EndStreams() { a.tails.once.Do(func() { close(a.tails.done) }) }

// principal is the visitor's account as the agent service's caller.
func principal(v *Visitor) auth.Principal { return auth.Principal{AccountID: v.Account.AccountID} }

// sessionRow is a session as the pages show it.
type sessionRow struct {
	agent.SessionView
	Ended bool
	// Stopping: the session is stopping (its stop waits for the step in flight), so its page
	// says so in place of Send and Stop, neither of which would do anything.
	Stopping bool
	// StartedBy names who started it, on the Agents list (starterNamer): a member sees there
	// which sessions are theirs to act on.
	StartedBy string
}

func newSessionRow(s agent.SessionView) sessionRow {
	return sessionRow{SessionView: s, Ended: agent.Ended(s.State), Stopping: s.State == agent.StateStopping}
}

type slotRow struct {
	Slot    string
	Session *sessionRow
}

type agentsData struct {
	Available bool
	Slots     []slotRow
	Sessions  []sessionRow
	// Free are the slots without a live session, where the page can start one.
	Free []string
	// Example is the first message the form offers when the sessions' model is played by the
	// built-in simulator (config.Config.Simulated), which answers a question without a script
	// with placeholder words: a script of one tool call, so that a first session gives a
	// working answer (newcomer trial h1). Empty otherwise.
	Example string
}

// simulatedAgentExample is agentsData.Example: a question and the script that answers it from
// the account's own datasets, whatever they are.
const simulatedAgentExample = `Which datasets does this account have? [[sim script: call list_storage_datasets {}]]`

func (a *App) agentsPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	d := agentsData{Available: a.agents != nil}
	if a.cfg.Simulated(a.cfg.Agents.Model(a.cfg)) {
		d.Example = simulatedAgentExample
	}
	if a.agents != nil {
		p := principal(v)
		slots, err := a.agents.Overview(r.Context(), p)
		if err != nil {
			a.failInternal(w, r, v, "agent overview", err)
			return
		}
		for _, s := range slots {
			row := slotRow{Slot: s.Slot}
			if s.Session != nil {
				sr := newSessionRow(*s.Session)
				row.Session = &sr
			}
			if row.Session == nil || row.Session.Ended {
				d.Free = append(d.Free, s.Slot)
			}
			d.Slots = append(d.Slots, row)
		}
		sessions, err := a.agents.Sessions(r.Context(), p)
		if err != nil {
			a.failInternal(w, r, v, "agent sessions", err)
			return
		}
		starters := a.starterNames(r, v)
		for _, s := range sessions {
			row := newSessionRow(s)
			row.StartedBy = starters.of(s)
			d.Sessions = append(d.Sessions, row)
		}
	}
	a.render(w, r, v, http.StatusOK, "agents", "Agents", d)
}

// eventRow is one event of a session's log, as the page lists it and the tail sends it.
type eventRow struct {
	Seq     int64     `json:"seq"`
	Kind    string    `json:"kind"`
	At      time.Time `json:"at"`
	Summary string    `json:"summary"`
	// State is the state a state event moves the session to (with its reason), and Turn the
	// turn of a model call: the live tail updates the page's summary with them.
	State string `json:"state,omitempty"`
	Turn  int    `json:"turn,omitempty"`
	// Stopping and Ended say that a state event moves the session to stopping, or to an end:
	// the live tail then takes away the page's forms (and, at the end, its "Stopping…" line),
	// which the page rendered for the state it was in and which would be refused now.
	Stopping bool `json:"stopping,omitempty"`
	Ended    bool `json:"ended,omitempty"`
	// Spend is the session's spend as the page writes it (moneyText), and SpendExact its
	// exact amount when that was rounded: sent by the live tail with the last model call of
	// each batch it sends, read from the session then, so that the page's summary does not say
	// $0.00 beside a call that cost money.
	Spend      string `json:"spend,omitempty"`
	SpendExact string `json:"spend_exact,omitempty"`
}

func newEventRow(e agent.Event) eventRow {
	// Text a tenant wrote (a prompt, a message, a tool's result) shows as itself: a
	// bidirectional override in it cannot reorder the line (trial h11 D4).
	row := eventRow{Seq: e.Seq, Kind: e.Kind, At: e.At.UTC(), Summary: plaintext.Visible(eventSummary(e), true)}
	if e.Kind == "state" || e.Kind == "model_call" {
		var d eventData
		_ = json.Unmarshal(e.Data, &d)
		if e.Kind == "state" {
			row.State = d.To
			row.Stopping, row.Ended = d.To == agent.StateStopping, agent.Ended(d.To)
			if d.Reason != "" {
				row.State += " (" + endReasonText(d.Reason) + ")"
			}
		} else {
			row.Turn = d.Turn
		}
	}
	return row
}

// eventData holds the fields of every event kind (agent.Event's documentation).
type eventData struct {
	From, To, Reason, Text, Model, Expert, Name, RequestID string
	Turn                                                   int
	InputTokens                                            int64 `json:"input_tokens"`
	OutputTokens                                           int64 `json:"output_tokens"`
	CostMicros                                             int64 `json:"cost_micros"`
	Arguments                                              json.RawMessage
	Truncated                                              bool
	IsError                                                bool `json:"is_error"`
}

// summaryMax bounds the text of one event's summary.
const summaryMax = 2000

// eventSummary is one line (or a paragraph) saying what the event is.
func eventSummary(e agent.Event) string {
	var d eventData
	_ = json.Unmarshal(e.Data, &d)
	var s string
	switch e.Kind {
	case "state":
		s = strings.TrimPrefix(d.From+" → "+d.To, " ") // the first has no state to come from
		if d.Reason != "" {
			s += " (" + endReasonText(d.Reason) + ")"
		}
	case "message_in":
		s = "message: " + d.Text
	case "model_call":
		s = fmt.Sprintf("turn %d: %s", d.Turn, d.Model)
		if d.Expert != "" && d.Expert != d.Model {
			s += " via " + d.Expert
		}
		s += fmt.Sprintf(", %d input and %d output tokens, %s", d.InputTokens, d.OutputTokens, formatUSD(d.CostMicros))
	case "tool_call":
		s = fmt.Sprintf("turn %d: calls %s %s", d.Turn, d.Name, string(d.Arguments))
	case "tool_result":
		s = d.Name + " answered"
		if d.IsError {
			s = d.Name + " failed"
		}
		s += ": " + d.Text
		if d.Truncated {
			s += " (truncated)"
		}
	case "message_out":
		s = fmt.Sprintf("turn %d: answer: %s", d.Turn, d.Text)
	case "error":
		s = "error: " + d.Text
	default:
		s = string(e.Data)
	}
	if len(s) > summaryMax {
		s = strings.ToValidUTF8(s[:summaryMax], "") + "…"
	}
	return s
}

// findSession is the account's session id (ErrNotFound when it is not one of them, as an
// unknown or malformed id): Tail with no cursor and no wait reads the session.
func (a *App) findSession(ctx context.Context, p auth.Principal, id string) (agent.SessionView, error) {
	if _, err := uuid.Parse(id); err != nil {
		return agent.SessionView{}, agent.ErrNotFound
	}
	t, err := a.agents.Tail(ctx, p, id, 0, 1, 0)
	if err != nil {
		return agent.SessionView{}, err
	}
	return t.Session, nil
}

type sessionData struct {
	Session sessionRow
	// Control is who started the session and whether the visitor may act on it.
	Control sessionControl
	Events  []eventRow
	// After is the cursor the list starts after; Cursor the last event listed (After when
	// none); Earlier the cursor of the page before (-1: none); More says newer events wait.
	After, Cursor, Earlier int64
	More                   bool
	// Notice says what the visitor just did (from the redirect's query).
	Notice string
}

// noSession answers that the visitor's account has no such agent session.
func (a *App) noSession(w http.ResponseWriter, r *http.Request, v *Visitor) {
	a.fail(w, r, v, http.StatusNotFound, "There is no such agent session.")
}

// failAgent answers an error of the agent service: agent.ErrNotFound is noSession, anything
// else an internal failure of what.
func (a *App) failAgent(w http.ResponseWriter, r *http.Request, v *Visitor, what string, err error) {
	if errors.Is(err, agent.ErrNotFound) {
		a.noSession(w, r, v)
		return
	}
	a.failInternal(w, r, v, what, err)
}

// agentSessionPage lists the session's events after ?after= (default: its newest
// eventsShown), with links to the earlier and newer ones.
func (a *App) agentSessionPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	if a.agents == nil {
		a.noSession(w, r, v)
		return
	}
	p := principal(v)
	s, err := a.findSession(r.Context(), p, r.PathValue("session"))
	if err != nil {
		a.failAgent(w, r, v, "agent session", err)
		return
	}
	after := max(s.LastSeq-eventsShown, 0)
	if q := r.URL.Query().Get("after"); q != "" {
		if n, err := strconv.ParseInt(q, 10, 64); err == nil && n >= 0 {
			after = n
		}
	}
	events, err := a.agents.Events(r.Context(), p, s.ID, after, eventsShown+1)
	if err != nil {
		a.failAgent(w, r, v, "agent events", err)
		return
	}
	d := sessionData{Session: newSessionRow(s), Control: a.sessionControlOf(r, s, v), After: after, Cursor: after, Earlier: -1}
	if len(events) > eventsShown {
		events, d.More = events[:eventsShown], true
	}
	for _, e := range events {
		d.Events = append(d.Events, newEventRow(e))
		d.Cursor = e.Seq
	}
	if after > 0 {
		d.Earlier = max(after-eventsShown, 0)
	}
	switch q := r.URL.Query(); {
	case q.Has("sent"):
		d.Notice = "Message sent: the agent takes it now, or at its next turn when it is busy."
	case q.Get("stopping") == "already":
		d.Notice = "This session was stopping already: it ends after its current step, or at once when the agent waits. Stopping it again changed nothing."
	case q.Has("stopping"):
		d.Notice = "Stopping: at once when the agent waits, after its current step when it is busy."
	}
	a.render(w, r, v, http.StatusOK, "agentsession", "Agent session", d)
}

// agentTail streams the session's events after the cursor (Last-Event-ID, else ?after=, else
// 0) as server-sent events: "id: <seq>" and a JSON eventRow each, a comment every
// tailHeartbeat, and "event: end" once the session has ended (after its final state event,
// or at once when it had ended before the cursor). Woken by agent.Service.Wait (LISTEN/NOTIFY
// on any replica); each wake-up and heartbeat reads the events after the last one sent, so
// nothing is skipped or sent twice, once it has checked that the visitor is still signed in
// and a member of the account. A tail of a session that has not ended holds one of the
// account's live tails (agent Service.Follow) while it lives; beyond them it is a 429.
func (a *App) agentTail(w http.ResponseWriter, r *http.Request, v *Visitor) {
	if a.agents == nil {
		a.noSession(w, r, v)
		return
	}
	ctx := r.Context()
	p := principal(v)
	id := r.PathValue("session")
	if _, err := uuid.Parse(id); err != nil {
		a.noSession(w, r, v)
		return
	}
	cursor := int64(0)
	for _, s := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil && n >= 0 {
			cursor = n
			break
		}
	}
	events, err := a.agents.Events(ctx, p, id, cursor, tailBatch)
	if err != nil {
		a.failAgent(w, r, v, "agent events", err)
		return
	}
	ended := false
	if len(events) == 0 {
		s, err := a.findSession(ctx, p, id)
		if err != nil && !errors.Is(err, agent.ErrNotFound) {
			a.failInternal(w, r, v, "agent session", err)
			return
		}
		ended = err != nil || agent.Ended(s.State)
	}
	// A tail that will follow the session is one of the account's live tails (the API's
	// events streams count with it), given back when the tail ends, however it ends; beyond
	// agents.max_live_tails it is refused with 429 and Retry-After (the page's script then says
	// that live updates stopped).
	if !ended {
		release, err := a.agents.Follow(p)
		if err != nil {
			if e := apierror.As(err); e.Kind == apierror.KindRateLimited {
				w.Header().Set("Retry-After", strconv.Itoa(apierror.Seconds(e.RetryAfter)))
				a.fail(w, r, v, http.StatusTooManyRequests, e.Message)
			} else {
				a.failAgent(w, r, v, "agent tail", err)
			}
			return
		}
		defer release()
	}

	out := sse.NewWriter(w)
	armWrite := func() { out.WaitAtMost(tailWriteWait) }
	defer out.WaitAtMost(0)
	armWrite()
	out.WriteHeader()
	// The reconnection delay, flushed with the headers.
	if out.Retry(3*time.Second) != nil || out.Flush() != nil {
		return
	}
	// The visitor's web session and membership are checked again whenever the tail wakes (an
	// event or a heartbeat): signing out, ending the session on the Sessions page or losing the
	// membership ends the tail before it sends anything more.
	token := a.sm.Token(ctx)
	allowed := func() bool {
		if _, ok, err := a.sessions.FindCtx(ctx, token); err != nil || !ok {
			return false
		}
		_, err := a.members.Membership(ctx, v.User.ID, v.Account.AccountID)
		return err == nil
	}
	heartbeat := time.NewTicker(tailHeartbeat)
	defer heartbeat.Stop()
	deadline := time.NewTimer(tailMaxDuration)
	defer deadline.Stop()
	for {
		armWrite()
		// The batch's last model call carries the session's spend as it is now (one read of the
		// session a batch that has a model call).
		lastCall, spent := -1, int64(0)
		for i, e := range events {
			if e.Kind == "model_call" {
				lastCall = i
			}
		}
		if lastCall >= 0 {
			if s, err := a.findSession(ctx, p, id); err == nil {
				spent = s.SpentMicros
			} else {
				lastCall = -1
			}
		}
		for i, e := range events {
			row := newEventRow(e)
			if i == lastCall {
				row.Spend = moneyText(spent)
				if moneyRounded(spent) {
					row.SpendExact = moneyExact(spent)
				}
			}
			b, _ := json.Marshal(row)
			if out.Write(sse.Event{ID: strconv.FormatInt(e.Seq, 10), Data: b}) != nil {
				return
			}
			cursor = e.Seq
			if e.Final() {
				ended = true
				break
			}
		}
		if ended && out.Write(sse.Event{Name: "end", Data: []byte("{}")}) != nil {
			return
		}
		if out.Flush() != nil {
			return
		}
		if ended {
			return
		}
		if len(events) < tailBatch {
			wctx, cancel := context.WithCancel(ctx)
			woken := a.agents.Wait(wctx, id, cursor)
			stop := false
			select {
			case <-woken:
			case <-heartbeat.C:
				if stop = !allowed(); !stop {
					armWrite()
					stop = out.Comment("heartbeat") != nil
				}
			case <-ctx.Done():
				stop = true
			case <-a.tails.done:
				stop = true
			case <-deadline.C:
				stop = true
			}
			cancel()
			if stop || !allowed() {
				return
			}
		}
		if events, err = a.agents.Events(ctx, p, id, cursor, tailBatch); err != nil {
			if ctx.Err() == nil {
				a.log.Warn("web: agent tail", "err", err)
			}
			return // the browser reconnects after the last event it has
		}
	}
}

// formatUSD shows micro-units as dollars.
func formatUSD(micros int64) string { return apierror.USD(micros) }

// endReasons says each end reason of a session (agent.Reason…) in a member's words.
var endReasons = map[string]string{
	agent.ReasonUserStop:         "stopped on request",
	agent.ReasonMaxTurns:         "reached its maximum number of turns",
	agent.ReasonMaxSpend:         "reached its maximum spend",
	agent.ReasonMaxDuration:      "reached its maximum duration",
	agent.ReasonError:            "failed with an error",
	agent.ReasonEnvironmentEnded: "its environment ended",
	agent.ReasonSlotUnassigned:   "the operator took its slot away",
	agent.ReasonKeyLimit:         "its API key's limits no longer allow a call",
	agent.ReasonKeyRevoked:       "the API key that started it was revoked",
	agent.ReasonKeyDisabled:      "the API key that started it was disabled",
	agent.ReasonKeyExpired:       "the API key that started it expired",
	agent.ReasonAccessRevoked:    "the connected app that started it lost its access",
	agent.ReasonMemberRemoved:    "the member who started it left the account",
}

// endReasonText is a session's end reason in words (the reason itself when it has none).
func endReasonText(reason string) string {
	if text, ok := endReasons[reason]; ok {
		return text
	}
	return reason
}
