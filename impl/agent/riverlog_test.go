package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRiverLoggerLimitsRepeats (operator trial h1): while PostgreSQL was stopped under
// `tollgate serve`, River's producer, notifier and leader elector logged an error for every
// retry, 33 lines in 15 s, where the usage writer logs one line per change of state. River's
// logger keeps its warnings and errors, drops its info, and passes one message at most once a
// minute while it repeats, the next one saying how many were left out; other messages pass.
func TestRiverLoggerLimitsRepeats(t *testing.T) {
	var buf bytes.Buffer
	log := riverLogger(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	down := errors.New("dial unix /tmp/pgs/.s.PGSQL.5432: connect: no such file or directory")
	ctx := context.Background()
	handle := func(at time.Time, level slog.Level, msg string) {
		t.Helper()
		r := slog.NewRecord(at, level, msg, 0)
		r.AddAttrs(slog.Any("err", down))
		if log.Handler().Enabled(ctx, level) {
			if err := log.Handler().Handle(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	t0 := time.Date(2026, 12, 6, 14, 30, 2, 0, time.UTC)
	for i := range 120 { // two a second for a minute
		at := t0.Add(time.Duration(i) * 500 * time.Millisecond)
		handle(at, slog.LevelError, "producer: Error fetching jobs")
		if i%4 == 0 {
			handle(at, slog.LevelError, "leadership.Elector: Error attempting reelection")
		}
		handle(at, slog.LevelInfo, "producer: Job fetched")
	}
	handle(t0.Add(61*time.Second), slog.LevelError, "producer: Error fetching jobs")
	log.With("client", "c1").Warn("notifier.Notifier: Error running listener")

	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		s := m["msg"].(string)
		if n, ok := m["repeated"]; ok {
			s += fmt.Sprintf(" repeated=%v", n)
		}
		got = append(got, s)
	}
	want := []string{
		"producer: Error fetching jobs",
		"leadership.Elector: Error attempting reelection",
		"producer: Error fetching jobs repeated=119",
		"notifier.Notifier: Error running listener",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
