// Package chaos is tollgate's fault-injection run (`tollgate chaos`, `make chaos`): it starts
// its own PostgreSQL cluster, redis-server and several `tollgate serve` replicas on them,
// drives steady traffic through the replicas (chat completions, Responses and Messages, streamed
// and not, a share of them asking the built-in simulator for 429 / 502 / 529 answers, stalls
// and dropped connections), and meanwhile stops and starts PostgreSQL, stops and starts Redis,
// and kills a replica with SIGKILL and starts it again. At the end it stops the replicas with
// SIGTERM and checks the books against what the clients saw:
//
//   - every 200 answer has exactly one usage record and one usage ledger entry;
//   - every account's balance is the sum of its ledger, and none is below zero;
//   - no credit is left held once the replicas have stopped (a killed replica's hold is
//     released when its lease expires, which the run waits for).
//
// It prints a table of the faults injected, the requests by outcome, the requests refused
// outside any fault window without a fault asked of the simulator ("wrongly refused"), and
// the usage lost. A SIGKILL may lose the usage settled in the killed process's last flush
// interval; the table counts such records apart, as the documented bound allows them.
//
// Everything runs on this machine from installed binaries (PostgreSQL's, redis-server) and the
// tollgate binary itself; nothing is mocked. The package is a tool, not a test: its Run is
// called by cmd/tollgate.
package chaos
