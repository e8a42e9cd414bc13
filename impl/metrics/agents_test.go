package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWatchAgents: the revocations whose ending of agent sessions was left to the sweep are
// read at each scrape, as a counter.
func TestWatchAgents(t *testing.T) {
	m := New()
	var left int64 = 2
	m.WatchAgents(func() int64 { return left })
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	if out := scrape(); !strings.Contains(out, "# TYPE tollgate_agent_endings_left_total counter\n") ||
		!strings.Contains(out, "tollgate_agent_endings_left_total 2\n") {
		t.Errorf("scrape lacks tollgate_agent_endings_left_total 2:\n%s", out)
	}
	left = 3
	if out := scrape(); !strings.Contains(out, "tollgate_agent_endings_left_total 3\n") {
		t.Errorf("second scrape lacks tollgate_agent_endings_left_total 3")
	}
}
