package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
)

// The agents' sessions, their event logs and their queued messages (AgentQueries).

// agentID is id as a nullable uuid column's value: NULL for uuid.Nil.
func agentID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: id != uuid.Nil} }

// agentScope is an account filter as the listings take it: NULL (every account) for nil.
func agentScope(account *uuid.UUID) pgtype.UUID {
	if account == nil {
		return pgtype.UUID{}
	}
	return pgtype.UUID{Bytes: *account, Valid: true}
}

// InsertAgentSession stores a new session; a slot that runs a live session already refuses it
// with a unique violation (23505).
func (a *AgentQueries) InsertAgentSession(ctx context.Context, s NewAgentSession) (AgentSession, error) {
	return a.q.InsertAgentSession(ctx, s)
}

// GetAgentSession reads the session with id, of any account: for the agents' River workers,
// reading the session their own job names. A path that serves a tenant reads
// GetAccountAgentSession.
func (a *AgentQueries) GetAgentSession(ctx context.Context, id uuid.UUID) (AgentSession, error) {
	return a.q.GetAgentSession(ctx, id)
}

// GetAgentSessionForUpdate reads the session with id, of any account, and locks its row (FOR
// UPDATE) for the rest of the transaction: for the agents' River workers, locking the session
// their own job names. A path that serves a tenant locks GetAccountAgentSessionForUpdate.
func (a *AgentQueries) GetAgentSessionForUpdate(ctx context.Context, id uuid.UUID) (AgentSession, error) {
	return a.q.GetAgentSessionForUpdate(ctx, id)
}

// GetAccountAgentSessionForUpdate reads the account's session with id and locks its row (FOR
// UPDATE) for the rest of the transaction; no row for another account's.
func (a *AgentQueries) GetAccountAgentSessionForUpdate(ctx context.Context, account, id uuid.UUID) (AgentSession, error) {
	return a.q.GetAccountAgentSessionForUpdate(ctx, db.GetAccountAgentSessionForUpdateParams{AccountID: account, ID: id})
}

// GetAccountAgentSession reads the account's session with id (no row for another account's).
func (a *AgentQueries) GetAccountAgentSession(ctx context.Context, account, id uuid.UUID) (AgentSession, error) {
	return a.q.GetAccountAgentSession(ctx, db.GetAccountAgentSessionParams{AccountID: account, ID: id})
}

// ListAccountAgentSessions lists the account's sessions, newest first, at most limit; with a
// key (not uuid.Nil), only the sessions that key started.
func (a *AgentQueries) ListAccountAgentSessions(ctx context.Context, account, key uuid.UUID, limit int32) ([]AgentSession, error) {
	return a.q.ListAccountAgentSessions(ctx, db.ListAccountAgentSessionsParams{AccountID: account, KeyID: agentID(key), Max: limit})
}

// LatestSlotSession reads the newest session, live or ended, of the account's slot (none of
// another account's).
func (a *AgentQueries) LatestSlotSession(ctx context.Context, account, slot uuid.UUID) (AgentSession, error) {
	return a.q.LatestSlotSession(ctx, db.LatestSlotSessionParams{AccountID: account, SlotID: agentID(slot)})
}

// LiveSlotSessionForUpdate reads the live session of the account's slot (none of another
// account's) and locks its row (FOR UPDATE).
func (a *AgentQueries) LiveSlotSessionForUpdate(ctx context.Context, account, slot uuid.UUID) (AgentSession, error) {
	return a.q.LiveSlotSessionForUpdate(ctx, db.LiveSlotSessionForUpdateParams{AccountID: account, SlotID: agentID(slot)})
}

// MemberLiveSessionIDs returns the ids of the live sessions the member user started on the
// console in the account, oldest first.
func (a *AgentQueries) MemberLiveSessionIDs(ctx context.Context, account, user uuid.UUID) ([]uuid.UUID, error) {
	return a.q.MemberLiveAgentSessionIDs(ctx, db.MemberLiveAgentSessionIDsParams{AccountID: account, UserID: user})
}

// KeysLiveSessionIDs returns the ids of the live sessions of the account started with one of
// the keys, oldest first.
func (a *AgentQueries) KeysLiveSessionIDs(ctx context.Context, account uuid.UUID, keys []uuid.UUID) ([]uuid.UUID, error) {
	return a.q.KeysLiveAgentSessionIDs(ctx, db.KeysLiveAgentSessionIDsParams{AccountID: account, KeyIds: keys})
}

