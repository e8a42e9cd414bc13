package httpapi

import (
	"context"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/apierror"
)

// The agent routes answer 501 in their route's envelope until the agent service is wired in.

// ListAgents is pending.
func (s *Server) ListAgents(context.Context, api.ListAgentsRequestObject) (api.ListAgentsResponseObject, error) {
	return nil, apierror.NotImplemented("GET /v1/agents")
}

// SpawnAgent is pending.
func (s *Server) SpawnAgent(context.Context, api.SpawnAgentRequestObject) (api.SpawnAgentResponseObject, error) {
	return nil, apierror.NotImplemented("POST /v1/agents")
}

// SendAgentMessage is pending.
func (s *Server) SendAgentMessage(context.Context, api.SendAgentMessageRequestObject) (api.SendAgentMessageResponseObject, error) {
	return nil, apierror.NotImplemented("POST /v1/agents/{slot}/messages")
}

// StopAgent is pending.
func (s *Server) StopAgent(context.Context, api.StopAgentRequestObject) (api.StopAgentResponseObject, error) {
	return nil, apierror.NotImplemented("DELETE /v1/agents/{slot}")
}

// StreamAgentEvents is pending.
func (s *Server) StreamAgentEvents(context.Context, api.StreamAgentEventsRequestObject) (api.StreamAgentEventsResponseObject, error) {
	return nil, apierror.NotImplemented("GET /v1/agents/{slot}/events")
}
