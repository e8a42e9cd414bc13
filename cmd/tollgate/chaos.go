//go:build dev

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/chaos"
)

// runChaos runs the fault-injection run of impl/devkit/chaos with this binary as the replicas'
// executable and prints its report.
func runChaos(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	replicas := fs.Int("replicas", 3, "gateway processes sharing the database and Redis")
	rate := fs.Int("rate", 30, "requests per second over all replicas")
	faultEvery := fs.Int("fault-every", 10, "every n-th request asks the simulator for a fault (negative: none)")
	dbOutage := fs.Duration("db-outage", 90*time.Second, "how long PostgreSQL stays down after its crash (pg_ctl stop -m immediate); longer than -credit-cover to reach the hard case")
	dbHang := fs.Duration("db-hang", 20*time.Second, "how long PostgreSQL stays stopped with SIGSTOP (a hung database)")
	redisOutage := fs.Duration("redis-outage", 30*time.Second, "how long Redis stays down while keys are driven to their credit caps")
	killDown := fs.Duration("kill-down", 10*time.Second, "how long the replica killed with SIGKILL stays down")
	longStreams := fs.Int("long-streams", 0, "long streams in flight when a replica is killed, over all replicas (0: 6 a replica)")
	longStream := fs.Duration("long-stream", 30*time.Second, "how long each long stream lasts, at 20 words a second")
	scale := fs.Float64("scale", 1, "multiplies every duration of the timeline, the flags' above included (1: about four and a half minutes in all)")
	creditCover := fs.Duration("credit-cover", 30*time.Second, "the replicas' -credit-outage-cover, which the database outage is to outlast")
	answerWithin := fs.Duration("answer-within", 5*time.Second, "how soon the replica restarted during the database outage must answer a request")
	requireCutBilling := fs.Bool("require-cut-billing", true, "fail the run when a stream cut by the SIGKILL is not billed at all (false: such streams are only reported)")
	keep := fs.Bool("keep", false, "keep the run's directory (database, replica logs)")
	if err := parseFlags(fs, args, os.Stdout); err != nil {
		return err
	}
	if err := takesNoArguments(fs); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	start := time.Now()
	err = chaos.Run(ctx, chaos.Options{
		Binary: bin, Replicas: *replicas, Rate: *rate, FaultEvery: *faultEvery, Scale: *scale, Keep: *keep,
		DatabaseOutage: *dbOutage, DatabaseHang: *dbHang, RedisOutage: *redisOutage, KillDown: *killDown,
		LongStreams: *longStreams, LongStream: *longStream, CreditCover: *creditCover, AnswerWithin: *answerWithin,
		RequireCutBilling: *requireCutBilling,
		Env:               []string{"PATH=" + os.Getenv("PATH"), "LOG_LEVEL=warn"},
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
