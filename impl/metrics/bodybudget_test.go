package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWatchBodyBudget: the body budget's size, use and refusals are read at each scrape.
func TestWatchBodyBudget(t *testing.T) {
	m := New()
	s := BodyBudgetStats{LimitBytes: 256 << 20, InUseBytes: 30 << 20, Refused: 4}
	m.WatchBodyBudget(func() BodyBudgetStats { return s })
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		"tollgate_body_budget_bytes 2.68435456e+08\n", "tollgate_body_budget_in_use_bytes 3.145728e+07\n",
		"tollgate_body_budget_refused_total 4\n",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("scrape lacks %q:\n%s", want, b)
		}
	}
}
