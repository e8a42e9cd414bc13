package store

import "github.com/jackc/pgx/v5/pgxpool"

// Pool is the store's connection pool, for the parts that need the pool itself: the Usage
// page's read model (impl/usageview), River's driver and the agents' LISTEN connection
// (impl/agent).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
