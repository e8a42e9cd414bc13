package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/pgbouncertest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

// TestServeWarnsThroughItsLogger: `tollgate serve` with DATABASE_URL naming a real PgBouncer in
// session pooling (which refuses the session bounds' start-up parameters) warns once that it
// dropped them, and the warning goes through the process's logger: with LOG_FORMAT=json it is
// one JSON line at level WARN, as is every other line of its log. Before, the store warned
// through slog's default logger, which serve never configures: a plain text line on standard
// error among the JSON ones.
func TestServeWarnsThroughItsLogger(t *testing.T) {
	bouncer := pgbouncertest.Start(t, pgtest.ConnString(t), pgbouncertest.Options{Mode: pgbouncertest.Session})
	p := startServe(t, serveEnv(t, bouncer.URL()))
	p.waitReadyz(t, http.StatusOK, 60*time.Second)

	var warnings []map[string]any
	for _, line := range strings.Split(p.logs(), "\n") {
		if line == "" {
			continue
		}
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("a line of the log is not JSON (%v): %s", err, line)
			continue
		}
		if msg, _ := entry["msg"].(string); strings.Contains(msg, "session bounds") {
			warnings = append(warnings, entry)
		}
	}
	if len(warnings) != 1 {
		t.Fatalf("%d JSON warnings of the dropped session bounds, want one\n%s\npgbouncer's log:\n%s", len(warnings), p.logs(), bouncer.Log())
	}
	if w := warnings[0]; w["level"] != "WARN" || w["dropped"] == nil || w["refused"] == nil {
		t.Errorf("the warning: %v, want level WARN naming what was refused and dropped", w)
	}
}
