package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/sse"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// The /v1/agents routes are thin adapters to the agent service (impl/agent), which owns every
// rule: ownership, states, idempotency. Without a service they answer 501 in their envelope.

// maxIdempotencyKeyLen bounds an Idempotency-Key header.
const maxIdempotencyKeyLen = 255

// agentEventsPage is how many events the events route reads from the log at a time.
const agentEventsPage = 200

// agentEventsRetry is the reconnection delay the events route tells clients (the `retry:`
// field, at the stream's start and with its in-band error): apierror.DependencyRetryAfter, as
// the 503 of a database outage says.
const agentEventsRetry = apierror.DependencyRetryAfter

// agentEventsReadTimeout bounds one read of the log while a stream follows it: a database that
// does not answer within it ends the stream with the in-band 503 rather than holding it
// silent (no heartbeat goes out while a read waits).
const agentEventsReadTimeout = 10 * time.Second

// agentError maps the agent service's errors onto the contract: a slot that is not the caller's
// (or does not exist) is 403 permission_error, a conflict with the state 409 with the service's
// message, a validation error 400 as the service wrote it; anything else goes to respondError
// (503 for a database outage, 500 otherwise).
func agentError(slot string, err error) error {
	if errors.Is(err, agent.ErrNotFound) {
		return apierror.Forbidden("slot '%s' is not assigned to this account", slot)
	}
	if c, ok := errors.AsType[*agent.ConflictError](err); ok {
		return apierror.Conflict("%s", c.Message)
	}
	return err
}

// idempotencyKey checks an Idempotency-Key header: "" when absent.
func idempotencyKey(h *api.IdempotencyKey) (string, error) {
	if h == nil {
		return "", nil
	}
	k := *h
	if k == "" || len(k) > maxIdempotencyKeyLen {
		return "", apierror.Invalid("Idempotency-Key", "'Idempotency-Key' must be 1 to %d printable ASCII characters", maxIdempotencyKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", apierror.Invalid("Idempotency-Key", "'Idempotency-Key' must be 1 to %d printable ASCII characters", maxIdempotencyKeyLen)
		}
	}
	return k, nil
}

// agentCommand is the preamble of the routes that send the agent service a command: 501 for
// a route without a service, the caller's principal, and its checked Idempotency-Key.
func (s *Server) agentCommand(ctx context.Context, route string, h *api.IdempotencyKey) (auth.Principal, string, error) {
	if s.agents == nil {
		return auth.Principal{}, "", apierror.NotImplemented(route)
	}
	p, err := principal(ctx)
	if err != nil {
		return auth.Principal{}, "", err
	}
	key, err := idempotencyKey(h)
	if err != nil {
		return auth.Principal{}, "", err
	}
	return p, key, nil
}

// ListAgents answers GET /v1/agents: the caller's slots with their current or last session.
func (s *Server) ListAgents(ctx context.Context, _ api.ListAgentsRequestObject) (api.ListAgentsResponseObject, error) {
	if s.agents == nil {
		return nil, apierror.NotImplemented("GET /v1/agents")
	}
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	slots, err := s.agents.Overview(ctx, p)
	if err != nil {
		return nil, agentError("", err)
	}
	out := api.AgentList{Object: "list", Data: make([]api.AgentSlot, len(slots))}
	for i, sl := range slots {
		out.Data[i] = api.AgentSlot{Slot: sl.Slot}
		if sl.Session != nil {
			v := sessionJSON(*sl.Session)
			out.Data[i].Session = &v
		}
	}
	return api.ListAgents200JSONResponse{Body: out}, nil
}

// sessionJSON is a session in the contract's shape.
func sessionJSON(v agent.SessionView) api.AgentSession {
	out := api.AgentSession{Id: v.ID, Slot: v.Slot, Model: v.Model, State: api.AgentSessionState(v.State),
		Turns: v.Turns, MaxTurns: v.MaxTurns, SpentMicros: v.SpentMicros, MaxSpendMicros: v.MaxSpendMicros,
		CreatedAt: v.CreatedAt, EndedAt: v.EndedAt}
	if v.Purpose != "" {
		out.Purpose = &v.Purpose
	}
	if v.AgentName != "" {
		out.AgentName = &v.AgentName
	}
	if v.EndReason != "" {
		out.EndReason = &v.EndReason
	}
	return out
}

