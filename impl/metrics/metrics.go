// Package metrics owns tollgate's Prometheus collectors and the handler of the metrics
// listener, which is served apart from the API.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
)

// Metrics holds the collectors the gateway updates.
type Metrics struct {
	registry *prometheus.Registry
	// Requests counts finished HTTP requests by route pattern and status.
	Requests *prometheus.CounterVec
	// Duration observes HTTP request durations by route pattern.
	Duration *prometheus.HistogramVec
	// RateLimited counts requests refused by a per-key cap.
	RateLimited prometheus.Counter
	// RateLimiterErrors counts requests let through because the limiter failed.
	RateLimiterErrors prometheus.Counter
	// RateLimiterFallback is 1 while per-key caps are enforced per process, shared out by
	// replica count, because Redis is unreachable, and 0 otherwise.
	RateLimiterFallback prometheus.Gauge
	// Degraded is 1 while the process is in degraded mode: its database change notifications
	// are lost, so it authenticates and checks model access from what it already knows, for a
	// bounded staleness; 0 otherwise.
	Degraded prometheus.Gauge
	// StaleServed counts lookups answered from a cache entry that could not be re-checked with
	// the database, by cache ("api_key", "model_access").
	StaleServed *prometheus.CounterVec
	// StaleRechecks counts the background re-checks of cache entries while degraded, by cache
	// and outcome: "current" (the database answered, the entry replaced), "gone" (the
	// database answered that it is no more: a revoked key, dropped) and "unavailable" (no
	// answer: nothing changed).
	StaleRechecks *prometheus.CounterVec
	// RefusedHeads counts the request heads the API server refused before any route, by
	// status (ObserveRefusedHead).
	RefusedHeads *prometheus.CounterVec

	// children caches, per route and status, the collectors ObserveRequest updates.
	children sync.Map // routeStatus → *requestChildren
	// genAI holds the GenAI, added-time and trace-drop collectors (genai.go).
	genAI *genAI
	// mcp holds the MCP endpoint's operation durations (mcp.go).
	mcp *mcpServer
}

type routeStatus struct {
	route  string
	status int
}

type requestChildren struct {
	requests prometheus.Counter
	duration *exemplarHistogram
}

// requestBuckets are tollgate_http_request_duration_seconds' bucket bounds.
var requestBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// ObserveRequest counts a finished request and observes its duration, with the request's trace
// id as an exemplar when it was traced (the zero TraceID when not; trial h8 D12: the dashboard's latency panel
// asked for exemplars that never came). The collectors of each route and status are looked up
// once and kept, so that a request does not pay for hashing the label values again.
func (m *Metrics) ObserveRequest(route string, status int, d time.Duration, traceID trace.TraceID) {
	key := routeStatus{route, status}
	c, ok := m.children.Load(key)
	if !ok {
		c, _ = m.children.LoadOrStore(key, &requestChildren{
			requests: m.Requests.WithLabelValues(route, strconv.Itoa(status)),
			duration: newExemplarHistogram(m.Duration.WithLabelValues(route), requestBuckets),
		})
	}
	rc := c.(*requestChildren)
	rc.requests.Inc()
	rc.duration.observe(d.Seconds(), traceID)
}

// refusedHeadStatuses are the status labels of tollgate_http_refused_heads_total: the answers
// the server writes itself to a head it will not read on, refusedHTTP2Label, and "other" for
// any other status (none is known), so that the label stays bounded whatever a server answers.
var refusedHeadStatuses = []string{"400", "431", "501", "505", refusedHTTP2Label, "other"}

// refusedHTTP2Label is the status label of an HTTP/2 connection preface the API server refused
// (ObserveRefusedHTTP2): h2c, HTTP/2 without TLS, spoken with prior knowledge.
const refusedHTTP2Label = "h2c"

// ObserveRefusedHead counts a request head the API server refused before any route, with
// status (h1server.Server.RefusedHead): such a request reaches no handler, so it is counted
// neither in tollgate_http_requests_total nor anywhere else.
func (m *Metrics) ObserveRefusedHead(status int) {
	label := "other"
	switch status {
	case http.StatusBadRequest, http.StatusRequestHeaderFieldsTooLarge, http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		label = strconv.Itoa(status)
	}
	m.RefusedHeads.WithLabelValues(label).Inc()
}

// ObserveRefusedHTTP2 counts an HTTP/2 connection preface the API server refused with a GOAWAY
// (a client speaking HTTP/2 with prior knowledge to an HTTP/1.1 port: h1server.RefusedHTTP2),
// under its own status label, "h2c", apart from the 505s of another HTTP/1 version: such a
// client needs another setting (HTTP/1.1, or TLS at a front), not a fixed request.
func (m *Metrics) ObserveRefusedHTTP2() {
	m.RefusedHeads.WithLabelValues(refusedHTTP2Label).Inc()
}

// New registers the collectors (and the Go and process collectors) on a fresh registry.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		registry: reg,
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_http_requests_total", Help: "Finished HTTP requests by route and status.",
		}, []string{"route", "status"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tollgate_http_request_duration_seconds", Help: "HTTP request duration by route.",
			Buckets: requestBuckets,
		}, []string{"route"}),
		RateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_rate_limited_total", Help: "Requests refused by a per-key requests-per-minute cap.",
		}),
		RateLimiterErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_rate_limiter_errors_total", Help: "Requests let through because the rate limiter failed.",
		}),
		Degraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tollgate_degraded", Help: "1 while database change notifications are lost and keys and model access are served from memory, for a bounded staleness.",
		}),
		StaleServed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_stale_cache_served_total", Help: "Lookups answered from a cache entry that could not be re-checked with the database, by cache.",
		}, []string{"cache"}),
		StaleRechecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_stale_cache_rechecks_total", Help: "Background re-checks with the database of cache entries answered from memory while degraded, by cache and outcome (current, gone, unavailable).",
		}, []string{"cache", "outcome"}),
		RefusedHeads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_http_refused_heads_total",
			Help: "Request heads the API server refused before any route (not in tollgate_http_requests_total), by status: 400 unreadable (a bare CR, both Content-Length and Transfer-Encoding, no Host, ...), 431 too large, 501 an unknown transfer coding, 505 another HTTP version, h2c HTTP/2 without TLS (prior knowledge, refused with a GOAWAY).",
		}, []string{"status"}),
	}
	for _, status := range refusedHeadStatuses {
		m.RefusedHeads.WithLabelValues(status) // each status at 0 from the start, for rate()
	}
	reg.MustRegister(m.Requests, m.Duration, m.RateLimited, m.RateLimiterErrors, m.Degraded, m.StaleServed, m.StaleRechecks, m.RefusedHeads,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.RateLimiterFallback = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tollgate_rate_limiter_fallback",
		Help: "1 while per-key caps are enforced per process (each cap shared out by replica count) because Redis is unreachable, else 0.",
	})
	reg.MustRegister(m.RateLimiterFallback)
	m.genAI = newGenAI(reg)
	m.mcp = newMCPServer(reg)
	return m
}

// Handler serves the registry in the Prometheus text format, or in the OpenMetrics format to
// a scraper that asks for it (which carries the exemplars' trace ids).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry, EnableOpenMetrics: true})
}
