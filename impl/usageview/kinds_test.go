package usageview_test

import (
	"bytes"
	"encoding/csv"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/pricecatalog"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usageview"
)

// TestTokenKinds: the daily spend adds up the tokens per kind and the savings from caching,
// the same from the rollup (UTC days) as from the requests (another time zone), per group and
// in all, without another account's; a request billed before per-kind prices counts its input
// as uncached. The request log and its CSV export carry each request's kinds, price and the
// parts of its cost (Bill), and a request without a price has no parts.
func TestTokenKinds(t *testing.T) {
	now := time.Date(2025, 10, 20, 12, 0, 0, 0, time.UTC)
	f := newFixture(t, now)
	a, b := f.account("a"), f.account("b")
	sonnet := sonnet45(t)
	mini, err := pricecatalog.Builtin().Price("gpt-4.1-mini", "2025-10-01")
	if err != nil {
		t.Fatal(err)
	}
	rec := func(acct uuid.UUID, id, model string, ago time.Duration) store.UsageRecord {
		return store.UsageRecord{AccountID: acct, RequestID: id, Model: model, Route: "/v1/messages", Provider: "sim",
			UpstreamModel: "e", Status: "ok", StartedAt: now.Add(-ago)}
	}
	// OpenAI's usage: prompt_tokens 52,000 of which cached_tokens 50,000, completion_tokens 500
	// (gpt-4.1-mini at $0.40 input, $0.10 cached input, $1.60 output per million tokens).
	openAITurn := price.Tokens{Uncached: 2_000, CacheRead: 50_000, Output: 500}
	old := rec(a, "old", "service-sonnet", 3*time.Hour)
	old.InputTokens, old.OutputTokens, old.CostMicros = 1_000, 100, 4_500
	f.write(
		priced(rec(a, "cached", "service-sonnet", time.Hour), sonnet, cachedTurn, 0, 0),
		priced(rec(a, "written", "service-sonnet", 2*time.Hour), sonnet, price.Tokens{Uncached: 100, CacheWrite5m: 20_000, Output: 50}, 0, 0),
		priced(rec(a, "openai", "service-mini", 26*time.Hour), mini, openAITurn, 0, 0),
		old,
		priced(rec(b, "b-cached", "service-sonnet", time.Hour), sonnet, cachedTurn, 0, 0),
	)
	// Savings: the Sonnet turn 105,000 (60,000 read at $0.30 instead of $3: 50,000 × 2.70 = 135,000,
	// less 10,000 written for an hour at $3 above the input price: 30,000); the 5-minute write
	// -15,000 (20,000 at $0.75 above); the OpenAI turn 15,000 (50,000 × $0.30).
	want := usageview.Tokens{Input: 62_000 + 20_100 + 52_000 + 1_000, Uncached: 2_000 + 100 + 2_000 + 1_000,
		CacheRead: 100_000, CacheWrite: 30_000, Output: 500 + 50 + 500 + 100, CacheSavingsMicros: 105_000 - 15_000 + 15_000}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	for _, loc := range []*time.Location{time.UTC, ny} {
		for _, by := range []usageview.GroupBy{usageview.GroupByModel, usageview.GroupByKey} {
			d, err := f.svc.DailySpend(f.ctx, a, usageview.LastDays(7, now, loc, by))
			if err != nil {
				t.Fatal(err)
			}
			if d.Tokens != want {
				t.Errorf("%s by %s: %+v, want %+v", loc, by, d.Tokens, want)
			}
			var sum usageview.Tokens
			for _, g := range d.Groups {
				sum.Input += g.Tokens.Input
				sum.CacheRead += g.Tokens.CacheRead
				sum.CacheSavingsMicros += g.Tokens.CacheSavingsMicros
			}
			if sum.Input != want.Input || sum.CacheRead != want.CacheRead || sum.CacheSavingsMicros != want.CacheSavingsMicros {
				t.Errorf("%s by %s: the groups add up to %+v", loc, by, sum)
			}
		}
	}
	d, err := f.svc.DailySpend(f.ctx, a, usageview.DailyQuery{From: now.AddDate(0, 0, -6), To: now.AddDate(0, 0, 1),
		GroupBy: usageview.GroupByModel, MaxGroups: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Groups) != 1 || !d.Groups[0].Other || d.Groups[0].Tokens != want {
		t.Errorf("the folded group: %+v", d.Groups)
	}

	page, err := f.svc.RequestLog(f.ctx, a, usageview.Filter{}, usageview.Cursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]usageview.Request{}
	for _, r := range page.Requests {
		byID[r.RequestID] = r
	}
	cached := byID["cached"]
	if cached.UncachedTokens() != 2_000 || cached.CacheReadTokens != 50_000 || cached.CacheWriteTokens() != 10_000 ||
		cached.ReasoningTokens != 120 || cached.Price == nil || cached.Price.Catalog != "claude-sonnet-4-5" ||
		cached.CacheSavingsMicros != 105_000 || cached.CostMicros != 88_500 {
		t.Errorf("the cached turn in the log: %+v", cached)
	}
	wantBill := []usageview.BillPart{
		{Kind: usageview.KindUncached, Tokens: 2_000, RateMicros: 3_000_000, CostMicros: 6_000},
		{Kind: usageview.KindCacheRead, Tokens: 50_000, RateMicros: 300_000, CostMicros: 15_000},
		{Kind: usageview.KindCacheWrite1h, Tokens: 10_000, RateMicros: 6_000_000, CostMicros: 60_000},
		{Kind: usageview.KindOutput, Tokens: 500, RateMicros: 15_000_000, CostMicros: 7_500},
	}
	if got := cached.Bill(); !slices.Equal(got, wantBill) {
		t.Errorf("the cached turn's bill:\n%+v\nwant\n%+v", got, wantBill)
	}
	if got := byID["old"]; got.Bill() != nil || got.UncachedTokens() != 1_000 {
		t.Errorf("a request billed before per-kind prices: %+v, bill %+v", got, got.Bill())
	}

	var out bytes.Buffer
	if _, err := f.svc.ExportCSV(f.ctx, a, usageview.Filter{}, &out); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	cells := map[string]map[string]string{}
	for _, r := range rows[1:] {
		m := map[string]string{}
		for h, i := range col {
			m[h] = r[i]
		}
		cells[r[col["request_id"]]] = m
	}
	if len(cells) != 4 || cells["b-cached"] != nil {
		t.Fatalf("exported %d requests: %v", len(cells), cells)
	}
	for id, want := range map[string]map[string]string{
		"cached": {"input_tokens": "62000", "uncached_input_tokens": "2000", "cache_read_tokens": "50000",
			"cache_write_1h_tokens": "10000", "reasoning_tokens": "120", "price_catalog": "claude-sonnet-4-5",
			"cache_read_rate_micros_per_mtok": "300000", "cache_write_1h_cost_micros": "60000", "cache_savings_micros": "105000"},
		"openai": {"uncached_input_tokens": "2000", "cache_read_tokens": "50000", "price_catalog": "gpt-4.1-mini",
			"uncached_input_rate_micros_per_mtok": "400000", "cache_read_cost_micros": "5000", "output_cost_micros": "800",
			"cost_micros": "6600"},
		"old": {"uncached_input_tokens": "1000", "price_catalog": "", "uncached_input_rate_micros_per_mtok": "",
			"output_cost_micros": "", "cost_micros": "4500", "waived_micros": "0"},
	} {
		for h, v := range want {
			if cells[id][h] != v {
				t.Errorf("%s: %s = %q, want %q", id, h, cells[id][h], v)
			}
		}
	}
}

// TestRateUSDAndThousands: rates as exact dollars, counts with separators.
func TestRateUSDAndThousands(t *testing.T) {
	for micros, want := range map[int64]string{3_000_000: "3.00", 300_000: "0.30", 75_000: "0.075", 125: "0.000125",
		15_000_000: "15.00", 0: "0.00", 1_250_000: "1.25"} {
		if got := usageview.RateUSD(micros); got != want {
			t.Errorf("RateUSD(%d) = %q, want %q", micros, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1_000: "1,000", 62_000: "62,000", 1_234_567: "1,234,567", -45_000: "-45,000"} {
		if got := usageview.Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
