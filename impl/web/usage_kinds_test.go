package web_test

import (
	"context"
	"encoding/csv"
	"html"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/pricecatalog"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usageview"
)

// pricedUsage is r billed at p for the tokens t, as the billing meter writes a record.
func pricedUsage(r store.UsageRecord, p price.Price, t price.Tokens, hostedMicros, waivedMicros int64) store.UsageRecord {
	r.InputTokens, r.OutputTokens = t.Input(), t.Output
	r.CacheReadTokens, r.CacheWrite5mTokens, r.CacheWrite1hTokens = t.CacheRead, t.CacheWrite5m, t.CacheWrite1h
	r.ReasoningTokens = t.Reasoning
	r.Price, r.Costs = &p, price.Cost(t, p)
	r.CacheSavingsMicros = price.CacheSavings(t, p, r.Costs)
	r.HostedMicros, r.WaivedMicros = hostedMicros, waivedMicros
	r.CostMicros = r.Costs.Total() + hostedMicros - waivedMicros
	return r
}

// TestUsagePageTokenKindsAndStatement: requests written with cache reads and writes at
// Sonnet 4.5's published price (Anthropic's pricing page, through the built-in catalog) show on
// the Usage page as tokens per kind and savings for the period, in the totals per model, and in
// the request log with how each cost was made (count × rate = cost per kind, hosted tools, what
// was waived, the catalog entry and its date, the service tier); a request billed before
// per-kind prices shows its cost alone. The statement of the period is a CSV whose lines add up
// from the opening to the closing balance, which is the account's balance; another account's
// usage is on neither, and a period that ends before it starts is a 400.
func TestUsagePageTokenKindsAndStatement(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	// The statement starts on the UTC day the test starts, before the starting credit is made, so
	// that a run across midnight still finds it on the statement.
	first := time.Now().UTC().Format(time.DateOnly)
	acme := e.account(t, "acme", aliceEmail, "member")
	other := e.account(t, "other", bobEmail, "member")
	sonnet, err := pricecatalog.Builtin().Price("claude-sonnet-4-5", "2025-10-01")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	rec := func(acct store.Account, id, model string, ago time.Duration) store.UsageRecord {
		return store.UsageRecord{AccountID: acct.ID, RequestID: id, Model: model, Route: "/v1/messages", Provider: "anthropic",
			UpstreamModel: "claude-sonnet-4-5", Status: "ok", StartedAt: now.Add(-ago), FinishedAt: now.Add(-ago + time.Second)}
	}
	// Anthropic's usage object of a turn whose prompt was cached: 2,000 uncached input tokens,
	// 10,000 written to the cache for an hour, 50,000 read from it, 500 output of which 120
	// thinking: $0.0885, and $0.105 saved by the cache.
	turn := price.Tokens{Uncached: 2_000, CacheWrite1h: 10_000, CacheRead: 50_000, Output: 500, Reasoning: 120}
	cached := pricedUsage(rec(acme, "cached", "service-sonnet", 3*time.Minute), sonnet, turn, 0, 0)
	cached.ServiceTier = "priority"
	searched := pricedUsage(rec(acme, "searched", "service-sonnet", 2*time.Minute), sonnet,
		price.Tokens{Uncached: 1_000, CacheWrite5m: 4_000, Output: 200}, 10_000, 500)
	searched.HostedCalls = map[string]int64{"web_search": 1}
	searched.FittedOutputTokens = 1_024 // it gave no output bound and was fitted to the credit
	old := rec(acme, "old", "service-flint", time.Minute)
	old.InputTokens, old.OutputTokens, old.CostMicros = 7_000, 300, 4_321
	secret := pricedUsage(rec(other, "secret", "secret-model", time.Minute), sonnet,
		price.Tokens{Uncached: 1, CacheRead: 77_777, Output: 1}, 0, 0)
	if _, err := e.Store.WriteUsage(ctx, "web-test", []store.UsageRecord{cached, searched, old, secret}); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)

	before := time.Now().UTC()
	p := b.get("/usage")
	after := time.Now().UTC()
	if p.Status != http.StatusOK {
		t.Fatalf("GET /usage: %d %.300s", p.Status, p.Body)
	}
	body := html.UnescapeString(p.Body)
	// The period: 10,000 uncached (2,000 + 1,000 + 7,000 billed before per-kind prices), 50,000
	// read, 14,000 written; saved 105,000 by the read turn, less 3,000 for the 5-minute write
	// ($0.75 a million above the input price).
	for _, want := range []string{
		`Saved <span class="money" title="$0.102000">$0.10</span> by prompt caching`,
		"<dt>Uncached input</dt><dd>10,000 tokens</dd>", "<dt>Cache reads</dt><dd>50,000 tokens</dd>",
		"<dt>Cache writes</dt><dd>14,000 tokens</dd>", "<dt>Output</dt><dd>1,000 tokens</dd>",
		// The totals per model.
		`<th scope="row">service-sonnet</th><td>2</td><td class="num">3,000</td><td class="num">50,000</td><td class="num">14,000</td><td class="num">700</td><td class="num"><span class="money" title="$0.102000">$0.10</span></td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	log := html.UnescapeString(logTable(p.Body))
	for _, want := range []string{
		// The cached turn's kinds, and how its cost was made.
		`<td class="num">2,000</td><td class="num">50,000</td><td class="num">10,000</td><td class="num">500<br><span class="help">120 reasoning</span></td>`,
		"<li>2,000 uncached input × $3.00/MTok = $0.006000</li>",
		"<li>50,000 cache read × $0.30/MTok = $0.015000</li>",
		"<li>10,000 cache write (1 h) × $6.00/MTok = $0.060000</li>",
		"<li>500 output (120 of them reasoning) × $15.00/MTok = $0.007500</li>",
		"<li><strong>cost $0.088500</strong></li>",
		"Price: claude-sonnet-4-5 (prices from 2025-09-29); service tier priority.",
		// The search: its hosted tool and what was waived.
		"<li>4,000 cache write (5 min) × $3.75/MTok = $0.015000</li>",
		"<li>hosted tools web_search=1: $0.010000</li>", "<li>waived (not billed): −$0.000500</li>",
		"<li><strong>cost $0.030500</strong></li>",
		// The search was fitted to the credit: its bound, under its output.
		`<td class="num">200<br><span class="help" title="The request gave no output bound and the credit did not cover the model's whole bound: it was fitted to this many output tokens.">fitted bound 1,024</span></td>`,
		// The old request: its cost alone, under a cent, with the exact amount in its title.
		`<td class="num">7,000</td><td class="num">0</td><td class="num">0</td><td class="num">300</td><td class="num cost"><span class="money" title="$0.004321">< $0.01</span></td>`,
		// The cached turn's cost, rounded to the cent where the log lists it.
		`<summary><span class="money" title="$0.088500">$0.09</span><span class="visually-hidden">: how this cost was made</span></summary>`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the request log lacks %q", want)
		}
	}
	if strings.Contains(body, "77,777") || strings.Contains(body, "secret-model") {
		t.Error("the page shows another account's usage")
	}

	// The statement of today (of the test's days): the starting credit (made today) and the three
	// requests.
	today := time.Now().UTC().Format(time.DateOnly)
	p = b.get("/usage/statement.csv?from=" + first + "&to=" + today)
	if p.Status != http.StatusOK || !strings.HasPrefix(p.Header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(p.Header.Get("Content-Disposition"), `filename="statement-`+first+"-to-"+today+`.csv"`) {
		t.Fatalf("statement: %d %v %.500s", p.Status, p.Header, p.Body)
	}
	rows, err := csv.NewReader(strings.NewReader(p.Body)).ReadAll()
	if err != nil || len(rows) < 3 || !slices.Equal(rows[0], usageview.StatementHeader) {
		t.Fatalf("statement rows %q, %v", rows, err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	num := func(row []string, name string) int64 {
		n, err := strconv.ParseInt(row[col[name]], 10, 64)
		if err != nil {
			t.Fatalf("%s of %q: %v", name, row, err)
		}
		return n
	}
	var types, requests []string
	sum := int64(0)
	for _, row := range rows[2 : len(rows)-1] {
		types = append(types, row[col["line_type"]])
		requests = append(requests, row[col["request_id"]])
		sum += num(row, "amount_micros")
	}
	opening, closing := num(rows[1], "balance_micros"), num(rows[len(rows)-1], "balance_micros")
	acct, err := e.Store.GetAccount(ctx, acme.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(types, []string{"grant", "usage", "usage", "usage"}) || !slices.Equal(requests, []string{"", "cached", "searched", "old"}) ||
		opening != 0 || opening+sum != closing || closing != acct.BalanceMicros {
		t.Errorf("statement: lines %v %v, opening %d + %d = closing %d, balance %d", types, requests, opening, sum, closing, acct.BalanceMicros)
	}
	if cachedRow := rows[3]; cachedRow[col["cache_read_tokens"]] != "50000" || cachedRow[col["cache_read_rate_micros_per_mtok"]] != "300000" ||
		cachedRow[col["amount_usd"]] != "-0.088500" || cachedRow[col["service_tier"]] != "priority" {
		t.Errorf("the cached turn's line: %q", cachedRow)
	}
	if strings.Contains(p.Body, "secret") {
		t.Error("the statement shows another account's usage")
	}
	if p := b.get("/usage/statement.csv?from=2025-03-02&to=2025-03-01"); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "must be after") {
		t.Errorf("a period that ends before it starts: %d %.500s", p.Status, p.Body)
	}
	// The page's statement form names this month, as of when the page was made.
	form := func(at time.Time) bool {
		return strings.Contains(body, `<input id="s-from" name="from" type="date" value="`+at.Format("2006-01")+`-01"`) &&
			strings.Contains(body, `<input id="s-to" name="to" type="date" value="`+at.Format(time.DateOnly)+`"`)
	}
	if !form(before) && !form(after) {
		t.Errorf("the statement form: %.2000s", body)
	}

	// Nobody signed in gets no statement.
	if p := e.browser(t).get("/usage/statement.csv"); p.Status == http.StatusOK || strings.Contains(p.Body, "line_type") {
		t.Errorf("a statement without a session: %d %.300s", p.Status, p.Body)
	}
	// Bob, of the other account, sees his own statement only.
	bob := e.browser(t)
	bob.signIn(e, bobEmail, bobPass)
	p = bob.get("/usage/statement.csv")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "secret-model") || strings.Contains(p.Body, ",cached,") ||
		strings.Contains(p.Body, "service-sonnet") {
		t.Errorf("bob's statement: %d\n%s", p.Status, p.Body)
	}
}
