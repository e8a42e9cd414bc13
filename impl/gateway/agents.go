package gateway

import (
	"context"
)

// runAgents runs the agents until ctx ends and their job runner has stopped (Run's meter
// drain waits for it, within bounds: awaitAgents).
func (g *Gateway) runAgents(ctx context.Context) {
	if err := g.Agents.Run(ctx); err != nil {
		g.agentLog.Error("the agents' job runner failed", "err", err)
	}
}
