package ratelimit

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of FallbackOptions.
const (
	// DefaultTimeout bounds one call to Redis on the request path.
	DefaultTimeout = 100 * time.Millisecond
	// DefaultProbeMin is the first wait before probing a Redis that failed.
	DefaultProbeMin = 100 * time.Millisecond
	// DefaultProbeMax is the longest wait between two probes of a Redis
	// that is down.
	DefaultProbeMax = 5 * time.Second
	// DefaultHeartbeat is how often a limiter tells Redis that it is alive
	// while Redis is up.
	DefaultHeartbeat = 5 * time.Second
)

const (
	// livenessBeats is how many heartbeat intervals a limiter that stopped
	// beating still counts as a replica.
	livenessBeats = 3
	// carryTimeout bounds the writing of the requests allowed during an
	// outage into Redis when it is back.
	carryTimeout = 5 * time.Second
	// carryBatch is how many commands one pipeline of that writing holds.
	carryBatch = 512
	// replicasKey is the name, after the prefix, of the sorted set of live
	// limiters. No key text contains '@'.
	replicasKey = "@replicas"
	// epochKey is the name, after the prefix, of the server's epoch: a random value the first
	// limiter to beat sets, with no expiry, which changes only when Redis loses its data (a
	// restart without persistence, a flush). No key text contains '@'.
	epochKey = "@epoch"
)

// heartbeatScript records the limiter ARGV[2] as alive at ARGV[1] (µs) in
// the sorted set KEYS[1], drops the limiters not seen in the last ARGV[3]
// µs, lets the set expire after ARGV[4] ms, and returns how many are left.
var heartbeatScript = redis.NewScript(`
local now = tonumber(ARGV[1])
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return redis.call('ZCARD', KEYS[1])
`)

// FallbackOptions configure a Fallback. The zero value is usable.
type FallbackOptions struct {
	// Replicas is the number of gateway processes assumed to share each
	// cap until the limiter has learnt the number from Redis: a process
	// started while Redis is down. Zero or less means 1.
	Replicas int
	// Timeout bounds each call to Redis on the request path (default
	// DefaultTimeout). It bounds reads from a server that stopped answering
	// only if the client was made with ContextTimeoutEnabled, as
	// TuneClientOptions sets; otherwise such a read waits for the client's
	// ReadTimeout.
	Timeout time.Duration
	// ProbeMin and ProbeMax bound the exponential backoff, with jitter,
	// between probes of a Redis that is down (defaults DefaultProbeMin,
	// DefaultProbeMax).
	ProbeMin, ProbeMax time.Duration
	// Heartbeat is how often the limiter tells Redis it is alive and reads
	// how many limiters are (default DefaultHeartbeat).
	Heartbeat time.Duration
	// Logger receives one line per change of state (default slog.Default).
	Logger *slog.Logger
	// OnChange, if set, is called with true when the limiter falls back to
	// per-process limiting and with false when it uses Redis again, in
	// order, one call per change. It must not block.
	OnChange func(fallback bool)
	// Now is the clock of the rolling window (default time.Now). Timers,
	// heartbeats and probes always use the real clock.
	Now func() time.Time
}

