package metrics

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// genAI holds the GenAI semantic conventions' client metrics, the gateway's added time and
// the trace export's drops, and caches their children per label set.
type genAI struct {
	tokens   *prometheus.HistogramVec
	duration *prometheus.HistogramVec
	ttft     *prometheus.HistogramVec
	ttfc     *prometheus.HistogramVec
	added    *prometheus.HistogramVec
	dropped  *prometheus.CounterVec

	children sync.Map // genAIKey → *genAIChildren
	added1   sync.Map // route string → *exemplarHistogram
}

type genAIKey struct {
	operation, provider, requestModel, model, errorType string
}

type genAIChildren struct {
	input, output        prometheus.Observer
	duration, ttft, ttfc *exemplarHistogram
}

// GenAIOperation is one upstream operation as the GenAI metrics see it. RequestModel and Model
// must come from the configuration (an expert's model and the gateway's model id from the
// catalog), never free text from a request, so that the label sets stay bounded.
type GenAIOperation struct {
	// Operation is gen_ai.operation.name ("chat"); Provider gen_ai.provider.name ("openai",
	// "anthropic").
	Operation, Provider string
	// RequestModel is gen_ai.request.model of the client metrics (token usage and operation
	// duration): the upstream's model, the one the operation's request was made to, as on the
	// try's span. Model is the gateway's model id the client asked for: the label tollgate_model
	// of the client metrics, and gen_ai.request.model of gen_ai.server.time_to_first_token,
	// which measures the gateway as the server of its client's request.
	RequestModel, Model string
	// InputTokens and OutputTokens are the usage the upstream reported (not observed when
	// both are 0, as for a failed operation).
	InputTokens, OutputTokens int64
	// Duration is the operation's duration; TimeToFirstToken a stream's time from the start of
	// the client's request to its first event sent to the client, TimeToFirstChunk from the
	// start of the operation (the upstream try) to its first chunk (each 0: not a stream, or
	// nothing came).
	Duration, TimeToFirstToken, TimeToFirstChunk time.Duration
	// ErrorType is error.type for a failed operation ("" when it succeeded).
	ErrorType string
	// TraceID, when valid (a sampled trace), is the exemplar of the duration and time to first
	// token observations; it is formatted only when a bucket takes it (exemplarEvery).
	TraceID trace.TraceID
}

// Buckets after the GenAI semantic conventions' advice.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	ttftBuckets     = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	addedBuckets    = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
)

func newGenAI(reg *prometheus.Registry) *genAI {
	labels := []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"}
	// The client metrics' gen_ai_request_model is the upstream's model; tollgate_model is the
	// gateway's model id that the request named (a query of one gateway model's operations).
	client := append(labels[:len(labels):len(labels)], "tollgate_model")
	g := &genAI{
		tokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_client_token_usage", Help: "Tokens used per upstream operation (gen_ai.client.token.usage), by token type (input, output).",
			Buckets: tokenBuckets,
		}, append([]string{"gen_ai_token_type"}, client...)),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_client_operation_duration_seconds", Help: "Duration of upstream operations (gen_ai.client.operation.duration), from the request to the end of the answer.",
			Buckets: durationBuckets,
		}, append(client, "error_type")),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_server_time_to_first_token_seconds", Help: "Time from the start of a streamed request to its first event sent to the client (gen_ai.server.time_to_first_token).",
			Buckets: ttftBuckets,
		}, labels),
		ttfc: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_client_operation_time_to_first_chunk_seconds", Help: "Time from the start of a streamed upstream operation to its first chunk (gen_ai.client.operation.time_to_first_chunk).",
			Buckets: durationBuckets,
		}, client),
		added: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tollgate_added_seconds", Help: "The gateway's own time per request: the request's duration minus the time spent waiting for the upstream, by route.",
			Buckets: addedBuckets,
		}, []string{"route"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_trace_spans_dropped_total", Help: "Trace spans dropped instead of exported, by reason (queue_full, export_failed, rejected, shutdown).",
		}, []string{"reason"}),
	}
	reg.MustRegister(g.tokens, g.duration, g.ttft, g.ttfc, g.added, g.dropped)
	return g
}

// exemplarEvery is how often one bucket of a histogram takes a new exemplar. Prometheus keeps
// the last exemplar of each bucket and scrapes every 15 s or so: an exemplar replaced sooner is
// never read, and making one cost a traced request several allocations (two or three per
// request, 1.9 % of the gateway's CPU with every request traced).
const exemplarEvery = time.Second

