package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWatchCredit: the meter's credit through outages is read at each scrape.
func TestWatchCredit(t *testing.T) {
	m := New()
	s := CreditStats{DatabaseDown: true, OutageRefused: 4, OnCreditRequests: 3, OnCreditMicros: 1500, AtRiskMicros: 900, ReleaseAsks: 2, ReleasedOnAsk: 1,
		BeyondReservationRequests: 5, BeyondReservationMicros: 7000, WaivedRequests: 6, WaivedMicros: 8000}
	m.WatchCredit(func() CreditStats { return s })
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	out := scrape()
	for _, want := range []string{
		"tollgate_credit_database_down 1\n", "tollgate_credit_outage_refused_total 4\n",
		"tollgate_credit_on_credit_requests_total 3\n", "tollgate_credit_on_credit_micros_total 1500\n",
		"tollgate_credit_at_risk_micros 900\n", "tollgate_credit_release_asks_total 2\n",
		"tollgate_credit_released_on_ask_total 1\n",
		"tollgate_credit_beyond_reservation_requests_total 5\n", "tollgate_credit_beyond_reservation_micros_total 7000\n",
		"tollgate_credit_waived_requests_total 6\n", "tollgate_credit_waived_micros_total 8000\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	s = CreditStats{OutageRefused: 4, OnCreditRequests: 3, OnCreditMicros: 1500}
	if out := scrape(); !strings.Contains(out, "tollgate_credit_database_down 0\n") || !strings.Contains(out, "tollgate_credit_at_risk_micros 0\n") {
		t.Errorf("second scrape:\n%s", out)
	}
}
