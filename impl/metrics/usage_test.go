package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWatchUsageWriter: the usage writer's state is read at each scrape.
func TestWatchUsageWriter(t *testing.T) {
	m := New()
	s := UsageWriterStats{Queued: 3, Backlog: 120, BacklogBytes: 51_000, WriteFailures: 7, Refused: 2, Full: true}
	m.WatchUsageWriter(func() UsageWriterStats { return s })
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	out := scrape()
	for _, want := range []string{
		"tollgate_usage_queued_records 3\n", "tollgate_usage_backlog_records 120\n", "tollgate_usage_spill_bytes 51000\n",
		"tollgate_usage_backlog_full 1\n", "tollgate_usage_write_failures_total 7\n", "tollgate_usage_refused_total 2\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	s = UsageWriterStats{WriteFailures: 7, Refused: 2}
	if out := scrape(); !strings.Contains(out, "tollgate_usage_backlog_full 0\n") || !strings.Contains(out, "tollgate_usage_backlog_records 0\n") {
		t.Errorf("second scrape:\n%s", out)
	}
}
