package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/impl/backoff"
	"github.com/tollgate/tollgate/impl/health"
	"github.com/tollgate/tollgate/impl/store"
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
		err := reachDatabase(ctx, url)
		if err == nil {
			d, openErr := openDatabase(ctx, local, log)
			if openErr == nil {
				if attempt > 1 {
					log.Info("database reachable", "attempts", attempt, "waited", time.Since(start).Round(time.Millisecond).String())
				}
				return d, nil
			}
			if ctx.Err() == nil && reachDatabase(ctx, url) == nil {
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

// reachDatabase reports whether the database at url accepts a connection and answers.
func reachDatabase(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, dbAttemptTimeout)
	defer cancel()
	st, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	st.Close()
	return nil
}