// Fallback is a Limiter that shares each key's cap through Redis, like
// Redis, and falls back to per-process limiting while Redis cannot answer,
// so that no request fails or waits because Redis is down.
//
// While Redis is up, every decision is Redis's, and each allowed request is
// also recorded in a Local limiter (the shadow log), so that the process
// knows its own recent requests when Redis goes away. A call to Redis that
// fails or takes longer than Timeout switches the limiter to its fallback:
// that request and the following ones are decided by the Local limiter,
// against the key's cap shared out by replica count, max(1, cap/replicas)
// rounded down, with no call to Redis. The first call to fail logs a
// warning and calls OnChange(true).
//
// Meanwhile a goroutine of the limiter probes Redis with exponential
// backoff between ProbeMin and ProbeMax. When a probe succeeds it writes
// the requests this process allowed during the outage (those still in the
// window) into Redis's logs, switches back to Redis, logs it and calls
// OnChange(false). While Redis is up the same goroutine beats every
// Heartbeat: it records the limiter as alive in a sorted set next to the
// keys and reads how many limiters beat in the last three intervals, which
// is the replica count the cap is shared out by during the next outage
// (before the first beat, FallbackOptions.Replicas). In the three intervals
// after Redis comes back a lower count is not believed: every limiter beats
// again within them, and until then the set holds only those that did.
//
// Counts across the switches, with N replicas each sharing cap/N: a
// process that falls back keeps counting its own requests allowed through
// Redis in the last minute, so in any 60-second window a key gets at most
// the sum over processes of max(cap/N, what that process had through Redis
// in the window): cap when the key's traffic was spread evenly, at most
// cap + (N-1)*cap/N < 2*cap when one process had all of it. When Redis is
// back, each process adds the requests it allowed during the outage to the
// Redis logs, so Redis counts them again, except those of processes that
// have not yet noticed Redis is back (they still limit locally) and the
// requests in flight at the switch. A Redis that lost its data (restarted
// empty, flushed) is told by its epoch (epochKey, which every beat reads and
// sets if it is missing): each process then writes back its whole window,
// the requests it allowed through Redis before the outage too (its shadow
// log), at the switch back or, when no request saw Redis fail, at its next
// beat; requests allowed through the new Redis before that beat are then
// counted twice, which errs on the strict side. A server that hung rather than
// died may still run the calls that timed out when it resumes: those
// requests then count twice, which errs on the strict side.
//
// During an outage a decision's Limit is the share, so the rate-limit
// headers show what this process enforces.
//
// A Fallback is safe for concurrent use. Close stops its goroutine.
type Fallback struct {
	redis *Redis
	local *Local
	o     FallbackOptions

	// down is set while the limiter falls back to local limiting.
	down atomic.Bool
	// downAt is the local limiter's time at which the last outage began;
	// it is written before down is set.
	downAt atomic.Int64
	// learnt is the replica count read from Redis at the last heartbeat,
	// zero before the first; a lower count than it is believed only from
	// trustLower on (which belongs to the limiter's goroutine). The set of
	// live limiters is pruned of those that did not beat for livenessBeats
	// heartbeats, which none could during an outage, and lost with Redis's
	// data: the first limiter to beat after either read a count of one,
	// and taking it for the replica count made it allow a key's whole cap
	// in an outage that came before its next heartbeat.
	learnt     atomic.Int64
	trustLower time.Time
	// epoch is the Redis epoch (epochKey) the last beat read, "" before the first; lost is set
	// by a beat that read another: Redis lost the logs, so the next carry writes back this
	// process's whole window, not only what it allowed during the outage. Both belong to the
	// limiter's goroutine (run).
	epoch string
	lost  bool

	// changeMu serialises the changes of state with their log lines and
	// OnChange calls; downSince is guarded by it.
	changeMu  sync.Mutex
	downSince time.Time

	// wake tells the goroutine that a request saw Redis fail.
	wake chan struct{}
	// ctx ends when Close is called; cancel ends it.
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

var _ Limiter = (*Fallback)(nil)

// NewFallback returns a limiter that shares caps through Redis with every
// process using the same server and prefix, and limits per process while
// Redis is down. It starts the goroutine that beats and probes; call Close
// to stop it. The client should be made with options adjusted by
// TuneClientOptions (see FallbackOptions.Timeout).
func NewFallback(client redis.UniversalClient, prefix string, o FallbackOptions) *Fallback {
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ProbeMin <= 0 {
		o.ProbeMin = DefaultProbeMin
	}
	if o.ProbeMax < o.ProbeMin {
		o.ProbeMax = max(DefaultProbeMax, o.ProbeMin)
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fallback{
		redis:  NewRedis(client, prefix, o.Now),
		local:  NewLocal(o.Now),
		o:      o,
		wake:   make(chan struct{}, 1),
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go f.run()
	return f
}

// TuneClientOptions adjusts the options of the Redis client a Fallback
// will use, leaving alone the retry counts the caller set (in the URL, for
// example): context deadlines bound reads and writes, so that
// FallbackOptions.Timeout holds against a server that stopped answering;
// and a connection is dialled once per attempt and a failed command retried
// once, instead of the client's five dials 100 ms apart and three retries,
// so that a stopped server is found out at once instead of at the timeout.
func TuneClientOptions(o *redis.Options) {
	o.ContextTimeoutEnabled = true
	if o.DialerRetries == 0 {
		o.DialerRetries = 1
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 1
	}
}

// Allow decides one request for key through Redis, or, while Redis is down
// or when it fails to answer within the timeout, through the process's own
// log against the key's share of limit. A limit of zero or less means
// unlimited. Allow never returns an error.
func (f *Fallback) Allow(ctx context.Context, key string, limit int) (Decision, error) {
	if limit <= 0 {
		return unlimited, nil
	}
	if !f.down.Load() {
		rctx, cancel := context.WithTimeout(ctx, f.o.Timeout)
		d, err := f.redis.Allow(rctx, key, limit)
		cancel()
		if err == nil {
			if d.Allowed {
				// The shadow log: this process's share of the key's
				// recent requests, for the next outage.
				_, _ = f.local.Allow(ctx, key, limit)
			}
			return d, nil
		}
		// A caller that went away says nothing about Redis.
		if ctx.Err() == nil && f.markDown(err) {
			select {
			case f.wake <- struct{}{}:
			default:
			}
		}
	}
	return f.local.Allow(ctx, key, f.share(limit))
}

// FallenBack reports whether the limiter is limiting per process because
// Redis is down.
func (f *Fallback) FallenBack() bool { return f.down.Load() }

// Replicas returns the number of processes each cap is shared out by
// during an outage: the count learnt from Redis at the last heartbeat, or
// FallbackOptions.Replicas before the first.
func (f *Fallback) Replicas() int {
	if n := f.learnt.Load(); n > 0 {
		return int(n)
	}
	return f.o.Replicas
}

// share returns the part of limit this process allows during an outage.
func (f *Fallback) share(limit int) int { return max(1, limit/f.Replicas()) }

// Close stops the limiter's goroutine, waits for it, and takes the limiter
// out of the replica count in Redis (best effort). The limiter keeps
// deciding requests, from then on without heartbeats or probes.
func (f *Fallback) Close() error {
	f.closeOnce.Do(func() {
		f.cancel()
		<-f.done
		if !f.down.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), f.o.Timeout)
			defer cancel()
			_ = f.redis.client.ZRem(ctx, f.redis.prefix+replicasKey, f.redis.id).Err()
		}
	})
	return nil
}

