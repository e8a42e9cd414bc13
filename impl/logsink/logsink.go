// Package logsink buffers the process log so that a request does not pay a write system call
// for its access-log line.
//
// A Writer collects what is written to it in memory and writes it out in one call when the
// buffer passes a size, every interval, and on Flush and Close. Lines keep their order: they
// are appended under one lock, and the batches are written one at a time. Writers never wait
// for the output while it is being written, only for the append. Urgent wraps a slog.Handler
// so that records at or above a level (warnings and errors, by default) are written out at
// once: what the operator needs after a crash is not held back. A process that dies without
// Close loses at most one interval of lower-level lines.
package logsink

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Writer is a buffered, concurrency-safe writer. The zero value is not usable; call New.
type Writer struct {
	out   io.Writer
	limit int

	mu  sync.Mutex
	buf []byte
	// spare is the buffer being written out, or written out last; nil while in use.
	spare  []byte
	err    error
	closed bool

	// writeMu serialises writes to out, so that batches leave in the order they were taken.
	writeMu sync.Mutex

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// New returns a Writer that writes to out every interval (default 100 ms), and at once when
// more than limit bytes (default 64 KiB) are waiting.
func New(out io.Writer, interval time.Duration, limit int) *Writer {
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	if limit <= 0 {
		limit = 64 << 10
	}
	w := &Writer{out: out, limit: limit, buf: make([]byte, 0, limit), spare: make([]byte, 0, limit),
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop(interval)
	return w
}

func (w *Writer) loop(interval time.Duration) {
	defer close(w.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			_ = w.Flush()
		}
	}
}

// Write appends p to the buffer; it writes the buffer out first when p would take it past the
// limit. It returns the error of an earlier write to the output, if any.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf = append(w.buf, p...)
	full := len(w.buf) >= w.limit || w.closed
	err := w.err
	w.mu.Unlock()
	if full {
		if ferr := w.Flush(); ferr != nil {
			return len(p), ferr
		}
	}
	return len(p), err
}

// Flush writes out everything written so far.
func (w *Writer) Flush() error {
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	w.mu.Lock()
	if len(w.buf) == 0 {
		w.mu.Unlock()
		return nil
	}
	batch := w.buf
	w.buf = w.spare[:0]
	w.spare = nil
	w.mu.Unlock()
	_, err := w.out.Write(batch)
	w.mu.Lock()
	if err != nil {
		w.err = err
	}
	if cap(batch) <= 4*w.limit {
		w.spare = batch[:0] // the two buffers take turns; an outsized one is let go
	}
	w.mu.Unlock()
	return err
}

// Close stops the timer and writes out what is left. Writes after Close go out at once.
func (w *Writer) Close() error {
	w.once.Do(func() {
		close(w.stop)
		<-w.done
	})
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	return w.Flush()
}

// Urgent returns a handler that passes every record to h and flushes w after each record at
// or above level.
func (w *Writer) Urgent(h slog.Handler, level slog.Leveler) slog.Handler {
	return &urgentHandler{Handler: h, w: w, level: level}
}

type urgentHandler struct {
	slog.Handler
	w     *Writer
	level slog.Leveler
}

func (u *urgentHandler) Handle(ctx context.Context, r slog.Record) error {
	err := u.Handler.Handle(ctx, r)
	if r.Level >= u.level.Level() {
		if ferr := u.w.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (u *urgentHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &urgentHandler{Handler: u.Handler.WithAttrs(attrs), w: u.w, level: u.level}
}

func (u *urgentHandler) WithGroup(name string) slog.Handler {
	return &urgentHandler{Handler: u.Handler.WithGroup(name), w: u.w, level: u.level}
}
