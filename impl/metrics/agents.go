package metrics

import "github.com/prometheus/client_golang/prometheus"

// WatchAgents registers the agents' collectors, read at each scrape:
// tollgate_agent_endings_left_total, the revocations (of a key, a grant, a member) whose ending
// of agent sessions failed in this process and was left to the sweep of lapsed sessions
// (agent.Service.EndingsLeft). Call it once.
func (m *Metrics) WatchAgents(endingsLeft func() int64) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tollgate_agent_endings_left_total",
		Help: "Revocations (of a key, a grant, a member) whose ending of agent sessions failed; the revocation stands and the sweep of lapsed sessions ends the sessions.",
	}, func() float64 { return float64(endingsLeft()) }))
}
