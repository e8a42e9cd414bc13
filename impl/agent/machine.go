package agent

import "fmt"

// Session states.
const (
	StateProvisioning = "provisioning"
	StateReady        = "ready"
	StateBusy         = "busy"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
	StateFailed       = "failed"
)

// End reasons of a session.
const (
	ReasonUserStop         = "user_stop"
	ReasonMaxTurns         = "max_turns"
	ReasonMaxSpend         = "max_spend"
	ReasonMaxDuration      = "max_duration"
	ReasonError            = "error"
	ReasonEnvironmentEnded = "environment_ended"
	ReasonSlotUnassigned   = "slot_unassigned"
	// ReasonKeyLimit: the key that started the session refused a model call by its limits
	// (its credit cap reached in the period, or the session's model taken out of its subset).
	ReasonKeyLimit = "key_limit"
	// ReasonKeyRevoked: the key that started the session was revoked.
	ReasonKeyRevoked = "key_revoked"
	// ReasonKeyDisabled: the key that started the session was disabled (enabling it again
	// revives no session).
	ReasonKeyDisabled = "key_disabled"
	// ReasonKeyExpired: the key that started the session reached its expiry.
	ReasonKeyExpired = "key_expired"
	// ReasonAccessRevoked: the connected app whose approved agent_spawn started the session
	// lost its access (its OAuth grant was revoked or reached the end of its lifetime, or its
	// member left the account or lost the role they allowed the app with).
	ReasonAccessRevoked = "access_revoked"
	// ReasonMemberRemoved: the member who started the session on the console is no longer in
	// the account.
	ReasonMemberRemoved = "member_removed"
)

// Command statuses (spawn and stop) and message states.
const (
	CommandAccepted = "accepted"
	CommandRunning  = "running"
	CommandDone     = "done"
	CommandFailed   = "failed"
	MessageQueued   = "queued"
	MessageTaken    = "taken"
)

// Approval states, and the action statuses of an approved one.
const (
	ApprovalPending   = "pending"
	ApprovalApproved  = "approved"
	ApprovalDenied    = "denied"
	ApprovalExpired   = "expired"
	ApprovalCancelled = "cancelled"
	ActionQueued      = "queued"
	ActionRunning     = "running"
	ActionDone        = "done"
	ActionFailed      = "failed"
)

// Machine is a state machine: its states, and the transitions it allows (nothing else).
type Machine struct {
	Name   string
	States []string
	allow  map[[2]string]bool
}

func newMachine(name string, states []string, edges ...[2]string) Machine {
	m := Machine{Name: name, States: states, allow: map[[2]string]bool{}}
	for _, e := range edges {
		m.allow[e] = true
	}
	return m
}

// Allowed reports whether the machine moves from one state to another.
func (m Machine) Allowed(from, to string) bool { return m.allow[[2]string{from, to}] }

// Check returns an error naming the refused transition, or nil.
func (m Machine) Check(from, to string) error {
	if m.Allowed(from, to) {
		return nil
	}
	return fmt.Errorf("%s: %s → %s is not allowed", m.Name, from, to)
}

// Terminal reports whether no transition leaves the state.
func (m Machine) Terminal(state string) bool {
	for e := range m.allow {
		if e[0] == state {
			return false
		}
	}
	return true
}

// The machines of sessions, commands, messages, approvals and approved actions.
var (
	SessionMachine = newMachine("session",
		[]string{StateProvisioning, StateReady, StateBusy, StateStopping, StateStopped, StateFailed},
		[2]string{StateProvisioning, StateReady}, [2]string{StateProvisioning, StateStopping}, [2]string{StateProvisioning, StateFailed},
		[2]string{StateReady, StateBusy}, [2]string{StateReady, StateStopping},
		[2]string{StateBusy, StateReady}, [2]string{StateBusy, StateStopping}, [2]string{StateBusy, StateFailed},
		[2]string{StateStopping, StateStopped}, [2]string{StateStopping, StateFailed})
	CommandMachine = newMachine("command",
		[]string{CommandAccepted, CommandRunning, CommandDone, CommandFailed},
		[2]string{CommandAccepted, CommandRunning}, [2]string{CommandRunning, CommandDone}, [2]string{CommandRunning, CommandFailed},
		// A stop command whose session ended before its job ran (or whose job was discarded)
		// ends with the session: done when stopped by the user, else failed.
		[2]string{CommandAccepted, CommandDone}, [2]string{CommandAccepted, CommandFailed})
	MessageMachine  = newMachine("message", []string{MessageQueued, MessageTaken}, [2]string{MessageQueued, MessageTaken})
	ApprovalMachine = newMachine("approval",
		[]string{ApprovalPending, ApprovalApproved, ApprovalDenied, ApprovalExpired, ApprovalCancelled},
		[2]string{ApprovalPending, ApprovalApproved}, [2]string{ApprovalPending, ApprovalDenied},
		[2]string{ApprovalPending, ApprovalExpired}, [2]string{ApprovalPending, ApprovalCancelled})
	ActionMachine = newMachine("approved action",
		[]string{ActionQueued, ActionRunning, ActionDone, ActionFailed},
		[2]string{ActionQueued, ActionRunning}, [2]string{ActionRunning, ActionDone}, [2]string{ActionRunning, ActionFailed})
)

// live reports whether a session state is not an end state.
func live(state string) bool { return state != StateStopped && state != StateFailed }

// Ended reports whether a session state is an end state (stopped or failed).
func Ended(state string) bool { return !live(state) }
