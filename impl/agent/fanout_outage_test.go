package agent

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// TestEventListenerLogsAnOutageOnce (operator trial h1): while PostgreSQL was stopped under
// `tollgate serve`, the agents' event listener logged "event notifications lost" at every
// reconnection attempt, 15 warnings in 20 s. It now warns once when the notifications are
// lost and says once that they are back, with the attempts between at debug.
func TestEventListenerLogsAnOutageOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster of its own")
	}
	pg := pgtest.NewOutage(t)
	ctx := context.Background()
	st, err := store.Open(ctx, pg.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var logs lockedLog
	s, err := New(Options{Store: st, Config: config.Default(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.listen(run) }()
	t.Cleanup(func() { stop(); <-done })

	wait := func(what string, ok func(string) bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(logs.String()); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s in the log:\n%s", what, logs.String())
			}
		}
	}
	time.Sleep(300 * time.Millisecond) // listening
	pg.Stop()
	wait("loss", func(l string) bool { return strings.Contains(l, "notifications lost") })
	time.Sleep(6 * time.Second) // attempts every 50 ms, doubling up to 2 s: seven or more
	pg.Start()
	wait("return", func(l string) bool { return strings.Contains(l, "notifications restored") })
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings for one outage, want 1:\n%s", n, logs.String())
	}
}

// lockedLog is a log buffer that the listener writes while the test reads.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
