package metrics

import "github.com/prometheus/client_golang/prometheus"

// UsageWriterStats is what the usage writer (billing.Meter.WriterStats) reports: Queued settled
// records wait in memory for the next write; Backlog records the database has not taken yet
// wait in the spill file (BacklogBytes is its size) or in memory; WriteFailures batch writes
// have failed; Refused requests were refused because the backlog was full, which Full reports;
// SetAside records the database refused as data were set aside (logged, not billed).
type UsageWriterStats struct {
	Queued        int64
	Backlog       int64
	BacklogBytes  int64
	WriteFailures int64
	Refused       int64
	Full          bool
	SetAside      int64
}

// WatchUsageWriter registers the usage writer's collectors, read from stats at each scrape:
// tollgate_usage_queued_records, tollgate_usage_backlog_records, tollgate_usage_spill_bytes,
// tollgate_usage_backlog_full, tollgate_usage_write_failures_total,
// tollgate_usage_refused_total and tollgate_usage_records_set_aside_total. Call it once.
func (m *Metrics) WatchUsageWriter(stats func() UsageWriterStats) {
	gauge := func(name, help string, v func(UsageWriterStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(stats()) })
	}
	counter := func(name, help string, v func(UsageWriterStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return v(stats()) })
	}
	m.registry.MustRegister(
		gauge("tollgate_usage_queued_records", "Settled usage records waiting in memory for the next write.",
			func(s UsageWriterStats) float64 { return float64(s.Queued) }),
		gauge("tollgate_usage_backlog_records", "Usage records the database has not taken yet, kept in the spill file (or in memory without one) until it does.",
			func(s UsageWriterStats) float64 { return float64(s.Backlog) }),
		gauge("tollgate_usage_spill_bytes", "Size of the usage spill file.",
			func(s UsageWriterStats) float64 { return float64(s.BacklogBytes) }),
		gauge("tollgate_usage_backlog_full", "1 while the usage backlog is full and new requests are refused with 503, else 0.",
			func(s UsageWriterStats) float64 {
				if s.Full {
					return 1
				}
				return 0
			}),
		counter("tollgate_usage_write_failures_total", "Usage batch writes that failed (the records were kept and written later).",
			func(s UsageWriterStats) float64 { return float64(s.WriteFailures) }),
		counter("tollgate_usage_refused_total", "Requests refused with 503 because the usage backlog was full.",
			func(s UsageWriterStats) float64 { return float64(s.Refused) }),
		counter("tollgate_usage_records_set_aside_total", "Usage records the database refused as data, logged and not billed (so that the records behind them are written).",
			func(s UsageWriterStats) float64 { return float64(s.SetAside) }),
	)
}
