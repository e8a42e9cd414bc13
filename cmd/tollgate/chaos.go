package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tollgate/tollgate/impl/chaos"
)

// runChaos runs the fault-injection run of impl/chaos with this binary as the replicas'
// executable and prints its report.
func runChaos(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	replicas := fs.Int("replicas", 3, "gateway processes sharing the database and Redis")
	rate := fs.Int("rate", 30, "requests per second over all replicas")
	faultEvery := fs.Int("fault-every", 10, "every n-th request asks the simulator for a fault (negative: none)")
	scale := fs.Float64("scale", 1, "multiplies the timeline's durations (1: about two and a half minutes)")
	keep := fs.Bool("keep", false, "keep the run's directory (database, replica logs)")
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error())
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	start := time.Now()
	err = chaos.Run(ctx, chaos.Options{
		Binary: bin, Replicas: *replicas, Rate: *rate, FaultEvery: *faultEvery, Scale: *scale, Keep: *keep,
		Env: []string{"PATH=" + os.Getenv("PATH"), "LOG_LEVEL=warn"},
		Logf: func(format string, a ...any) {
			fmt.Fprintf(os.Stderr, "chaos %5.1fs: "+format+"\n", append([]any{time.Since(start).Seconds()}, a...)...)
		},
	}, os.Stdout)
	if err != nil {
		return fmt.Errorf("chaos: the invariants do not hold: %w", err)
	}
	fmt.Println("chaos: every invariant holds")
	return nil
}
