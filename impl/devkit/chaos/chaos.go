package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	// DatabaseOutage is how long PostgreSQL stays down after its crash (default 90 s: longer
	// than CreditCover, so that the credit the processes hold runs out while traffic goes on).
	DatabaseOutage time.Duration
	// DatabaseHang is how long PostgreSQL stays stopped with SIGSTOP (default 20 s).
	DatabaseHang time.Duration
	// RedisOutage is how long Redis stays down, while the capped keys are driven to their caps
	// (default 30 s).
	RedisOutage time.Duration
	// KillDown is how long the replica killed with SIGKILL stays down (default 10 s).
	KillDown time.Duration
	// LongStreams is how many long streams are sent, round robin over the replicas, a quarter of
	// their length before the kill (default 6 a replica), and LongStream how long each lasts at
	// 20 words a second (default 30 s).
	LongStreams int
	LongStream  time.Duration
	// Scale multiplies every duration of the timeline, those above included (default 1: about
	// four and a half minutes in all).
	Scale float64
	// CreditCover is the replicas' -credit-outage-cover (default 30 s, the gateway's default),
	// which the database outage is to outlast.
	CreditCover time.Duration
	// AnswerWithin bounds how long the replica restarted during the database outage may take to
	// answer a request (default 5 s); a request it has not answered by then has hung.
	AnswerWithin time.Duration
	// RequireCutBilling makes a stream cut by the SIGKILL that no usage record covers fail the
	// run; without it such streams are counted and reported only.
	RequireCutBilling bool
	// Env is the environment the replicas get on top of DATABASE_URL and REDIS_URL (such as
	// PATH, and settings of the gateway).
	Env []string
	// Keep leaves the run's directory (cluster, logs) in place.
	Keep bool
	// Logf receives progress lines (nil: discarded).
	Logf func(format string, args ...any)
}

