package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/store"
)

// inTx runs fn in one transaction, committing when it returns nil.
func (s *Service) inTx(ctx context.Context, fn func(tx *store.AgentTx) error) error {
	return s.store.InAgentTx(ctx, fn)
}

// sessionTx is a session row locked in a transaction, and the events appended to it there.
// Every change of a session goes through one: it numbers the events from the row's next_seq,
// checks each state change against SessionMachine, and save writes the row back.
type sessionTx struct {
	ctx context.Context
	tx  *store.AgentTx
	row store.AgentSession
	now time.Time
}

// lockSession locks the session's row for the rest of the transaction, whatever its account:
// for the River workers, locking the session their own job names. A path that serves a
// tenant locks with lockAccountSession.
func lockSession(ctx context.Context, tx *store.AgentTx, id uuid.UUID) (*sessionTx, error) {
	row, err := tx.GetAgentSessionForUpdate(ctx, id)
	if err != nil {
		return nil, notFound(err)
	}
	return &sessionTx{ctx: ctx, tx: tx, row: row, now: time.Now()}, nil
}

// lockAccountSession locks the account's session's row for the rest of the transaction;
// ErrNotFound for another account's session, as for an unknown one.
func lockAccountSession(ctx context.Context, tx *store.AgentTx, account, id uuid.UUID) (*sessionTx, error) {
	row, err := tx.GetAccountAgentSessionForUpdate(ctx, account, id)
	if err != nil {
		return nil, notFound(err)
	}
	return &sessionTx{ctx: ctx, tx: tx, row: row, now: time.Now()}, nil
}

// event appends an event to the session's log.
func (st *sessionTx) event(kind string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	seq := st.row.NextSeq
	st.row.NextSeq++
	return st.tx.InsertAgentEvent(st.ctx, store.NewAgentEvent{SessionID: st.row.ID, Seq: seq, AccountID: st.row.AccountID, Kind: kind, Data: storableJSON(b)})
}

// move changes the session's state (reason: the end reason, kept while stopping), with its
// state event.
func (st *sessionTx) move(to, reason string) error {
	from := st.row.State
	if err := SessionMachine.Check(from, to); err != nil {
		return err
	}
	st.row.State = to
	if reason != "" {
		st.row.EndReason = reason
	}
	switch to {
	case StateReady:
		if st.row.ReadyAt == nil {
			t := st.now
			st.row.ReadyAt = &t
		}
	case StateStopped, StateFailed:
		t := st.now
		st.row.EndedAt = &t
		if err := st.tx.FinishAgentStopCommands(st.ctx, st.row.ID, stopCommandsEnd(to, st.row.EndReason)); err != nil {
			return err
		}
		if err := st.tx.CancelSessionPromptApprovals(st.ctx, st.row.AccountID, st.row.ID.String()); err != nil {
			return err
		}
	}
	data := map[string]string{"from": from, "to": to}
	if reason != "" {
		data["reason"] = reason
	}
	return st.event("state", data)
}

// stopCommandsEnd is how the stop commands still under way (accepted or running) of a session
// that ends in state to with reason end: done when it ended stopped by the user (the stop took
// effect, whichever command's job carried it out), failed when it ended for another cause first
// (a bound, a revocation, an error: the session's end reason says which).
func stopCommandsEnd(to, reason string) string {
	if to == StateStopped && reason == ReasonUserStop {
		return CommandDone
	}
	return CommandFailed
}

// end ends a live session with reason: through stopping to stopped, or to failed.
func (st *sessionTx) end(to, reason string) error {
	if to == StateStopped && st.row.State != StateStopping {
		if err := st.move(StateStopping, reason); err != nil {
			return err
		}
	}
	if to == StateStopped && reason == "" {
		reason = st.row.EndReason
	}
	return st.move(to, reason)
}

// save writes the row back.
func (st *sessionTx) save() error {
	r := st.row
	return st.tx.UpdateAgentSession(st.ctx, store.AgentSessionUpdate{
		ID: r.ID, State: r.State, EndReason: r.EndReason, Turns: r.Turns, SpentMicros: r.SpentMicros,
		Step: r.Step, NextSeq: r.NextSeq, ReadyAt: r.ReadyAt, EndedAt: r.EndedAt,
	})
}

// deadline is when the session's wall-clock bound ends it (zero before it is ready).
func deadline(r store.AgentSession) time.Time {
	if r.ReadyAt == nil {
		return time.Time{}
	}
	return r.ReadyAt.Add(time.Duration(r.MaxDurationSeconds) * time.Second)
}

// notFound maps pgx's no-rows error to ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// tenantOf is the account a tenant-facing call acts for: ErrNotFound for a zero account id (a
// caller that forgot to set it), which must never read as "every account".
func tenantOf(p auth.Principal) (uuid.UUID, error) {
	return tenantID(p.AccountID)
}

// tenantID refuses a zero account id as not found (see tenantOf).
func tenantID(id uuid.UUID) (uuid.UUID, error) {
	if id == uuid.Nil {
		return uuid.Nil, ErrNotFound
	}
	return id, nil
}

// scope is the account filter of an operator's listing: nil is every account (the operator's
// explicit "all accounts"), a pointer to an account that account alone, and a pointer to the
// zero id ErrNotFound (never every account).
func scope(accountID *uuid.UUID) (*uuid.UUID, error) {
	if accountID == nil {
		return nil, nil
	}
	if _, err := tenantID(*accountID); err != nil {
		return nil, err
	}
	return accountID, nil
}

func pgUUID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: id != uuid.Nil} }

func fromPG(id pgtype.UUID) uuid.UUID {
	if !id.Valid {
		return uuid.Nil
	}
	return uuid.UUID(id.Bytes)
}

func idText(id pgtype.UUID) string {
	if !id.Valid {
		return ""
	}
	return uuid.UUID(id.Bytes).String()
}

// parseID reads an id the caller gave; anything unreadable is a thing that does not exist.
func parseID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, ErrNotFound
	}
	return id, nil
}

// view is the session as its account sees it.
func view(r store.AgentSession) SessionView {
	return SessionView{
		ID: r.ID.String(), Slot: r.SlotName, Model: r.Model, Purpose: r.Purpose, AgentName: r.AgentName,
		State: r.State, EndReason: r.EndReason, TargetEnvironment: r.TargetEnvironment, ResourceProfile: r.ResourceProfile,
		Turns: int(r.Turns), MaxTurns: int(r.MaxTurns), SpentMicros: r.SpentMicros, MaxSpendMicros: r.MaxSpendMicros,
		MaxDurationSeconds: int(r.MaxDurationSeconds), CreatedAt: r.CreatedAt, ReadyAt: r.ReadyAt, EndedAt: r.EndedAt,
		LastSeq:      r.NextSeq - 1,
		StartedByKey: fromPG(r.KeyID), StartedByGrant: fromPG(r.OauthGrantID), StartedByUser: fromPG(r.StartedByUser),
	}
}

// endedText names an ended session's state and reason, e.g. "stopped: max_turns".
func endedText(r store.AgentSession) string {
	if r.EndReason == "" {
		return r.State
	}
	return fmt.Sprintf("%s: %s", r.State, r.EndReason)
}
