package audit

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
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
	DB db.DBTX
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

// Record appends e (its ID and At are set by the database). Pass a transaction's DBTX in
// l.DB to record in the same transaction as the change.
func (l *Log) Record(ctx context.Context, e Entry) error {
	before, err := encode(e.Before)
	if err != nil {
		return err
	}
	after, err := encode(e.After)
	if err != nil {
		return err
	}
	var actorID pgtype.UUID
	if e.ActorUserID != uuid.Nil {
		actorID = pgtype.UUID{Bytes: e.ActorUserID, Valid: true}
	}
	_, err = db.New(l.DB).InsertAudit(ctx, db.InsertAuditParams{AccountID: e.AccountID, Actor: e.Actor, ActorUserID: actorID,
		Action: e.Action, Target: e.Target, Before: before, After: after})
	return err
}

// List returns up to limit entries of the account, newest first, older than beforeID (0: the
// newest). Before and After come back as json.RawMessage.
func (l *Log) List(ctx context.Context, accountID uuid.UUID, beforeID int64, limit int) ([]Entry, error) {
	rows, err := db.New(l.DB).ListAudit(ctx, db.ListAuditParams{AccountID: accountID, BeforeID: beforeID, RowLimit: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(rows))
	for _, r := range rows {
		e := Entry{ID: r.ID, AccountID: r.AccountID, Actor: r.Actor, Action: r.Action, Target: r.Target, At: r.At}
		if r.ActorUserID.Valid {
			e.ActorUserID = r.ActorUserID.Bytes
		}
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
