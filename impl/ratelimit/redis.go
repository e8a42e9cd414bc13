package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// allowScript decides one request atomically on the sorted set KEYS[1],
// whose members are allowed requests scored by their time in microseconds.
//
// ARGV: now (µs), window (µs), limit, unique member, key TTL (ms).
// Returns {allowed (0|1), count, oldest score, blocking score}: count is the
// number of requests in the window after this call, oldest the score of the
// oldest of them, and blocking (only when rejected) the score of the request
// whose leaving the window lets the next request through.
var allowScript = redis.NewScript(`
local key = KEYS[1]
local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - tonumber(ARGV[2]))
local count = redis.call('ZCARD', key)
if count < limit then
	redis.call('ZADD', key, ARGV[1], ARGV[4])
	redis.call('PEXPIRE', key, ARGV[5])
	local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
	return {1, count + 1, tonumber(oldest[2]), 0}
end
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
local blocking = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
return {0, count, tonumber(oldest[2]), tonumber(blocking[2])}
`)

// Redis is a Limiter whose sliding logs live in Redis, one sorted set per
// key named prefix+key, so that every process using the same server and
// prefix shares one cap per key. Each Allow call runs one Lua script
// (EVALSHA, falling back to EVAL once the script cache is empty).
//
// Request times come from the limiter's clock with microsecond precision,
// so the gateway processes sharing a server should have synchronised
// clocks; a skew between them shifts the window by the same amount. A
// key's set expires one Window after its newest allowed request.
//
// A Redis is safe for concurrent use.
type Redis struct {
	client redis.UniversalClient
	prefix string
	now    func() time.Time
	// id makes members unique across processes, seq within this one.
	id  string
	seq atomic.Uint64
}

var _ Limiter = (*Redis)(nil)

// NewRedis returns a limiter that keeps its sliding logs in Redis through
// client, under keys prefixed with prefix, and reads the time from now. A
// nil now means time.Now.
func NewRedis(client redis.UniversalClient, prefix string, now func() time.Time) *Redis {
	if now == nil {
		now = time.Now
	}
	var id [8]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails.
	return &Redis{client: client, prefix: prefix, now: now, id: hex.EncodeToString(id[:])}
}

// Allow records one request for key if fewer than limit requests for key
// were allowed in the last Window by any process sharing the Redis server
// and prefix. A limit of zero or less means unlimited and makes no call to
// Redis. On error the decision is not allowed and the error wraps the
// client's.
func (r *Redis) Allow(ctx context.Context, key string, limit int) (Decision, error) {
	if limit <= 0 {
		return unlimited, nil
	}
	now := r.now().UnixMicro()
	const window = int64(Window / time.Microsecond)

	res, err := allowScript.Run(ctx, r.client, []string{r.prefix + key},
		now, window, limit, r.member(now), Window.Milliseconds()).Int64Slice()
	if err != nil {
		return Decision{Limit: limit}, fmt.Errorf("ratelimit: redis allow %q: %w", key, err)
	}
	if len(res) != 4 {
		return Decision{Limit: limit}, fmt.Errorf("ratelimit: redis allow %q: unexpected reply %v", key, res)
	}
	cut := now - window
	// A request another process recorded between this call's reading of the clock and its
	// script can have a score a little after now (its clock was read later), which would make
	// the waits below exceed the window by that gap; they are capped at one Window, the most a
	// client can have to wait for a per-minute cap.
	micros := func(us int64) time.Duration { return min(time.Duration(us)*time.Microsecond, Window) }
	d := Decision{Limit: limit, ResetAfter: micros(res[2] - cut)}
	if res[0] == 1 {
		d.Allowed = true
		d.Remaining = max(limit-int(res[1]), 0)
		return d, nil
	}
	// After the script's trim every remaining score is above cut, so this
	// is positive; the guard only protects the contract.
	d.RetryAfter = max(micros(res[3]-cut), time.Microsecond)
	return d, nil
}

// member returns a sorted-set member for a request at now (µs) unique
// across the processes sharing the server.
func (r *Redis) member(now int64) string {
	b := make([]byte, 0, 48)
	b = strconv.AppendInt(b, now, 10)
	b = append(b, '-')
	b = append(b, r.id...)
	b = append(b, '-')
	b = strconv.AppendUint(b, r.seq.Add(1), 10)
	return string(b)
}

// carriedMember returns the sorted-set member of a request a Fallback allowed
// locally at local (its local limiter's time), at us (µs), the n-th of its
// key at that time: the same for the same request whenever it is carried,
// and unique across the processes sharing the server.
func (r *Redis) carriedMember(us, local int64, n int) string {
	b := make([]byte, 0, 64)
	b = strconv.AppendInt(b, us, 10)
	b = append(b, '-')
	b = append(b, r.id...)
	b = append(b, "-c"...)
	b = strconv.AppendInt(b, local, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(n), 10)
	return string(b)
}
