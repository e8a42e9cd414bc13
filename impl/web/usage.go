package web

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/usageview"
)

// The Usage page (the data comes from impl/usageview): balance, burn rate and days left, the
// statement of a period (a CSV of the credit ledger), spend per day stacked by model or key (a
// table, drawn as a chart by static/usage-chart.js with the vendored uPlot when scripts run)
// with the tokens per kind and what prompt caching saved, and the request log with each
// request's tokens per kind and how its cost was made, its filters in the URL, keyset pages and
// a CSV export. Times are UTC, as everywhere in the application.

// usageChartGroups is how many groups the chart and its table show (the rest are added up).
const usageChartGroups = 8

func (a *App) usageRoutes(mux *router) {
	svc := a.usage
	mux.Handle("GET /usage", a.member(func(w http.ResponseWriter, r *http.Request, v *Visitor) { a.usagePage(w, r, v, svc) }))
	mux.Handle("GET /usage/export.csv", a.member(func(w http.ResponseWriter, r *http.Request, v *Visitor) { a.usageExport(w, r, v, svc) }))
	mux.Handle("GET /usage/statement.csv", a.member(func(w http.ResponseWriter, r *http.Request, v *Visitor) { a.usageStatement(w, r, v, svc) }))
}

// usageData is what templates/usage.html renders. Amounts are micro-dollars, written by the
// template's money function (money.go).
type usageData struct {
	// Held is the part of the balance that gateway processes hold as credit holds (see
	// impl/billing): still the account's, and returned when its requests stop.
	Balance, Held, PerDay int64
	// Projection says how long the balance lasts at the burn rate, or why the page does not
	// say (projectionText).
	Projection          string
	Chart               usageChart
	Form                usageForm
	Keys                []usageKeyOption
	Problems            []usageview.Problem
	Rows                []usageRow
	NewestURL, OlderURL string // "" when not applicable
	CSVURL              string
	// StatementFrom and StatementTo are the statement form's days (to included): the request
	// log's days, or this month (statementPeriod).
	StatementFrom, StatementTo string
}

type usageChart struct {
	Group  string // model or key
	Days   int
	Series []string
	// Rows are the table's rows, oldest first: a day with spend each, and one row for each
	// run of days without (usageChartRow.Empty), so that a quiet month is not thirty rows of
	// $0.00.
	Rows               []usageChartRow
	Totals             []usageTotal
	Total              int64
	Requests           int64
	Tokens             usageTokens
	ByModelURL         string
	ByKeyURL           string
	Days7, Days30, D90 string
}

// usageChartRow is a day with spend, or a run of EmptyDays days without any from Day to Last.
type usageChartRow struct {
	Day    time.Time
	Cells  []int64
	Micros int64
	// EmptyDays is how many days without spend the row stands for (0: a day with spend);
	// Last is the last of them.
	EmptyDays int
	Last      time.Time
}

type usageTotal struct {
	Label    string
	Requests int64
	Micros   int64
	Tokens   usageTokens
}

// usageTokens are tokens per kind and the savings from caching, as the page writes them.
type usageTokens struct {
	Uncached, CacheRead, CacheWrite, Output string
	// Saved is what prompt caching saved, in micro-dollars; CostMore is set instead (to what
	// it cost beyond what it saved) when cache writes cost more than the reads saved.
	Saved, CostMore int64
}

// tokensText writes tokens per kind with thousands separators and the savings in dollars.
func tokensText(t usageview.Tokens) usageTokens {
	out := usageTokens{Uncached: usageview.Thousands(t.Uncached), CacheRead: usageview.Thousands(t.CacheRead),
		CacheWrite: usageview.Thousands(t.CacheWrite), Output: usageview.Thousands(t.Output)}
	if t.CacheSavingsMicros < 0 {
		out.CostMore = -t.CacheSavingsMicros
	} else {
		out.Saved = t.CacheSavingsMicros
	}
	return out
}

// usageForm holds the filter form's values as the URL gave them.
type usageForm struct {
	From, To, Model, Key, Route, Status, Limit, Group, Days string
}

type usageKeyOption struct {
	ID, Label string
	Selected  bool
}

