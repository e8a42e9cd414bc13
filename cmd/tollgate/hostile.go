//go:build dev

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/hostile"
)

// runHostile runs the hostile-load run of impl/devkit/hostile with this binary as the gateway and
// simulator executable, and prints its report.
func runHostile(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hostile", flag.ContinueOnError)
	bad := fs.Int("bad", 1000, "bad requests to send")
	workers := fs.Int("workers", 16, "bad requests in flight at once")
	rate := fs.Int("rate", 50, "normal requests per second")
	before := fs.Duration("before", 10*time.Second, "normal traffic alone before the bad requests")
	after := fs.Duration("after", 30*time.Second, "normal traffic alone after them, before the gateway's memory is read again")
	memoryLimit := fs.Int("memory-limit-mb", 0, "the gateway's server.memory_limit_mb (0: derived from the machine)")
	budget := fs.Int("body-budget-mb", 0, "the gateway's server.body_budget_mb (0: a quarter of the memory limit)")
	seed := fs.Int64("seed", 1, "orders the bad requests")
	keep := fs.Bool("keep", false, "keep the run's directory (database, gateway and simulator logs)")
	binary := fs.String("binary", "", "the tollgate executable that serves, simulates and administers (default: this one; another build, to compare)")
	if err := parseFlags(fs, args, os.Stdout); err != nil {
		return err
	}
	if err := takesNoArguments(fs); err != nil {
		return err
	}
	bin := *binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return err
		}
	}
	start := time.Now()
	_, err := hostile.Run(ctx, hostile.Options{
		Binary: bin, Bad: *bad, Workers: *workers, Rate: *rate, Before: *before, After: *after,
		MemoryLimitMB: *memoryLimit, BodyBudgetMB: *budget, Seed: *seed, Keep: *keep,
		Logf: func(format string, a ...any) {
			fmt.Fprintf(os.Stderr, "hostile %5.1fs: "+format+"\n", append([]any{time.Since(start).Seconds()}, a...)...)
		},
	}, os.Stdout)
	if err != nil {
		return fmt.Errorf("hostile: %w", err)
	}
	return nil
}
