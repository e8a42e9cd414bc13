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

// GetAgentApproval reads the approval with id, of any account: for the operator's commands.
// A path that serves a tenant reads GetAccountAgentApproval.
func (a *AgentQueries) GetAgentApproval(ctx context.Context, id uuid.UUID) (AgentApproval, error) {
	return a.q.GetAgentApproval(ctx, id)
}

// GetAccountAgentApproval reads the account's approval with id; no row for another account's.
func (a *AgentQueries) GetAccountAgentApproval(ctx context.Context, account, id uuid.UUID) (AgentApproval, error) {
	return a.q.GetAccountAgentApproval(ctx, db.GetAccountAgentApprovalParams{ID: id, AccountID: account})
}

// GetAgentApprovalForUpdate reads the approval with id, of any account, and locks its row (FOR
// UPDATE): for the worker of an approved action, reading the approval its own job names.
func (a *AgentQueries) GetAgentApprovalForUpdate(ctx context.Context, id uuid.UUID) (AgentApproval, error) {
	return a.q.GetAgentApprovalForUpdate(ctx, id)
}

// ListAgentApprovals lists the approvals of account (nil: every account's) in state (""
// any), newest first, at most limit.
func (a *AgentQueries) ListAgentApprovals(ctx context.Context, account *uuid.UUID, state string, limit int32) ([]AgentApproval, error) {
	return a.q.ListAgentApprovals(ctx, db.ListAgentApprovalsParams{AccountID: agentScope(account), State: state, Max: limit})
}

// ExpireAgentApproval expires the account's approval with id when it is pending past its
// expiry, and returns how many it expired (none of another account's).
func (a *AgentQueries) ExpireAgentApproval(ctx context.Context, account, id uuid.UUID) (int64, error) {
	return a.q.ExpireAgentApproval(ctx, db.ExpireAgentApprovalParams{ID: id, AccountID: account})
}

// ExpireAgentApprovals expires every approval pending past its expiry, and returns their ids.
func (a *AgentQueries) ExpireAgentApprovals(ctx context.Context) ([]uuid.UUID, error) {
	return a.q.ExpireAgentApprovals(ctx)
}

// ResolveAgentApproval moves the account's pending approval with id to state (approved, with
// its action queued, or denied), resolved by by; no row when it is not pending or is another
// account's.
func (a *AgentQueries) ResolveAgentApproval(ctx context.Context, account, id uuid.UUID, state, by string) (AgentApproval, error) {
	return a.q.ResolveAgentApproval(ctx, db.ResolveAgentApprovalParams{State: state, ResolvedBy: by, ID: id, AccountID: account})
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

// GetAgentTicket reads the ticket with id, of any account: for the operator's commands. A path
// that serves a tenant reads GetAccountAgentTicket.
func (a *AgentQueries) GetAgentTicket(ctx context.Context, id uuid.UUID) (AgentTicket, error) {
	return a.q.GetAgentTicket(ctx, id)
}

// GetAccountAgentTicket reads the account's ticket with id; no row for another account's.
func (a *AgentQueries) GetAccountAgentTicket(ctx context.Context, account, id uuid.UUID) (AgentTicket, error) {
	return a.q.GetAccountAgentTicket(ctx, db.GetAccountAgentTicketParams{ID: id, AccountID: account})
}

// CloseAgentTicket closes the account's open ticket with id; no row when it is closed already
// or another account's.
func (a *AgentQueries) CloseAgentTicket(ctx context.Context, account, id uuid.UUID) (AgentTicket, error) {
	return a.q.CloseAgentTicket(ctx, db.CloseAgentTicketParams{ID: id, AccountID: account})
}

// ListAgentTickets lists the tickets of account (nil: every account's) in state ("" any),
// newest first, at most limit; with a key (not uuid.Nil), only the tickets that the sessions
// that key started opened.
func (a *AgentQueries) ListAgentTickets(ctx context.Context, account *uuid.UUID, key uuid.UUID, state string, limit int32) ([]AgentTicket, error) {
	return a.q.ListAgentTickets(ctx, db.ListAgentTicketsParams{AccountID: agentScope(account), KeyID: agentID(key), State: state, Max: limit})
}
