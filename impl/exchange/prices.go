package exchange

import (
	"time"

	"github.com/tollgate/tollgate/impl/routing"
)

// Prices that change while the gateway runs. A configuration's catalog prices are resolved
// for one day; the built-in catalog holds dated entries (o3 cost $10 and $40 a million tokens
// from 2025-04-16, $2 and $8 from 2025-06-10), so a gateway that runs across such a date must
// bill from its first moment (00:00 UTC) at the new price, as the provider does. The Engine
// keeps its registry priced for the current day: a timer set for the next day on which an
// entry that the configuration names takes effect swaps in a registry priced for that day
// (exchanges already started keep the model they resolved, and are billed at its prices).
// Trial h12 D6: the prices were resolved once, at start, and a restart was needed.

// reprice prices the registry for the clock's current day when that day's prices differ from
// the ones in use, and sets the timer for the next change.
func (eng *Engine) reprice() {
	cfg := eng.config
	eng.priceMu.Lock()
	defer eng.priceMu.Unlock()
	if eng.closed {
		return
	}
	now := eng.now()
	day := cfg.PriceDay(now)
	priced, err := cfg.PricedOn(day)
	if err != nil {
		// An entry the configuration names is not in force on day (a clock before its first
		// date): that price keeps its resolution.
		eng.log.Warn("some prices kept their resolution", "day", day, "err", err)
	}
	eng.registry.Store(routing.NewRegistry(priced))
	eng.stopPriceTimer()
	next := cfg.NextPriceChange(day)
	if next == "" {
		return
	}
	at, err := time.Parse(time.DateOnly, next)
	if err != nil {
		return
	}
	eng.priceNext = at
	eng.priceTime = time.AfterFunc(at.Sub(now), eng.reprice)
}

// Close stops the timer that renews the prices (the engine keeps the registry it has): a
// gateway that stops lets the engine go at once, not at the next catalog date.
func (eng *Engine) Close() {
	eng.priceMu.Lock()
	defer eng.priceMu.Unlock()
	eng.closed = true
	eng.stopPriceTimer()
}

// stopPriceTimer stops the timer of the next price change, if one is set. Called with priceMu
// held.
func (eng *Engine) stopPriceTimer() {
	if eng.priceTime != nil {
		eng.priceTime.Stop()
		eng.priceTime, eng.priceNext = nil, time.Time{}
	}
}
