// Package chaos is tollgate's fault-injection run (`tollgate chaos`, `make chaos`): it starts
// its own durable PostgreSQL cluster (fsync, synchronous_commit and full_page_writes on, so a
// crash loses no acknowledged commit), redis-server and several `tollgate serve` replicas on
// them, drives steady traffic through the replicas (chat completions, Responses and Messages,
// streamed and not, a share of them asking the built-in simulator for 429 / 502 / 529 answers,
// stalls and dropped connections), and meanwhile, in turn:
//
//   - crashes PostgreSQL (`pg_ctl stop -m immediate`: SIGQUIT to the postmaster) and keeps it
//     down longer than the gateway's credit outage cover (90 s against 30 s by default) while
//     traffic goes on, and restarts a replica (SIGTERM, then start) in the middle of that
//     outage, probing it twice a second: it must answer every request within a bound (5 s)
//     rather than hang;
//   - hangs PostgreSQL: SIGSTOP of the postmaster and every process it started, so that
//     connections open and queries wait instead of being refused, then SIGCONT;
//   - creates keys with credit caps sized to be reached half-way through a Redis outage, stops
//     Redis, and drives them to their caps;
//   - starts long streams (30 s at 20 words a second) on every replica and kills one replica
//     with SIGKILL a quarter of the way through them, so the kill cuts the streams it serves,
//     and starts it again.
//
// At the end it waits for the killed process's holds to be reaped, stops the replicas with
// SIGTERM and checks the books against what the clients saw:
//
//   - every 200 answer has exactly one usage record and one usage ledger entry (a SIGKILL may
//     lose the usage settled in the killed process's last flush interval, counted apart);
//   - every account's balance is the sum of its ledger, and none is below zero;
//   - no credit and no key reservation is left held;
//   - every usage record's cost is the price arithmetic of its own tokens at its own price
//     (impl/price.Cost of the row's counts, as read through the store), every record carries a
//     price, and every whole answer is billed for exactly the tokens its client was shown, with
//     nothing waived: under-billing shows;
//   - no capped key spent more than its cap in a period, and each key budget's spend is what its
//     usage records charge;
//   - the replica restarted during the outage answered every request within the bound, and no
//     request was billed whose client never saw an answer;
//   - every stream the SIGKILL cut that is billed is billed for at least the words its client
//     had received two seconds (the checkpoint bound) before the kill. Cut streams with no usage
//     record are counted as "unbilled cut streams"; they fail the run with
//     Options.RequireCutBilling (`tollgate chaos` sets it unless -require-cut-billing=false).
//
// It also fails when it did not reach a hard case it exists for (an outage within the credit
// cover, caps not reached during the Redis outage, no stream cut by the kill, no request to the
// restarted replica), so a run that passes has exercised them. It prints tables of the faults,
// the hard cases reached, the requests by outcome (and per fault), the books, the capped keys,
// the restart and the cut streams.
//
// Everything runs on this machine from installed binaries (PostgreSQL's, redis-server) and the
// tollgate binary itself; nothing is mocked. The package is a tool, not a test: its Run is
// called by cmd/tollgate.
package chaos
