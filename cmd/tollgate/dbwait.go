package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/backoff"
	"github.com/tollgate/tollgate/impl/h1server"
	"github.com/tollgate/tollgate/impl/health"
	"github.com/tollgate/tollgate/impl/httpapi"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web"
)

// The timing of start-up's wait for the database: attempts backing off exponentially from
// dbRetryInitial to dbRetryMax (with jitter), each connection attempt bounded by dbAttemptTimeout
// (a server that drops packets instead of refusing would otherwise hold an attempt for the
// kernel's TCP timeout, minutes).
const (
	dbRetryInitial   = 250 * time.Millisecond
	dbRetryMax       = 5 * time.Second
	dbAttemptTimeout = 10 * time.Second
)

// openDatabaseWaiting is openDatabase for serve and dev. When DATABASE_URL names a server that
// cannot be reached (stopped, starting, refusing connections, not yet accepting the role), it
// does not give up: it retries with exponential backoff, logging each attempt with the reason,
// for up to limit (0: until ctx ends), with cond Down ("waiting for the database") meanwhile.
// A malformed DATABASE_URL fails at once, and so does a failure once the server answers (a
// migration that does not apply): waiting would not mend either. Without DATABASE_URL (dev's
// local cluster) it is openDatabase.
func openDatabaseWaiting(ctx context.Context, local bool, log *slog.Logger, limit time.Duration, cond *health.Condition) (*database, error) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		return openDatabase(ctx, local, log)
	}
	if _, err := pgxpool.ParseConfig(url); err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := reachDatabase(ctx, url, log)
		if err == nil {
			d, openErr := openDatabase(ctx, local, log)
			if openErr == nil {
				if attempt > 1 {
					log.Info("database reachable", "attempts", attempt, "waited", time.Since(start).Round(time.Millisecond).String())
				}
				return d, nil
			}
			if ctx.Err() == nil && reachDatabase(ctx, url, log) == nil {
				// The server answers: the failure is not an outage.
				return nil, openErr
			}
			err = openErr
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		waited := time.Since(start)
		if limit > 0 && waited >= limit {
			return nil, fmt.Errorf("the database was not reachable within %s (-database-wait): %w", limit, err)
		}
		delay := backoff.Exponential(dbRetryInitial, dbRetryMax, attempt-1, rand.Float64())
		if limit > 0 {
			delay = min(delay, limit-waited)
		}
		cond.Set(health.Down, "waiting for the database")
		log.Warn("database not reachable; retrying", "attempt", attempt, "retry_in", delay.Round(time.Millisecond).String(),
			"waited", waited.Round(time.Millisecond).String(), "err", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// reachDatabase reports whether the database at url accepts a connection and answers. What
// opening the store warns about goes to log, the process's logger.
func reachDatabase(ctx context.Context, url string, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, dbAttemptTimeout)
	defer cancel()
	st, err := store.Open(ctx, url, store.WithLogger(log))
	if err != nil {
		return err
	}
	st.Close()
	return nil
}

// startingRetryAfter is the Retry-After of the answers the API listener gives before the gateway
// serves: apierror.DependencyRetryAfter (2 s), what a running gateway answers while its database
// is unreachable, so that a client sees one value whichever replica it reaches. Answers are
// immediate and cost nothing, so a client retrying that often does no harm; the SDKs' two
// retries then span about 4 s, and their callers' own retries whatever they choose. A longer
// value would keep clients waiting after a restart with the database up, where the gateway
// is assembled within a second or two (docs/operations.md, "Starting during a database
// outage").
const startingRetryAfter = apierror.DependencyRetryAfter

// startingMetricsRoute is the route label of the answers given before the handover in
// tollgate_http_requests_total.
const startingMetricsRoute = "starting"

// apiHandover is the API listener's handler for the whole life of the process. Until handOver
// gives it the gateway's handler it answers every request at once, reading nothing of it but its
// path: 503 with Retry-After (startingRetryAfter) in the route's own envelope
// (httpapi.WriteUnavailable), or a short plain-text 503 on the web console's pages. So a client
// never waits on a process that cannot serve yet, and no request is kept to be run later, when
// its client may have gone. From the handover on, every request (on the connections already
// open as on new ones) goes to the gateway's handler: one atomic load a request.
type apiHandover struct {
	gateway atomic.Pointer[http.Handler]
	// startup is the readiness condition whose reason says what the process is waiting for
	// ("starting", "waiting for the database"); the answers quote it.
	startup *health.Condition
	// pages is whether the web console will be served (its paths then get the page answer).
	pages   bool
	metrics *metrics.Metrics // may be nil
	// answered counts the requests answered 503 before the handover.
	answered atomic.Int64
}

// newAPIHandover returns the handler that answers 503 until handOver; pages tells whether the
// web console's paths are pages (the console will be mounted).
func newAPIHandover(startup *health.Condition, m *metrics.Metrics, pages bool) *apiHandover {
	return &apiHandover{startup: startup, pages: pages, metrics: m}
}

// handOver makes gateway serve every request from now on, and returns how many requests were
// answered 503 before.
func (a *apiHandover) handOver(gateway http.Handler) int64 {
	a.gateway.Store(&gateway)
	return a.answered.Load()
}

// ServeHTTP implements http.Handler.
func (a *apiHandover) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if gw := a.gateway.Load(); gw != nil {
		(*gw).ServeHTTP(w, r)
		return
	}
	start := time.Now()
	a.answered.Add(1)
	status := http.StatusServiceUnavailable
	// "the gateway is starting", and what it waits for when that is more ("waiting for the
	// database").
	what := "the gateway is starting"
	if _, reason := a.startup.State(); reason != "" && reason != "starting" {
		what += " (" + reason + ")"
	}
	if a.pages && web.Owns(r.URL.Path) {
		answerStartingPage(w, what)
	} else {
		if !httpapi.WriteUnavailable(w, r, fmt.Sprintf("%s and cannot serve requests yet; retry in %d seconds",
			what, apierror.Seconds(startingRetryAfter)), startingRetryAfter) {
			status = httpapi.StatusClientClosedRequest // nothing was sent: the client had gone
		}
	}
	if a.metrics != nil {
		a.metrics.ObserveRequest(startingMetricsRoute, status, time.Since(start), trace.TraceID{})
	}
	if status == httpapi.StatusClientClosedRequest {
		// The connection ends without an answer (the server would send an empty 200).
		panic(http.ErrAbortHandler)
	}
}

// answerStartingPage is the web console's answer before the handover: a short plain-text 503
// with Retry-After, kept out of caches, saying what (the gateway is starting...).
func answerStartingPage(w http.ResponseWriter, what string) {
	h := w.Header()
	h.Set("Retry-After", fmt.Sprint(apierror.Seconds(startingRetryAfter)))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = fmt.Fprintf(w, "%s. Try again in a few seconds.\n", what)
}

// stopBeforeHandover ends the API server of a process that stops before its gateway served (a
// signal, or a start-up failure): every request it has is answered at once, so a short
// graceful shutdown finishes them; connections still open after it are closed.
func stopBeforeHandover(srv *h1server.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
}
