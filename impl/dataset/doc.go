// Package dataset owns tenant datasets: the files an account keeps in storage and the
// isolated query engine that loads and queries them.
//
// Storage. An account's datasets live under the key prefix tenant/<account-id>/ of a Storage
// (a local directory by default, DirStorage, fit for one host; or an S3-compatible object store
// that every replica shares, impl/objectstore, read through a local cache that implements
// LeasingStorage). A store that does not answer in time is a *StoreUnavailableError, whose text
// the tools show. A dataset is one file, <name>.csv,
// <name>.parquet or <name>.jsonl, and dataset names match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$.
//
// Name resolution is the security boundary. A caller names a dataset by its short name
// (<name>) or by its full name (tenant/<account-id>/<name>, see FullName, with the caller's
// own account id in canonical lowercase form); either may end in the format's extension,
// which pins the format. The name resolves only under the caller's own prefix, and anything
// else (another tenant's dataset or full name, the account's name in place of its id, a path,
// "..", encoded separators, backslashes, NUL, non-ASCII look-alikes, a name that does not
// exist) is refused with a *NotOwnedError, whose text is exactly
// "dataset '<name>' is not owned by the caller". A dataset that does not exist and one that
// belongs to somebody else are deliberately indistinguishable.
//
// Query engine. Loading a dataset starts an engine process (the same binary, re-executed: see
// init in child.go, and engineProcess) that creates a DuckDB in-memory database holding only that
// dataset's table, so that the gateway's own process never runs a tenant's SQL. The kernel
// bounds the engine process's memory (Options.EngineMemoryBytes, RLIMIT_DATA), which DuckDB's
// memory_limit does not cover for values some functions build outside its buffer manager, and
// the gateway kills it (SIGKILL) when a query outlives its statement timeout by killGrace,
// which a function that never checks for interrupts does; either way the query's caller gets an
// error and the next query materializes the dataset in a new process. The database holds the
// dataset's table, read from the resolved file by a fixed statement that this package builds
// (projected columns and the filter come from a validated parse tree, never from pasted
// user text). Right after loading, the database disables external access and locks its
// configuration, and extension installing and autoloading are off from the start, so user
// SQL can reach no file, network, extension or setting. Queries must be one SELECT or WITH
// statement (checked by a tokenizer and by DuckDB's own parser and statement type), run
// under a statement timeout that interrupts the engine, and return at most a row cap and a
// byte cap of text, saying so when a cap is hit.
//
// Shared state. What an account has loaded is recorded in PostgreSQL (table
// loaded_datasets, through package store) with the load parameters, so that it survives a
// restart and every gateway process behind a load balancer sees it: a process materializes
// a recorded dataset from storage on first use. Materialized databases are held in a
// least-recently-used cache bounded by count and approximate memory (an engine process's
// resident memory after its load); eviction ends the engine process, never the record.
package dataset