type usageRow struct {
	Time                      time.Time
	Route, Model, Expert, Key string
	// Uncached, CacheRead, CacheWrite and Output are the request's tokens per kind; Reasoning
	// the part of the output spent on reasoning ("" when none); Fitted the output bound the
	// gateway fitted to the account's credit for a request that gave none ("" when it was not
	// fitted: docs/billing.md).
	Uncached, CacheRead, CacheWrite, Output, Reasoning, Fitted string
	// Cost is the request's cost in micro-dollars (written to the cent), CostExact to the
	// micro-dollar (in how it was made).
	Cost            int64
	CostExact       string
	Status, Latency string
	OnCredit        bool
	// Bill is how the cost was made; nil for a request billed before per-kind prices.
	Bill *usageBill
	// TraceID is the request's trace id (32 hex digits; "" when it was not traced), and
	// TraceURL its address in the trace viewer of config telemetry.trace_url ("" when none is
	// configured: the log shows the id to copy).
	TraceID, TraceURL string
}

// usageBill is how a request's cost was made, as the request log's details show it.
type usageBill struct {
	Parts []usageBillPart
	// Hosted is the hosted tools' calls ("web_search=1") and HostedCost their cost ("" when
	// none); Waived is what was not billed ("" when nothing).
	Hosted, HostedCost, Waived string
	// Price names the price: its catalog entry and the date it holds from, or that it was set
	// in the configuration; LongContext the tier's threshold when its rates applied.
	Price, LongContext string
	ServiceTier        string
}

type usageBillPart struct {
	Kind, Tokens, Rate, Cost string
	// Note qualifies the count: how much of the output was reasoning.
	Note string
}

func (a *App) usagePage(w http.ResponseWriter, r *http.Request, v *Visitor, svc *usageview.Service) {
	ctx, acct := r.Context(), v.Account.AccountID
	q := r.URL.Query()
	status := http.StatusOK
	d := usageData{Form: usageForm{From: q.Get("from"), To: q.Get("to"), Model: q.Get("model"), Key: q.Get("key"),
		Route: q.Get("route"), Status: q.Get("status"), Limit: q.Get("limit"), Group: q.Get("group"), Days: q.Get("days")}}
	var qe *usageview.QueryError

	sum, err := svc.Summary(ctx, acct)
	if err != nil {
		a.failInternal(w, r, v, "usage summary", err)
		return
	}
	d.Balance, d.Held, d.PerDay = sum.BalanceMicros, sum.HeldMicros, sum.PerDayMicros()
	spendDays, err := daysWithSpend(ctx, svc, acct)
	if err != nil {
		a.failInternal(w, r, v, "usage days with spend", err)
		return
	}
	d.Projection = projectionText(sum, spendDays)

	dq, err := usageview.ParseDailyQuery(q, time.Now(), time.UTC)
	if errors.As(err, &qe) {
		d.Problems = append(d.Problems, qe.Problems...)
		status = http.StatusBadRequest
		dq = usageview.LastDays(usageview.DefaultDays, time.Now(), time.UTC, usageview.GroupByModel)
	}
	dq.MaxGroups = usageChartGroups
	daily, err := svc.DailySpend(ctx, acct, dq)
	if err != nil {
		a.failInternal(w, r, v, "usage per day", err)
		return
	}
	d.Chart = chartData(daily, q)

	keys, err := a.store.ListAPIKeys(ctx, acct)
	if err != nil {
		a.failInternal(w, r, v, "usage keys", err)
		return
	}
	for _, k := range keys {
		d.Keys = append(d.Keys, usageKeyOption{ID: k.ID.String(), Label: usageview.KeyLabel(k.Name, k.DisplayPrefix), Selected: k.ID.String() == d.Form.Key})
	}

	seal, err := a.seals.Seal(ctx)
	if err != nil {
		a.failInternal(w, r, v, "usage cursor key", err)
		return
	}
	lq, err := usageview.ParseLogQuery(q, time.UTC, seal)
	if errors.As(err, &qe) {
		d.Problems = append(d.Problems, qe.Problems...)
		status = http.StatusBadRequest
	} else if err != nil {
		a.failInternal(w, r, v, "usage query", err)
		return
	} else {
		page, err := svc.RequestLog(ctx, acct, lq.Filter, lq.After, lq.Limit)
		if err != nil {
			a.failInternal(w, r, v, "request log", err)
			return
		}
		for _, req := range page.Requests {
			row := logRow(req)
			row.TraceID, row.TraceURL = a.traceOf(req.TraceID)
			d.Rows = append(d.Rows, row)
		}
		keep := lq.Values(time.UTC)
		for _, p := range []string{usageview.ParamGroup, usageview.ParamDays} {
			if s := q.Get(p); s != "" {
				keep.Set(p, s)
			}
		}
		if !lq.After.IsZero() {
			d.NewestURL = "/usage?" + keep.Encode()
		}
		if !page.Next.IsZero() {
			next := cloneValues(keep)
			next.Set(usageview.ParamAfter, page.Next.Seal(seal))
			d.OlderURL = "/usage?" + next.Encode()
		}
		d.CSVURL = "/usage/export.csv?" + lq.Values(time.UTC).Encode()
	}
	// The statement form names the days the log shows (lq is zero when its filter could not
	// be read: this month).
	period := statementPeriod(lq.Filter, time.Now()).Values(time.UTC)
	d.StatementFrom, d.StatementTo = period.Get(usageview.ParamFrom), period.Get(usageview.ParamTo)
	a.render(w, r, v, status, "usage", "Usage", d)
}

