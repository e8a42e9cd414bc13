package store

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gen/db"
)

// OnPool returns a store over pool, which must be the pool of a store Open made (its Pool()):
// for the callers that were handed the pool only. The two stores share the pool, and closing
// either closes it.
func OnPool(pool *pgxpool.Pool) *Store { return &Store{pool: pool, q: db.New(pool)} }
