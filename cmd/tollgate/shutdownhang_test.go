package main

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

// TestServeSIGTERMWithHungDatabase: a serve process whose database hangs (PostgreSQL stopped
// with SIGSTOP: connections accepted, nothing answered) exits on SIGTERM within its grace
// period and a small bound, and loses no money. A stream in flight when the database hangs
// runs until the grace period is over, then ends with its format's in-band error; its usage
// record cannot reach the database, so the shutdown keeps it in the usage spill file, as an
// outage keeps every record, and the next process on the same data directory bills it once the
// database answers again: status shutdown, what it produced, its ledger entry, and the first
// process's credit hold reaped after its lease. Trial h17: the shutdown's steps after the
// grace waited for their own timeouts against the hung database (28 s after the grace); before
// the fix this test saw the process exit 25-46 s after SIGTERM with a grace of 2 s (the agents'
// job runner, then the meter's drain of 10 s, then the pool's close, each waiting on the hung
// server), and 8.5 s after it.
func TestServeSIGTERMWithHungDatabase(t *testing.T) {
	testBinary(t)
	pg := pgtest.NewOutage(t) // a cluster of the test's own, which it can freeze
	db := pg.ConnString()
	key := setupAccount(t, db)
	// A short lease, so that the next process reaps the hold the hung shutdown could not return;
	// no stream checkpoint, so that the stream is billed from its own record (a checkpoint
	// reaped first would bill it as process_lost, its record then billing the rest).
	env := append(serveEnv(t, db), "TOLLGATE_TEST_BILLING_LEASE=3s", "TOLLGATE_TEST_BILLING_REAP_INTERVAL=500ms",
		"TOLLGATE_TEST_BILLING_CHECKPOINT_INTERVAL=1h")
	const grace = 2 * time.Second
	// bound is what the shutdown may take after the grace period with the database hung: the
	// wait for an idle job runner (0.5 s), the meter's drain (drainWait, 5 s), the change feed
	// (1 s at most, less as a rule) and the store's close (storeCloseWait, 1 s), with a margin.
	const bound = 9 * time.Second
	p := startServe(t, env, "-shutdown-grace", grace.String())
	p.waitReadyz(t, http.StatusOK, 30*time.Second)

	// A Messages stream of a minute, past the grace period; the database hangs once text flows.
	c := paced("[[sim words=3000 tps=50]]", false)[2]
	started, done := sendUntil(p, key, c, "content_block_delta")
	<-started
	pg.Freeze()
	signalled := time.Now()
	p.signal(t, syscall.SIGTERM)
	a := <-done
	if err := p.wait(t, 2*time.Minute); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	took := time.Since(signalled)
	t.Logf("the process exited %s after SIGTERM (grace %s)", took.Round(time.Millisecond), grace)
	if took > grace+bound {
		t.Errorf("the process took %s to exit after SIGTERM with the database hung; want at most the grace period %s and %s\n%s",
			took.Round(time.Millisecond), grace, bound, p.logs())
	}
	if a.err != nil || a.status != 200 || !strings.Contains(a.body, `"type":"overloaded_error"`) || !strings.Contains(a.body, "content_block_delta") {
		t.Errorf("%s: %d %v\n%s", a.name, a.status, a.err, tail(a.body))
	}
	logs := p.logs()
	if !strings.Contains(logs, "grace period over") {
		t.Errorf("logs:\n%s", logs)
	}

	// The database answers again: nothing of the stream reached it, and the next process
	// bills it from the spill file the first left.
	pg.Thaw()
	if b := readBooks(t, db); len(b.status) != 0 {
		t.Logf("usage records written before the exit: %v", b.status)
	}
	q := startServe(t, env)
	q.waitReadyz(t, http.StatusOK, 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	var b books
	for {
		b = readBooks(t, db)
		if _, ok := b.status[a.requestID]; ok && b.holds == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream's usage record (%s) is not billed, or the first process's hold not reaped: %+v\nfirst process:\n%s\nsecond process:\n%s",
				a.requestID, b, logs, q.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	q.signal(t, syscall.SIGTERM)
	if err := q.wait(t, 60*time.Second); err != nil {
		t.Fatalf("the second process's exit after SIGTERM: %v\n%s", err, q.logs())
	}
	checkBilled(t, readBooks(t, db), []answer{a}, func(answer) string { return "shutdown" })
}
