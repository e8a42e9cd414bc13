package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// The agent slots assigned to accounts (AgentQueries).

// InsertAgentSlot assigns a slot called name to the account: a unique violation (23505) when
// it has one, a foreign-key violation (23503) when the account does not exist.
func (a *AgentQueries) InsertAgentSlot(ctx context.Context, account uuid.UUID, name string) (AgentSlot, error) {
	return a.q.InsertAgentSlot(ctx, db.InsertAgentSlotParams{AccountID: account, Name: name})
}

// GetAgentSlot reads the account's slot called name.
func (a *AgentQueries) GetAgentSlot(ctx context.Context, account uuid.UUID, name string) (AgentSlot, error) {
	return a.q.GetAgentSlot(ctx, db.GetAgentSlotParams{AccountID: account, Name: name})
}

// GetAgentSlotForUpdate reads the account's slot called name and locks its row (FOR UPDATE).
func (a *AgentQueries) GetAgentSlotForUpdate(ctx context.Context, account uuid.UUID, name string) (AgentSlot, error) {
	return a.q.GetAgentSlotForUpdate(ctx, db.GetAgentSlotForUpdateParams{AccountID: account, Name: name})
}

// ListAgentSlots lists the slots of account (nil: of every account) with their live sessions.
func (a *AgentQueries) ListAgentSlots(ctx context.Context, account *uuid.UUID) ([]AgentSlotListing, error) {
	return a.q.ListAgentSlots(ctx, agentScope(account))
}

// FreeAgentSlots lists the account's slots without a live session, by name.
func (a *AgentQueries) FreeAgentSlots(ctx context.Context, account uuid.UUID) ([]AgentSlot, error) {
	return a.q.FreeAgentSlots(ctx, account)
}

// DeleteAgentSlot deletes the account's slot with id, and returns how many slots it deleted
// (none for another account's).
func (a *AgentQueries) DeleteAgentSlot(ctx context.Context, account, id uuid.UUID) (int64, error) {
	return a.q.DeleteAgentSlot(ctx, db.DeleteAgentSlotParams{ID: id, AccountID: account})
}
