// Package replicas holds the tests that run several real gateway processes side by side: the
// tollgate binary, built once per test run from ./cmd/tollgate, started two or three times with
// `tollgate serve` on one throwaway PostgreSQL database (impl/devkit/pgtest) and one throwaway
// redis-server (impl/devkit/redistest), each process on its own loopback port with the built-in
// simulator as its upstream, and driven by a round-robin client.
//
// The tests show what must hold across processes: one account's spend never exceeds its
// balance under a 200-way race spread over the processes, and every answer served is billed
// exactly once; an account spread over the processes with little credit is refused (402)
// only once its balance no longer covers the request, never because another process sits on
// an idle hold of it; a revoked key is refused by every process within a second; a key's
// requests-per-minute cap holds across processes through Redis; and a process killed with
// SIGKILL in the middle of a stream leaves its credit hold to be reaped by the others, the
// ledger consistent, and the other processes serving throughout; and the streams it was
// relaying are billed by the others from their last checkpoints, each losing at most one
// checkpoint interval of output (and one write), at the price arithmetic of its tokens.
//
// The package has no code of its own besides this comment: everything is in its tests.
package replicas
