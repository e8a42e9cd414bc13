package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gen/db"
)

// ErrNotFound reports that the requested row does not exist (or is not visible to the caller's
// account).
var ErrNotFound = errors.New("not found")

// ErrInsufficientCredit reports that a debit would take an account's balance below zero.
var ErrInsufficientCredit = errors.New("insufficient credit")

// ErrConflict reports that a row with the same unique value already exists.
var ErrConflict = errors.New("already exists")

// Store is a handle on the database. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	q    *db.Queries
}

// Open connects a pool to the database at url and checks that it answers.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	return openPool(ctx, cfg, opts)
}

// Option changes how Open and OpenObserved open the store.
type Option func(*openOptions)

// openOptions is what the Options of an Open set.
type openOptions struct {
	// log is the logger of what opening the store warns about (warnSessionBoundsDropped).
	log *slog.Logger
}

// WithLogger makes the store log what it warns about while opening (a connection pooler that
// refused the session bounds) through log, the process's logger, in its format and with its
// attributes. Without it, or with nil, the store logs through slog's default logger.
func WithLogger(log *slog.Logger) Option {
	return func(o *openOptions) { o.log = log }
}

// resolveOptions applies opts over the defaults.
func resolveOptions(opts []Option) openOptions {
	var o openOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	return o
}

// openPool connects a pool configured by cfg, with the store's codecs and session bounds
// (boundSessions) on every connection, and checks that the database answers.
//
// A connection pooler that refuses the session bounds' start-up parameters (PgBouncer does, but
// for those its ignore_startup_parameters lists) would leave the gateway unable to connect at
// all: the pool is then opened again without them, and a warning says so once per process
// (warnSessionBoundsDropped), through the logger of opts (WithLogger). Any other error is returned as it is.
func openPool(ctx context.Context, cfg *pgxpool.Config, opts []Option) (*Store, error) {
	o := resolveOptions(opts)
	bounds := boundSessions(cfg)
	afterConnect := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		registerUUIDCodec(conn.TypeMap())
		if afterConnect != nil {
			return afterConnect(ctx, conn)
		}
		return nil
	}
	st, err := connectPool(ctx, cfg)
	if refused, ok := refusedSessionBound(err, bounds); ok {
		unboundSessions(cfg, bounds)
		if st, err = connectPool(ctx, cfg); err == nil {
			warnSessionBoundsDropped(o.log, refused, bounds)
		}
	}
	return st, err
}

// connectPool connects a pool configured by cfg and checks that the database answers.
func connectPool(ctx context.Context, cfg *pgxpool.Config) (*Store, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return &Store{pool: pool, q: db.New(pool)}, nil
}

// Close closes every connection of the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// inTx runs fn in one transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(q *db.Queries) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(s.q.WithTx(tx)) })
}

// notFound maps pgx's no-rows error to ErrNotFound and passes every other error through.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// isUniqueViolation reports whether err is PostgreSQL's unique_violation.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
