// Package store is tollgate's PostgreSQL persistence: accounts, API keys, model access and the
// credit ledger, the web console's sessions, users, memberships and audit log, the hosted
// agents' tables, the schema migrations, and LISTEN/NOTIFY subscriptions. Beside the Usage
// page's read model (impl/usageview) it is the only package that imports gen/db (the archtest
// holds every other to it); what it returns is one of its own types (the agents' records are
// aliases of the generated rows: see Agents), and every query it runs is a sqlc query from
// queries/*.sql.
//
// # Agents
//
// The hosted agents (impl/agent) run their state machine inside transactions that also hold
// River's jobs, so they reach the database through AgentQueries: on the pool (Store.Agents),
// or in one transaction (Store.InAgentTx hands an AgentTx to a callback; AgentTx.Tx gives River
// the same pgx.Tx for InsertTx, JobCompleteTx and JobDeleteTx, and AgentTx.Savepoint opens a
// savepoint with the same queries). Each AgentQueries method runs one sqlc query and keeps its
// semantics: its locking (the ...ForUpdate reads lock their row), and its errors as they are
// (pgx.ErrNoRows for a missing row, *pgconn.PgError for a refusal), which the agents map.
//
// The agents' records (AgentSession, AgentApproval, AgentSlot, AgentSlotListing, AgentTicket,
// AgentEvent, AgentMessage, AgentCommand) and what they store (NewAgentSession,
// AgentSessionUpdate and the like) are type aliases of the generated rows and parameters:
// each is exactly its table's row, which a copy would only repeat field by field. They are
// named through this package, so that impl/agent never imports gen/db; a record that comes to
// differ from its row becomes a type of its own here.
package store
