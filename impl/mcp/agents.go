package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/tool"
)

// AgentService is what the agent tools need from the agent service. Every method acts for the
// verified caller p and must see only p's account: a session or approval of another account is
// reported exactly like one that does not exist, by an error wrapping [ErrAgentNotOwned] (the
// tools answer both with the same text). An expected failure the caller should read (no free
// slot, a session that has ended, an unknown model) is a [*tool.PublicError]; any other error is
// logged and reported as internal.
type AgentService interface {
	// Sessions returns the caller's sessions, newest first.
	Sessions(ctx context.Context, p auth.Principal) ([]AgentSession, error)
	// Tail returns events of one of the caller's sessions: with a Cursor of 0 or less its newest
	// MaxLines events, otherwise at most MaxLines events after Cursor; either way it waits up to
	// MaxWait for the first one when there is none yet. The answer's Cursor is the sequence
	// number of the last event returned, or the request's cursor when none came.
	Tail(ctx context.Context, p auth.Principal, req TailRequest) (AgentTail, error)
	// Tickets returns the caller's tickets in state "open", "closed" or "all", newest first, at
	// most limit.
	Tickets(ctx context.Context, p auth.Principal, state string, limit int) ([]AgentTicket, error)
	// ApprovalStatus returns one of the caller's approvals.
	ApprovalStatus(ctx context.Context, p auth.Principal, approvalID string) (AgentApproval, error)
	// RequestSpawn creates a pending approval for a new session and returns it; nothing runs.
	RequestSpawn(ctx context.Context, p auth.Principal, req SpawnRequest) (AgentApproval, error)
	// RequestPrompt creates a pending approval for a message to one of the caller's sessions and
	// returns it; nothing is sent.
	RequestPrompt(ctx context.Context, p auth.Principal, sessionID, prompt string) (AgentApproval, error)
}

// ErrAgentNotOwned is wrapped by AgentService errors for a session or approval id that is not
// one of the caller's, whether it belongs to another account or to none.
var ErrAgentNotOwned = errors.New("not owned by the caller")

// AgentSession is one agent session as the tools show it.
type AgentSession struct {
	ID, Slot, Model, Purpose, AgentName string
	// State is provisioning, ready, busy, stopping, stopped or failed; EndReason is set once the
	// session has ended.
	State, EndReason      string
	Turns, MaxTurns       int
	SpentMicros, MaxSpend int64
	CreatedAt             time.Time
	EndedAt               *time.Time
}

// Ended reports whether the session is in a final state.
func (s AgentSession) Ended() bool { return s.State == "stopped" || s.State == "failed" }

// AgentEvent is one event of a session's log.
type AgentEvent struct {
	Seq  int64
	Kind string
	Data json.RawMessage
	At   time.Time
}

// TailRequest is the arguments of tail_agent_session, with its defaults applied.
type TailRequest struct {
	SessionID string
	// Cursor is the cursor to continue after; 0 or less for none (the newest events).
	Cursor   int64
	MaxLines int
	MaxWait  time.Duration
}

// AgentTail is the answer to tail_agent_session.
type AgentTail struct {
	Session AgentSession
	Events  []AgentEvent
	Cursor  int64
}

// AgentTicket is one ticket.
type AgentTicket struct {
	ID, State, Title, Body, OpenedBy, SessionID string
	CreatedAt                                   time.Time
	ClosedAt                                    *time.Time
}

// SpawnRequest is the arguments of agent_spawn.
type SpawnRequest struct {
	Purpose, Model, TargetEnvironment, ResourceProfile, AgentName string
	MaxTurns                                                      *int
	MaxSpend                                                      *int64
}

// AgentApproval is one approval and, once approved, its action's status.
type AgentApproval struct {
	ID string
	// Action is "spawn" or "prompt"; Arguments the exact arguments the approval is bound to.
	Action    string
	Arguments json.RawMessage
	// State is pending, approved, denied, expired or cancelled; ActionStatus, once approved,
	// queued, running, done or failed.
	State, ActionStatus           string
	SessionID, MessageID, Failure string
	CreatedAt, ExpiresAt          time.Time
	ResolvedAt                    *time.Time
	// NoFreeSlot reports, on a spawn's approval just created, that every slot of the caller's
	// account ran a session at the time of the call: approved then, the spawn would fail.
	NoFreeSlot bool
}

