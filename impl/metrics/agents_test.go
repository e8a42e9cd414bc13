package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWatchAgents: the revocations whose ending of agent sessions was left to the sweep, and
// the sessions they left, are read at each scrape, as two counters.
func TestWatchAgents(t *testing.T) {
	m := New()
	var left, sessions int64 = 2, 5
	m.WatchAgents(func() int64 { return left }, func() int64 { return sessions })
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	out := scrape()
	for _, want := range []string{"# TYPE tollgate_agent_endings_left_total counter\n", "tollgate_agent_endings_left_total 2\n",
		"# TYPE tollgate_agent_sessions_left_total counter\n", "tollgate_agent_sessions_left_total 5\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %q:\n%s", want, out)
		}
	}
	left, sessions = 3, 6
	if out := scrape(); !strings.Contains(out, "tollgate_agent_endings_left_total 3\n") || !strings.Contains(out, "tollgate_agent_sessions_left_total 6\n") {
		t.Errorf("second scrape lacks tollgate_agent_endings_left_total 3 and tollgate_agent_sessions_left_total 6")
	}
}
