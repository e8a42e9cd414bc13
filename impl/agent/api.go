package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ErrNotFound reports a slot, session, ticket or approval that does not exist or is not the
// caller's account's: the two are indistinguishable.
var ErrNotFound = errors.New("not found")

// ConflictError is a request refused because of the state of what it names (a live session
// on the slot, an ended session, a resolved approval, a reused Idempotency-Key). Its message
// may be shown to the caller.
type ConflictError struct{ Message string }

func (e *ConflictError) Error() string { return e.Message }

func conflictf(format string, args ...any) *ConflictError {
	return &ConflictError{Message: fmt.Sprintf(format, args...)}
}

// SpawnResult answers POST /v1/agents.
type SpawnResult struct {
	CommandID, Slot, SessionID string
	// Status is "provisioning".
	Status string
}

// MessageResult answers POST /v1/agents/{slot}/messages.
type MessageResult struct {
	MessageID, Slot, SessionID string
	// Queued reports that the session was busy: the message is taken at its next turn.
	Queued bool
}

// StopResult answers DELETE /v1/agents/{slot}.
type StopResult struct {
	CommandID, Slot, SessionID string
	// Status is "stopping".
	Status string
	// Repeated reports that the session was stopping already: CommandID is the stop under way,
	// and this stop changed nothing (the console then says so and audits nothing).
	Repeated bool
}

// SlotView is one of the caller's slots with its current (or last) session.
type SlotView struct {
	Slot    string
	Session *SessionView
}

// SessionView is a session as its account sees it.
type SessionView struct {
	ID, Slot, Model, Purpose, AgentName, State, EndReason string
	TargetEnvironment, ResourceProfile                    string
	Turns, MaxTurns                                       int
	SpentMicros, MaxSpendMicros                           int64
	MaxDurationSeconds                                    int
	CreatedAt                                             time.Time
	ReadyAt, EndedAt                                      *time.Time
	// LastSeq is the sequence number of the session's newest event (0: none yet).
	LastSeq int64
	// StartedByKey, StartedByGrant and StartedByUser say who started the session, each
	// uuid.Nil when not: the API key (POST /v1/agents, or the key whose agent_spawn was
	// approved), the OAuth grant of the connected app whose agent_spawn was approved, and the
	// member who started it on the web console (recorded since migration 0029: a console
	// session from before it has none of the three). The console lets a member act only on the
	// sessions they started (impl/web's mayControlSession).
	StartedByKey, StartedByGrant, StartedByUser uuid.UUID
}

// Event is one entry of a session's event log. Kinds: state (from, to, reason), message_in
// (message_id, text), model_call (turn, model, expert, input_tokens, output_tokens,
// cost_micros, request_id), tool_call (turn, call_id, name, arguments), tool_result (turn,
// call_id, name, text, truncated, is_error), message_out (turn, text), error (text).
type Event struct {
	Seq  int64
	Kind string
	Data json.RawMessage
	At   time.Time
}

// Final reports whether e is the state event that ends its session: the last one of its log,
// after which a follower of the log stops.
func (e Event) Final() bool {
	if e.Kind != "state" {
		return false
	}
	var d struct {
		To string `json:"to"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return Ended(d.To)
}

// Tail answers tail_agent_session: the session, its events after the cursor (or its newest
// ones), and the cursor to continue from.
type Tail struct {
	Session SessionView
	Events  []Event
	Cursor  int64
	Waited  time.Duration
}

// Bounds of Tail.
const (
	MaxTailLines = 500
	MaxTailWait  = 30 * time.Second
)

// Ticket is an account's ticket.
type Ticket struct {
	ID        string
	AccountID uuid.UUID
	SessionID string
	Title     string
	Body      string
	State     string
	OpenedBy  string
	CreatedAt time.Time
	ClosedAt  *time.Time
}

// SpawnAction is the arguments of agent_spawn.
type SpawnAction struct {
	Purpose           string `json:"purpose"`
	Model             string `json:"model,omitempty"`
	TargetEnvironment string `json:"target_environment,omitempty"`
	ResourceProfile   string `json:"resource_profile,omitempty"`
	AgentName         string `json:"agent_name,omitempty"`
	MaxTurns          *int   `json:"max_turns,omitempty"`
	MaxSpend          *int64 `json:"max_spend,omitempty"`
}

// Approval is an approval-gated action and its outcome. KeyID is the API key that requested it
// ("" when none); SessionID is the spawned session (spawn) or the prompted one (prompt).
type Approval struct {
	ID, Action, State, ActionStatus, SessionID, MessageID, Failure, ResolvedBy string
	KeyID                                                                      string
	// RequestedBy names the connected app (and member) of an OAuth grant that asked, when no
	// key did; "" for a key's request.
	RequestedBy          string
	AccountID            uuid.UUID
	Arguments            json.RawMessage
	ArgumentsHash        string
	CreatedAt, ExpiresAt time.Time
	ResolvedAt           *time.Time
	// NoFreeSlot reports, on the approval RequestSpawn has just made, that every slot of the
	// account ran a session when it was asked, so that approved then the spawn would fail; it
	// is false on every other approval.
	NoFreeSlot bool
}

// SlotAssignment is a slot as the operator sees it.
type SlotAssignment struct {
	AccountID    uuid.UUID
	Account      string
	Slot         string
	SessionID    string
	SessionState string
	CreatedAt    time.Time
}