// statementPeriod is the period the Usage page's statement form names, so that a view of a
// past month's requests (the log's from and to in the URL, which a person bookmarks or
// shares) offers that month's statement: the days of the request log's filter f as whole UTC
// days (a time within a day takes the day), and this month (usageview.ThisMonth) when f names
// no days. A filter with a start only ends today (or on the start's day, when that is later);
// one with an end only starts on the first day of the end's month.
func statementPeriod(f usageview.Filter, now time.Time) usageview.Period {
	p := usageview.ThisMonth(now, time.UTC)
	day := func(t time.Time) time.Time {
		y, m, d := t.UTC().Date()
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	}
	if !f.To.IsZero() {
		last := day(f.To.Add(-time.Nanosecond)) // the filter's end is excluded
		p = usageview.Period{From: last.AddDate(0, 0, 1-last.Day()), To: last.AddDate(0, 0, 1)}
	}
	if !f.From.IsZero() {
		p.From = day(f.From)
		if !p.To.After(p.From) {
			p.To = p.From.AddDate(0, 0, 1)
		}
	}
	return p
}

// chartData lays the daily spend out as the table the chart is drawn from.
func chartData(daily usageview.Daily, q url.Values) usageChart {
	c := usageChart{Group: string(daily.GroupBy), Days: len(daily.Days), Total: daily.TotalMicros,
		Requests: daily.Requests, Tokens: tokensText(daily.Tokens)}
	for _, g := range daily.Groups {
		c.Series = append(c.Series, g.Label)
		c.Totals = append(c.Totals, usageTotal{Label: g.Label, Requests: g.Requests, Micros: g.TotalMicros,
			Tokens: tokensText(g.Tokens)})
	}
	c.Rows = dayRows(daily)
	link := func(param, value string) string {
		v := cloneValues(q)
		v.Del(usageview.ParamAfter)
		v.Set(param, value)
		return "/usage?" + v.Encode()
	}
	c.ByModelURL, c.ByKeyURL = link(usageview.ParamGroup, "model"), link(usageview.ParamGroup, "key")
	c.Days7, c.Days30, c.D90 = link(usageview.ParamDays, "7"), link(usageview.ParamDays, "30"), link(usageview.ParamDays, "90")
	return c
}

// logRow formats one request for the log table.
func logRow(r usageview.Request) usageRow {
	expert := r.UpstreamModel
	if r.Provider != "" {
		expert = r.Provider + " / " + r.UpstreamModel
	}
	key := usageview.KeyLabelLastFour(r.KeyName, r.KeyPrefix, r.KeySuffix)
	if key == "" && r.KeyID != uuid.Nil {
		key = "key " + r.KeyID.String()[:8]
	}
	if key == "" {
		key = "—"
	}
	row := usageRow{Time: r.StartedAt, Route: r.Route, Model: r.Model, Expert: expert, Key: key,
		Uncached: usageview.Thousands(r.UncachedTokens()), CacheRead: usageview.Thousands(r.CacheReadTokens),
		CacheWrite: usageview.Thousands(r.CacheWriteTokens()), Output: usageview.Thousands(r.OutputTokens),
		Cost: r.CostMicros, CostExact: moneyExact(r.CostMicros), Status: r.Status,
		Latency: latencyText(r.Latency(), r.FinishedAt.IsZero()), OnCredit: r.OnCredit, Bill: billOf(r)}
	if r.ReasoningTokens > 0 {
		row.Reasoning = usageview.Thousands(r.ReasoningTokens)
	}
	if r.FittedOutputTokens > 0 {
		row.Fitted = usageview.Thousands(r.FittedOutputTokens)
	}
	return row
}

