package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gen/db"
)

// AgentQueries are the queries of the hosted agents (impl/agent), on the pool (Store.Agents)
// or in a transaction (AgentTx). Each method runs one sqlc query and returns its error as the
// query does: a missing row is pgx.ErrNoRows, and a refusal of the database a *pgconn.PgError,
// which the agents map to their own errors.
type AgentQueries struct {
	q *db.Queries
}

// Agents returns the agents' queries on the pool, each in a transaction of its own.
func (s *Store) Agents() *AgentQueries { return &AgentQueries{q: s.q} }

// AgentTx is one transaction of the agents: their queries (the embedded AgentQueries) run in
// it, and River's jobs are inserted, completed and deleted in it through Tx, so that a step's
// effects and its jobs commit together or not at all.
type AgentTx struct {
	*AgentQueries
	tx pgx.Tx
}

// newAgentTx is the agents' queries in tx.
func newAgentTx(q *db.Queries, tx pgx.Tx) *AgentTx {
	return &AgentTx{AgentQueries: &AgentQueries{q: q.WithTx(tx)}, tx: tx}
}

// InAgentTx runs fn in one transaction, committing when it returns nil and rolling back
// otherwise.
func (s *Store) InAgentTx(ctx context.Context, fn func(tx *AgentTx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(newAgentTx(s.q, tx)) })
}

// Tx is the transaction itself, for River's InsertTx, JobCompleteTx and JobDeleteTx
// (riverpgxv5): the jobs they write commit with the rest of the transaction.
func (t *AgentTx) Tx() pgx.Tx { return t.tx }

// AgentSavepoint is a savepoint inside an AgentTx: a transaction of its own (the embedded
// AgentTx) whose writes Release keeps in the outer transaction and Rollback undoes, leaving the
// outer transaction usable.
type AgentSavepoint struct {
	*AgentTx
}

// Savepoint starts a savepoint in the transaction.
func (t *AgentTx) Savepoint(ctx context.Context) (*AgentSavepoint, error) {
	sp, err := t.tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &AgentSavepoint{AgentTx: &AgentTx{AgentQueries: &AgentQueries{q: t.q.WithTx(sp)}, tx: sp}}, nil
}

// Release keeps the savepoint's writes in the outer transaction (RELEASE SAVEPOINT).
func (sp *AgentSavepoint) Release(ctx context.Context) error { return sp.tx.Commit(ctx) }

// Rollback undoes the savepoint's writes (ROLLBACK TO SAVEPOINT).
func (sp *AgentSavepoint) Rollback(ctx context.Context) error { return sp.tx.Rollback(ctx) }