// withDefaults fills in the zero values of o.
func (o Options) withDefaults() Options {
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.Rate <= 0 {
		o.Rate = 30
	}
	if o.FaultEvery == 0 {
		o.FaultEvery = 10
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.DatabaseOutage, 90*time.Second)
	def(&o.DatabaseHang, 20*time.Second)
	def(&o.RedisOutage, 30*time.Second)
	def(&o.KillDown, 10*time.Second)
	def(&o.LongStream, 30*time.Second)
	def(&o.CreditCover, 30*time.Second)
	def(&o.AnswerWithin, 5*time.Second)
	if o.LongStreams <= 0 {
		o.LongStreams = 6 * o.Replicas
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
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

// Rates of the run's smaller flows: the capped keys' requests (over all capped keys) and the
// probes of the replica restarted during the database outage.
const (
	cappedRate   = 4
	cappedKeys   = 2
	probeRate    = 2
	longStreamTP = 20 // words a second
)

// holdSettle is how long after the kill the run waits at least before reading the books: the
// killed process's credit hold, key reservations and streams are reaped once its lease (40 s)
// has expired, at the next reap (every 10 s).
const holdSettle = 55 * time.Second

// Run starts the run's dependencies and replicas, drives traffic while it injects the faults,
// checks the books and writes the report to out. It returns an error when the run could not be
// made or when an invariant does not hold.
func Run(ctx context.Context, o Options, out io.Writer) error {
	if o.Binary == "" {
		return errors.New("chaos: no tollgate binary")
	}
	o = o.withDefaults()
	logf := o.Logf
	scaled := func(d time.Duration) time.Duration { return time.Duration(float64(d) * o.Scale) }
	d := func(s float64) time.Duration { return scaled(time.Duration(s * float64(time.Second))) }

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
	defer func() {
		_ = pg.resume()
		_ = pg.stop(context.WithoutCancel(ctx))
	}()
	rd, err := startRedis(root)
	if err != nil {
		return err
	}
	defer rd.stop()
	// The replicas' usage spill files go to the run's directory (each process takes a file of
	// its own there), not to the working directory's .data.
	env := append([]string{"DATABASE_URL=" + pg.url(), "REDIS_URL=" + rd.url(), fmt.Sprintf("TOLLGATE_REPLICAS=%d", o.Replicas),
		"TOLLGATE_DATA_DIR=" + filepath.Join(root, "data")}, o.Env...)
	if err := tollgate(ctx, o.Binary, env, "migrate"); err != nil {
		return err
	}
	keys := make([]*apiKey, 4)
	for i := range keys {
		if keys[i], err = account(ctx, o.Binary, env, fmt.Sprintf("chaos-%d", i)); err != nil {
			return err
		}
	}
	probeKey, err := account(ctx, o.Binary, env, "chaos-probe")
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
	logf("%d replicas up (PostgreSQL durable: fsync and synchronous commit on); traffic at %d requests/s", len(replicas), o.Rate)

	var (
		facts = runFacts{answerWithin: o.AnswerWithin, creditCover: o.CreditCover, probeAccount: probeKey.account,
			requireCutBilling: o.RequireCutBilling}
		errs []error
	)
	begin := func(name string, replica int) fault {
		logf("%s", name)
		return fault{name: name, from: time.Now(), replica: replica}
	}
	end := func(f fault) fault {
		f.till = time.Now()
		logf("%s: over after %s", f.name, f.till.Sub(f.from).Round(time.Second))
		facts.faults = append(facts.faults, f)
		return f
	}
	note := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}

	trafficCtx, stopTraffic := context.WithCancel(ctx)
	defer stopTraffic()
	traffic := &load{}
	var flows sync.WaitGroup
	flows.Go(func() {
		traffic.run(trafficCtx, flow{name: flowSteady, replicas: replicas, keys: keys, rate: o.Rate,
			faultEvery: max(o.FaultEvery, 0), timeout: 30 * time.Second})
	})
	restarted := replicas[min(1, len(replicas)-1)]
	victim := replicas[len(replicas)-1]
	facts.victim, facts.restarted = victim.n, restarted.n
	sleep(ctx, d(15))

	// PostgreSQL crashes and stays down longer than the credit cover; meanwhile a replica is
	// restarted, and must answer at once although it cannot reach the database.
	outage := scaled(o.DatabaseOutage)
	db := begin(fmt.Sprintf("PostgreSQL crashed (pg_ctl stop -m immediate) and down for longer than the %s credit cover", o.CreditCover), -1)
	note("crashing PostgreSQL", pg.crash(ctx))
	sleep(ctx, outage/6)
	rs := begin(fmt.Sprintf("replica %d restarted (SIGTERM, start) during the database outage", restarted.n), restarted.n)
	note(fmt.Sprintf("replica %d, stopped with SIGTERM during the database outage", restarted.n), restarted.terminate(ctx, 45*time.Second))
	probeCtx, stopProbes := context.WithCancel(ctx)
	if facts.restartFrom, err = restarted.startListening(30 * time.Second); err != nil {
		note("restarting a replica during the database outage", err)
	} else {
		logf("replica %d listening again; probing it every %s", restarted.n, time.Second/probeRate)
		flows.Go(func() {
			traffic.run(probeCtx, flow{name: flowProbe, replicas: []*replica{restarted}, keys: []*apiKey{probeKey}, rate: probeRate,
				timeout: 2 * o.AnswerWithin})
		})
	}
	sleep(ctx, time.Until(db.from.Add(outage)))
	note("starting PostgreSQL after its crash", pg.start(ctx))
	stopProbes()
	facts.restartTill = time.Now()
	db = end(db)
	facts.databaseOutage = db.till.Sub(db.from)
	for deadline := time.Now().Add(60 * time.Second); ctx.Err() == nil && time.Now().Before(deadline) && !restarted.answers(2*time.Second); {
		sleep(ctx, 200*time.Millisecond)
	}
	end(rs)
	sleep(ctx, d(15))

	// PostgreSQL hangs: its processes stopped, its sockets still accepting.
	hang := begin("PostgreSQL hung (SIGSTOP of the postmaster and its processes)", -1)
	n, err := pg.hang()
	note("hanging PostgreSQL", err)
	hang.name = fmt.Sprintf("PostgreSQL hung (SIGSTOP of the postmaster and its %d other processes)", max(n-1, 0))
	sleep(ctx, scaled(o.DatabaseHang))
	note("continuing PostgreSQL", pg.resume())
	end(hang)
	sleep(ctx, d(15))

	// Redis stops while keys with credit caps are driven to their caps.
	capped, err := cappedKeysFor(ctx, o.Binary, env, pg.url(), keys, scaled(o.RedisOutage))
	if err != nil {
		return err
	}
	facts.cappedKeys = capped
	redis := begin(fmt.Sprintf("Redis stopped, %d keys driven to their credit caps", len(capped)), -1)
	rd.stop()
	flows.Go(func() {
		traffic.run(trafficCtx, flow{name: flowCapped, replicas: replicas, keys: capped, rate: cappedRate, timeout: 30 * time.Second})
	})
	sleep(ctx, scaled(o.RedisOutage))
	note("starting Redis", rd.start())
	facts.redisFrom = redis.from
	end(redis)
	facts.redisTill = time.Now()
	sleep(ctx, d(10))

	// Long streams in flight when a replica is killed: the kill cuts those it serves.
	long := scaled(o.LongStream)
	words := max(int(long.Seconds()*longStreamTP), 20)
	facts.longStreams = o.LongStreams
	logf("%d long streams of %d words at %d words/s", o.LongStreams, words, longStreamTP)
	traffic.launchLong(replicas, keys, o.LongStreams, words, longStreamTP)
	sleep(ctx, long/4)
	kill := begin(fmt.Sprintf("replica %d killed (SIGKILL) with long streams in flight", victim.n), victim.n)
	facts.killedAt = time.Now()
	victim.kill()
	sleep(ctx, scaled(o.KillDown))
	note(fmt.Sprintf("restarting replica %d after the SIGKILL", victim.n), victim.start(30*time.Second))
	end(kill)
	sleep(ctx, d(15))
	stopTraffic()
	flows.Wait()
	outcomes := traffic.outcomes()
	logf("traffic stopped: %d requests", len(outcomes))

	// The killed replica's holds and key reservations are released by another replica once
	// their lease has expired.
	for deadline := facts.killedAt.Add(holdSettle + 90*time.Second); ctx.Err() == nil && time.Now().Before(deadline); sleep(ctx, time.Second) {
		if time.Since(facts.killedAt) < holdSettle {
			continue
		}
		h, err1 := expiredHolds(ctx, pg.url())
		k, err2 := expiredKeyReservations(ctx, pg.url())
		if err1 == nil && err2 == nil && h == 0 && k == 0 {
			break
		}
	}
	for _, r := range replicas {
		note(fmt.Sprintf("replica %d", r.n), r.terminate(ctx, 60*time.Second))
	}
	b, err := readBooks(ctx, pg.url())
	if err != nil {
		return err
	}
	rep := check(outcomes, b, facts)
	rep.write(out)
	errs = append(errs, rep.failures()...)
	return errors.Join(errs...)
}

// cappedKeysFor creates the keys with a credit cap that the run drives to their caps, one on
// each of the run's first accounts: each cap is what the key's share of the capped flow spends in
// half of within (at the mean cost of the answers so far), and three of the dearest answers
// more (a request is refused once what is left of the cap does not cover its worst case), so
// that it is reached about half-way through.
func cappedKeysFor(ctx context.Context, bin string, env []string, url string, keys []*apiKey, within time.Duration) ([]*apiKey, error) {
	mean, most, err := meanCost(ctx, url)
	if err != nil {
		return nil, err
	}
	perKey := float64(cappedRate) / cappedKeys * within.Seconds() / 2
	capMicros := max(int64(float64(mean)*perKey)+3*most, 1000)
	out := make([]*apiKey, cappedKeys)
	for i := range out {
		acct := keys[i%len(keys)].account
		name := fmt.Sprintf("chaos-capped-%d", i)
		secret, err := tollgateOutput(ctx, bin, env, "admin", "key", "create", acct, "-name", name,
			"-credit-cap", strconv.FormatInt(capMicros, 10), "-cap-period", "none", "-quiet")
		if err != nil {
			return nil, err
		}
		out[i] = &apiKey{secret: strings.TrimSpace(secret), name: name, account: acct, capped: true, capMicros: capMicros}
	}
	return out, nil
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

// account creates the account name with $50 of credit and a key on the plan's default cap,
// and returns the key.
func account(ctx context.Context, bin string, env []string, name string) (*apiKey, error) {
	if err := tollgate(ctx, bin, env, "admin", "account", "create", name); err != nil {
		return nil, err
	}
	if err := tollgate(ctx, bin, env, "admin", "credit", "grant", name, "50000000", "-note", "chaos run"); err != nil {
		return nil, err
	}
	keyName := name + "-key"
	secret, err := tollgateOutput(ctx, bin, env, "admin", "key", "create", name, "-name", keyName, "-quiet")
	if err != nil {
		return nil, err
	}
	return &apiKey{secret: strings.TrimSpace(secret), name: keyName, account: name}, nil
}
