package store

import (
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The bounds every connection of a store's pool sets on its PostgreSQL session, so that a
// client that goes silent (a network partition: no FIN, no RST, the gateway's process gone with
// its host) costs its locks and its backend for a bounded time, with no server configuration
// (they are session parameters, sent at start-up, so they hold on managed PostgreSQL too).
// Without them a backend left "idle in transaction" holding row locks (a capped key's
// reservation and budget, an account's balance, an agent session) kept them until the kernel's
// keepalive gave up on the peer, about two hours, and every request of that key, on every
// replica, timed out meanwhile (docs/operations.md, "A connection lost in a transaction").
//
// A parameter the database URL names already (postgres://...?idle_in_transaction_session_timeout=30s)
// is left as the URL says: that is how an operator changes one.
var sessionBounds = map[string]string{
	// idleInTransaction ends a session whose transaction waits for its client longer than this
	// (its locks are released, its transaction rolled back). The gateway's transactions idle
	// only for the Go code between their statements (micro- to milliseconds); a caller that
	// stops waiting (billing's WriteTimeout, 5 s by default; a request's context) closes its
	// connection, which the server sees at once unless the network lost the close. Ten seconds
	// leaves room for a starved or paused process and bounds what a lost connection blocks to
	// about two WriteTimeouts. The one transaction that idles by design, the lock of an
	// account's dataset uploads held while a file is stored, lifts it for itself
	// (LockDatasetUploads).
	"idle_in_transaction_session_timeout": "10s",
	// The server's TCP keepalives and its TCP_USER_TIMEOUT (PostgreSQL 12 and later) notice a
	// client that is gone even outside a transaction, and in the transaction that lifted the
	// bound above: about 30 s after the peer last answered, the backend ends. Over a Unix
	// socket the server ignores them.
	"tcp_keepalives_idle":     "15s",
	"tcp_keepalives_interval": "5s",
	"tcp_keepalives_count":    "3",
	"tcp_user_timeout":        "30s",
}

// clientKeepAlive is the TCP keepalive of the pool's own sockets: a server gone silent is
// noticed on an idle connection about 30 s after it last answered (15 s idle, then three
// probes 5 s apart), so the pool replaces it. A statement in flight is bounded by its context,
// as every caller of the store gives one.
var clientKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}

// boundSessions sets the session bounds on cfg (but those the URL names) and dials its
// connections with clientKeepAlive. It returns the names of the parameters it set, sorted.
func boundSessions(cfg *pgxpool.Config) (set []string) {
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = make(map[string]string, len(sessionBounds))
	}
	params := cfg.ConnConfig.RuntimeParams
	for name, value := range sessionBounds {
		if _, named := params[name]; !named {
			params[name] = value
			set = append(set, name)
		}
	}
	slices.Sort(set)
	// connect_timeout in the URL bounds the dial, as pgconn's own dialer does.
	dialer := &net.Dialer{Timeout: cfg.ConnConfig.ConnectTimeout, KeepAliveConfig: clientKeepAlive}
	cfg.ConnConfig.DialFunc = dialer.DialContext
	return set
}

// refusedSessionBound reports which of the start-up parameters set (boundSessions's) the server
// refused, when err is such a refusal: that of a connection pooler that passes on no start-up
// parameter it does not know. PgBouncer (1.18 and others) answers the first one it meets with
// FATAL "unsupported startup parameter: NAME", SQLSTATE 08P01 (protocol_violation), unless its
// ignore_startup_parameters lists it; PostgreSQL itself takes every one of them. Any other error,
// or the refusal of a parameter the URL names, is no such refusal.
func refusedSessionBound(err error, set []string) (string, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "08P01" {
		return "", false
	}
	name, found := strings.CutPrefix(pgErr.Message, "unsupported startup parameter: ")
	if !found || !slices.Contains(set, name) {
		return "", false
	}
	return name, true
}

// unboundSessions takes the start-up parameters set (boundSessions's) off cfg, leaving the
// client's TCP keepalives, for a server that refused them (refusedSessionBound).
func unboundSessions(cfg *pgxpool.Config, set []string) {
	for _, name := range set {
		delete(cfg.ConnConfig.RuntimeParams, name)
	}
}

// sessionBoundsDropped makes warnSessionBoundsDropped warn once per process, whichever pool and
// however many times the process opens the store (tollgate serve retries while its database is
// unreachable).
var sessionBoundsDropped sync.Once

// warnSessionBoundsDropped logs, once per process, that the server (a connection pooler) refused
// the session bounds, which the process then connects without, and how an operator restores
// them. It logs through log, the logger Open was given (WithLogger), or slog's default logger.
func warnSessionBoundsDropped(log *slog.Logger, refused string, dropped []string) {
	sessionBoundsDropped.Do(func() {
		log.Warn("the database refused the session bounds as start-up parameters (a connection pooler, such as PgBouncer, that does not pass them on): "+
			"connecting without them, so a connection lost in a transaction may hold its locks until the kernel gives up on it (about 2 h). "+
			"Restore them on the PostgreSQL server for the gateway's role (ALTER ROLE ... SET idle_in_transaction_session_timeout = '10s', and tcp_keepalives_idle, tcp_keepalives_interval, tcp_keepalives_count, tcp_user_timeout), "+
			"and bound the pooler's own clients (PgBouncer: idle_transaction_timeout = 10, tcp_keepidle, tcp_keepintvl, tcp_keepcnt, tcp_user_timeout); "+
			"the gateway's own TCP keepalives are kept (docs/operations.md, \"Behind a connection pooler\")",
			"refused", refused, "dropped", strings.Join(dropped, ","))
	})
}