// traceOf is a request's trace id as the log shows it, and its link in the configured trace
// viewer; both "" for a request that was not traced (an all-zero id).
func (a *App) traceOf(id [16]byte) (string, string) {
	if id == ([16]byte{}) {
		return "", ""
	}
	text := hex.EncodeToString(id[:])
	return text, a.cfg.Telemetry.TraceUI.Link(text)
}

// billOf is how a request's cost was made: each token kind's count at its rate, the hosted
// tools, what was waived, and the price it was billed at; nil for a request billed before
// per-kind prices.
func billOf(r usageview.Request) *usageBill {
	parts := r.Bill()
	if parts == nil {
		return nil
	}
	b := &usageBill{ServiceTier: r.ServiceTier}
	for _, p := range parts {
		part := usageBillPart{Kind: p.Kind, Tokens: usageview.Thousands(p.Tokens),
			Rate: "$" + usageview.RateUSD(p.RateMicros), Cost: moneyExact(p.CostMicros)}
		if p.Kind == usageview.KindOutput && r.ReasoningTokens > 0 {
			part.Note = usageview.Thousands(r.ReasoningTokens) + " of them reasoning"
		}
		b.Parts = append(b.Parts, part)
	}
	if r.HostedMicros != 0 || len(r.HostedCalls) > 0 {
		b.Hosted, b.HostedCost = usageview.HostedCallsText(r.HostedCalls), moneyExact(r.HostedMicros)
	}
	if r.WaivedMicros != 0 {
		b.Waived = moneyExact(r.WaivedMicros)
	}
	switch p := r.Price; {
	case p.Catalog != "" && p.Effective != "":
		b.Price = p.Catalog + " (prices from " + p.Effective + ")"
	case p.Catalog != "":
		b.Price = p.Catalog
	default:
		b.Price = "set in the gateway's configuration"
	}
	if r.Costs.LongContext && r.Price.LongContext != nil {
		b.LongContext = usageview.Thousands(r.Price.LongContext.AboveInputTokens)
	}
	return b
}

// latencyText is a request's latency as a person reads it: whole milliseconds below a
// second ("12 ms", "<1 ms"), seconds with one decimal above ("1.4 s"), and "—" when the
// request has no end time (or an end before its start).
func latencyText(d time.Duration, unfinished bool) string {
	switch {
	case unfinished || d < 0:
		return "—"
	case d < time.Millisecond:
		return "<1 ms"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	default:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
}

// usageExport streams the filtered request log as CSV. A filter it cannot read is a 400
// page, a failure before anything was sent a 503 page; a failure once rows have been sent
// aborts the response, so that a cut download is never taken for a whole one.
func (a *App) usageExport(w http.ResponseWriter, r *http.Request, v *Visitor, svc *usageview.Service) {
	seal, err := a.seals.Seal(r.Context())
	if err != nil {
		a.failInternal(w, r, v, "usage cursor key", err)
		return
	}
	lq, err := usageview.ParseLogQuery(r.URL.Query(), time.UTC, seal)
	if err != nil {
		a.fail(w, r, v, http.StatusBadRequest, "The export's filters could not be read: "+err.Error())
		return
	}
	a.streamCSV(w, r, v, "usage-"+time.Now().UTC().Format("20060102-150405")+".csv", "usage export", func(out io.Writer) error {
		_, err := svc.ExportCSV(r.Context(), v.Account.AccountID, lq.Filter, out)
		return err
	})
}

// streamCSV sends what write writes as the CSV file name. An error before anything was sent is
// answered with an error page (503) instead of the file; one after that aborts the download, so
// that a cut file is never taken for a whole one. what names the export in the log.
func (a *App) streamCSV(w http.ResponseWriter, r *http.Request, v *Visitor, name, what string, write func(io.Writer) error) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+strings.NewReplacer(":", "", `"`, "").Replace(name)+`"`)
	cw := &countingWriter{w: w}
	if err := write(cw); err != nil {
		if cw.n == 0 {
			w.Header().Del("Content-Disposition")
			a.failInternal(w, r, v, what, err)
			return
		}
		a.log.Warn("web: "+what, "err", err, "path", r.URL.Path)
		panic(http.ErrAbortHandler)
	}
}

