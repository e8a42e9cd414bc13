package changefeed

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/store"
)

// waitFor polls cond until it holds, failing the test after a generous deadline (outages on a
// busy machine take their time; nothing here measures speed).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFeedThroughOutages runs a feed on a real PostgreSQL that is stopped and started again, then
// frozen (it answers nothing and closes nothing, as behind a network partition) and thawed. The
// feed goes degraded and comes back each time, with one log line per change of state (not one
// per reconnection attempt), the tollgate_degraded gauge and Degraded following it, and a new
// generation at each reconnection.
func TestFeedThroughOutages(t *testing.T) {
	o := pgtest.NewOutage(t)
	ctx := context.Background()
	st, err := store.Open(ctx, o.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := metrics.New()
	logs := &logBuffer{}
	f := NewWithOptions(st, Options{Heartbeat: 200 * time.Millisecond, HeartbeatWait: 2 * time.Second, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if d, _ := f.Degraded(); !d || metric(t, m, "tollgate_degraded") != 1 {
		t.Fatal("a feed that never connected is not degraded")
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { f.Run(runCtx) })
	defer func() { stop(); wg.Wait() }()

	waitFor(t, "the feed is live", f.Live)
	gen := f.state.Load().gen
	check := func(phase string, degraded bool) {
		t.Helper()
		d, _ := f.Degraded()
		if d != degraded || metric(t, m, "tollgate_degraded") != map[bool]float64{false: 0, true: 1}[degraded] {
			t.Fatalf("%s: Degraded %v, gauge %v", phase, d, metric(t, m, "tollgate_degraded"))
		}
	}
	check("connected", false)

	o.Stop()
	waitFor(t, "the feed sees the stop", func() bool { return !f.Live() })
	check("stopped", true)
	time.Sleep(time.Second) // several reconnection attempts fail meanwhile
	o.Start()
	waitFor(t, "the feed reconnects after the start", f.Live)
	check("restarted", false)
	if g := f.state.Load().gen; g != gen+1 {
		t.Fatalf("generation %d after one reconnection from %d", g, gen)
	}

	o.Freeze()
	waitFor(t, "the heartbeat sees the frozen database", func() bool { return !f.Live() })
	check("frozen", true)
	o.Thaw()
	waitFor(t, "the feed reconnects after the thaw", f.Live)
	check("thawed", false)

	var transitions []string
	for _, l := range logs.lines() {
		if strings.Contains(l, "change notifications") {
			transitions = append(transitions, l)
		}
	}
	want := []string{"live", "lost", "restored", "lost", "restored"}
	if len(transitions) != len(want) {
		t.Fatalf("%d log lines of changes of state, want %d:\n%s", len(transitions), len(want), strings.Join(transitions, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(transitions[i], w) {
			t.Fatalf("line %d is not %q:\n%s", i, w, strings.Join(transitions, "\n"))
		}
	}
}
