package store_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/impl/devkit/pgbouncertest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// TestStoreThroughPgBouncer opens the store through a real PgBouncer (Debian's, 1.18) as
// tollgate serve opens DATABASE_URL, migrates it and does the database work of metered requests
// from several goroutines at once: a credit hold, reservations on a capped key, their settlements
// and the usage batches. PgBouncer refuses a start-up parameter it does not know ("unsupported
// startup parameter", SQLSTATE 08P01); before, every connection sent the session bounds as
// start-up parameters (sessionbounds.go), so the store could not connect through it at all.
//
// In session pooling, the mode docs/operations.md supports, a second process opens and migrates
// too, notifications are delivered, and the process warned once that it dropped the bounds,
// naming them, through the logger Open was given (store.WithLogger): with a JSON logger, as
// tollgate serve's, the warning is one JSON line at level WARN. In transaction pooling (with default_query_exec_mode=cache_describe, which the
// docs ask for) the request path's statements work; what does not there (LISTEN, session-level
// advisory locks) is in docs/operations.md, "Behind a connection pooler".
func TestStoreThroughPgBouncer(t *testing.T) {
	t.Run("session", func(t *testing.T) {
		ctx := context.Background()
		log, warnings := captureWarnings(t)
		bouncer := startBouncer(t, pgtest.ConnString(t), pgbouncertest.Session)
		st := openThrough(t, bouncer.URL(), store.WithLogger(log))
		requestsThroughPgBouncer(t, st)

		// A second replica starts: it connects and migrates (nothing to do) as well.
		second := openThrough(t, bouncer.URL(), store.WithLogger(log))
		// Notifications (key revocations, credit releases, agents' events) reach a listener.
		got := make(chan string, 1)
		listening := make(chan struct{}, 1)
		listenCtx, stopListening := context.WithCancel(ctx)
		defer stopListening()
		go second.ListenCreditRelease(listenCtx, store.Subscription{
			Notify:    func(_, payload string) { got <- payload },
			Connected: func() { listening <- struct{}{} },
		})
		select {
		case <-listening:
		case <-time.After(10 * time.Second):
			t.Fatal("the listener did not connect through PgBouncer")
		}
		if err := st.NotifyCreditRelease(ctx, "through-pgbouncer"); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-got:
			if p != "through-pgbouncer" {
				t.Errorf("notification %q", p)
			}
		case <-time.After(10 * time.Second):
			t.Error("no notification through PgBouncer in session pooling")
		}

		// One warning for the process, however many pools it opened, naming what it dropped.
		w := warnings()
		if len(w) != 1 {
			t.Fatalf("%d lines logged, want one warning: %q", len(w), w)
		}
		var warning struct {
			Level, Msg, Refused, Dropped string
		}
		if err := json.Unmarshal([]byte(w[0]), &warning); err != nil {
			t.Fatalf("the warning is not one JSON line (%v): %s", err, w[0])
		}
		if warning.Level != "WARN" {
			t.Errorf("the warning's level is %q, want WARN: %s", warning.Level, w[0])
		}
		if warning.Refused == "" {
			t.Errorf("the warning does not say which parameter was refused: %s", w[0])
		}
		if want := "idle_in_transaction_session_timeout,tcp_keepalives_count,tcp_keepalives_idle,tcp_keepalives_interval,tcp_user_timeout"; warning.Dropped != want {
			t.Errorf("the warning says dropped=%q, want %q", warning.Dropped, want)
		}
		for _, want := range []string{"ALTER ROLE", "idle_transaction_timeout"} {
			if !strings.Contains(warning.Msg, want) {
				t.Errorf("the warning does not say %q: %s", want, warning.Msg)
			}
		}
	})
	t.Run("transaction", func(t *testing.T) {
		bouncer := startBouncer(t, pgtest.ConnString(t), pgbouncertest.Transaction)
		st := openThrough(t, bouncer.URL()+"&default_query_exec_mode=cache_describe")
		requestsThroughPgBouncer(t, st)
	})
}