// GrantLiveSessionIDs returns the ids of the live sessions of the account that the connected
// app with the OAuth grant started, oldest first.
func (a *AgentQueries) GrantLiveSessionIDs(ctx context.Context, account, grant uuid.UUID) ([]uuid.UUID, error) {
	return a.q.GrantLiveAgentSessionIDs(ctx, db.GrantLiveAgentSessionIDsParams{AccountID: account, GrantID: grant})
}

// MemberGrantsLiveSessionIDs returns the ids of the live sessions of the account that the
// connected apps the member user allowed started, oldest first.
func (a *AgentQueries) MemberGrantsLiveSessionIDs(ctx context.Context, account, user uuid.UUID) ([]uuid.UUID, error) {
	return a.q.MemberGrantsLiveAgentSessionIDs(ctx, db.MemberGrantsLiveAgentSessionIDsParams{AccountID: account, UserID: user})
}

// LapsedSession is a live session whose right to run has lapsed with nobody ending it, and
// the reason it ends with (LapsedSessions).
type LapsedSession = db.LapsedAgentSessionsRow

// LapsedSessions returns up to 500 live sessions, not stopping yet, whose connected app lost
// its grant (access_revoked), whose key was revoked, disabled or has expired (key_revoked,
// key_disabled, key_expired), or whose member who started it on the console left the account
// (member_removed), by account and oldest first.
func (a *AgentQueries) LapsedSessions(ctx context.Context) ([]LapsedSession, error) {
	return a.q.LapsedAgentSessions(ctx)
}

// UpdateAgentSession writes a session row's changed fields back.
func (a *AgentQueries) UpdateAgentSession(ctx context.Context, u AgentSessionUpdate) error {
	return a.q.UpdateAgentSession(ctx, u)
}

// InsertAgentEvent appends an event to a session's log (notifying tollgate_agent_events at
// commit).
func (a *AgentQueries) InsertAgentEvent(ctx context.Context, e NewAgentEvent) error {
	return a.q.InsertAgentEvent(ctx, e)
}

// AllAgentEvents lists the session's whole event log, in order.
func (a *AgentQueries) AllAgentEvents(ctx context.Context, session uuid.UUID) ([]AgentEvent, error) {
	return a.q.AllAgentEvents(ctx, session)
}

// ListAgentEvents lists the events of the account's session after seq, in order, at most
// limit (none for another account's session).
func (a *AgentQueries) ListAgentEvents(ctx context.Context, account, session uuid.UUID, afterSeq int64, limit int32) ([]AgentEvent, error) {
	return a.q.ListAgentEvents(ctx, db.ListAgentEventsParams{AccountID: account, SessionID: session, Seq: afterSeq, Limit: limit})
}

// ListAgentEventsTail lists the newest events of the account's session, newest first, at most
// limit (none for another account's session).
func (a *AgentQueries) ListAgentEventsTail(ctx context.Context, account, session uuid.UUID, limit int32) ([]AgentEvent, error) {
	return a.q.ListAgentEventsTail(ctx, db.ListAgentEventsTailParams{AccountID: account, SessionID: session, Limit: limit})
}

// LastAgentEventSeq is the number of the session's last event.
func (a *AgentQueries) LastAgentEventSeq(ctx context.Context, session uuid.UUID) (int64, error) {
	return a.q.LastAgentEventSeq(ctx, session)
}

// InsertAgentMessage queues a message for a session.
func (a *AgentQueries) InsertAgentMessage(ctx context.Context, m NewAgentMessage) error {
	return a.q.InsertAgentMessage(ctx, m)
}

// ListQueuedAgentMessages lists the session's queued messages, in the order they came.
func (a *AgentQueries) ListQueuedAgentMessages(ctx context.Context, session uuid.UUID) ([]AgentMessage, error) {
	return a.q.ListQueuedAgentMessages(ctx, session)
}

// CountQueuedAgentMessages counts the session's queued messages.
func (a *AgentQueries) CountQueuedAgentMessages(ctx context.Context, session uuid.UUID) (int64, error) {
	return a.q.CountQueuedAgentMessages(ctx, session)
}

// TakeAgentMessages marks the queued messages with ids taken by turn, and returns how many
// were still queued.
func (a *AgentQueries) TakeAgentMessages(ctx context.Context, turn int32, ids []uuid.UUID) (int64, error) {
	return a.q.TakeAgentMessages(ctx, db.TakeAgentMessagesParams{Turn: turn, Ids: ids})
}