// Agent tool names.
const (
	ToolListAgentSessions = "list_agent_sessions"
	ToolTailAgentSession  = "tail_agent_session"
	ToolListAgentTickets  = "list_agent_tickets"
	ToolAgentActionStatus = "agent_action_status"
	ToolAgentSpawn        = "agent_spawn"
	ToolAgentPrompt       = "agent_prompt"
)

// Tail bounds and defaults. The schema refuses values above the bounds; the defaults apply when
// an argument is absent.
const (
	TailMaxLines        = 500
	TailMaxSeconds      = 30
	TailDefaultLines    = 100
	TicketsDefaultLimit = 50
)

// AgentTools returns the six agent tools of the tenant profile over svc: list_agent_sessions,
// tail_agent_session, list_agent_tickets and agent_action_status (read-only), and agent_spawn and
// agent_prompt, which change nothing but an approval request: they create a pending approval
// and return its id, and the action runs only when a person approves it (never through this
// endpoint). Their input schemas are the OpenAPI components ListAgentSessionsInput,
// TailAgentSessionInput, ListAgentTicketsInput, AgentActionStatusInput, AgentSpawnInput and
// AgentPromptInput. A session or approval id that is not the caller's, another account's or
// none at all, is answered "Error: session '<id>' is not owned by the caller" (or approval).
//
// AgentTools panics if the embedded OpenAPI document lacks one of the schemas, which this
// package's tests rule out.
func AgentTools(svc AgentService) []tool.Tool {
	a := agentTools{svc: svc}
	return []tool.Tool{
		{
			Name:        ToolListAgentSessions,
			Title:       "List agent sessions",
			Description: "List the caller's agent sessions, newest first. The first line counts them; each further line is one session as JSON: id, slot, state (provisioning, ready, busy, stopping, stopped, failed), end_reason once ended, model, purpose, agent_name, turns and max_turns (model calls), spent_micros and max_spend_micros (1 USD = 1000000), created_at, ended_at.",
			InputSchema: mustComponentSchema("ListAgentSessionsInput"),
			Annotations: tool.ReadOnlyAnnotations("List agent sessions"),
			Handler:     a.sessions,
		},
		{
			Name:        ToolTailAgentSession,
			Title:       "Tail an agent session",
			Description: fmt.Sprintf("Events of one of the caller's agent sessions (messages in and out, model calls with tokens and cost, tool calls and results, state changes). Without cursor: the newest max_lines events (default %d). With the cursor of an earlier answer: the events after it. When there is none yet, it waits up to max_seconds (0 to %d, default 0) for the first one. max_lines is 1 to %d; larger values are refused. The first line describes the session; each further line is one event as JSON {seq, kind, at, data}; the last line is 'cursor: <n>': pass n back as cursor to continue without gap or duplicate (it is unchanged when no event came).", TailDefaultLines, TailMaxSeconds, TailMaxLines),
			InputSchema: mustComponentSchema("TailAgentSessionInput"),
			Annotations: tool.ReadOnlyAnnotations("Tail an agent session"),
			Handler:     a.tail,
		},
		{
			Name:        ToolListAgentTickets,
			Title:       "List agent tickets",
			Description: fmt.Sprintf("List the caller's tickets (opened by the caller's agents or the operator), newest first: state open (default), closed or all; at most limit (default %d). The first line counts them; each further line is one ticket as JSON: id, state, title, body, opened_by, session_id, created_at, closed_at.", TicketsDefaultLimit),
			InputSchema: mustComponentSchema("ListAgentTicketsInput"),
			Annotations: tool.ReadOnlyAnnotations("List agent tickets"),
			Handler:     a.tickets,
		},
		{
			Name:        ToolAgentActionStatus,
			Title:       "Agent action status",
			Description: "The status of an approval that the caller's agent_spawn or agent_prompt created: the approval's state (pending, approved, denied, expired, cancelled) and, once approved, the action's status (queued, running, done, failed) with the resulting session_id or message_id, or the failure. The first line says it in words; the second is the approval as JSON: id, action, arguments, state, action_status, session_id, message_id, failure, created_at, expires_at, resolved_at.",
			InputSchema: mustComponentSchema("AgentActionStatusInput"),
			Annotations: tool.ReadOnlyAnnotations("Agent action status"),
			Handler:     a.status,
		},
		{
			Name:        ToolAgentSpawn,
			Title:       "Request an agent session",
			Description: "Ask for a new agent session in one of the caller's own free slots, with purpose as its first message. This needs a person's approval: the tool only creates a pending approval bound to exactly these arguments and returns its id at once (the first line in words, the second the approval as JSON). Nothing runs until a person approves it; then the session starts in a free slot of the caller's (or the action fails if none is free). Poll agent_action_status with the approval id for the outcome and the session id.",
			InputSchema: mustComponentSchema("AgentSpawnInput"),
			Annotations: tool.Annotations{Title: "Request an agent session"},
			Handler:     a.spawn,
		},
		{
			Name:        ToolAgentPrompt,
			Title:       "Request a prompt to an agent",
			Description: "Ask to send a prompt to one of the caller's running agent sessions. This needs a person's approval: the tool only creates a pending approval bound to exactly this session and prompt and returns its id at once (the first line in words, the second the approval as JSON). Nothing is sent until a person approves it. Poll agent_action_status with the approval id for the outcome and the message id.",
			InputSchema: mustComponentSchema("AgentPromptInput"),
			Annotations: tool.Annotations{Title: "Request a prompt to an agent"},
			Handler:     a.prompt,
		},
	}
}

