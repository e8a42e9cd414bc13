package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// The agents' lifecycle commands and their Idempotency-Keys (AgentQueries).

// LockAgentKey takes a transaction-level advisory lock on key (an account's Idempotency-Key,
// or its approvals), held until the transaction ends.
func (a *AgentQueries) LockAgentKey(ctx context.Context, key string) error {
	return a.q.LockAgentKey(ctx, key)
}

// ForgetOldAgentCommandKey frees the account's Idempotency-Key key when its command is older
// than the keys are kept (24 hours), and returns how many commands it freed.
func (a *AgentQueries) ForgetOldAgentCommandKey(ctx context.Context, account uuid.UUID, key string) (int64, error) {
	return a.q.ForgetOldAgentCommandKey(ctx, db.ForgetOldAgentCommandKeyParams{AccountID: account, IdempotencyKey: &key})
}

// GetAgentCommandByKey reads the account's command with Idempotency-Key key.
func (a *AgentQueries) GetAgentCommandByKey(ctx context.Context, account uuid.UUID, key string) (AgentCommand, error) {
	return a.q.GetAgentCommandByKey(ctx, db.GetAgentCommandByKeyParams{AccountID: account, IdempotencyKey: &key})
}

// InsertAgentCommand stores a command with its answer.
func (a *AgentQueries) InsertAgentCommand(ctx context.Context, c NewAgentCommand) error {
	return a.q.InsertAgentCommand(ctx, c)
}

// SetAgentCommandStatus sets the status of the command with id.
func (a *AgentQueries) SetAgentCommandStatus(ctx context.Context, id uuid.UUID, status string) error {
	return a.q.SetAgentCommandStatus(ctx, db.SetAgentCommandStatusParams{ID: id, Status: status})
}

// FinishAgentStopCommands moves the session's stop commands still under way (accepted or running)
// to status (done or failed): the session ended.
func (a *AgentQueries) FinishAgentStopCommands(ctx context.Context, session uuid.UUID, status string) error {
	return a.q.FinishAgentStopCommands(ctx, db.FinishAgentStopCommandsParams{SessionID: agentID(session), Status: status})
}

// FirstLiveAgentStopCommand is the account's session's first stop command still under way
// (accepted, or running until the session ends); pgx.ErrNoRows when it has none.
func (a *AgentQueries) FirstLiveAgentStopCommand(ctx context.Context, account, session uuid.UUID) (AgentCommand, error) {
	return a.q.FirstLiveAgentStopCommand(ctx, db.FirstLiveAgentStopCommandParams{AccountID: account, SessionID: agentID(session)})
}
