package store

import "github.com/jackc/pgx/v5/pgxpool"

// Pool is the store's connection pool, for the parts that keep their own tables and queries
// (the web application's sessions, users and audit log: impl/web).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
