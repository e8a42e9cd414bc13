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
