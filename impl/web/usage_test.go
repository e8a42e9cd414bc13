package web_test

import (
	"context"
	"encoding/csv"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/store"
)

// TestUsagePage: the Usage page shows the balance, the burn rate, the spend per day (the
// table the chart is drawn from) and the request log of the visitor's account only; a filter
// in the URL narrows the log, next-page links walk it one row at a time without repeating a
// row, a bad filter is a 400 that names it, the CSV export streams the same rows, and the
// chart's scripts are served from the application itself.
func TestUsagePage(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, "member")
	other := e.account(t, "other", bobEmail, "member")
	key, err := e.Accounts.CreateKey(ctx, acme.ID, "ci-runner", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Yesterday (UTC) has spend on both models, today on service-flint only, whatever the hour
	// the test runs at: the day table shows today's service-sonnet cell as no spend.
	now := time.Now().UTC()
	today := now.Truncate(24 * time.Hour)
	rec := func(acct store.Account, id, model string, at time.Time, cost int64) store.UsageRecord {
		r := store.UsageRecord{AccountID: acct.ID, RequestID: id, Model: model, Route: "/v1/chat/completions",
			Provider: "sim", UpstreamModel: "expert-" + model, InputTokens: 10, OutputTokens: 20, CostMicros: cost,
			Status: "completed", StartedAt: at, FinishedAt: at.Add(1200 * time.Millisecond)}
		if acct.ID == acme.ID && id != "r3" {
			r.APIKeyID = key.Key.ID
		}
		return r
	}
	if _, err := e.Store.WriteUsage(ctx, "web-test", []store.UsageRecord{
		rec(acme, "r1", "service-flint", today.Add(-2*time.Hour), 1500), rec(acme, "r2", "service-sonnet", today.Add(-time.Hour), 2500),
		rec(acme, "r3", "service-flint", now.Add(-now.Sub(today)/2), 500), rec(other, "o1", "secret-model", now.Add(-time.Hour), 9999),
	}); err != nil {
		t.Fatal(err)
	}
	// r3 took 12 ms: the log shows milliseconds below a second and seconds above.
	if _, err := e.Store.Pool().Exec(ctx, `UPDATE usage_records SET finished_at = started_at + interval '12 milliseconds'
		WHERE account_id = $1 AND request_id = 'r3'`, acme.ID); err != nil {
		t.Fatal(err)
	}
	// A gateway process holds credit of acme's: the page names it for what it is.
	if g, err := e.Store.TakeCreditHold(ctx, store.HoldRequest{AccountID: acme.ID, Holder: "web-test", NeedMicros: 250_000,
		WantMicros: 250_000, Lease: time.Minute}); err != nil || !g.Granted {
		t.Fatalf("credit hold: %+v, %v", g, err)
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)

	p := b.get("/usage")
	if p.Status != http.StatusOK {
		t.Fatalf("GET /usage: %d %.300s", p.Status, p.Body)
	}
	body := html.UnescapeString(p.Body)
	// Three requests of yesterday and today are not a burn rate to project from;
	// the total of the chart's days is under a cent, written as such with its exact amount.
	for _, want := range []string{"Balance", `Days left</dt><dd id="usage-projection">not enough history yet: spend on `, " a day <span",
		"service-flint", "service-sonnet", "expert-service-sonnet", "ci-runner", `<span class="money" title="$0.004500">< $0.01</span> over 3 requests`,
		`data-micros="2500"`, `src="/static/uplot/uPlot.iife.min.js"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if !strings.Contains(body, `Reserved by the gateway</dt><dd><span class="money">$0.25</span> `) || strings.Contains(body, "in flight</dt>") {
		t.Errorf("the credit holds are not shown as reserved by the gateway: %.1500s", body)
	}
	// Each filter's label and field are one unit (style.css keeps it on one line).
	for _, f := range []string{"from", "to", "model", "key", "route", "status"} {
		if !strings.Contains(p.Body, `<span class="field"><label for="f-`+f+`">`) {
			t.Errorf("the %s filter's label is not kept with its field", f)
		}
	}
	// The Key column names the key as the Keys page does: prefix…last four.
	if log, want := html.UnescapeString(logTable(p.Body)), "ci-runner ("+key.Key.DisplayPrefix+"…"+key.Key.DisplaySuffix+")"; key.Key.DisplaySuffix == "" || !strings.Contains(log, "<td>"+want+"</td>") {
		t.Errorf("the log's Key column lacks %q: %.3000s", want, log)
	}
	if log := logTable(p.Body); !strings.Contains(log, "<td>12 ms</td>") || !strings.Contains(log, "<td>1.2 s</td>") {
		t.Errorf("latencies: %.3000s", log)
	}
	if strings.Contains(body, "secret-model") || strings.Contains(body, "9999") {
		t.Error("the page shows another account's usage")
	}
	// The days without spend are one row, not a row of $0.00 each; a model without spend on a
	// day with spend reads as none, not as $0.00.
	perDay := perDayTable(p.Body)
	if n := strings.Count(perDay, "<tr"); n != 4 || !strings.Contains(perDay, `class="no-spend" data-empty-days="`) ||
		!strings.Contains(perDay, "No spend in these 28 days") || strings.Contains(html.UnescapeString(perDay), ">$0.00<") ||
		!strings.Contains(perDay, `<td data-micros="0"><span class="none" title="No spend">–</span></td>`) {
		t.Errorf("the per-day table of 30 days with spend on the last two: %d rows (the head's included):\n%s", n, perDay)
	}

	// One row a page: r3, r2, r1, each once, then no older link. The link's cursor is sealed:
	// it carries neither the row's id, which is usage_records' sequence shared by every account,
	// nor the plain "<microseconds>-<id>" of earlier builds.
	var ids []string
	idRows, err := e.Store.Pool().Query(ctx, `SELECT id::text FROM usage_records`)
	if err != nil {
		t.Fatal(err)
	}
	for idRows.Next() {
		var id string
		if err := idRows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	idRows.Close()
	sealed := regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
	var seen []string
	next := "/usage?limit=1"
	older := regexp.MustCompile(`href="([^"]+)" rel="next"`)
	for i := 0; next != "" && i < 10; i++ {
		if u, err := url.Parse(next); err != nil {
			t.Fatal(err)
		} else if after := u.Query().Get("after"); after != "" && !sealed.MatchString(after) {
			t.Errorf("the older link's cursor %q is not sealed (ids %v)", after, ids)
		}
		p := b.get(next)
		if p.Status != http.StatusOK {
			t.Fatalf("GET %s: %d", next, p.Status)
		}
		body := logTable(p.Body)
		for _, m := range []string{"service-flint", "service-sonnet"} {
			if strings.Count(body, "<th scope=\"row\">"+m+"</th>") > 0 {
				seen = append(seen, m)
			}
		}
		next = ""
		if m := older.FindStringSubmatch(p.Body); m != nil {
			next = html.UnescapeString(m[1])
		}
	}
	if strings.Join(seen, ",") != "service-flint,service-sonnet,service-flint" {
		t.Errorf("pages showed %v", seen)
	}

	// A cursor in the plain form of earlier builds, which named a row by its id, is refused.
	if p := b.get("/usage?after=" + strconv.FormatInt(now.UnixMicro(), 10) + "-" + ids[0]); p.Status != http.StatusBadRequest ||
		!strings.Contains(p.Body, "is not a page cursor") {
		t.Errorf("a plain cursor: %d %.1500s", p.Status, p.Body)
	}

	p = b.get("/usage?model=service-sonnet")
	if log := logTable(p.Body); !strings.Contains(log, "<th scope=\"row\">service-sonnet</th>") || strings.Contains(log, "<th scope=\"row\">service-flint</th>") {
		t.Errorf("model filter: %.2000s", p.Body)
	}
	p = b.get("/usage?key=nope&limit=0")
	if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "<strong>key</strong>") || !strings.Contains(p.Body, "<strong>limit</strong>") {
		t.Errorf("bad filter: %d %.2000s", p.Status, p.Body)
	}

	p = b.get("/usage/export.csv?key=" + key.Key.ID.String())
	if p.Status != http.StatusOK || !strings.HasPrefix(p.Header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(p.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("export: %d %v", p.Status, p.Header)
	}
	rows, err := csv.NewReader(strings.NewReader(p.Body)).ReadAll()
	if err != nil || len(rows) != 3 || rows[0][0] != "started_at" || rows[1][1] != "r2" || rows[2][1] != "r1" {
		t.Fatalf("export rows %v, %v", rows, err)
	}
	for _, asset := range []string{"/static/uplot/uPlot.iife.min.js", "/static/uplot/uPlot.min.css", "/static/usage-chart.js"} {
		if p := b.get(asset); p.Status != http.StatusOK || len(p.Body) < 500 {
			t.Errorf("GET %s: %d, %d bytes", asset, p.Status, len(p.Body))
		}
	}
	_ = other
}

// perDayTable is the spend-per-day table of a Usage page.
func perDayTable(body string) string {
	_, t, _ := strings.Cut(body, `id="usage-per-day"`)
	t, _, _ = strings.Cut(t, "</table>")
	return t
}

// logTable is the request log table of a Usage page.
func logTable(body string) string {
	_, log, _ := strings.Cut(body, `id="usage-requests"`)
	log, _, _ = strings.Cut(log, "</table>")
	return log
}

// TestStatementFormTakesThePagesDays (last session's newcomer walk): the Usage page's
// statement form always named this month, so that on a view of a past month's requests (the
// request log's from and to in the URL, which is what a person bookmarks or shares) Download
// statement gave this month's statement. The form now names the days of the log's filter, as
// whole UTC days (a time within a day takes the day; a filter with an end only starts on the
// first of the end's month), and this month when the filter names no days; the statement
// route, which takes from and to, writes the statement of those days.
func TestStatementFormTakesThePagesDays(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "member")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	formRe := regexp.MustCompile(`(?s)<input id="s-from" name="from" type="date" value="([^"]*)"[^>]*>.*<input id="s-to" name="to" type="date" value="([^"]*)"`)
	now := time.Now().UTC()
	for _, c := range []struct{ query, from, to string }{
		{"?from=2025-11-01&to=2025-11-30", "2025-11-01", "2025-11-30"},
		{"?to=2025-11-30", "2025-11-01", "2025-11-30"},
		{"?from=2025-11-03T10:00:00Z&to=2025-11-05T00:00:00Z&model=service-flint", "2025-11-03", "2025-11-04"},
		{"?from=2025-11-03", "2025-11-03", now.Format(time.DateOnly)},
		{"?days=7", now.Format("2006-01") + "-01", now.Format(time.DateOnly)},
		{"", now.Format("2006-01") + "-01", now.Format(time.DateOnly)},
	} {
		p := b.get("/usage" + c.query)
		m := formRe.FindStringSubmatch(p.Body)
		if p.Status != http.StatusOK || m == nil {
			t.Fatalf("GET /usage%s: %d, no statement form: %.3000s", c.query, p.Status, p.Body)
		}
		if m[1] != c.from || m[2] != c.to {
			t.Errorf("GET /usage%s: the statement form names %s to %s, want %s to %s", c.query, m[1], m[2], c.from, c.to)
		}
		statement := b.get("/usage/statement.csv?" + url.Values{"from": {m[1]}, "to": {m[2]}}.Encode())
		if want := `filename="statement-` + c.from + "-to-" + c.to + `.csv"`; statement.Status != http.StatusOK ||
			!strings.Contains(statement.Header.Get("Content-Disposition"), want) {
			t.Errorf("the statement of GET /usage%s's form: %d %q, want %s", c.query, statement.Status, statement.Header.Get("Content-Disposition"), want)
		}
	}
}
