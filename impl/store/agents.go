package store

import (
	"github.com/tollgate/tollgate/gen/db"
)

// The records of the hosted agents (impl/agent). Each is exactly the row of its table as the
// generated queries read it, so it is a type alias of that row rather than a copy of it (see
// the package comment): the agents name them through the store and never import gen/db.

// AgentSession is a stored agent session: its slot, model, bounds, state machine fields
// (state, end reason, turns, spend, step, next event number) and the key or OAuth grant it
// acts for.
type AgentSession = db.AgentSession

// AgentApproval is a stored approval of an agent action, with the action's status once it is
// approved.
type AgentApproval = db.AgentApproval

// AgentSlot is an agent slot assigned to an account.
type AgentSlot = db.AgentSlot

// AgentSlotListing is a slot as the operator's listing shows it: its account's name and its
// live session's id and state (NULL and "" when it has none).
type AgentSlotListing = db.ListAgentSlotsRow

// AgentTicket is a stored ticket of an account, opened by an operator or by an agent.
type AgentTicket = db.AgentTicket

// AgentEvent is one event of a session's log, numbered by seq.
type AgentEvent = db.AgentEvent

// AgentMessage is a message sent to a session, queued until a turn takes it.
type AgentMessage = db.AgentMessage

// AgentCommand is a stored lifecycle command (spawn, message, stop) with its Idempotency-Key,
// the hash of its request and its first answer.
type AgentCommand = db.AgentCommand

// NewAgentSession is what InsertAgentSession stores.
type NewAgentSession = db.InsertAgentSessionParams

// NewAgentApproval is what InsertAgentApproval stores.
type NewAgentApproval = db.InsertAgentApprovalParams

// NewAgentCommand is what InsertAgentCommand stores.
type NewAgentCommand = db.InsertAgentCommandParams

// NewAgentTicket is what InsertAgentTicket stores.
type NewAgentTicket = db.InsertAgentTicketParams

// NewAgentMessage is what InsertAgentMessage stores.
type NewAgentMessage = db.InsertAgentMessageParams

// NewAgentEvent is what InsertAgentEvent stores.
type NewAgentEvent = db.InsertAgentEventParams

// AgentSessionUpdate is the session row's fields that UpdateAgentSession writes back.
type AgentSessionUpdate = db.UpdateAgentSessionParams

// AgentActionUpdate is a move of an approved action's status that SetAgentApprovalAction makes,
// conditional on its status before (From).
type AgentActionUpdate = db.SetAgentApprovalActionParams
