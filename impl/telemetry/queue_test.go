package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/telemetry/otlp"
)

// stuckExporter stands for a backend that takes no batch until released, or refuses them.
type stuckExporter struct {
	release chan struct{}
	refuse  bool
	mu      sync.Mutex
	got     int
}

func (e *stuckExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.refuse {
		return errors.New("backend refused")
	}
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.mu.Lock()
	e.got += len(spans)
	e.mu.Unlock()
	return nil
}

func (e *stuckExporter) Shutdown(context.Context) error { return nil }

type drops struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *drops) add(reason string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n[reason] += n
}

func (d *drops) get(reason string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[reason]
}

// endSpans makes n sampled spans end through a provider whose only processor is q.
func endSpans(q *queue, n int) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	tr := tp.Tracer("test")
	for range n {
		_, s := tr.Start(context.Background(), "s")
		s.End()
	}
}

// TestQueueNeverBlocks: while the exporter is stuck (an exporter that takes no batch, and
// impl/telemetry/otlp's posting to a real endpoint that does not answer), ending spans never
// waits; the spans beyond the queue are dropped and counted; once the backend answers, the
// queued ones go out.
func TestQueueNeverBlocks(t *testing.T) {
	for _, c := range []struct {
		name string
		// start returns the exporter, what lets its backend answer, and how many spans it took.
		start func() (exp sdktrace.SpanExporter, release func(), exported func() int)
	}{
		{"a stuck exporter", func() (sdktrace.SpanExporter, func(), func() int) {
			exp := &stuckExporter{release: make(chan struct{})}
			return exp, func() { close(exp.release) }, func() int { return exp.got }
		}},
		{"impl/telemetry/otlp's exporter to a stuck endpoint", func() (sdktrace.SpanExporter, func(), func() int) {
			gate := make(chan struct{})
			backend := newOTLPBackend(t, gate)
			return otlp.NewHTTPExporter(otlp.HTTPOptions{URL: backend.srv.URL}), func() { close(gate) }, func() int { return len(backend.spans()) }
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			exp, release, exported := c.start()
			d := &drops{n: map[string]int{}}
			q := newQueue(exp, Settings{QueueSize: 4, BatchSize: 2, BatchTimeout: time.Hour, ExportTimeout: time.Hour}, d.add)
			// 2 spans fill the first batch, whose export hangs; 4 wait in the queue; the other 94
			// are dropped. Ending them returns (this test would hang otherwise).
			endSpans(q, 100)
			deadline := time.Now().Add(10 * time.Second)
			for d.get(DropQueueFull) < 94 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if got := d.get(DropQueueFull); got < 94 || got > 96 {
				t.Errorf("dropped (queue full) %d, want 94 to 96", got)
			}
			release()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := q.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if exported()+d.get(DropQueueFull) != 100 {
				t.Errorf("exported %d + dropped %d, want 100", exported(), d.get(DropQueueFull))
			}
		})
	}
}

