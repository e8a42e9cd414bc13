package tenanttools

import (
	"context"
	"errors"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/mcp"
	"github.com/tollgate/tollgate/impl/tool"
)

// AgentTools returns the tenant profile's six agent tools over the agent service; none when svc
// is nil. The gateway appends them to Tools.
func AgentTools(svc *agent.Service) []tool.Tool {
	if svc == nil {
		return nil
	}
	return mcp.AgentTools(agents{svc})
}

// agents adapts *agent.Service to mcp.AgentService.
type agents struct{ svc *agent.Service }

var _ mcp.AgentService = agents{}

// mapAgentError turns the agent service's errors into what the MCP layer shows: a missing or
// foreign id the not-owned refusal, a conflict, a validation error or a refusal of the key its
// message, anything else an internal error.
func mapAgentError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, agent.ErrNotFound) {
		return errors.Join(mcp.ErrAgentNotOwned, err)
	}
	if c, ok := errors.AsType[*agent.ConflictError](err); ok {
		return &tool.PublicError{Message: c.Message}
	}
	if msg, ok := callerMessage(err); ok {
		return &tool.PublicError{Message: msg}
	}
	return err
}

func session(v agent.SessionView) mcp.AgentSession {
	return mcp.AgentSession{ID: v.ID, Slot: v.Slot, Model: v.Model, Purpose: v.Purpose, AgentName: v.AgentName,
		State: v.State, EndReason: v.EndReason, Turns: v.Turns, MaxTurns: v.MaxTurns, SpentMicros: v.SpentMicros,
		MaxSpend: v.MaxSpendMicros, CreatedAt: v.CreatedAt, EndedAt: v.EndedAt}
}

func approval(a agent.Approval) mcp.AgentApproval {
	return mcp.AgentApproval{ID: a.ID, Action: a.Action, Arguments: a.Arguments, State: a.State, ActionStatus: a.ActionStatus,
		SessionID: a.SessionID, MessageID: a.MessageID, Failure: a.Failure, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt,
		ResolvedAt: a.ResolvedAt, NoFreeSlot: a.NoFreeSlot}
}

// Sessions implements mcp.AgentService.
func (a agents) Sessions(ctx context.Context, p auth.Principal) ([]mcp.AgentSession, error) {
	list, err := a.svc.Sessions(ctx, p)
	if err != nil {
		return nil, mapAgentError(err)
	}
	out := make([]mcp.AgentSession, len(list))
	for i, v := range list {
		out[i] = session(v)
	}
	return out, nil
}

// Tail implements mcp.AgentService.
func (a agents) Tail(ctx context.Context, p auth.Principal, req mcp.TailRequest) (mcp.AgentTail, error) {
	t, err := a.svc.Tail(ctx, p, req.SessionID, req.Cursor, req.MaxLines, req.MaxWait)
	if err != nil {
		return mcp.AgentTail{}, mapAgentError(err)
	}
	out := mcp.AgentTail{Session: session(t.Session), Cursor: t.Cursor, Events: make([]mcp.AgentEvent, len(t.Events))}
	for i, e := range t.Events {
		out.Events[i] = mcp.AgentEvent{Seq: e.Seq, Kind: e.Kind, Data: e.Data, At: e.At}
	}
	return out, nil
}

// Tickets implements mcp.AgentService.
func (a agents) Tickets(ctx context.Context, p auth.Principal, state string, limit int) ([]mcp.AgentTicket, error) {
	list, err := a.svc.Tickets(ctx, p, state, limit)
	if err != nil {
		return nil, mapAgentError(err)
	}
	out := make([]mcp.AgentTicket, len(list))
	for i, t := range list {
		out[i] = mcp.AgentTicket{ID: t.ID, State: t.State, Title: t.Title, Body: t.Body, OpenedBy: t.OpenedBy,
			SessionID: t.SessionID, CreatedAt: t.CreatedAt, ClosedAt: t.ClosedAt}
	}
	return out, nil
}

// ApprovalStatus implements mcp.AgentService.
func (a agents) ApprovalStatus(ctx context.Context, p auth.Principal, approvalID string) (mcp.AgentApproval, error) {
	ap, err := a.svc.ApprovalStatus(ctx, p, approvalID)
	if err != nil {
		return mcp.AgentApproval{}, mapAgentError(err)
	}
	return approval(ap), nil
}

// RequestSpawn implements mcp.AgentService.
func (a agents) RequestSpawn(ctx context.Context, p auth.Principal, req mcp.SpawnRequest) (mcp.AgentApproval, error) {
	ap, err := a.svc.RequestSpawn(ctx, p, agent.SpawnAction{Purpose: req.Purpose, Model: req.Model, TargetEnvironment: req.TargetEnvironment,
		ResourceProfile: req.ResourceProfile, AgentName: req.AgentName, MaxTurns: req.MaxTurns, MaxSpend: req.MaxSpend})
	if err != nil {
		return mcp.AgentApproval{}, mapAgentError(err)
	}
	return approval(ap), nil
}

// RequestPrompt implements mcp.AgentService.
func (a agents) RequestPrompt(ctx context.Context, p auth.Principal, sessionID, prompt string) (mcp.AgentApproval, error) {
	ap, err := a.svc.RequestPrompt(ctx, p, sessionID, prompt)
	if err != nil {
		return mcp.AgentApproval{}, mapAgentError(err)
	}
	return approval(ap), nil
}

// callerMessage is the message of a refusal the agent service wrote for the caller (an unknown
// model or profile, a missing argument, a key with limits prompting a session another key
// started, a tail beyond the account's live tails), and true; false for anything else.
func callerMessage(err error) (string, bool) {
	e, ok := errors.AsType[*apierror.Error](err)
	if !ok {
		return "", false
	}
	switch e.Kind {
	case apierror.KindInvalidRequest, apierror.KindModelNotFound, apierror.KindConflict, apierror.KindInsufficientCredit,
		apierror.KindForbidden, apierror.KindRateLimited:
		return e.Message, true
	}
	return "", false
}