// agentTools holds the handlers of the agent tools.
type agentTools struct {
	svc AgentService
}

// NotOwnedAgentResult is the answer for a session or approval id that is not the caller's:
// "Error: <what> '<id>' is not owned by the caller", the same for another account's id and for
// one that does not exist.
func NotOwnedAgentResult(what, id string) tool.Result {
	return tool.ErrorResult("%s '%s' is not owned by the caller", what, id)
}

// agentFailed turns a service error about the id into a result or an error for runTool.
func agentFailed(what, id string, err error) (tool.Result, error) {
	if errors.Is(err, ErrAgentNotOwned) {
		return NotOwnedAgentResult(what, id), nil
	}
	return tool.Result{}, err
}

// sessionLine is a session as one JSON line.
type sessionLine struct {
	ID             string `json:"id"`
	Slot           string `json:"slot"`
	State          string `json:"state"`
	EndReason      string `json:"end_reason,omitempty"`
	Model          string `json:"model"`
	Purpose        string `json:"purpose,omitempty"`
	AgentName      string `json:"agent_name,omitempty"`
	Turns          int    `json:"turns"`
	MaxTurns       int    `json:"max_turns"`
	SpentMicros    int64  `json:"spent_micros"`
	MaxSpendMicros int64  `json:"max_spend_micros"`
	CreatedAt      string `json:"created_at"`
	EndedAt        string `json:"ended_at,omitempty"`
}

func newSessionLine(s AgentSession) sessionLine {
	l := sessionLine{ID: s.ID, Slot: s.Slot, State: s.State, EndReason: s.EndReason, Model: s.Model, Purpose: s.Purpose,
		AgentName: s.AgentName, Turns: s.Turns, MaxTurns: s.MaxTurns, SpentMicros: s.SpentMicros, MaxSpendMicros: s.MaxSpend,
		CreatedAt: formatTime(s.CreatedAt)}
	if s.EndedAt != nil {
		l.EndedAt = formatTime(*s.EndedAt)
	}
	return l
}

