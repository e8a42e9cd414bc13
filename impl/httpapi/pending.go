package httpapi

import (
	"context"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/apierror"
)

// The agent operations answer 501 in their route's envelope until their issues
// land; the README lists them as pending.

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
