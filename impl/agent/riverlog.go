package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// riverRepeatEvery is how often one message of River's is logged while it repeats.
const riverRepeatEvery = time.Minute

// riverLogger is the logger River reports through. River reports every start and stop at
// info, so only its warnings and errors are kept; and while the database is away its
// producer, notifier and leader elector retry and report every attempt (about two error lines
// a second, trial h1), so each message is logged at most once every riverRepeatEvery while it
// repeats, the next one saying how many were left out ("repeated").
func riverLogger(h slog.Handler) *slog.Logger {
	return slog.New(repeatLimit{Handler: minLevel{h, slog.LevelWarn}, every: riverRepeatEvery,
		seen: &repeats{last: map[string]time.Time{}, left: map[string]int{}}})
}

// minLevel is a slog handler that drops records below a level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(a), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

// repeatLimit is a slog handler that passes a record whose message it passed less than every
// ago (by the records' times) only as a count, added to the next one it passes.
type repeatLimit struct {
	slog.Handler
	every time.Duration
	seen  *repeats
}

// repeats is what a repeatLimit and the handlers derived from it know of the messages passed.
type repeats struct {
	mu   sync.Mutex
	last map[string]time.Time // message → when it was last passed
	left map[string]int       // message → how many were left out since
}

func (h repeatLimit) Handle(ctx context.Context, r slog.Record) error {
	h.seen.mu.Lock()
	last, ok := h.seen.last[r.Message]
	if ok && r.Time.Sub(last) < h.every {
		h.seen.left[r.Message]++
		h.seen.mu.Unlock()
		return nil
	}
	h.seen.last[r.Message] = r.Time
	left := h.seen.left[r.Message]
	delete(h.seen.left, r.Message)
	h.seen.mu.Unlock()
	if left > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("repeated", left))
	}
	return h.Handler.Handle(ctx, r)
}

func (h repeatLimit) WithAttrs(a []slog.Attr) slog.Handler {
	return repeatLimit{h.Handler.WithAttrs(a), h.every, h.seen}
}

func (h repeatLimit) WithGroup(name string) slog.Handler {
	return repeatLimit{h.Handler.WithGroup(name), h.every, h.seen}
}