func (a agentTools) sessions(ctx context.Context, p auth.Principal, _ json.RawMessage) (tool.Result, error) {
	list, err := a.svc.Sessions(ctx, p)
	if err != nil {
		return tool.Result{}, err
	}
	if len(list) == 0 {
		return tool.TextResult("No agent sessions. Ask for one with agent_spawn."), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d agent %s:\n", len(list), plural(len(list), "session", "sessions"))
	for _, s := range list {
		writeJSONLine(&b, newSessionLine(s))
	}
	return tool.TextResult(strings.TrimSuffix(b.String(), "\n")), nil
}

// describeSession is one sentence on a session's state, turns and spend.
func describeSession(s AgentSession) string {
	state := s.State
	if s.EndReason != "" {
		state += " (" + s.EndReason + ")"
	}
	return fmt.Sprintf("Session %s in slot '%s': %s; model %s; %d of %d turns; spent %d of %d micros",
		s.ID, s.Slot, state, s.Model, s.Turns, s.MaxTurns, s.SpentMicros, s.MaxSpend)
}

func (a agentTools) tail(ctx context.Context, p auth.Principal, raw json.RawMessage) (tool.Result, error) {
	var args struct {
		SessionID  string `json:"session_id"`
		MaxLines   *int   `json:"max_lines"`
		MaxSeconds *int   `json:"max_seconds"`
		Cursor     *int64 `json:"cursor"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return tool.ErrorResult("invalid arguments for tool '%s': %v", ToolTailAgentSession, err), nil
	}
	req := TailRequest{SessionID: args.SessionID, Cursor: -1, MaxLines: TailDefaultLines}
	if args.MaxLines != nil {
		req.MaxLines = min(max(*args.MaxLines, 1), TailMaxLines)
	}
	if args.MaxSeconds != nil {
		req.MaxWait = time.Duration(min(max(*args.MaxSeconds, 0), TailMaxSeconds)) * time.Second
	}
	if args.Cursor != nil {
		req.Cursor = max(*args.Cursor, 0)
	}
	t, err := a.svc.Tail(ctx, p, req)
	if err != nil {
		return agentFailed("session", args.SessionID, err)
	}
	var b strings.Builder
	b.WriteString(describeSession(t.Session))
	newest := req.Cursor <= 0
	switch {
	case len(t.Events) == 0 && newest:
		b.WriteString(". No events yet.\n")
	case len(t.Events) == 0:
		fmt.Fprintf(&b, ". No events after cursor %d.\n", req.Cursor)
	case newest:
		fmt.Fprintf(&b, ". The newest %d %s:\n", len(t.Events), plural(len(t.Events), "event", "events"))
	default:
		fmt.Fprintf(&b, ". %d %s after cursor %d:\n", len(t.Events), plural(len(t.Events), "event", "events"), req.Cursor)
	}
	for _, e := range t.Events {
		writeJSONLine(&b, struct {
			Seq  int64           `json:"seq"`
			Kind string          `json:"kind"`
			At   string          `json:"at"`
			Data json.RawMessage `json:"data"`
		}{e.Seq, e.Kind, formatTime(e.At), rawOrNull(e.Data)})
	}
	fmt.Fprintf(&b, "cursor: %d", t.Cursor)
	return tool.TextResult(b.String()), nil
}

// rawOrNull is data, or JSON null when it is empty.
func rawOrNull(data json.RawMessage) json.RawMessage {
	if len(data) == 0 {
		return json.RawMessage("null")
	}
	return data
}

func (a agentTools) tickets(ctx context.Context, p auth.Principal, raw json.RawMessage) (tool.Result, error) {
	var args struct {
		State string `json:"state"`
		Limit *int   `json:"limit"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return tool.ErrorResult("invalid arguments for tool '%s': %v", ToolListAgentTickets, err), nil
	}
	if args.State == "" {
		args.State = "open"
	}
	limit := TicketsDefaultLimit
	if args.Limit != nil {
		limit = max(*args.Limit, 1)
	}
	list, err := a.svc.Tickets(ctx, p, args.State, limit)
	if err != nil {
		return tool.Result{}, err
	}
	which := args.State + " "
	if args.State == "all" {
		which = ""
	}
	if len(list) == 0 {
		return tool.TextResult(fmt.Sprintf("No %stickets.", which)), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s%s:\n", len(list), which, plural(len(list), "ticket", "tickets"))
	for _, t := range list {
		l := struct {
			ID        string `json:"id"`
			State     string `json:"state"`
			Title     string `json:"title"`
			Body      string `json:"body,omitempty"`
			OpenedBy  string `json:"opened_by"`
			SessionID string `json:"session_id,omitempty"`
			CreatedAt string `json:"created_at"`
			ClosedAt  string `json:"closed_at,omitempty"`
		}{ID: t.ID, State: t.State, Title: t.Title, Body: t.Body, OpenedBy: t.OpenedBy, SessionID: t.SessionID, CreatedAt: formatTime(t.CreatedAt)}
		if t.ClosedAt != nil {
			l.ClosedAt = formatTime(*t.ClosedAt)
		}
		writeJSONLine(&b, l)
	}
	return tool.TextResult(strings.TrimSuffix(b.String(), "\n")), nil
}

// actionStatusText is an approved action's status (queued, running, done or failed) in words:
// "the action is running", "the action failed".
func actionStatusText(status string) string {
	if status == "failed" {
		return "the action failed"
	}
	return "the action is " + status
}

// approvalText is an approval in words, then as one JSON line.
func approvalText(ap AgentApproval, created bool) string {
	var b strings.Builder
	tool := "agent_" + ap.Action
	switch {
	case created:
		fmt.Fprintf(&b, "Approval %s created: %s waits until %s for a person to approve it, on the web console's Approvals page or with tollgate admin approval approve %s; nothing runs before. Poll agent_action_status with approval_id %s.",
			ap.ID, tool, formatTime(ap.ExpiresAt), ap.ID, ap.ID)
		if ap.NoFreeSlot {
			b.WriteString(" No slot is free now: every agent slot of the account runs a session, so approved now the spawn would fail. " +
				"Stop a session first (DELETE /v1/agents/{slot}, or Stop the session on the web console's Agents page) or wait for one to end, then have it approved.")
		}
	case ap.State == "pending":
		fmt.Fprintf(&b, "Approval %s (%s) is pending until %s; nothing has run.", ap.ID, tool, formatTime(ap.ExpiresAt))
	case ap.State == "approved":
		fmt.Fprintf(&b, "Approval %s (%s) was approved; %s", ap.ID, tool, actionStatusText(ap.ActionStatus))
		switch {
		case ap.SessionID != "" && ap.Action == "spawn":
			fmt.Fprintf(&b, ", session %s", ap.SessionID)
		case ap.MessageID != "":
			fmt.Fprintf(&b, ", message %s", ap.MessageID)
		}
		if ap.Failure != "" {
			fmt.Fprintf(&b, ": %s", ap.Failure)
		}
		b.WriteByte('.')
	default:
		fmt.Fprintf(&b, "Approval %s (%s) was %s; the action did not run and never will.", ap.ID, tool, ap.State)
	}
	b.WriteByte('\n')
	l := struct {
		ID           string          `json:"id"`
		Action       string          `json:"action"`
		Arguments    json.RawMessage `json:"arguments"`
		State        string          `json:"state"`
		ActionStatus string          `json:"action_status,omitempty"`
		SessionID    string          `json:"session_id,omitempty"`
		MessageID    string          `json:"message_id,omitempty"`
		Failure      string          `json:"failure,omitempty"`
		CreatedAt    string          `json:"created_at"`
		ExpiresAt    string          `json:"expires_at"`
		ResolvedAt   string          `json:"resolved_at,omitempty"`
	}{ID: ap.ID, Action: ap.Action, Arguments: rawOrNull(ap.Arguments), State: ap.State, ActionStatus: ap.ActionStatus,
		SessionID: ap.SessionID, MessageID: ap.MessageID, Failure: ap.Failure, CreatedAt: formatTime(ap.CreatedAt), ExpiresAt: formatTime(ap.ExpiresAt)}
	if ap.ResolvedAt != nil {
		l.ResolvedAt = formatTime(*ap.ResolvedAt)
	}
	writeJSONLine(&b, l)
	return strings.TrimSuffix(b.String(), "\n")
}

func (a agentTools) status(ctx context.Context, p auth.Principal, raw json.RawMessage) (tool.Result, error) {
	var args struct {
		ApprovalID string `json:"approval_id"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return tool.ErrorResult("invalid arguments for tool '%s': %v", ToolAgentActionStatus, err), nil
	}
	ap, err := a.svc.ApprovalStatus(ctx, p, args.ApprovalID)
	if err != nil {
		return agentFailed("approval", args.ApprovalID, err)
	}
	return tool.TextResult(approvalText(ap, false)), nil
}

func (a agentTools) spawn(ctx context.Context, p auth.Principal, raw json.RawMessage) (tool.Result, error) {
	var args struct {
		Purpose           string `json:"purpose"`
		Model             string `json:"model"`
		TargetEnvironment string `json:"target_environment"`
		ResourceProfile   string `json:"resource_profile"`
		AgentName         string `json:"agent_name"`
		MaxTurns          *int   `json:"max_turns"`
		MaxSpend          *int64 `json:"max_spend"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return tool.ErrorResult("invalid arguments for tool '%s': %v", ToolAgentSpawn, err), nil
	}
	ap, err := a.svc.RequestSpawn(ctx, p, SpawnRequest{Purpose: args.Purpose, Model: args.Model, TargetEnvironment: args.TargetEnvironment,
		ResourceProfile: args.ResourceProfile, AgentName: args.AgentName, MaxTurns: args.MaxTurns, MaxSpend: args.MaxSpend})
	if err != nil {
		return tool.Result{}, err
	}
	return tool.TextResult(approvalText(ap, true)), nil
}

func (a agentTools) prompt(ctx context.Context, p auth.Principal, raw json.RawMessage) (tool.Result, error) {
	var args struct {
		SessionID string `json:"session_id"`
		Prompt    string `json:"prompt"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return tool.ErrorResult("invalid arguments for tool '%s': %v", ToolAgentPrompt, err), nil
	}
	ap, err := a.svc.RequestPrompt(ctx, p, args.SessionID, args.Prompt)
	if err != nil {
		return agentFailed("session", args.SessionID, err)
	}
	return tool.TextResult(approvalText(ap, true)), nil
}
