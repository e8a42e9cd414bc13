package web

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/usageview"
)

// TestMoneyText shows the console's money rule (money.go): to the cent, rounded half away from
// zero, thousands separated, an amount under a cent that is not zero as "< $0.01" rather than
// "$0.00", and the exact amount in the title of every rounded one. The old pages wrote
// "$0.000116" and thirty "$0.000000".
func TestMoneyText(t *testing.T) {
	for _, c := range []struct {
		micros      int64
		text, exact string
		rounded     bool
	}{
		{0, "$0.00", "$0.000000", false},
		{1, "< $0.01", "$0.000001", true},
		{116, "< $0.01", "$0.000116", true},
		{9_999, "< $0.01", "$0.009999", true},
		{10_000, "$0.01", "$0.010000", false},
		{14_999, "$0.01", "$0.014999", true},
		{15_000, "$0.02", "$0.015000", true},
		{88_500, "$0.09", "$0.088500", true},
		{2_500_000, "$2.50", "$2.500000", false},
		{1_234_567_891, "$1,234.57", "$1,234.567891", true},
		{1_000_000_000_000, "$1,000,000.00", "$1,000,000.000000", false},
		{-116, "−< $0.01", "−$0.000116", true},
		{-1_200_000, "−$1.20", "−$1.200000", false},
	} {
		if got := moneyText(c.micros); got != c.text {
			t.Errorf("moneyText(%d) = %q, want %q", c.micros, got, c.text)
		}
		if got := moneyExact(c.micros); got != c.exact {
			t.Errorf("moneyExact(%d) = %q, want %q", c.micros, got, c.exact)
		}
		html := string(moneyHTML(c.micros))
		if hasTitle := strings.Contains(html, ` title="`+c.exact+`"`); hasTitle != c.rounded {
			t.Errorf("moneyHTML(%d) = %s: the exact amount in the title is %v, want %v", c.micros, html, hasTitle, c.rounded)
		}
	}
	if got := string(moneyHTML(116)); got != `<span class="money" title="$0.000116">&lt; $0.01</span>` {
		t.Errorf("moneyHTML(116) = %s", got)
	}
}

// TestProjectionText: the Usage page projects how long the balance lasts only from a burn
// rate with enough history (spend on 3 of the last 7 days), and says "more than a year"
// rather than a number past 365 days. A fresh account with one request of $0.0001 used to
// read "about 598,714 days left".
func TestProjectionText(t *testing.T) {
	fresh := usageview.Summary{DaysLeft: 598_714}
	for _, c := range []struct {
		sum       usageview.Summary
		spendDays int
		want      string
	}{
		{usageview.Summary{NoRecentSpend: true}, 0, "no spend in the last 7 days"},
		{fresh, 1, "not enough history yet: spend on 1 of the last 7 days (a projection needs 3)"},
		{usageview.Summary{DaysLeft: 12.4}, 2, "not enough history yet: spend on 2 of the last 7 days (a projection needs 3)"},
		{usageview.Summary{DaysLeft: 598_714}, 7, "more than a year at that rate"},
		{usageview.Summary{DaysLeft: 365}, 3, "about 365 days at that rate"},
		{usageview.Summary{DaysLeft: 3.06}, 4, "about 3.1 days at that rate"},
	} {
		if got := projectionText(c.sum, c.spendDays); got != c.want {
			t.Errorf("projectionText(%+v, %d) = %q, want %q", c.sum, c.spendDays, got, c.want)
		}
	}
}

// TestDayRows: the per-day table keeps a row for each day with spend and folds each run of days
// without into one row, however long (a quiet month is one row, not thirty of $0.00).
func TestDayRows(t *testing.T) {
	day0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	daily := usageview.Daily{Groups: []usageview.Group{{Label: "m", Micros: make([]int64, 30)}}, DayMicros: make([]int64, 30)}
	for i := range 30 {
		daily.Days = append(daily.Days, day0.AddDate(0, 0, i))
	}
	for _, i := range []int{3, 4, 20} {
		daily.DayMicros[i], daily.Groups[0].Micros[i] = 1_000, 1_000
	}
	var got []string
	for _, r := range dayRows(daily) {
		if r.EmptyDays > 0 {
			got = append(got, r.Day.Format("01-02")+".."+r.Last.Format("01-02")+"="+strconv.Itoa(r.EmptyDays))
		} else {
			got = append(got, r.Day.Format("01-02")+"$")
		}
	}
	want := "03-01..03-03=3 03-04$ 03-05$ 03-06..03-20=15 03-21$ 03-22..03-30=9"
	if strings.Join(got, " ") != want {
		t.Errorf("rows %s, want %s", strings.Join(got, " "), want)
	}
	empty := usageview.Daily{Days: daily.Days, DayMicros: make([]int64, 30)}
	if rows := dayRows(empty); len(rows) != 1 || rows[0].EmptyDays != 30 {
		t.Errorf("thirty days without spend: %+v", rows)
	}
}

func itoa(n int) string {
	return strings.TrimSpace(strings.Repeat(" ", 0) + string(rune('0'+n/10)) + string(rune('0'+n%10)))
}

// TestBrowserSummary names browsers as a person does, for the Sessions and Audit log pages.
func TestBrowserSummary(t *testing.T) {
	for ua, want := range map[string]string{
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36":                                   "Chrome on Linux",
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36":                           "Headless Chrome on Linux",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0":               "Edge on Windows",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15":                   "Safari on macOS",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1": "Safari on iOS",
		"Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0":                                                          "Firefox on Linux",
		"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36":                   "Chrome on Android",
		"curl/8.5.0": "curl",
		"":           "unknown browser",
		"web-test":   "web-test",
	} {
		if got := browserSummary(ua); got != want {
			t.Errorf("browserSummary(%q) = %q, want %q", ua, got, want)
		}
	}
}

// TestParseUSD shows what the key forms take for a credit cap: an amount of dollars as a person
// types it, and as the pages write it ("$1,234.50", TestMoneyText), so that a cap copied from
// the Keys page is taken; the newcomer's trial of 2026-12-06 had "1,000" refused. An amount
// without a digit ("$") was read as a cap of $0.00, a key that can spend nothing.
func TestParseUSD(t *testing.T) {
	for _, c := range []struct {
		in     string
		micros int64
		ok     bool
	}{
		{"5", 5_000_000, true},
		{"2.50", 2_500_000, true},
		{" $0.25 ", 250_000, true},
		{".5", 500_000, true},
		{"0", 0, true},
		{"0.000001", 1, true},
		{"1,000", 1_000_000_000, true},
		{"$1,234.50", 1_234_500_000, true},
		{"12,345,678.9", 12_345_678_900_000, true},
		{"$", 0, false},
		{".", 0, false},
		{"", 0, false},
		{"1,00", 0, false},
		{",100", 0, false},
		{"1000,000", 0, false},
		{"1,,000", 0, false},
		{"1,000,", 0, false},
		{"0.0000001", 0, false},
		{"-1", 0, false},
		{"1e3", 0, false},
		{"abc", 0, false},
	} {
		if got, ok := parseUSD(c.in); got != c.micros || ok != c.ok {
			t.Errorf("parseUSD(%q) = %d, %v; want %d, %v", c.in, got, ok, c.micros, c.ok)
		}
	}
}