// markDown switches the limiter to its fallback after err, unless it has
// fallen back already, and reports whether it switched.
func (f *Fallback) markDown(err error) bool {
	if f.down.Load() {
		return false
	}
	f.changeMu.Lock()
	defer f.changeMu.Unlock()
	if f.down.Load() {
		return false
	}
	f.downAt.Store(f.local.clock())
	f.down.Store(true)
	f.downSince = time.Now()
	source := "learnt from Redis"
	if f.learnt.Load() == 0 {
		source = "configured"
	}
	f.o.Logger.Warn("rate limiter: Redis unreachable; limiting per process with each key's cap shared out by replica count",
		"replicas", f.Replicas(), "replicas_source", source, "err", err)
	if f.o.OnChange != nil {
		f.o.OnChange(true)
	}
	return true
}

// markUp switches the limiter back to Redis after carried requests were
// written into it, and returns the local limiter's time of the switch.
func (f *Fallback) markUp(carried, keys int) int64 {
	f.changeMu.Lock()
	defer f.changeMu.Unlock()
	at := f.local.clock()
	if !f.down.Load() {
		return at
	}
	f.down.Store(false)
	f.o.Logger.Info("rate limiter: Redis is back; caps are shared through Redis again",
		"outage", time.Since(f.downSince).Round(time.Millisecond),
		"carried_requests", carried, "carried_keys", keys)
	if f.o.OnChange != nil {
		f.o.OnChange(false)
	}
	return at
}

// run beats while Redis is up and probes it with backoff while it is
// down, until Close.
func (f *Fallback) run() {
	defer close(f.done)
	backoff := f.o.ProbeMin
	timer := time.NewTimer(0) // the first beat at once
	defer timer.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-f.wake:
			// A request saw Redis fail: probe soon.
			backoff = f.o.ProbeMin
			timer.Reset(jitter(backoff))
			continue
		case <-timer.C:
		}
		if err := f.beat(); err != nil {
			if f.ctx.Err() != nil {
				return
			}
			f.markDown(err)
			timer.Reset(jitter(backoff))
			backoff = min(2*backoff, f.o.ProbeMax)
			continue
		}
		if f.down.Load() {
			if err := f.recover(); err != nil {
				if f.ctx.Err() != nil {
					return
				}
				timer.Reset(jitter(backoff))
				backoff = min(2*backoff, f.o.ProbeMax)
				continue
			}
		}
		backoff = f.o.ProbeMin
		timer.Reset(f.o.Heartbeat)
	}
}

