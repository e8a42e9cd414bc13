package usageview_test

import (
	"bytes"
	"encoding/csv"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/pricecatalog"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usageview"
)

// sonnet45 is Claude Sonnet 4.5's price as Anthropic's pricing page publishes it
// (https://docs.anthropic.com/en/docs/about-claude/pricing, through the built-in catalog):
// $3 input, $3.75 and $6 cache writes (5 minutes, 1 hour), $0.30 cache reads, $15 output per
// million tokens.
func sonnet45(t testing.TB) price.Price {
	t.Helper()
	p, err := pricecatalog.Builtin().Price("claude-sonnet-4-5", "2025-10-01")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// cachedTurn is the usage of a turn of a conversation whose long prompt was cached for an hour
// earlier and is read back, with a new part written to the cache: the shape of Anthropic's
// usage object (input_tokens 2,000 uncached, cache_creation 10,000 for 1 h,
// cache_read_input_tokens 50,000, output_tokens 500, of which 120 thinking). At Sonnet 4.5's
// price it costs $0.006 + $0.06 + $0.015 + $0.0075 = $0.0885, and caching saved $0.105.
var cachedTurn = price.Tokens{Uncached: 2_000, CacheWrite1h: 10_000, CacheRead: 50_000, Output: 500, Reasoning: 120}

// priced is r billed at p for the tokens t, as the billing meter writes a record: the counts
// per kind, the price, each kind's cost and the savings, the hosted tools' cost, and what was
// waived of the full cost.
func priced(r store.UsageRecord, p price.Price, t price.Tokens, hostedMicros, waivedMicros int64) store.UsageRecord {
	r.InputTokens, r.OutputTokens = t.Input(), t.Output
	r.CacheReadTokens, r.CacheWrite5mTokens, r.CacheWrite1hTokens = t.CacheRead, t.CacheWrite5m, t.CacheWrite1h
	r.ReasoningTokens = t.Reasoning
	r.Price, r.Costs = &p, price.Cost(t, p)
	r.CacheSavingsMicros = price.CacheSavings(t, p, r.Costs)
	r.HostedMicros, r.WaivedMicros = hostedMicros, waivedMicros
	r.CostMicros = r.Costs.Total() + hostedMicros - waivedMicros
	return r
}

// dbNow is the database's clock: a ledger entry written after it is stamped after it (an
// entry's time is when its transaction began).
func (f *fixture) dbNow() time.Time {
	f.t.Helper()
	var now time.Time
	if err := f.pool.QueryRow(f.ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		f.t.Fatal(err)
	}
	return now
}

// grant appends a credit entry (an adjustment when reason says so) to the account's ledger.
func (f *fixture) grant(account uuid.UUID, reason, key string, micros int64) {
	f.t.Helper()
	if _, _, err := f.st.Append(f.ctx, store.LedgerChange{AccountID: account, AmountMicros: micros, Reason: reason,
		IdempotencyKey: key, Note: "test " + key}); err != nil {
		f.t.Fatal(err)
	}
}

// bareAccount creates an account with no credit.
func (f *fixture) bareAccount(name string) uuid.UUID {
	f.t.Helper()
	a, err := f.st.CreateAccount(f.ctx, name, "default")
	if err != nil {
		f.t.Fatal(err)
	}
	return a.ID
}

// statementRows is a statement read back: its rows by column name, the header first.
type statementRows struct {
	t    testing.TB
	rows [][]string
	col  map[string]int
}

func (f *fixture) statement(account uuid.UUID, from, to time.Time) (usageview.Statement, statementRows) {
	f.t.Helper()
	var out bytes.Buffer
	st, err := f.svc.WriteStatement(f.ctx, account, from, to, testSeal, &out)
	if err != nil {
		f.t.Fatal(err)
	}
	return st, readStatement(f.t, out.String())
}

func readStatement(t testing.TB, text string) statementRows {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 3 || !slices.Equal(rows[0], usageview.StatementHeader) {
		t.Fatalf("a statement needs a header, an opening and a closing row: %q", rows)
	}
	s := statementRows{t: t, rows: rows, col: map[string]int{}}
	for i, h := range rows[0] {
		s.col[h] = i
	}
	return s
}

// cell is the named cell of row i (0 is the opening balance).
func (s statementRows) cell(i int, name string) string {
	s.t.Helper()
	c, ok := s.col[name]
	if !ok {
		s.t.Fatalf("no column %q", name)
	}
	return s.rows[i+1][c]
}

// micros is the named cell of row i as a number.
func (s statementRows) micros(i int, name string) int64 {
	s.t.Helper()
	n, err := strconv.ParseInt(s.cell(i, name), 10, 64)
	if err != nil {
		s.t.Fatalf("row %d, %s: %v", i, name, err)
	}
	return n
}

// lines is the number of rows between the opening and the closing balance.
func (s statementRows) lines() int { return len(s.rows) - 3 }

// check verifies what every statement must be: an opening row, lines whose amounts (in
// micro-units, and the same in dollars) add up to closing - opening and whose balances run from
// the opening balance, and a closing row.
func (s statementRows) check() (opening, closing int64) {
	s.t.Helper()
	last := s.lines() + 1
	if s.cell(0, "line_type") != usageview.LineOpening || s.cell(last, "line_type") != usageview.LineClosing {
		s.t.Fatalf("first and last rows: %q, %q", s.rows[1], s.rows[len(s.rows)-1])
	}
	opening, closing = s.micros(0, "balance_micros"), s.micros(last, "balance_micros")
	balance := opening
	for i := 1; i < last; i++ {
		amount := s.micros(i, "amount_micros")
		balance += amount
		if got := s.micros(i, "balance_micros"); got != balance {
			s.t.Errorf("line %d: balance %d, want %d", i, got, balance)
		}
		if s.cell(i, "amount_usd") != usageview.USD(amount) || s.cell(i, "balance_usd") != usageview.USD(balance) {
			s.t.Errorf("line %d: dollars %s and %s for %d and %d", i, s.cell(i, "amount_usd"), s.cell(i, "balance_usd"), amount, balance)
		}
	}
	if balance != closing || s.cell(last, "balance_usd") != usageview.USD(closing) || s.cell(0, "balance_usd") != usageview.USD(opening) {
		s.t.Errorf("opening %d + lines = %d, closing row %d (%s)", opening, balance, closing, s.cell(last, "balance_usd"))
	}
	return opening, closing
}

// lastBalanceBefore is the balance after the account's last ledger entry stamped before t.
func (f *fixture) lastBalanceBefore(account uuid.UUID, t time.Time) int64 {
	f.t.Helper()
	entries, err := f.st.LedgerEntries(f.ctx, account, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, e := range entries { // newest first
		if e.CreatedAt.Before(t) {
			return e.BalanceAfterMicros
		}
	}
	return 0
}

// TestStatement: a statement of a period lists the account's ledger entries of the period
// only, in order (usage, a grant, an adjustment), each usage line with its record's tokens per
// kind, rates and costs; a usage entry billed in part shows its cost, the amount billed and
// what was not billed, with the ledger's note; the amounts add up to the ledger's change over
// the period, the opening balance is the balance after the last entry before the period and
// the closing balance the one after its last entry. Entries before and after the period, and
// another account's (even one with the same request id), are not on it; consecutive periods
// meet exactly, and a statement of all time closes at the account's balance.
func TestStatement(t *testing.T) {
	f := newFixture(t, time.Now())
	p := sonnet45(t)
	acct, other := f.bareAccount("statement"), f.account("other")
	key := f.key(acct, "billing")
	at := time.Now().UTC()
	rec := func(account uuid.UUID, id, model string) store.UsageRecord {
		return store.UsageRecord{AccountID: account, RequestID: id, APIKeyID: key, Model: model, Route: "/v1/messages",
			Provider: "anthropic", UpstreamModel: "claude-sonnet-4-5", Status: "ok", StartedAt: at}
	}
	full := price.Cost(cachedTurn, p).Total()
	if full != 88_500 {
		t.Fatalf("the cached turn costs %d, want 88,500", full)
	}

	// Before the period: 100,000 of credit and a request of 10,000 (balance 90,000).
	f.grant(acct, store.ReasonGrant, "starting-credit", 100_000)
	before := rec(acct, "before", "service-sonnet")
	before.CostMicros, before.InputTokens, before.OutputTokens = 10_000, 100, 10
	f.write(before)
	t0 := f.dbNow()
	f.write(rec(other, "other-before", "secret-model"))
	t1 := f.dbNow()

	// The period: the cached turn, billed in full (1,500 left); the same again, of which only
	// the 1,500 left is billed; a top-up; a request with a web search of which 500 was waived;
	// an operator's adjustment. The other account uses the same request id meanwhile.
	f.write(priced(rec(acct, "turn-1", "service-sonnet"), p, cachedTurn, 0, 0))
	f.write(priced(rec(other, "turn-1", "secret-model"), p, cachedTurn, 0, 0))
	turn2 := priced(rec(acct, "turn-2", "service-sonnet"), p, cachedTurn, 0, 0)
	turn2.ServiceTier = "standard"
	f.write(turn2)
	f.grant(acct, store.ReasonGrant, "top-up", 1_000_000)
	searched := priced(rec(acct, "turn-3", "service-sonnet"), p, price.Tokens{Uncached: 1_000, Output: 200}, 10_000, 500)
	searched.HostedCalls = map[string]int64{"web_search": 1}
	searched.FittedOutputTokens = 1024 // it gave no output bound and was fitted to the credit
	f.write(searched)
	f.grant(acct, store.ReasonAdjustment, "correction", -2_000)
	t2 := f.dbNow()

	// After the period.
	f.write(priced(rec(acct, "after", "service-sonnet"), p, cachedTurn, 0, 0))
	f.grant(acct, store.ReasonGrant, "later", 5_000)

	st, s := f.statement(acct, t1, t2)
	opening, closing := s.check()
	if opening != 90_000 || opening != f.lastBalanceBefore(acct, t1) {
		t.Errorf("opening balance %d, want 90,000 (the ledger: %d)", opening, f.lastBalanceBefore(acct, t1))
	}
	searchedCost := int64(3_000 + 3_000 + 10_000 - 500)
	wantClosing := int64(90_000 - 88_500 - 1_500 + 1_000_000 - searchedCost - 2_000)
	if closing != wantClosing || closing != f.lastBalanceBefore(acct, t2) {
		t.Errorf("closing balance %d, want %d (the ledger: %d)", closing, wantClosing, f.lastBalanceBefore(acct, t2))
	}
	if st.OpeningMicros != opening || st.ClosingMicros != closing || st.Lines != 5 ||
		st.UsageMicros != 88_500+1_500+searchedCost || st.CreditMicros != 1_000_000-2_000 {
		t.Errorf("summary %+v", st)
	}
	var types, refs []string
	for i := 1; i <= s.lines(); i++ {
		types = append(types, s.cell(i, "line_type"))
		refs = append(refs, s.cell(i, "reference"))
	}
	if want := []string{"usage", "usage", "grant", "usage", "adjustment"}; !slices.Equal(types, want) {
		t.Fatalf("lines %v, want %v", types, want)
	}
	if want := []string{"usage:turn-1", "usage:turn-2", "top-up", "usage:turn-3", "correction"}; !slices.Equal(refs, want) {
		t.Fatalf("references %v, want %v", refs, want)
	}

	// The first turn: its tokens per kind, its price, each kind's cost.
	for name, want := range map[string]string{
		"request_id": "turn-1", "model": "service-sonnet", "route": "/v1/messages", "provider": "anthropic",
		"expert": "claude-sonnet-4-5", "key_id": key.String(), "key_name": "billing (tgk_bill…)",
		"input_tokens": "62000", "output_tokens": "500", "uncached_input_tokens": "2000", "cache_read_tokens": "50000",
		"cache_write_5m_tokens": "0", "cache_write_1h_tokens": "10000", "reasoning_tokens": "120",
		"price_catalog": "claude-sonnet-4-5", "price_effective": "2025-09-29", "long_context": "false",
		"uncached_input_rate_micros_per_mtok": "3000000", "cache_read_rate_micros_per_mtok": "300000",
		"cache_write_5m_rate_micros_per_mtok": "3750000", "cache_write_1h_rate_micros_per_mtok": "6000000",
		"output_rate_micros_per_mtok": "15000000",
		"uncached_input_cost_micros":  "6000", "cache_read_cost_micros": "15000", "cache_write_5m_cost_micros": "0",
		"cache_write_1h_cost_micros": "60000", "output_cost_micros": "7500", "waived_micros": "0",
		"cache_savings_micros": "105000", "cost_micros": "88500", "not_billed_micros": "0",
		"amount_micros": "-88500", "amount_usd": "-0.088500", "balance_micros": "1500", "balance_usd": "0.001500",
		"fitted_output_tokens": "",
	} {
		if got := s.cell(1, name); got != want {
			t.Errorf("turn-1 %s = %q, want %q", name, got, want)
		}
	}
	// The second turn was billed in part: the ledger took what was left.
	if s.cell(2, "cost_micros") != "88500" || s.cell(2, "amount_micros") != "-1500" || s.cell(2, "not_billed_micros") != "87000" ||
		!strings.Contains(s.cell(2, "note"), "87000 not billed") || s.cell(2, "service_tier") != "standard" {
		t.Errorf("the turn billed in part: %q", s.rows[3])
	}
	// The grant: no usage cells.
	if s.cell(3, "amount_micros") != "1000000" || s.cell(3, "request_id") != "" || s.cell(3, "cost_micros") != "" ||
		s.cell(3, "note") != "test top-up" {
		t.Errorf("the top-up: %q", s.rows[4])
	}
	// The search: its hosted tool and what was waived, and the parts that add up to its cost.
	if s.cell(4, "hosted_tool_calls") != "web_search=1" || s.cell(4, "hosted_tool_micros") != "10000" ||
		s.cell(4, "waived_micros") != "500" || s.micros(4, "cost_micros") != searchedCost || s.micros(4, "amount_micros") != -searchedCost ||
		s.cell(4, "fitted_output_tokens") != "1024" || s.cell(3, "fitted_output_tokens") != "" {
		t.Errorf("the search: %q", s.rows[5])
	}
	for i := 1; i <= s.lines(); i++ {
		if s.cell(i, "line_type") != "usage" {
			continue
		}
		sum := s.micros(i, "hosted_tool_micros") - s.micros(i, "waived_micros")
		for _, k := range []string{"uncached_input", "cache_read", "cache_write_5m", "cache_write_1h", "output"} {
			sum += s.micros(i, k+"_cost_micros")
		}
		if sum != s.micros(i, "cost_micros") {
			t.Errorf("line %d: the parts add up to %d, the cost is %d", i, sum, s.micros(i, "cost_micros"))
		}
	}
	if strings.Contains(strings.Join(slices.Concat(s.rows...), "\n"), "secret-model") {
		t.Error("the statement shows another account's usage")
	}

	// The other account's statement of the same period: its own line only.
	_, o := f.statement(other, t1, t2)
	o.check()
	if o.lines() != 1 || o.cell(1, "model") != "secret-model" || o.cell(1, "request_id") != "turn-1" {
		t.Errorf("the other account's statement: %q", o.rows)
	}

	// Consecutive periods meet: the period before ends where this one starts.
	_, prev := f.statement(acct, t0, t1)
	if _, c := prev.check(); c != opening || prev.lines() != 0 {
		t.Errorf("the period before closes at %d with %d lines, this one opens at %d", c, prev.lines(), opening)
	}
	// All time: from nothing to the account's balance.
	_, all := f.statement(acct, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Now().Add(time.Hour))
	o0, c0 := all.check()
	bal, err := f.svc.Balance(f.ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	if o0 != 0 || c0 != bal.BalanceMicros || all.lines() != 9 {
		t.Errorf("all time: opening %d, closing %d (balance %d), %d lines", o0, c0, bal.BalanceMicros, all.lines())
	}
}

// TestStatementStopsWhenTheLedgerDoesNotAddUp: an entry whose balance after it is not the
// balance before it plus its amount stops the statement with ErrLedgerMismatch before its
// closing row, so that it is never taken for a whole one.
func TestStatementStopsWhenTheLedgerDoesNotAddUp(t *testing.T) {
	f := newFixture(t, time.Now())
	acct := f.bareAccount("broken")
	f.grant(acct, store.ReasonGrant, "first", 1_000)
	if _, err := f.pool.Exec(f.ctx, `INSERT INTO credit_ledger (account_id, amount_micros, balance_after_micros, reason, idempotency_key)
		VALUES ($1, 500, 9999, 'adjustment', 'forged')`, acct); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, err := f.svc.WriteStatement(f.ctx, acct, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Now().Add(time.Hour), testSeal, &out)
	if !errors.Is(err, usageview.ErrLedgerMismatch) || strings.Contains(out.String(), usageview.LineClosing) {
		t.Errorf("err %v, output:\n%s", err, out.String())
	}
	if _, err := f.svc.WriteStatement(f.ctx, acct, time.Now(), time.Now().Add(-time.Hour), testSeal, &out); err == nil {
		t.Error("a period that ends before it starts was accepted")
	}
}

// TestParseStatementQuery: days (to included) or RFC 3339 times, this month by default, and a
// period that ends before it starts, or after the last time RFC 3339 can write (its closing line
// was dated 10000-01-01), refused naming the parameter.
func TestParseStatementQuery(t *testing.T) {
	now := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	day := func(m time.Month, d int) time.Time { return time.Date(2025, m, d, 0, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		query    string
		from, to time.Time
	}{
		{"", day(3, 1), day(3, 15)},
		{"from=2025-02-01&to=2025-02-28", day(2, 1), day(3, 1)},
		{"from=2025-02-01T12:00:00Z&to=2025-02-02T00:00:00Z", day(2, 1).Add(12 * time.Hour), day(2, 2)},
		{"to=2025-03-31", day(3, 1), day(4, 1)},
	} {
		v, _ := url.ParseQuery(c.query)
		p, err := usageview.ParseStatementQuery(v, now, nil)
		if err != nil || !p.From.Equal(c.from) || !p.To.Equal(c.to) {
			t.Errorf("%q: %v to %v, %v; want %v to %v", c.query, p.From, p.To, err, c.from, c.to)
		}
	}
	if got := (usageview.Period{From: day(2, 1), To: day(3, 1)}).Values(nil).Encode(); got != "from=2025-02-01&to=2025-02-28" {
		t.Errorf("Values: %s", got)
	}
	for _, q := range []string{"from=2025-03-02&to=2025-03-01", "from=yesterday", "from=0001-01-01&to=9999-12-31"} {
		v, _ := url.ParseQuery(q)
		var qe *usageview.QueryError
		if _, err := usageview.ParseStatementQuery(v, now, nil); !errors.As(err, &qe) {
			t.Errorf("%q: %v", q, err)
		}
	}
}
