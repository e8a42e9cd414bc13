package objectstore

import (
	"sync/atomic"
	"time"
)

// watchdog cancels a call to the store when it is armed for longer than its duration: a
// request that gets no answer, or a transfer that makes no progress. Arming it again restarts
// the count.
type watchdog struct {
	d   time.Duration
	t   *time.Timer
	hit atomic.Bool
}

// newWatchdog returns an armed watchdog that calls cancel when it fires.
func newWatchdog(d time.Duration, cancel func()) *watchdog {
	w := &watchdog{d: d}
	w.t = time.AfterFunc(d, func() {
		w.hit.Store(true)
		cancel()
	})
	return w
}

// disarmed disarms w and returns it.
func (w *watchdog) disarmed() *watchdog {
	w.disarm()
	return w
}

// arm starts (or restarts) the count.
func (w *watchdog) arm() { w.t.Reset(w.d) }

// disarm stops the count.
func (w *watchdog) disarm() { w.t.Stop() }

// stop stops the count for good.
func (w *watchdog) stop() { w.t.Stop() }

// fired reports whether the watchdog cancelled the call.
func (w *watchdog) fired() bool { return w.hit.Load() }
