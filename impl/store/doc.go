// Package store is tollgate's PostgreSQL persistence: accounts, API keys, model access and the
// credit ledger, the schema migrations, and LISTEN/NOTIFY subscriptions. It is the only package
// that imports gen/db; everything it returns is one of its own domain types, and every query it
// runs is a sqlc query from queries/*.sql.
package store
