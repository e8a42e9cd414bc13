package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
)

// AuditEntry is one row of an account's audit log (audit_log, migration 0008; impl/web/audit
// owns what the rows mean): who did what, when, to what, with the object's state before and
// after as JSON documents.
type AuditEntry struct {
	// ID numbers the entries in the order they were recorded (set by the database).
	ID int64
	// AccountID is the account the action was done in.
	AccountID uuid.UUID
	// Actor names who did it (a user, "operator", ...).
	Actor string
	// ActorUserID is the user who did it (uuid.Nil: no user, such as the operator).
	ActorUserID uuid.UUID
	// Action is what was done, such as "key.created".
	Action string
	// Target names what it was done to.
	Target string
	// Before and After are the object's state as JSON documents (nil: none).
	Before, After []byte
	// At is when it was recorded (set by the database).
	At time.Time
}

// RecordAudit appends e to its account's audit log (its ID and At are set by the database).
func (s *Store) RecordAudit(ctx context.Context, e AuditEntry) error {
	return insertAudit(ctx, s.q, e)
}

// RecordAudit appends e to its account's audit log in the agents' queries' transaction, so
// that an agent's change and its entry commit together or not at all.
func (a *AgentQueries) RecordAudit(ctx context.Context, e AuditEntry) error {
	return insertAudit(ctx, a.q, e)
}

func insertAudit(ctx context.Context, q *db.Queries, e AuditEntry) error {
	var actorID pgtype.UUID
	if e.ActorUserID != uuid.Nil {
		actorID = pgtype.UUID{Bytes: e.ActorUserID, Valid: true}
	}
	_, err := q.InsertAudit(ctx, db.InsertAuditParams{AccountID: e.AccountID, Actor: e.Actor, ActorUserID: actorID,
		Action: e.Action, Target: e.Target, Before: e.Before, After: e.After})
	return err
}

// ListAudit returns up to limit entries of the account's audit log, newest first, older than
// beforeID (0: the newest).
func (s *Store) ListAudit(ctx context.Context, accountID uuid.UUID, beforeID int64, limit int) ([]AuditEntry, error) {
	rows, err := s.q.ListAudit(ctx, db.ListAuditParams{AccountID: accountID, BeforeID: beforeID, RowLimit: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]AuditEntry, 0, len(rows))
	for _, r := range rows {
		e := AuditEntry{ID: r.ID, AccountID: r.AccountID, Actor: r.Actor, Action: r.Action, Target: r.Target,
			Before: r.Before, After: r.After, At: r.At}
		if r.ActorUserID.Valid {
			e.ActorUserID = r.ActorUserID.Bytes
		}
		out = append(out, e)
	}
	return out, nil
}