// TestQueueCountsFailedExports: a batch the backend refuses is counted as dropped.
func TestQueueCountsFailedExports(t *testing.T) {
	d := &drops{n: map[string]int{}}
	q := newQueue(&stuckExporter{refuse: true}, Settings{QueueSize: 64, BatchSize: 8, BatchTimeout: time.Hour, ExportTimeout: time.Second}, d.add)
	endSpans(q, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := d.get(DropExportFailed); got != 20 {
		t.Errorf("dropped (export failed) %d, want 20", got)
	}
	_ = q.Shutdown(ctx)
	endSpans(q, 3)
	if got := d.get(DropShutdown); got != 3 {
		t.Errorf("dropped after shutdown %d, want 3", got)
	}
}

// TestShutdownKeepsItsDeadline: a backend that never answers does not hold the shutdown past
// its deadline.
func TestShutdownKeepsItsDeadline(t *testing.T) {
	exp := &stuckExporter{release: make(chan struct{})}
	defer close(exp.release)
	q := newQueue(exp, Settings{QueueSize: 8, BatchSize: 8, BatchTimeout: time.Hour, ExportTimeout: time.Hour}, nil)
	endSpans(q, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() { _ = q.Shutdown(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after its deadline")
	}
}

// TestOffByDefault: with nothing configured, Start does nothing and the helpers are no-ops.
func TestOffByDefault(t *testing.T) {
	s, err := Resolve(config.Telemetry{}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Start(context.Background(), s, Options{})
	if err != nil || tr != nil {
		t.Fatalf("Start with nothing configured: %v, %v", tr, err)
	}
	if Enabled() || Tracer() != noopTracer || TraceID(context.Background()) != "" {
		t.Error("tracing is on with nothing configured")
	}
	if tr.Shutdown(context.Background()) != nil || tr.Flush(context.Background()) != nil {
		t.Error("a nil Tracing's Shutdown or Flush failed")
	}
}

// countingExporter takes every batch and counts the spans and the calls.
type countingExporter struct {
	mu             sync.Mutex
	spans, batches int
}

func (e *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.spans += len(spans)
	e.batches++
	return nil
}

func (e *countingExporter) Shutdown(context.Context) error { return nil }

func (e *countingExporter) counts() (spans, batches int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.spans, e.batches
}

// TestQueueExportsWholeBatchesAtOnce: whole batches go out as soon as they fill, a partial one
// waits for the batch timeout (or ForceFlush), and every span is exported once.
func TestQueueExportsWholeBatchesAtOnce(t *testing.T) {
	exp := &countingExporter{}
	q := newQueue(exp, Settings{QueueSize: 64, BatchSize: 4, BatchTimeout: time.Hour, ExportTimeout: time.Second}, nil)
	endSpans(q, 10)
	deadline := time.Now().Add(10 * time.Second)
	for spans, _ := exp.counts(); spans < 8 && time.Now().Before(deadline); spans, _ = exp.counts() {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if spans, batches := exp.counts(); spans != 8 || batches != 2 {
		t.Errorf("before the timeout: %d spans in %d batches exported, want the two whole batches (8 in 2)", spans, batches)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if spans, batches := exp.counts(); spans != 10 || batches != 3 {
		t.Errorf("after ForceFlush: %d spans in %d batches, want 10 in 3", spans, batches)
	}
	endSpans(q, 3)
	if err := q.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if spans, _ := exp.counts(); spans != 13 {
		t.Errorf("after Shutdown: %d spans exported, want 13", spans)
	}
}

// TestQueueExportsAPartialBatchOnTime: a partial batch goes out when the batch timeout passes.
func TestQueueExportsAPartialBatchOnTime(t *testing.T) {
	exp := &countingExporter{}
	q := newQueue(exp, Settings{QueueSize: 64, BatchSize: 512, BatchTimeout: 20 * time.Millisecond, ExportTimeout: time.Second}, nil)
	defer func() { _ = q.Shutdown(context.Background()) }()
	endSpans(q, 5)
	deadline := time.Now().Add(10 * time.Second)
	for spans, _ := exp.counts(); spans < 5 && time.Now().Before(deadline); spans, _ = exp.counts() {
		time.Sleep(time.Millisecond)
	}
	if spans, _ := exp.counts(); spans != 5 {
		t.Errorf("%d spans exported after the batch timeout, want 5", spans)
	}
}

// TestQueueSmallerThanABatch: with a queue smaller than the batch size, a batch is the whole
// queue and goes out when it fills, not only when the timer passes.
func TestQueueSmallerThanABatch(t *testing.T) {
	exp := &countingExporter{}
	q := newQueue(exp, Settings{QueueSize: 4, BatchSize: 512, BatchTimeout: time.Hour, ExportTimeout: time.Second}, nil)
	defer func() { _ = q.Shutdown(context.Background()) }()
	endSpans(q, 4)
	deadline := time.Now().Add(10 * time.Second)
	for spans, _ := exp.counts(); spans < 4 && time.Now().Before(deadline); spans, _ = exp.counts() {
		time.Sleep(time.Millisecond)
	}
	if spans, batches := exp.counts(); spans != 4 || batches != 1 {
		t.Errorf("%d spans in %d batches exported before the timeout, want 4 in 1", spans, batches)
	}
}

// TestQueueCountsRejectedSpans: spans a backend rejects out of a batch it took (OTLP's
// partial success) are counted as rejected, the rest as exported, not the whole batch as
// failed.
func TestQueueCountsRejectedSpans(t *testing.T) {
	answer, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{
		PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 3, ErrorMessage: "spans older than the retention"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(answer)
	}))
	defer srv.Close()
	d := &drops{n: map[string]int{}}
	q := newQueue(otlp.NewHTTPExporter(otlp.HTTPOptions{URL: srv.URL}), Settings{QueueSize: 64, BatchSize: 64, BatchTimeout: time.Hour, ExportTimeout: 5 * time.Second}, d.add)
	endSpans(q, 8)
	if err := q.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, failed := d.get(DropRejected), d.get(DropExportFailed); got != 3 || failed != 0 {
		t.Errorf("rejected %d, failed %d; want 3 rejected, none failed", got, failed)
	}
	_ = q.Shutdown(context.Background())
}

// otlpBackend is an OTLP/HTTP endpoint that decodes the batches posted to it, each once the
// test lets it answer (a closed gate: at once).
type otlpBackend struct {
	gate  chan struct{}
	mu    sync.Mutex
	posts []*coltracepb.ExportTraceServiceRequest
	srv   *httptest.Server
}

func newOTLPBackend(t *testing.T, gate chan struct{}) *otlpBackend {
	b := &otlpBackend{gate: gate}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		<-b.gate
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("a batch that is not an ExportTraceServiceRequest: %v", err)
		}
		b.mu.Lock()
		b.posts = append(b.posts, &req)
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// spans returns every span posted so far by its id, with its resource's and scope's names.
func (b *otlpBackend) spans() map[string]postedSpan {
	b.mu.Lock()
	defer b.mu.Unlock()
	return postedSpans(b.posts...)
}

// postedSpan is one span of a request, with what its ResourceSpans and ScopeSpans said.
type postedSpan struct {
	resource, scope string
	span            *tracepb.Span
}

func postedSpans(reqs ...*coltracepb.ExportTraceServiceRequest) map[string]postedSpan {
	out := map[string]postedSpan{}
	for _, req := range reqs {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					out[string(s.SpanId)] = postedSpan{prototext.Format(rs.Resource), prototext.Format(ss.Scope), s}
				}
			}
		}
	}
	return out
}

// TestQueuePostsWhatTheLibraryWould: through the queue and impl/telemetry/otlp's exporter, the
// batches posted (two whole ones when they fill, the rest on ForceFlush) carry every span
// once, each as the OpenTelemetry library's exporter writes it, under its resource and scope
// (two tracers: two scopes), whatever batch it fell in.
func TestQueuePostsWhatTheLibraryWould(t *testing.T) {
	gate := make(chan struct{})
	close(gate)
	backend := newOTLPBackend(t, gate)
	q := newQueue(otlp.NewHTTPExporter(otlp.HTTPOptions{URL: backend.srv.URL}), Settings{QueueSize: 64, BatchSize: 4, BatchTimeout: time.Hour, ExportTimeout: 5 * time.Second}, nil)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q), sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "queue-test"))))
	for i := range 10 {
		tr := tp.Tracer(fmt.Sprint("scope", i%2))
		ctx, parent := tr.Start(context.Background(), "parent", trace.WithSpanKind(trace.SpanKindServer))
		_, child := tr.Start(ctx, "child")
		child.SetAttributes(attribute.Int("i", i), attribute.String("s", strings.Repeat("x", i*40)), attribute.Bool("even", i%2 == 0))
		child.AddEvent("event", trace.WithAttributes(attribute.Float64("f", float64(i)/3)))
		child.SetStatus(codes.Error, "failed")
		child.End()
		parent.End()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	library := newOTLPBackend(t, gate)
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(library.srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(ctx, rec.Ended()); err != nil {
		t.Fatal(err)
	}
	got, want := backend.spans(), library.spans()
	if len(got) != 20 || len(want) != 20 {
		t.Fatalf("%d spans posted through the queue, %d by the library; want 20 each", len(got), len(want))
	}
	for id, w := range want {
		g, ok := got[id]
		if !ok || g.resource != w.resource || g.scope != w.scope || !proto.Equal(g.span, w.span) {
			t.Fatalf("span %x: the queue posted\n%v %v %v\nthe library\n%v %v %v", id, g.resource, g.scope, g.span, w.resource, w.scope, w.span)
		}
	}
	backend.mu.Lock()
	posts := len(backend.posts)
	backend.mu.Unlock()
	if posts != 5 {
		t.Errorf("%d batches posted, want 5 of 4 spans each", posts)
	}
	_ = q.Shutdown(ctx)
}
