package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Options configure a run. Zero values take the defaults.
type Options struct {
	// Binary is the tollgate executable the replicas run (required).
	Binary string
	// Replicas is how many `tollgate serve` processes share the database and Redis (default 3).
	Replicas int
	// Rate is the request rate, per second, over all replicas (default 30).
	Rate int
	// FaultEvery makes every n-th request ask the simulator for a fault (default 10; 0 keeps
	// the default, negative asks for none).
	FaultEvery int
	// Scale multiplies the timeline's durations (default 1: about two and a half minutes).
	Scale float64
	// Env is the environment the replicas get on top of DATABASE_URL and REDIS_URL (such as
	// PATH, and settings of the gateway).
	Env []string
	// Keep leaves the run's directory (cluster, logs) in place.
	Keep bool
	// Logf receives progress lines (nil: discarded).
	Logf func(format string, args ...any)
}

// fault is one injected fault and the window in which requests may suffer from it.
type fault struct {
	name       string
	from, till time.Time
	replica    int // the replica it hits, -1 for all
}

// recovery is how long after a fault has ended requests may still feel it (reconnecting pools,
// a replica restarting).
const recovery = 3 * time.Second

// Run starts the run's dependencies and replicas, drives traffic while it injects the faults,
// checks the books and writes the report to out. It returns an error when the run could not be
// made or when an invariant does not hold.
func Run(ctx context.Context, o Options, out io.Writer) error {
	if o.Binary == "" {
		return errors.New("chaos: no tollgate binary")
	}
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.Rate <= 0 {
		o.Rate = 30
	}
	if o.FaultEvery == 0 {
		o.FaultEvery = 10
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	d := func(s float64) time.Duration { return time.Duration(s * o.Scale * float64(time.Second)) }

	root, err := os.MkdirTemp("", "tollgate-chaos-")
	if err != nil {
		return err
	}
	// The postgres OS user (when run as root) must reach the cluster under it.
	if err := os.Chmod(root, 0o755); err != nil {
		return err
	}
	if !o.Keep {
		defer os.RemoveAll(root)
	}
	logf("run directory %s", root)
	pg, err := startPostgres(ctx, root, nil)
	if err != nil {
		return err
	}
	defer func() { _ = pg.stop(context.WithoutCancel(ctx)) }()
	rd, err := startRedis(root)
	if err != nil {
		return err
	}
	defer rd.stop()
	env := append([]string{"DATABASE_URL=" + pg.url(), "REDIS_URL=" + rd.url(), fmt.Sprintf("TOLLGATE_REPLICAS=%d", o.Replicas)}, o.Env...)
	if err := tollgate(ctx, o.Binary, env, "migrate"); err != nil {
		return err
	}
	keys, err := accounts(ctx, o.Binary, env, 4)
	if err != nil {
		return err
	}
	replicas := make([]*replica, o.Replicas)
	for i := range replicas {
		if replicas[i], err = newReplica(i, o.Binary, root, env); err != nil {
			return err
		}
		if err := replicas[i].start(30 * time.Second); err != nil {
			return err
		}
		defer replicas[i].kill()
	}
	logf("%d replicas up; traffic at %d requests/s", len(replicas), o.Rate)

	// The timeline: warm up, PostgreSQL down for 20 s, Redis down for 15 s, a replica killed
	// and started again 10 s later, and quiet traffic to the end.
	var (
		faults []fault
		errs   []error
	)
	window := func(name string, replica int, down, up func() error, length time.Duration) {
		f := fault{name: name, from: time.Now(), replica: replica}
		if err := down(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		logf("%s", name)
		sleep(ctx, length)
		if err := up(); err != nil {
			errs = append(errs, fmt.Errorf("%s, recovering: %w", name, err))
		}
		f.till = time.Now()
		logf("%s: over after %s", name, f.till.Sub(f.from).Round(time.Second))
		faults = append(faults, f)
	}
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	var outcomes []outcome
	var wg sync.WaitGroup
	wg.Go(func() { outcomes = traffic(trafficCtx, replicas, keys, o.Rate, max(o.FaultEvery, 0)) })
	victim := replicas[len(replicas)-1]
	var killedAt time.Time
	sleep(ctx, d(10))
	window("PostgreSQL stopped", -1, func() error { return pg.stop(ctx) }, func() error { return pg.start(ctx) }, d(20))
	sleep(ctx, d(10))
	window("Redis stopped", -1, func() error { rd.stop(); return nil }, rd.start, d(15))
	sleep(ctx, d(10))
	window(fmt.Sprintf("replica %d killed (SIGKILL)", victim.n), victim.n,
		func() error { killedAt = time.Now(); victim.kill(); return nil },
		func() error { return victim.start(30 * time.Second) }, d(10))
	sleep(ctx, d(15))
	stopTraffic()
	wg.Wait()
	logf("traffic stopped: %d requests", len(outcomes))

	// The killed replica's hold is released by another replica once its lease expires (40 s,
	// billing's default lease with the default outage cover).
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if n, err := expiredHolds(ctx, pg.url()); err == nil && n == 0 && time.Since(killedAt) > 45*time.Second {
			break
		}
		sleep(ctx, time.Second)
	}
	for _, r := range replicas {
		if err := r.terminate(ctx, 60*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("replica %d: %w", r.n, err))
		}
	}
	b, err := readBooks(ctx, pg.url())
	if err != nil {
		return err
	}
	rep := check(outcomes, faults, b, victim.n, killedAt)
	rep.write(out)
	errs = append(errs, rep.failures()...)
	return errors.Join(errs...)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// tollgate runs a tollgate command to its end and returns its output.
func tollgate(ctx context.Context, bin string, env []string, args ...string) error {
	_, err := tollgateOutput(ctx, bin, env, args...)
	return err
}

func tollgateOutput(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("tollgate %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// accounts creates n accounts with $50 of credit each and a key on the plan's default cap for each,
// and returns the keys.
func accounts(ctx context.Context, bin string, env []string, n int) ([]string, error) {
	keys := make([]string, n)
	for i := range keys {
		name := fmt.Sprintf("chaos-%d", i)
		if err := tollgate(ctx, bin, env, "admin", "account", "create", name); err != nil {
			return nil, err
		}
		if err := tollgate(ctx, bin, env, "admin", "credit", "grant", name, "50000000", "-note", "chaos run"); err != nil {
			return nil, err
		}
		key, err := tollgateOutput(ctx, bin, env, "admin", "key", "create", name, "-quiet")
		if err != nil {
			return nil, err
		}
		keys[i] = strings.TrimSpace(key)
	}
	return keys, nil
}