// exemplarClock is the exemplars' clock (a test moves it).
var exemplarClock = time.Now

// exemplarHistogram is one histogram child, with the time each of its buckets last took an
// exemplar.
type exemplarHistogram struct {
	observer prometheus.Observer
	bounds   []float64      // the histogram's upper bounds
	last     []atomic.Int64 // per bucket, +Inf's last: Unix nanoseconds of its last exemplar
}

func newExemplarHistogram(o prometheus.Observer, bounds []float64) *exemplarHistogram {
	return &exemplarHistogram{observer: o, bounds: bounds, last: make([]atomic.Int64, len(bounds)+1)}
}

// observe records v, with the trace id as its exemplar when there is one and v's bucket has
// taken none for exemplarEvery (a bucket's first exemplar is always taken: a rare slow
// request's trace is not lost to the common ones').
func (h *exemplarHistogram) observe(v float64, traceID trace.TraceID) {
	if traceID.IsValid() {
		// The bucket Prometheus puts v in: the first upper bound at or above it.
		b := &h.last[sort.SearchFloat64s(h.bounds, v)]
		now, last := exemplarClock().UnixNano(), b.Load()
		if (last == 0 || now-last >= int64(exemplarEvery)) && b.CompareAndSwap(last, now) {
			if eo, ok := h.observer.(prometheus.ExemplarObserver); ok {
				eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": traceID.String()})
				return
			}
		}
	}
	h.observer.Observe(v)
}

// ObserveGenAI records one upstream operation in the GenAI metrics.
func (m *Metrics) ObserveGenAI(op GenAIOperation) {
	g := m.genAI
	key := genAIKey{op.Operation, op.Provider, op.RequestModel, op.Model, op.ErrorType}
	c, ok := g.children.Load(key)
	if !ok {
		c, _ = g.children.LoadOrStore(key, &genAIChildren{
			input:    g.tokens.WithLabelValues("input", op.Operation, op.Provider, op.RequestModel, op.Model),
			output:   g.tokens.WithLabelValues("output", op.Operation, op.Provider, op.RequestModel, op.Model),
			duration: newExemplarHistogram(g.duration.WithLabelValues(op.Operation, op.Provider, op.RequestModel, op.Model, op.ErrorType), durationBuckets),
			ttft:     newExemplarHistogram(g.ttft.WithLabelValues(op.Operation, op.Provider, op.Model), ttftBuckets),
			ttfc:     newExemplarHistogram(g.ttfc.WithLabelValues(op.Operation, op.Provider, op.RequestModel, op.Model), durationBuckets),
		})
	}
	ch := c.(*genAIChildren)
	if op.InputTokens > 0 || op.OutputTokens > 0 {
		// No exemplars on the token counts: the duration's exemplar links the same trace, and
		// each exemplar costs the request a few allocations.
		ch.input.Observe(float64(op.InputTokens))
		ch.output.Observe(float64(op.OutputTokens))
	}
	ch.duration.observe(op.Duration.Seconds(), op.TraceID)
	if op.TimeToFirstToken > 0 {
		ch.ttft.observe(op.TimeToFirstToken.Seconds(), op.TraceID)
	}
	if op.TimeToFirstChunk > 0 {
		// Of streamed operations only, as the conventions ask.
		ch.ttfc.observe(op.TimeToFirstChunk.Seconds(), op.TraceID)
	}
}

// ObserveAdded records the gateway's own time for a request of route: its duration minus the
// time spent waiting for the upstream.
func (m *Metrics) ObserveAdded(route string, added time.Duration, traceID trace.TraceID) {
	o, ok := m.genAI.added1.Load(route)
	if !ok {
		o, _ = m.genAI.added1.LoadOrStore(route, newExemplarHistogram(m.genAI.added.WithLabelValues(route), addedBuckets))
	}
	o.(*exemplarHistogram).observe(max(added, 0).Seconds(), traceID)
}

// TraceSpansDropped counts n trace spans dropped for reason (impl/telemetry's Drop* reasons);
// it is telemetry.Options.OnDrop.
func (m *Metrics) TraceSpansDropped(reason string, n int) {
	m.genAI.dropped.WithLabelValues(reason).Add(float64(n))
}