// usageStatement streams the statement of the chosen period (the form's days, to included;
// this month when none are given) as CSV: the opening balance, every ledger entry of the
// period, and the closing balance (usageview.WriteStatement). Errors are answered as
// usageExport answers them.
func (a *App) usageStatement(w http.ResponseWriter, r *http.Request, v *Visitor, svc *usageview.Service) {
	period, err := usageview.ParseStatementQuery(r.URL.Query(), time.Now(), time.UTC)
	if err != nil {
		a.fail(w, r, v, http.StatusBadRequest, "The statement's period could not be read: "+err.Error())
		return
	}
	seal, err := a.seals.Seal(r.Context())
	if err != nil {
		a.failInternal(w, r, v, "statement entry key", err)
		return
	}
	days := period.Values(time.UTC)
	name := "statement-" + days.Get(usageview.ParamFrom) + "-to-" + days.Get(usageview.ParamTo) + ".csv"
	a.streamCSV(w, r, v, name, "usage statement", func(out io.Writer) error {
		_, err := svc.WriteStatement(r.Context(), v.Account.AccountID, period.From, period.To, seal, out)
		return err
	})
}

// countingWriter counts what went through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// formatDaysLeft writes the "days left" estimate as a person reads it: a tenth of a day below
// ten days, whole days with thousands separators above ("15,648", not "15648.3").
func formatDaysLeft(days float64) string {
	if days < 10 {
		return strconv.FormatFloat(days, 'f', 1, 64)
	}
	return thousands(int64(math.Round(days)))
}

// The projection's bounds: the page says how many days the balance lasts only when the
// account spent on at least projectionMinDays of the usageview.BurnDays days the burn rate
// averages (fewer is not a rate yet: one request on a fresh account would project hundreds of
// thousands of days), and says "more than a year" beyond projectionMaxDays.
const (
	projectionMinDays = 3
	projectionMaxDays = 365
)

// projectionText is the Usage page's "Days left": how long the balance lasts at the burn rate,
// or why the page does not say.
func projectionText(sum usageview.Summary, spendDays int) string {
	switch {
	case sum.NoRecentSpend:
		return "no spend in the last " + strconv.Itoa(usageview.BurnDays) + " days"
	case spendDays < projectionMinDays:
		return "not enough history yet: spend on " + strconv.Itoa(spendDays) + " of the last " +
			strconv.Itoa(usageview.BurnDays) + " days (a projection needs " + strconv.Itoa(projectionMinDays) + ")"
	case sum.DaysLeft > projectionMaxDays:
		return "more than a year at that rate"
	default:
		return "about " + formatDaysLeft(sum.DaysLeft) + " days at that rate"
	}
}

// daysWithSpend counts the days, of the usageview.BurnDays the burn rate averages, on which
// the account spent anything.
func daysWithSpend(ctx context.Context, svc *usageview.Service, acct uuid.UUID) (int, error) {
	daily, err := svc.DailySpend(ctx, acct, usageview.LastDays(usageview.BurnDays, time.Now(), time.UTC, usageview.GroupByModel))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range daily.DayMicros {
		if m > 0 {
			n++
		}
	}
	return n, nil
}

// dayRows lays the daily spend out as the per-day table's rows: a row for each day with spend
// and one for each run of days without.
func dayRows(daily usageview.Daily) []usageChartRow {
	var rows []usageChartRow
	for i, day := range daily.Days {
		if daily.DayMicros[i] == 0 && !groupsSpent(daily.Groups, i) {
			if n := len(rows); n > 0 && rows[n-1].EmptyDays > 0 {
				rows[n-1].EmptyDays++
				rows[n-1].Last = day
				continue
			}
			rows = append(rows, usageChartRow{Day: day, Last: day, EmptyDays: 1})
			continue
		}
		row := usageChartRow{Day: day, Micros: daily.DayMicros[i]}
		for _, g := range daily.Groups {
			row.Cells = append(row.Cells, g.Micros[i])
		}
		rows = append(rows, row)
	}
	return rows
}

// groupsSpent reports whether any group spent on day i (a day's total may be 0 with spend in a
// group only if amounts were negative; the row is kept then).
func groupsSpent(groups []usageview.Group, i int) bool {
	for _, g := range groups {
		if g.Micros[i] != 0 {
			return true
		}
	}
	return false
}
