package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// The approvals of agent actions and the tickets of accounts (AgentQueries).

// InsertAgentApproval stores a pending approval.
func (a *AgentQueries) InsertAgentApproval(ctx context.Context, n NewAgentApproval) (AgentApproval, error) {
	return a.q.InsertAgentApproval(ctx, n)
}

// CountPendingAgentApprovals counts the account's pending approvals.
func (a *AgentQueries) CountPendingAgentApprovals(ctx context.Context, account uuid.UUID) (int64, error) {
	return a.q.CountPendingAgentApprovals(ctx, account)
}

// GetAgentApproval reads the approval with id.
func (a *AgentQueries) GetAgentApproval(ctx context.Context, id uuid.UUID) (AgentApproval, error) {
	return a.q.GetAgentApproval(ctx, id)
}

// GetAgentApprovalForUpdate reads the approval with id and locks its row (FOR UPDATE).
func (a *AgentQueries) GetAgentApprovalForUpdate(ctx context.Context, id uuid.UUID) (AgentApproval, error) {
	return a.q.GetAgentApprovalForUpdate(ctx, id)
}

// ListAgentApprovals lists the approvals of account (nil: every account's) in state (""
// any), newest first, at most limit.
func (a *AgentQueries) ListAgentApprovals(ctx context.Context, account *uuid.UUID, state string, limit int32) ([]AgentApproval, error) {
	return a.q.ListAgentApprovals(ctx, db.ListAgentApprovalsParams{AccountID: agentScope(account), State: state, Max: limit})
}

// ExpireAgentApproval expires the approval with id when it is pending past its expiry, and
// returns how many it expired.
func (a *AgentQueries) ExpireAgentApproval(ctx context.Context, id uuid.UUID) (int64, error) {
	return a.q.ExpireAgentApproval(ctx, id)
}

// ExpireAgentApprovals expires every approval pending past its expiry, and returns their ids.
func (a *AgentQueries) ExpireAgentApprovals(ctx context.Context) ([]uuid.UUID, error) {
	return a.q.ExpireAgentApprovals(ctx)
}

// ResolveAgentApproval moves the pending approval with id to state (approved, with its action
// queued, or denied), resolved by by; no row when it is not pending.
func (a *AgentQueries) ResolveAgentApproval(ctx context.Context, id uuid.UUID, state, by string) (AgentApproval, error) {
	return a.q.ResolveAgentApproval(ctx, db.ResolveAgentApprovalParams{State: state, ResolvedBy: by, ID: id})
}

// SetAgentApprovalAction moves an approved action's status when it is still u.From, and
// returns how many approvals it moved.
func (a *AgentQueries) SetAgentApprovalAction(ctx context.Context, u AgentActionUpdate) (int64, error) {
	return a.q.SetAgentApprovalAction(ctx, u)
}

// CancelSessionPromptApprovals cancels the account's pending agent_prompt approvals for the
// session (whose id is given as text, as the approval's arguments hold it).
func (a *AgentQueries) CancelSessionPromptApprovals(ctx context.Context, account uuid.UUID, session string) error {
	return a.q.CancelSessionPromptApprovals(ctx, db.CancelSessionPromptApprovalsParams{AccountID: account, SessionID: session})
}

// InsertAgentTicket opens a ticket; a session that does not exist refuses it with a
// foreign-key violation (23503).
func (a *AgentQueries) InsertAgentTicket(ctx context.Context, t NewAgentTicket) (AgentTicket, error) {
	return a.q.InsertAgentTicket(ctx, t)
}

// GetAgentTicket reads the ticket with id.
func (a *AgentQueries) GetAgentTicket(ctx context.Context, id uuid.UUID) (AgentTicket, error) {
	return a.q.GetAgentTicket(ctx, id)
}

// CloseAgentTicket closes the open ticket with id; no row when it is closed already.
func (a *AgentQueries) CloseAgentTicket(ctx context.Context, id uuid.UUID) (AgentTicket, error) {
	return a.q.CloseAgentTicket(ctx, id)
}

// ListAgentTickets lists the tickets of account (nil: every account's) in state ("" any),
// newest first, at most limit; with a key (not uuid.Nil), only the tickets that the sessions
// that key started opened.
func (a *AgentQueries) ListAgentTickets(ctx context.Context, account *uuid.UUID, key uuid.UUID, state string, limit int32) ([]AgentTicket, error) {
	return a.q.ListAgentTickets(ctx, db.ListAgentTicketsParams{AccountID: agentScope(account), KeyID: agentID(key), State: state, Max: limit})
}
