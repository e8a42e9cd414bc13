//go:build dev

package main

import (
	"context"
	"strings"
)

// devUsage lists the development commands in `tollgate help`.
const devUsage = `
Development commands (in a build with -tags dev: make run, make bench, make chaos, make hostile):
  tollgate dev     [-config FILE]   serve on embedded defaults: a local PostgreSQL cluster when
                                    DATABASE_URL is unset, a demo account and key (what make run does)
  tollgate bench                    measure what the gateway adds over the simulator (make bench)
  tollgate relay   [-listen ADDR] [-upstream URL] [-bytes]
                                    a bare HTTP relay, the bench's reference for one process hop
                                    (-bytes: a hand-framed byte relay, the floor of any relay)
  tollgate chaos   [-replicas N] [-rate R]
                                    fault injection: replicas on their own PostgreSQL and Redis,
                                    steady traffic, outages and a SIGKILL; checks the books (make chaos)
  tollgate hostile [-bad N] [-rate R]
                                    1,000 bad requests beside normal traffic against one serve
                                    process; its latency and memory against the bounds (make hostile)`

// The development commands: dev (the gateway on embedded defaults with the development OpenID
// provider), bench, relay, chaos and hostile. They are in a build with -tags dev only (make
// run, make bench, make chaos and make hostile build it), so that the production binary links
// none of what they use.
func init() {
	commands["dev"] = func(ctx context.Context, args []string) error { return runServe(ctx, args, true) }
	commands["bench"] = runBench
	commands["relay"] = runRelay
	commands["chaos"] = runChaos
	commands["hostile"] = runHostile
	usage = strings.Replace(usage, "\nEnvironment:", devUsage+"\nEnvironment:", 1)
}
