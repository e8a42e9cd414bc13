package telemetry

import (
	"context"
	"errors"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tollgate/tollgate/impl/telemetry/otlp"
)

// Reasons a span is dropped, as OnDrop is told them.
const (
	// DropQueueFull: the export queue was full (the backend is slow or down).
	DropQueueFull = "queue_full"
	// DropExportFailed: the backend refused the batch, or did not take it in time.
	DropExportFailed = "export_failed"
	// DropRejected: the backend took the batch but rejected some of its spans (OTLP's
	// partial success over http/protobuf; over gRPC the whole batch counts as export_failed).
	DropRejected = "rejected"
	// DropShutdown: the process ended before the span could be exported.
	DropShutdown = "shutdown"
)

// queue is a span processor that batches ended, sampled spans for one exporter. Unlike the
// SDK's batch processor it reports every span it drops (the SDK's keeps a count it does not
// expose), which the gateway needs for tollgate_trace_spans_dropped_total. OnEnd never blocks
// and never wakes the exporting goroutine for one span: it appends the span to a buffer under
// a mutex, and only the span that fills a batch signals the exporter (the SDK's processor, and
// this one before, sent every span over a channel to a goroutine that woke for each: five
// wake-ups per traced request). A span that finds the buffer full is dropped. One goroutine
// exports, a batch when one is full, the rest when the batch timeout passes, on ForceFlush and
// at Shutdown; it is the queue's own and ends with Shutdown.
type queue struct {
	exporter      sdktrace.SpanExporter
	queueSize     int
	batchSize     int
	batchTimeout  time.Duration
	exportTimeout time.Duration
	onDrop        func(reason string, n int)

	mu      sync.Mutex
	waiting []sdktrace.ReadOnlySpan // ended spans not taken for export yet, at most queueSize
	stopped bool                    // set by Shutdown: spans ending after it are dropped

	full     chan struct{} // a batch is waiting (capacity 1: one signal stands for many)
	flush    chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// newQueue starts the queue of exp. A batch is at most the queue's size (OTEL_BSP_MAX_QUEUE_SIZE
// below the batch size would otherwise leave every batch partial, sent only by the timer).
func newQueue(exp sdktrace.SpanExporter, s Settings, onDrop func(string, int)) *queue {
	if onDrop == nil {
		onDrop = func(string, int) {}
	}
	q := &queue{
		exporter: exp, queueSize: s.QueueSize, batchSize: max(min(s.BatchSize, s.QueueSize), 1),
		batchTimeout: s.BatchTimeout, exportTimeout: s.ExportTimeout, onDrop: onDrop,
		full: make(chan struct{}, 1), flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
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
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		q.onDrop(DropShutdown, 1)
		return
	}
	if len(q.waiting) >= q.queueSize {
		q.mu.Unlock()
		q.onDrop(DropQueueFull, 1)
		return
	}
	q.waiting = append(q.waiting, s)
	batchFull := len(q.waiting) == q.batchSize
	q.mu.Unlock()
	if batchFull {
		select {
		case q.full <- struct{}{}:
		default: // signalled already
		}
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
// spans ending from now on are counted as dropped.
func (q *queue) Shutdown(ctx context.Context) error {
	q.stopOnce.Do(func() {
		q.mu.Lock()
		q.stopped = true
		q.mu.Unlock()
		close(q.stop)
	})
	select {
	case <-q.done:
	case <-ctx.Done():
	}
	return q.exporter.Shutdown(ctx)
}

// take moves up to one batch of the waiting spans into batch (empty) and returns it; with
// whole set, only a whole batch (none when fewer spans wait).
func (q *queue) take(batch []sdktrace.ReadOnlySpan, whole bool) []sdktrace.ReadOnlySpan {
	q.mu.Lock()
	defer q.mu.Unlock()
	if whole && len(q.waiting) < q.batchSize {
		return batch
	}
	k := min(len(q.waiting), q.batchSize)
	batch = append(batch, q.waiting[:k]...)
	n := copy(q.waiting, q.waiting[k:])
	clear(q.waiting[n:])
	q.waiting = q.waiting[:n]
	return batch
}

// run exports the queued spans: whole batches when signalled, everything waiting (in
// batches) when the batch timeout passes, on ForceFlush and at Shutdown.
func (q *queue) run() {
	defer close(q.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, q.batchSize)
	// exportEach exports batch after batch while take gives one (whole: whole ones only).
	exportEach := func(whole bool) {
		for {
			if batch = q.take(batch, whole); len(batch) == 0 {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), q.exportTimeout)
			err := q.exporter.ExportSpans(ctx, batch)
			cancel()
			var partial *otlp.PartialSuccessError
			switch {
			case err == nil:
			case errors.As(err, &partial):
				if n := min(partial.Rejected, int64(len(batch))); n > 0 {
					q.onDrop(DropRejected, int(n))
				}
			default:
				q.onDrop(DropExportFailed, len(batch))
			}
			clear(batch) // the spans are the exporter's no longer
			batch = batch[:0]
		}
	}
	timer := time.NewTimer(q.batchTimeout)
	defer timer.Stop()
	for {
		select {
		case <-q.full:
			exportEach(true)
		case <-timer.C:
			exportEach(false)
			timer.Reset(q.batchTimeout)
		case ack := <-q.flush:
			exportEach(false)
			close(ack)
		case <-q.stop:
			exportEach(false)
			return
		}
	}
}