// TestPgBouncerSessionBoundsFromTheRole: the bounds the store cannot send through PgBouncer are
// the session's when the server sets them for the gateway's role, as the warning and
// docs/operations.md ask (ALTER ROLE ... SET, here for the test's database only).
func TestPgBouncerSessionBoundsFromTheRole(t *testing.T) {
	ctx := context.Background()
	cs := pgtest.ConnString(t)
	direct, err := pgx.Connect(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	var role, database string
	if err := direct.QueryRow(ctx, "SELECT current_user, current_database()").Scan(&role, &database); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Exec(ctx, "ALTER ROLE "+pgx.Identifier{role}.Sanitize()+" IN DATABASE "+pgx.Identifier{database}.Sanitize()+
		" SET idle_in_transaction_session_timeout = '10s'"); err != nil {
		t.Fatal(err)
	}
	bouncer := startBouncer(t, cs, pgbouncertest.Session)
	st := openThrough(t, bouncer.URL())
	var timeout string
	if err := st.Pool().QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != "10s" {
		t.Errorf("idle_in_transaction_session_timeout is %q through PgBouncer with the role's setting, want 10s", timeout)
	}
}

// TestPgBouncerRefusingTheURLsParameter: a session bound the database URL names is the
// operator's, never dropped: PgBouncer's refusal of it is the error Open returns.
func TestPgBouncerRefusingTheURLsParameter(t *testing.T) {
	bouncer := startBouncer(t, pgtest.ConnString(t), pgbouncertest.Session)
	st, err := store.Open(context.Background(), bouncer.URL()+"&idle_in_transaction_session_timeout=30s")
	if err == nil {
		st.Close()
		t.Fatal("the store opened through PgBouncer without the URL's idle_in_transaction_session_timeout")
	}
	if !strings.Contains(err.Error(), "unsupported startup parameter: idle_in_transaction_session_timeout") {
		t.Errorf("error %v, want PgBouncer's refusal of the URL's parameter", err)
	}
}

// startBouncer starts a PgBouncer in mode in front of the database of cs, whose log the test
// shows when it fails.
func startBouncer(t *testing.T, cs string, mode pgbouncertest.Mode) *pgbouncertest.Bouncer {
	t.Helper()
	bouncer := pgbouncertest.Start(t, cs, pgbouncertest.Options{Mode: mode})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pgbouncer's log:\n%s", bouncer.Log())
		}
	})
	return bouncer
}

// openThrough opens the store at url with opts, as tollgate serve does, and migrates it.
func openThrough(t *testing.T, url string, opts ...store.Option) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url, opts...)
	if err != nil {
		t.Fatalf("open the store through PgBouncer: %v", err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate through PgBouncer: %v", err)
	}
	return st
}

// captureWarnings returns a JSON logger, as tollgate serve's by default, that records what is
// logged at level WARN and above for the rest of t, and what it recorded so far, a line each. It
// lets the store warn once more (a test before may have had the process's warning).
func captureWarnings(t *testing.T) (*slog.Logger, func() []string) {
	var (
		mu  sync.Mutex
		buf strings.Builder
	)
	log := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelWarn}))
	store.ResetSessionBoundsWarning()
	return log, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return strings.FieldsFunc(buf.String(), func(r rune) bool { return r == '\n' })
	}
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// requestsThroughPgBouncer does the database work of metered requests on a capped key, several
// at once, and checks what the account and the key were charged.
func requestsThroughPgBouncer(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	acct := fundedAccount(t, st, 1_000_000)
	capMicros := int64(500_000)
	hash := make([]byte, 32)
	_, _ = rand.Read(hash)
	key, err := st.CreateAPIKey(ctx, store.NewAPIKey{AccountID: acct, Name: "capped", Hash: hash,
		DisplayPrefix: "tgk_", DisplaySuffix: "abcd", CreditCapMicros: &capMicros, CapPeriod: store.CapPeriodMonthly})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.TakeCreditHold(ctx, store.HoldRequest{AccountID: acct, Holder: "gw", NeedMicros: 200_000, WantMicros: 200_000, Lease: time.Minute}); err != nil {
		t.Fatalf("credit hold: %v", err)
	}
	period := store.CapPeriodMonthly.Start(time.Now())
	const workers, perWorker, cost = 4, 10, int64(1_000)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			var batch []store.UsageRecord
			for i := range perWorker {
				id := fmt.Sprintf("req-%d-%d", w, i)
				kr, err := st.ReserveKeyBudget(ctx, store.KeyReservationRequest{KeyID: key.ID, PeriodStart: period, CapMicros: capMicros,
					AmountMicros: 10_000, RequestID: id, Holder: "gw", Lease: time.Minute})
				if err != nil || !kr.Reserved {
					errs <- fmt.Errorf("reserve %s: %+v %v", id, kr, err)
					return
				}
				if settled, err := st.SettleKeyReservation(ctx, key.ID, id, cost); err != nil || !settled {
					errs <- fmt.Errorf("settle %s: %v %v", id, settled, err)
					return
				}
				now := time.Now()
				batch = append(batch, store.UsageRecord{AccountID: acct, APIKeyID: key.ID, RequestID: id, Model: "m",
					Route: "/v1/chat/completions", CostMicros: cost, Status: "completed", StartedAt: now, FinishedAt: now})
			}
			if res, err := st.WriteUsage(ctx, "gw", batch); err != nil || res.Written != perWorker {
				errs <- fmt.Errorf("usage batch: %+v %v", res, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	want := int64(workers*perWorker) * cost
	if n, total, err := st.UsageTotals(ctx, acct); err != nil || n != workers*perWorker || total != want {
		t.Errorf("usage records: %d costing %d (%v), want %d costing %d", n, total, err, workers*perWorker, want)
	}
	if c := checkHeld(t, st, acct); c.BalanceMicros != 1_000_000-want {
		t.Errorf("balance %d, want %d", c.BalanceMicros, 1_000_000-want)
	}
	if b, err := st.GetKeyBudget(ctx, key.ID, period); err != nil || b.SpentMicros != want {
		t.Errorf("the key's budget: %+v (%v), want %d spent", b, err, want)
	}
}
