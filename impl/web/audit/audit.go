package audit

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
)

// Actions recorded by the web application (others may add theirs).
const (
	ActionSignIn       = "session.sign_in"
	ActionKeyCreated   = "key.created"
	ActionKeyRevoked   = "key.revoked"
	ActionKeyChanged   = "key.changed"
	ActionLimitChanged = "limits.changed"
	ActionApproval     = "approval.decided"
)

// Entry is one audited action. Before and After are any JSON-encodable values (nil: none).
type Entry struct {
	ID          int64
	AccountID   uuid.UUID
	Actor       string
	ActorUserID uuid.UUID
	Action      string
	Target      string
	Before      any
	After       any
	At          time.Time
}

// Log writes and reads the audit log.
type Log struct {
	// Store is the database the log is kept in.
	Store *store.Store
}

func encode(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(v)
}

// Record appends e (its ID and At are set by the database).
func (l *Log) Record(ctx context.Context, e Entry) error {
	before, err := encode(e.Before)
	if err != nil {
		return err
	}
	after, err := encode(e.After)
	if err != nil {
		return err
	}
	return l.Store.RecordAudit(ctx, store.AuditEntry{AccountID: e.AccountID, Actor: e.Actor, ActorUserID: e.ActorUserID,
		Action: e.Action, Target: e.Target, Before: before, After: after})
}

// List returns up to limit entries of the account, newest first, older than beforeID (0: the
// newest). Before and After come back as json.RawMessage.
func (l *Log) List(ctx context.Context, accountID uuid.UUID, beforeID int64, limit int) ([]Entry, error) {
	rows, err := l.Store.ListAudit(ctx, accountID, beforeID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(rows))
	for _, r := range rows {
		e := Entry{ID: r.ID, AccountID: r.AccountID, Actor: r.Actor, ActorUserID: r.ActorUserID, Action: r.Action,
			Target: r.Target, At: r.At}
		if r.Before != nil {
			e.Before = json.RawMessage(r.Before)
		}
		if r.After != nil {
			e.After = json.RawMessage(r.After)
		}
		out = append(out, e)
	}
	return out, nil
}

// Actions on an account that only the operator takes (`tollgate admin`).
const (
	ActionModelGranted  = "model.granted"
	ActionModelRevoked  = "model.revoked"
	ActionCreditGranted = "credit.granted"
	ActionSlotAssigned  = "slot.assigned"
	ActionSlotRemoved   = "slot.unassigned"
	ActionTicketOpened  = "ticket.opened"
	ActionTicketClosed  = "ticket.closed"
	// The account's own upstream key for a provider set or removed (tollgate admin
	// provider-key): the target names the provider, the state its hint, never the key.
	ActionUpstreamKeySet     = "upstream_key.set"
	ActionUpstreamKeyRemoved = "upstream_key.removed"
)

// ActionAgentSessionsEnded is the entry of the agent sessions that one cause ended, a key
// revoked, disabled or expired, a member removed or a connected app's grant revoked
// (agent.Service records it; actor "tollgate", the cause as its target, after it the end
// reason, the count and the ids of the sessions).
const ActionAgentSessionsEnded = "agent.sessions_ended"
