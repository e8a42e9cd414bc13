package gateway

import (
	"context"
	"errors"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/httpapi"
)

// agentCaller runs the agents' model calls through the HTTP surface's own routing,
// reservation and metering (httpapi.Server.AgentCall); *srv is set once the surface is built.
func agentCaller(srv **httpapi.Server) agent.ModelCaller {
	return func(ctx context.Context, c agent.ModelCall) (agent.ModelAnswer, error) {
		a, err := (*srv).AgentCall(ctx, httpapi.AgentCall{Principal: c.Principal, RequestID: c.RequestID,
			SessionID: c.SessionID, Body: c.Body, CeilingMicros: c.CeilingMicros})
		if errors.Is(err, httpapi.ErrSpendCeiling) {
			err = agent.ErrSpendCeiling
		}
		return agent.ModelAnswer{Body: a.Body, Expert: a.Expert, InputTokens: a.InputTokens, OutputTokens: a.OutputTokens,
			CacheReadTokens: a.CacheReadTokens, CacheWriteTokens: a.CacheWriteTokens, CostMicros: a.CostMicros}, err
	}
}

// runAgents runs the agents until ctx ends, then ends the meter (endMeter): the agents' last
// steps settle their model calls before the meter drains.
func (g *Gateway) runAgents(ctx context.Context, endMeter func()) {
	if err := g.Agents.Run(ctx); err != nil {
		g.agentLog.Error("the agents' job runner failed", "err", err)
	}
	<-ctx.Done()
	endMeter()
}
