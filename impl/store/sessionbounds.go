package store

import (
	"net"
	"time"

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
// connections with clientKeepAlive.
func boundSessions(cfg *pgxpool.Config) {
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = make(map[string]string, len(sessionBounds))
	}
	params := cfg.ConnConfig.RuntimeParams
	for name, value := range sessionBounds {
		if _, set := params[name]; !set {
			params[name] = value
		}
	}
	// connect_timeout in the URL bounds the dial, as pgconn's own dialer does.
	dialer := &net.Dialer{Timeout: cfg.ConnConfig.ConnectTimeout, KeepAliveConfig: clientKeepAlive}
	cfg.ConnConfig.DialFunc = dialer.DialContext
}