// beat records the limiter as alive in Redis and learns the replica count.
func (f *Fallback) beat() error {
	ctx, cancel := context.WithTimeout(f.ctx, f.o.Timeout)
	defer cancel()
	live := livenessBeats * f.o.Heartbeat
	n, err := heartbeatScript.Run(ctx, f.redis.client, []string{f.redis.prefix + replicasKey},
		time.Now().UnixMicro(), f.redis.id, live.Microseconds(), live.Milliseconds()).Int64()
	if err != nil {
		return err
	}
	var candidate [16]byte
	_, _ = crand.Read(candidate[:])
	pipe := f.redis.client.Pipeline()
	pipe.SetNX(ctx, f.redis.prefix+epochKey, hex.EncodeToString(candidate[:]), 0)
	get := pipe.Get(ctx, f.redis.prefix+epochKey)
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	epoch := get.Val()
	if f.epoch != "" && epoch != f.epoch {
		f.lost = true
	}
	f.epoch = epoch
	f.noteCount(n)
	if f.lost && !f.down.Load() {
		// Redis lost its logs without this process noticing an outage (a quick restart):
		// write back what it allowed in the window.
		now := f.local.clock()
		if _, _, err := f.carry(now-int64(Window), now); err != nil {
			return err
		}
		f.lost = false
	}
	return nil
}

// noteCount takes n, the replica count a heartbeat read, as the replica
// count, unless it is lower than the count the limiter has and Redis has just
// come back (an outage of this limiter, or Redis's data lost): every live
// limiter beats again within livenessBeats heartbeats of the return, and
// until then a lower count is not believed. A replica that stopped meanwhile
// leaves the count that much later, which errs on the strict side.
func (f *Fallback) noteCount(n int64) {
	now := time.Now()
	if f.down.Load() || f.lost {
		f.trustLower = now.Add(livenessBeats * f.o.Heartbeat)
	}
	if n > 0 && (n >= f.learnt.Load() || !now.Before(f.trustLower)) {
		f.learnt.Store(n)
	}
}

// recover writes the requests allowed locally during the outage into Redis,
// switches back to Redis, then writes those allowed while the first write
// ran. If the first write fails, the limiter stays down.
func (f *Fallback) recover() error {
	// The request that found Redis down is recorded at downAt itself. A Redis that lost its
	// logs (its epoch changed) gets this process's whole window back, the requests it allowed
	// through Redis before the outage as well: otherwise a key could get one more cap in the
	// minute after (trial h2: 56 requests in a minute on a cap of 30).
	from := max(f.downAt.Load()-1, f.local.clock()-int64(Window))
	if f.lost {
		from = f.local.clock() - int64(Window)
	}
	mid := f.local.clock()
	n, keys, err := f.carry(from, mid)
	if err != nil {
		return err
	}
	f.lost = false
	up := f.markUp(n, keys)
	// Requests decided locally while the first write ran (later ones are
	// Redis's own); a failure here shows on the next request.
	_, _, _ = f.carry(mid, up)
	return nil
}

// carry adds the requests recorded locally in (from, to] to the Redis logs
// of their keys and returns how many requests of how many keys it wrote.
// Each request is named by its local time (carriedMember), so a request
// carried twice is counted once: a carry that Redis failing again cut short
// after some of its pipelines is done again from its start by the next
// probe, and with a new name for each, the requests of the first pipelines
// were counted twice, which kept their keys refused until they left the
// window.
func (f *Fallback) carry(from, to int64) (n, keys int, err error) {
	ctx, cancel := context.WithTimeout(f.ctx, carryTimeout)
	defer cancel()
	pipe := f.redis.client.Pipeline()
	flush := func() error {
		if pipe.Len() == 0 {
			return nil
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	f.local.recorded(from, to, func(key string, ts []int64) {
		if err != nil {
			return
		}
		zs := make([]redis.Z, len(ts))
		same := 0
		for i, t := range ts {
			if i > 0 && ts[i-1] == t {
				same++
			} else {
				same = 0
			}
			us := f.local.unixMicros(t)
			zs[i] = redis.Z{Score: float64(us), Member: f.redis.carriedMember(us, t, same)}
		}
		k := f.redis.prefix + key
		pipe.ZAdd(ctx, k, zs...)
		pipe.PExpire(ctx, k, Window)
		n += len(ts)
		keys++
		if pipe.Len() >= carryBatch {
			err = flush()
		}
	})
	if err == nil {
		err = flush()
	}
	return n, keys, err
}

// jitter returns a duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