// SpawnAgent answers POST /v1/agents: 202 once the spawn command is accepted.
func (s *Server) SpawnAgent(ctx context.Context, req api.SpawnAgentRequestObject) (api.SpawnAgentResponseObject, error) {
	p, key, err := s.agentCommand(ctx, "POST /v1/agents", req.Params.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	var slot, prompt string
	var settings agent.SpawnAction
	if b := req.Body; b != nil {
		slot = b.Slot
		if b.Prompt != nil {
			prompt = *b.Prompt
		}
		deref := func(v *string) string {
			if v == nil {
				return ""
			}
			return *v
		}
		settings = agent.SpawnAction{Model: deref(b.Model), TargetEnvironment: deref(b.TargetEnvironment),
			ResourceProfile: deref(b.ResourceProfile), AgentName: deref(b.AgentName), MaxTurns: b.MaxTurns}
		if b.MaxSpend != nil {
			settings.MaxSpend = new(int64(*b.MaxSpend))
		}
	}
	res, err := s.agents.SpawnWith(ctx, p, slot, prompt, key, settings)
	if err != nil {
		return nil, agentError(slot, err)
	}
	noteSession(ctx, res.SessionID)
	return api.SpawnAgent202JSONResponse{Body: api.AgentSpawnResponse{Ok: true, CommandId: res.CommandID, AllocatedSlot: res.Slot,
		Status: api.AgentSpawnResponseStatus(res.Status), SessionId: &res.SessionID}}, nil
}

// SendAgentMessage answers POST /v1/agents/{slot}/messages: 202 once the message is accepted.
func (s *Server) SendAgentMessage(ctx context.Context, req api.SendAgentMessageRequestObject) (api.SendAgentMessageResponseObject, error) {
	p, key, err := s.agentCommand(ctx, "POST /v1/agents/{slot}/messages", req.Params.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	var text string
	if req.Body != nil {
		text = req.Body.Text
	}
	res, err := s.agents.SendMessage(ctx, p, req.Slot, text, key)
	if err != nil {
		return nil, agentError(req.Slot, err)
	}
	noteSession(ctx, res.SessionID)
	return api.SendAgentMessage202JSONResponse{Body: api.AgentMessageResponse{MessageId: res.MessageID, Slot: res.Slot,
		SessionId: &res.SessionID, Queued: &res.Queued}}, nil
}

// StopAgent answers DELETE /v1/agents/{slot}: 202 once the stop is accepted.
func (s *Server) StopAgent(ctx context.Context, req api.StopAgentRequestObject) (api.StopAgentResponseObject, error) {
	p, key, err := s.agentCommand(ctx, "DELETE /v1/agents/{slot}", req.Params.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	res, err := s.agents.Stop(ctx, p, req.Slot, key)
	if err != nil {
		return nil, agentError(req.Slot, err)
	}
	return api.StopAgent202JSONResponse{Body: api.AgentStopResponse{CommandId: res.CommandID, Status: api.AgentStopResponseStatus(res.Status),
		Slot: &res.Slot, SessionId: &res.SessionID}}, nil
}

// StreamAgentEvents is never called: the events route is served by inferenceBinding's
// StreamAgentEvents, outside the strict server, as the inference streams are.
func (s *Server) StreamAgentEvents(context.Context, api.StreamAgentEventsRequestObject) (api.StreamAgentEventsResponseObject, error) {
	return nil, errors.New("GET /v1/agents/{slot}/events is served outside the strict server")
}

// StreamAgentEvents serves GET /v1/agents/{slot}/events.
func (b inferenceBinding) StreamAgentEvents(w http.ResponseWriter, r *http.Request, slot api.SlotName, params api.StreamAgentEventsParams) {
	if err := b.s.streamAgentEvents(w, r, slot, params); err != nil {
		b.s.respondError(w, r, err)
	}
}

// agentEventCursor reads where the stream resumes: Last-Event-ID, else ?after, else the
// beginning; an event's id is <session id>:<seq>, and a bare <seq> (the ids of before) is
// taken as one of the slot's current session.
func agentEventCursor(params api.StreamAgentEventsParams) (eventCursor, error) {
	name, raw := "", ""
	switch {
	case params.LastEventID != nil:
		name, raw = "Last-Event-ID", *params.LastEventID
	case params.After != nil:
		name, raw = "after", *params.After
	default:
		return eventCursor{}, nil
	}
	raw = strings.TrimSpace(raw)
	var c eventCursor
	if session, seq, ok := strings.Cut(raw, ":"); ok {
		id, err := uuid.Parse(session)
		if err != nil {
			return eventCursor{}, apierror.Invalid(name, "'%s' must be the id of an event: <session id>:<sequence number>, or a sequence number", name)
		}
		c.session, raw = id.String(), seq
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return eventCursor{}, apierror.Invalid(name, "'%s' must be the id of an event: <session id>:<sequence number>, or a sequence number", name)
	}
	c.seq = n
	return c, nil
}

// eventCursor is where a client resumes a slot's event stream: after the event seq of session
// ("" for a bare sequence number: of the slot's current session).
type eventCursor struct {
	session string
	seq     int64
}

// in is the cursor's sequence number within sess, the slot's current session: a cursor of
// another session, or a bare one beyond sess's last event (it cannot be one of sess's own), is
// of a session the slot has moved on from, and sess is streamed from its first event (trial
// h13 D1: a client that followed one session and reconnected after the next one started
// silently lost that one's first events).
func (c eventCursor) in(sess agent.SessionView) int64 {
	if (c.session != "" && c.session != sess.ID) || (c.session == "" && c.seq > sess.LastSeq) {
		return 0
	}
	return c.seq
}

// agentEvent is an event's data: line.
type agentEvent struct {
	Seq       int64           `json:"seq"`
	Kind      string          `json:"kind"`
	At        time.Time       `json:"at"`
	SessionID string          `json:"sessionId"`
	Data      json.RawMessage `json:"data"`
}

// streamAgentEvents writes the events of the slot's session after the cursor, then follows the
// log (Service.Wait wakes it when any gateway process appends an event) until the session's
// final state event, the client leaves, or the gateway ends its streams. An error returned
// before the first byte is answered in the envelope. The stream starts with a `retry:` field
// (agentEventsRetry); when it cannot go on (the log cannot be read: the database is
// unreachable; the gateway is ending its streams), it ends with an `error` event without an
// id, whose data is the error in the chat-completions envelope, and the `retry:` field again,
// so that the client reconnects with Last-Event-ID and loses nothing. A key that is no longer
// valid ends the stream without a word (its reconnection gets the 401). A stream of a session
// that has not ended holds one of the account's live tails while it lives (agent
// Service.Follow), and is refused with 429 beyond them. Every write waits for
// the client at most stalledClientBeats heartbeat intervals, as an inference stream's: a client
// that takes no byte for that long is let go, its goroutine and connection with it.
func (s *Server) streamAgentEvents(w http.ResponseWriter, r *http.Request, slot string, params api.StreamAgentEventsParams) error {
	if s.agents == nil {
		return apierror.NotImplemented("GET /v1/agents/{slot}/events")
	}
	ctx := r.Context()
	p, err := principal(ctx)
	if err != nil {
		return err
	}
	from, err := agentEventCursor(params)
	if err != nil {
		return err
	}
	sess, err := s.agents.SlotSession(ctx, p, slot)
	if err != nil {
		return agentError(slot, err)
	}
	cursor := from.in(sess)
	ended := agent.Ended(sess.State)
	// The first page before the headers, so that a failure still gets its envelope.
	evs, err := s.agents.Events(ctx, p, sess.ID, cursor, agentEventsPage)
	if err != nil {
		return agentError(slot, err)
	}
	// A stream that will follow the session is one of the account's live tails, given back
	// when the stream ends, however it ends: beyond agents.max_live_tails, a 429 with
	// Retry-After in the envelope.
	if !ended {
		release, err := s.agents.Follow(p)
		if err != nil {
			return err
		}
		defer release()
	}
	sw := sse.NewWriter(w)
	armWrite := func() { sw.WaitAtMost(stalledClientBeats * s.heartbeat) }
	defer sw.WaitAtMost(0)
	armWrite()
	sw.WriteHeader()
	if err := sw.Retry(agentEventsRetry); err != nil {
		return nil
	}
	if err := sw.Flush(); err != nil {
		return nil
	}
	heartbeat := time.NewTimer(s.heartbeat)
	defer heartbeat.Stop()
	// The key is checked again whenever the stream wakes (an event or a heartbeat): a key
	// revoked, disabled or expired meanwhile ends the stream, as its next request would get 401.
	authorization := r.Header.Get("Authorization")
	keyValid := func() bool {
		_, err := s.auth.Authenticate(ctx, authorization)
		return !errors.Is(err, auth.ErrUnknown) && !errors.Is(err, auth.ErrDisabled) && !errors.As(err, new(*auth.ExpiredError))
	}
	for {
		armWrite()
		for _, e := range evs {
			data, err := json.Marshal(agentEvent{Seq: e.Seq, Kind: e.Kind, At: e.At.UTC(), SessionID: sess.ID, Data: rawOrEmpty(e.Data)})
			if err != nil {
				s.logger(ctx).Error("agent event: encode", "session", sess.ID, "seq", e.Seq, "err", err)
				endAgentEvents(sw, w, err)
				return nil
			}
			if err := writeAgentEvent(sw, sess.ID, e, data); err != nil {
				return nil
			}
			cursor = e.Seq
			if e.Final() {
				_ = sw.Flush()
				return nil
			}
		}
		if len(evs) > 0 {
			if err := sw.Flush(); err != nil {
				return nil
			}
			heartbeat.Reset(s.heartbeat)
		}
		switch {
		case len(evs) == agentEventsPage:
			// More are waiting in the log.
		case ended:
			// The session had ended when the stream began, and its log is read to the end.
			return nil
		default:
			if woken, endErr := s.waitAgentEvent(ctx, sw, armWrite, heartbeat, sess.ID, cursor, keyValid); !woken {
				if endErr != nil {
					armWrite()
					endAgentEvents(sw, w, endErr)
				}
				return nil
			}
		}
		if !keyValid() {
			return nil
		}
		if evs, err = s.readAgentEvents(ctx, p, sess.ID, cursor); err != nil {
			if ctx.Err() != nil {
				return nil // the client left
			}
			if err = agentError(slot, err); store.Unavailable(err) {
				s.logger(ctx).Debug("agent events: the database is unavailable", "session", sess.ID, "err", err)
				err = apierror.Unavailable("the database", err)
			} else if !errors.As(err, new(*apierror.Error)) {
				s.logger(ctx).Error("agent events: read", "session", sess.ID, "err", err)
			}
			armWrite()
			endAgentEvents(sw, w, err)
			return nil
		}
	}
}

// readAgentEvents reads the next page of the log after cursor within agentEventsReadTimeout.
func (s *Server) readAgentEvents(ctx context.Context, p auth.Principal, sessionID string, cursor int64) ([]agent.Event, error) {
	rctx, cancel := context.WithTimeout(ctx, agentEventsReadTimeout)
	defer cancel()
	return s.agents.Events(rctx, p, sessionID, cursor, agentEventsPage)
}

// agentEventsShuttingDown is the in-band error of the events streams the gateway ends at a
// shutdown (EndStreams): the client reconnects, to another process, with Last-Event-ID.
var agentEventsShuttingDown = &apierror.Error{Kind: apierror.KindOverloaded,
	Message: "the gateway is shutting down; reconnect with Last-Event-ID to continue"}

// endAgentEvents ends an events stream that cannot go on with err: an `error` event without an
// id (the client's Last-Event-ID stays the last event it got), whose data is err in the
// chat-completions envelope (an internal error names only the request id), and the `retry:`
// field, flushed. The stream may be gone already; then nothing more can be done.
func endAgentEvents(sw *sse.Writer, w http.ResponseWriter, err error) {
	data, _ := json.Marshal(openAIErrorBody{Error: openAIErrorOf(apierror.As(err), w.Header().Get(headerRequestID))})
	if sw.Write(sse.Event{Name: "error", Data: data}) != nil || sw.Retry(agentEventsRetry) != nil {
		return
	}
	_ = sw.Flush()
}

// waitAgentEvent waits until the session has an event after cursor, sending a heartbeat comment
// whenever the heartbeat timer fires while keyValid holds. It returns woken true when an event
// may be there; false when the stream must end, with the error to send in-band when there is
// one (the gateway is ending its streams), or none (the client left, the caller's key is no
// longer valid, a heartbeat could not be written).
func (s *Server) waitAgentEvent(ctx context.Context, sw *sse.Writer, armWrite func(), heartbeat *time.Timer, sessionID string, cursor int64, keyValid func() bool) (woken bool, endErr error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake := s.agents.Wait(wctx, sessionID, cursor)
	for {
		select {
		case <-wake:
			return true, nil
		case <-heartbeat.C:
			if !keyValid() {
				return false, nil
			}
			armWrite()
			if err := sw.Comment("heartbeat"); err != nil {
				return false, nil
			}
			heartbeat.Reset(s.heartbeat)
		case <-ctx.Done():
			return false, nil
		case <-s.streamsEnd.Done():
			return false, agentEventsShuttingDown
		}
	}
}

// writeAgentEvent frames one event of the session: id (<session>:<seq>), event and data
// fields.
func writeAgentEvent(sw *sse.Writer, session string, e agent.Event, data []byte) error {
	return sw.Write(sse.Event{ID: session + ":" + strconv.FormatInt(e.Seq, 10), Name: e.Kind, Data: data})
}

// rawOrEmpty is data, or an empty object when the event has none.
func rawOrEmpty(data json.RawMessage) json.RawMessage {
	if len(data) == 0 {
		return json.RawMessage("{}")
	}
	return data
}

// noteSession names the agent session a request spawned or messaged on the request's server
// span, so that the request's trace leads to the session's (whose invoke_agent span links
// back to it).
func noteSession(ctx context.Context, id string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() && id != "" {
		span.SetAttributes(telemetry.AttrAgentSessionID.String(id))
	}
}
