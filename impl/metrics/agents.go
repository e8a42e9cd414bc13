package metrics

import "github.com/prometheus/client_golang/prometheus"

// WatchAgents registers the agents' collectors, read at each scrape:
// tollgate_agent_endings_left_total, the revocations (of a key, a grant, a member) whose ending
// of agent sessions failed in this process and was left to the sweep of lapsed sessions
// (agent.Service.EndingsLeft: one per revocation, whatever its sessions), and
// tollgate_agent_sessions_left_total, the live agent sessions those endings left running until
// the sweep ends them (agent.Service.SessionsLeft). Call it once.
func (m *Metrics) WatchAgents(endingsLeft, sessionsLeft func() int64) {
	m.registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tollgate_agent_endings_left_total",
			Help: "Revocations (of a key, a grant, a member) whose ending of their agent sessions failed, one per revocation (not per session): the revocation stands and the sweep of lapsed sessions ends the sessions.",
		}, func() float64 { return float64(endingsLeft()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tollgate_agent_sessions_left_total",
			Help: "Live agent sessions that a revocation's failed ending left running until the sweep of lapsed sessions ends them (counted per revocation; a lower bound when looking them up failed).",
		}, func() float64 { return float64(sessionsLeft()) }),
	)
}
