package telemetry

import (
	"context"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Reasons a span is dropped, as OnDrop is told them.
const (
	// DropQueueFull: the export queue was full (the backend is slow or down).
	DropQueueFull = "queue_full"
	// DropExportFailed: the backend refused the batch, or did not take it in time.
	DropExportFailed = "export_failed"
	// DropShutdown: the process ended before the span could be exported.
	DropShutdown = "shutdown"
)

// queue is a span processor that batches ended, sampled spans for one exporter. Unlike the
// SDK's batch processor it reports every span it drops (the SDK's keeps a count it does not
// expose), which the gateway needs for tollgate_trace_spans_dropped_total. OnEnd never blocks:
// a span that finds the queue full is dropped. One goroutine exports; it is the queue's own
// and ends with Shutdown.
type queue struct {
	exporter      sdktrace.SpanExporter
	spans         chan sdktrace.ReadOnlySpan
	batchSize     int
	batchTimeout  time.Duration
	exportTimeout time.Duration
	onDrop        func(reason string, n int)

	flush    chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func newQueue(exp sdktrace.SpanExporter, s Settings, onDrop func(string, int)) *queue {
	if onDrop == nil {
		onDrop = func(string, int) {}
	}
	q := &queue{
		exporter: exp, spans: make(chan sdktrace.ReadOnlySpan, s.QueueSize),
		batchSize: s.BatchSize, batchTimeout: s.BatchTimeout, exportTimeout: s.ExportTimeout, onDrop: onDrop,
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go q.run()
	return q
}

// OnStart does nothing: spans are queued when they end.
func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span, or drops it (counted) when the queue is full or stopped.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case <-q.stop:
		q.onDrop(DropShutdown, 1)
		return
	default:
	}
	select {
	case q.spans <- s:
	default:
		q.onDrop(DropQueueFull, 1)
	}
}

// ForceFlush exports what is queued now and waits for it, or for ctx.
func (q *queue) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case q.flush <- ack:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued, within ctx's deadline, and shuts the exporter down; the
// spans it could not export in time are counted as dropped.
func (q *queue) Shutdown(ctx context.Context) error {
	q.stopOnce.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
	}
	return q.exporter.Shutdown(ctx)
}

// run batches queued spans and exports them, a batch when it is full, when the batch timeout
// passes, on ForceFlush, and at Shutdown.
func (q *queue) run() {
	defer close(q.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, q.batchSize)
	timer := time.NewTimer(q.batchTimeout)
	defer timer.Stop()
	export := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), q.exportTimeout)
		err := q.exporter.ExportSpans(ctx, batch)
		cancel()
		if err != nil {
			q.onDrop(DropExportFailed, len(batch))
		}
		clear(batch)
		batch = batch[:0]
	}
	drain := func() {
		for {
			select {
			case s := <-q.spans:
				batch = append(batch, s)
				if len(batch) >= q.batchSize {
					export()
				}
			default:
				export()
				return
			}
		}
	}
	for {
		select {
		case s := <-q.spans:
			batch = append(batch, s)
			if len(batch) >= q.batchSize {
				export()
			}
		case <-timer.C:
			export()
			timer.Reset(q.batchTimeout)
		case ack := <-q.flush:
			drain()
			close(ack)
		case <-q.stop:
			drain()
			return
		}
	}
}
