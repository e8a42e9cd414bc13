package exchange

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
)

// TestPricesChangeOnTheirDay: a gateway running across the day a catalog price changes bills
// from that day on at the new price, without a restart. The built-in catalog's o3 cost $10
// and $40 a million tokens from 2025-04-16 and $2 and $8 from 2025-06-10 (OpenAI's price cut):
// an engine whose clock stands just before midnight UTC of 2025-06-09 prices o3 at $10, and
// its timer swaps in $2 at midnight. Trial h12 D6: the prices were resolved once, at start.
func TestPricesChangeOnTheirDay(t *testing.T) {
	cfg := datedConfig(t)
	midnight := time.Date(2025, 6, 10, 0, 0, 0, 0, time.UTC)
	start := time.Now()
	clock := func() time.Time { return midnight.Add(-150 * time.Millisecond).Add(time.Since(start)) }
	eng := New(Options{Config: cfg, Now: clock})
	inputPrice := func() int64 {
		m, ok := eng.registry.Load().Model("dated-o3")
		if !ok {
			t.Fatal("no model")
		}
		return m.Experts[0].Price.Input
	}
	if got := inputPrice(); got != 10_000_000 {
		t.Fatalf("o3 on 2025-06-09 at %d micro-units a million input tokens, want 10,000,000", got)
	}
	eng.priceMu.Lock()
	next := eng.priceNext
	eng.priceMu.Unlock()
	if !next.Equal(midnight) {
		t.Fatalf("the next price change at %v, want %v", next, midnight)
	}
	deadline := time.Now().Add(5 * time.Second)
	for inputPrice() != 2_000_000 {
		if time.Now().After(deadline) {
			t.Fatalf("o3 after midnight of 2025-06-10 still at %d micro-units a million input tokens, want 2,000,000", inputPrice())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m, _ := eng.registry.Load().Model("dated-o3"); m.Experts[0].Price.Effective != "2025-06-10" || m.Experts[0].Price.Output != 8_000_000 {
		t.Errorf("o3's price after the change: %+v", m.Experts[0].Price)
	}
	// The timer is set again, for the next day a named entry takes effect (the default
	// configuration's models name entries dated after 2025-06-10).
	eng.priceMu.Lock()
	defer eng.priceMu.Unlock()
	if eng.priceTime == nil || !eng.priceNext.After(midnight) {
		t.Errorf("after the change the next one is at %v", eng.priceNext)
	}
	eng.priceTime.Stop()
}

// TestCloseStopsThePriceTimer: a closed engine's price timer is stopped, and it sets no other,
// so that a stopped gateway's engine is let go at once, not at the next catalog date (the
// review of fccb0bd); its prices stay those of the day it was closed.
func TestCloseStopsThePriceTimer(t *testing.T) {
	cfg := datedConfig(t)
	day := time.Date(2025, 6, 9, 12, 0, 0, 0, time.UTC)
	eng := New(Options{Config: cfg, Now: func() time.Time { return day }})
	eng.priceMu.Lock()
	armed := eng.priceTime != nil
	eng.priceMu.Unlock()
	if !armed {
		t.Fatal("no price timer before the change of 2025-06-10")
	}
	before := eng.registry.Load()
	eng.Close()
	eng.reprice() // as the timer would
	eng.priceMu.Lock()
	defer eng.priceMu.Unlock()
	if eng.priceTime != nil || eng.registry.Load() != before {
		t.Errorf("after Close: timer %v, registry replaced %v", eng.priceTime != nil, eng.registry.Load() != before)
	}
}

// datedConfig is the default configuration with the model dated-o3, priced as the catalog's
// o3, whose price changed on 2025-06-10.
func datedConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Models = append(cfg.Models, config.Model{ID: "dated-o3", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{Catalog: "o3"}, MaxOutputTokens: 16,
		Backend: &config.Upstream{Provider: cfg.Providers[0].Name, Model: "o3"}})
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}
