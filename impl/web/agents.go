package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/sse"
)

// The Agents page: the account's slots and sessions (state, model, turns, spend, end reason),
// and a page per session with its event log. The log is server-rendered (a "refresh" link and
// an after= cursor work without JavaScript); static/agent-tail.js follows the session's live
// tail, GET /agents/{session}/events, a text/event-stream behind the same web session:
// each event carries its sequence number as the SSE id, so a reconnecting EventSource resumes
// with Last-Event-ID, without a gap and without a duplicate.

func (a *App) agentsRoutes(mux *http.ServeMux) {
	mux.Handle("GET /agents", a.member(a.agentsPage))
	mux.Handle("GET /agents/{session}", a.member(a.agentSessionPage))
	mux.Handle("GET /agents/{session}/events", a.member(a.agentTail))
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
}

func newSessionRow(s agent.SessionView) sessionRow {
	return sessionRow{SessionView: s, Ended: agent.Ended(s.State)}
}

type slotRow struct {
	Slot    string
	Session *sessionRow
}

type agentsData struct {
	Available bool
	Slots     []slotRow
	Sessions  []sessionRow
}

func (a *App) agentsPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	d := agentsData{Available: a.agents != nil}
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
			d.Slots = append(d.Slots, row)
		}
		sessions, err := a.agents.Sessions(r.Context(), p)
		if err != nil {
			a.failInternal(w, r, v, "agent sessions", err)
			return
		}
		for _, s := range sessions {
			d.Sessions = append(d.Sessions, newSessionRow(s))
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
}

func newEventRow(e agent.Event) eventRow {
	return eventRow{Seq: e.Seq, Kind: e.Kind, At: e.At.UTC(), Summary: eventSummary(e)}
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
		s = d.From + " → " + d.To
		if d.Reason != "" {
			s += " (" + d.Reason + ")"
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
	Events  []eventRow
	// After is the cursor the list starts after; Cursor the last event listed (After when
	// none); Earlier the cursor of the page before (-1: none); More says newer events wait.
	After, Cursor, Earlier int64
	More                   bool
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
	d := sessionData{Session: newSessionRow(s), After: after, Cursor: after, Earlier: -1}
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
	a.render(w, r, v, http.StatusOK, "agentsession", "Agent session", d)
}

// agentTail streams the session's events after the cursor (Last-Event-ID, else ?after=, else
// 0) as server-sent events: "id: <seq>" and a JSON eventRow each, a comment every
// tailHeartbeat, and "event: end" once the session has ended (after its final state event,
// or at once when it had ended before the cursor). Woken by agent.Service.Wait (LISTEN/NOTIFY
// on any replica); each wake-up and heartbeat reads the events after the last one sent, so
// nothing is skipped or sent twice, once it has checked that the visitor is still signed in
// and a member of the account.
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

	out := sse.NewWriter(w)
	out.WriteHeader()
	// The reconnection delay is a field sse.Event has no place for: it is written as it is and
	// flushed with the headers.
	if _, err := io.WriteString(w, "retry: 3000\n\n"); err != nil || http.NewResponseController(w).Flush() != nil {
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
		for _, e := range events {
			b, _ := json.Marshal(newEventRow(e))
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
				stop = !allowed() || out.Comment("heartbeat") != nil
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
