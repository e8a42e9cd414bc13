package metrics

import "github.com/prometheus/client_golang/prometheus"

// CreditStats is what the meter did with credit through database outages
// (billing.Meter.CreditStats): DatabaseDown while it cannot reach the database; OutageRefused
// requests were refused (503) because the process's credit hold did not cover them while the
// database could not be reached; OnCreditRequests requests, costing OnCreditMicros, were
// served on credit beyond the hold (failure handling "continue"); AtRiskMicros is the credit
// served so that the ledger has not taken yet.
type CreditStats struct {
	DatabaseDown     bool
	OutageRefused    int64
	OnCreditRequests int64
	OnCreditMicros   int64
	AtRiskMicros     int64
	ReleaseAsks      int64
	ReleasedOnAsk    int64
	// BeyondReservationRequests requests were charged BeyondReservationMicros beyond their
	// reservation (out of the hold's free credit); WaivedRequests requests were not charged
	// WaivedMicros of their cost.
	BeyondReservationRequests int64
	BeyondReservationMicros   int64
	WaivedRequests            int64
	WaivedMicros              int64
}

// WatchCredit registers the meter's collectors of credit through database outages, read from
// stats at each scrape: tollgate_credit_database_down, tollgate_credit_outage_refused_total,
// tollgate_credit_on_credit_requests_total, tollgate_credit_on_credit_micros_total,
// tollgate_credit_at_risk_micros, tollgate_credit_release_asks_total,
// tollgate_credit_released_on_ask_total, tollgate_credit_beyond_reservation_requests_total,
// tollgate_credit_beyond_reservation_micros_total, tollgate_credit_waived_requests_total and
// tollgate_credit_waived_micros_total. Call it once.
func (m *Metrics) WatchCredit(stats func() CreditStats) {
	gauge := func(name, help string, v func(CreditStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(stats()) })
	}
	counter := func(name, help string, v func(CreditStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return v(stats()) })
	}
	m.registry.MustRegister(
		gauge("tollgate_credit_database_down", "1 while the meter cannot reach the database (requests are served from the credit holds), else 0.",
			func(s CreditStats) float64 {
				if s.DatabaseDown {
					return 1
				}
				return 0
			}),
		counter("tollgate_credit_outage_refused_total", "Requests refused with 503 because the credit hold did not cover them while the database could not be reached.",
			func(s CreditStats) float64 { return float64(s.OutageRefused) }),
		counter("tollgate_credit_on_credit_requests_total", "Requests served on credit beyond the credit hold while the database could not be reached (failure handling continue).",
			func(s CreditStats) float64 { return float64(s.OnCreditRequests) }),
		counter("tollgate_credit_on_credit_micros_total", "Cost, in micro-units, of the requests served on credit beyond the credit hold.",
			func(s CreditStats) float64 { return float64(s.OnCreditMicros) }),
		gauge("tollgate_credit_at_risk_micros", "Credit, in micro-units, served on credit (settled or in flight) that the ledger has not taken yet.",
			func(s CreditStats) float64 { return float64(s.AtRiskMicros) }),
		counter("tollgate_credit_release_asks_total", "Times this process asked the others to release their idle credit holds of an account before answering 402.",
			func(s CreditStats) float64 { return float64(s.ReleaseAsks) }),
		counter("tollgate_credit_released_on_ask_total", "Credit holds this process released because another process asked for them.",
			func(s CreditStats) float64 { return float64(s.ReleasedOnAsk) }),
		counter("tollgate_credit_beyond_reservation_requests_total", "Requests that cost more than their reservation and were charged the excess out of the credit hold.",
			func(s CreditStats) float64 { return float64(s.BeyondReservationRequests) }),
		counter("tollgate_credit_beyond_reservation_micros_total", "Cost, in micro-units, charged beyond the requests' reservations out of the credit hold.",
			func(s CreditStats) float64 { return float64(s.BeyondReservationMicros) }),
		counter("tollgate_credit_waived_requests_total", "Requests whose cost was not charged whole (beyond the reservation and the credit hold).",
			func(s CreditStats) float64 { return float64(s.WaivedRequests) }),
		counter("tollgate_credit_waived_micros_total", "Cost, in micro-units, not charged: what requests cost beyond their reservation and the credit hold.",
			func(s CreditStats) float64 { return float64(s.WaivedMicros) }),
	)
}
