package gateway

import (
	"context"
)

// runAgents runs the agents until ctx ends, then ends the meter (endMeter): the agents' last
// steps settle their model calls before the meter drains.
func (g *Gateway) runAgents(ctx context.Context, endMeter func()) {
	if err := g.Agents.Run(ctx); err != nil {
		g.agentLog.Error("the agents' job runner failed", "err", err)
	}
	<-ctx.Done()
	endMeter()
}
