package agent

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/auth"
)

var errNotImplemented = errors.New("not implemented yet")

func (s *Service) Spawn(ctx context.Context, p auth.Principal, slot, prompt, idempotencyKey string) (SpawnResult, error) {
	return SpawnResult{}, errNotImplemented
}
func (s *Service) SendMessage(ctx context.Context, p auth.Principal, slot, text, idempotencyKey string) (MessageResult, error) {
	return MessageResult{}, errNotImplemented
}
func (s *Service) Stop(ctx context.Context, p auth.Principal, slot, idempotencyKey string) (StopResult, error) {
	return StopResult{}, errNotImplemented
}
func (s *Service) Overview(ctx context.Context, p auth.Principal) ([]SlotView, error) {
	return nil, errNotImplemented
}
func (s *Service) SlotSession(ctx context.Context, p auth.Principal, slot string) (SessionView, error) {
	return SessionView{}, errNotImplemented
}
func (s *Service) Events(ctx context.Context, p auth.Principal, sessionID string, afterSeq int64, limit int) ([]Event, error) {
	return nil, errNotImplemented
}
func (s *Service) Wait(ctx context.Context, sessionID string, afterSeq int64) <-chan struct{} {
	return make(chan struct{})
}
func (s *Service) Sessions(ctx context.Context, p auth.Principal) ([]SessionView, error) {
	return nil, errNotImplemented
}
func (s *Service) Tail(ctx context.Context, p auth.Principal, sessionID string, cursor int64, maxLines int, maxWait time.Duration) (Tail, error) {
	return Tail{}, errNotImplemented
}
func (s *Service) Tickets(ctx context.Context, p auth.Principal, state string, limit int) ([]Ticket, error) {
	return nil, errNotImplemented
}
func (s *Service) RequestSpawn(ctx context.Context, p auth.Principal, a SpawnAction) (Approval, error) {
	return Approval{}, errNotImplemented
}
func (s *Service) RequestPrompt(ctx context.Context, p auth.Principal, sessionID, prompt string) (Approval, error) {
	return Approval{}, errNotImplemented
}
func (s *Service) ApprovalStatus(ctx context.Context, p auth.Principal, approvalID string) (Approval, error) {
	return Approval{}, errNotImplemented
}
func (s *Service) AssignSlot(ctx context.Context, accountID uuid.UUID, name string) error {
	return errNotImplemented
}
func (s *Service) UnassignSlot(ctx context.Context, accountID uuid.UUID, name string) error {
	return errNotImplemented
}
func (s *Service) ListSlots(ctx context.Context, accountID *uuid.UUID) ([]SlotAssignment, error) {
	return nil, errNotImplemented
}
func (s *Service) OpenTicket(ctx context.Context, accountID uuid.UUID, sessionID *uuid.UUID, title, body, openedBy string) (Ticket, error) {
	return Ticket{}, errNotImplemented
}
func (s *Service) CloseTicket(ctx context.Context, accountID *uuid.UUID, ticketID string) (Ticket, error) {
	return Ticket{}, errNotImplemented
}
func (s *Service) ListTickets(ctx context.Context, accountID *uuid.UUID, state string, limit int) ([]Ticket, error) {
	return nil, errNotImplemented
}
func (s *Service) ListApprovals(ctx context.Context, accountID *uuid.UUID, state string, limit int) ([]Approval, error) {
	return nil, errNotImplemented
}
func (s *Service) Resolve(ctx context.Context, accountID *uuid.UUID, approvalID string, approve bool, by string) (Approval, error) {
	return Approval{}, errNotImplemented
}
