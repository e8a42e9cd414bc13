package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// OpenObserved is Open with observe called with the text of every statement that the store
// sends, before it is sent, on the calling goroutine. The text of a named query
// begins with its sqlc name ("-- name: TakeCreditHold :one"). It is for tests that must show
// how many round trips a code path makes, and for diagnostics.
func OpenObserved(ctx context.Context, url string, observe func(sql string), opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	cfg.ConnConfig.Tracer = observer(observe)
	return openPool(ctx, cfg, opts)
}

// observer is a pgx.QueryTracer that reports each statement's text.
type observer func(sql string)

func (o observer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	o(data.SQL)
	return ctx
}

func (o observer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
