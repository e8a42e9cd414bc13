package metrics

import "github.com/prometheus/client_golang/prometheus"

// BodyBudgetStats is what the body budget of large request bodies holds and has refused
// (impl/httpapi).
type BodyBudgetStats struct {
	LimitBytes int64
	InUseBytes int64
	Refused    int64
}

// WatchBodyBudget registers the body budget's collectors, read from stats at each scrape:
// tollgate_body_budget_bytes (its size), tollgate_body_budget_in_use_bytes and
// tollgate_body_budget_refused_total (large bodies answered 503 because it stayed spent).
// Call it once.
func (m *Metrics) WatchBodyBudget(stats func() BodyBudgetStats) {
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_body_budget_bytes",
			Help: "Size of the budget of large request bodies (over 1 MiB) held in memory at once."},
			func() float64 { return float64(stats().LimitBytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_body_budget_in_use_bytes",
			Help: "Bytes of the body budget held by large request bodies now."},
			func() float64 { return float64(stats().InUseBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tollgate_body_budget_refused_total",
			Help: "Large request bodies answered 503 (server_busy) because the body budget stayed spent."},
			func() float64 { return float64(stats().Refused) }),
	)
}

// SocketMemoryStats is what the Responses WebSockets remember for previous_response_id, all
// together, against its bound (impl/httpapi), and the responses not remembered for want of room.
type SocketMemoryStats struct {
	LimitBytes int64
	InUseBytes int64
	Forgotten  int64
}

// WatchSocketMemory registers the collectors of the sockets' memory, read from stats at each
// scrape: tollgate_responses_socket_memory_bytes (its bound),
// tollgate_responses_socket_memory_in_use_bytes and
// tollgate_responses_socket_memory_forgotten_total. Call it once.
func (m *Metrics) WatchSocketMemory(stats func() SocketMemoryStats) {
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_responses_socket_memory_bytes",
			Help: "Bound of what the Responses WebSockets remember for previous_response_id, all together (half the body budget)."},
			func() float64 { return float64(stats().LimitBytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_responses_socket_memory_in_use_bytes",
			Help: "Bytes the Responses WebSockets remember now for previous_response_id."},
			func() float64 { return float64(stats().InUseBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tollgate_responses_socket_memory_forgotten_total",
			Help: "Responses a WebSocket did not remember for want of room (the next request naming one resends the whole input)."},
			func() float64 { return float64(stats().Forgotten) }),
	)
}

// WatchConnectionsRefused registers tollgate_connections_per_address_refused_total, read from
// refused at each scrape: the API connections closed as soon as accepted because their client
// address held its share (server.max_connections_per_address). Call it once.
func (m *Metrics) WatchConnectionsRefused(refused func() int64) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tollgate_connections_per_address_refused_total",
		Help: "API connections closed as soon as accepted because their client address held its share (server.max_connections_per_address)."},
		func() float64 { return float64(refused()) }))
}
