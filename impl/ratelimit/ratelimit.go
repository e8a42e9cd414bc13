package ratelimit

import (
	"context"
	"time"
)

// Window is the length of the rolling window over which requests are
// counted. A request at time t counts against requests in (t-Window, t].
const Window = 60 * time.Second

// Decision is the outcome of one Allow call.
type Decision struct {
	// Allowed reports whether the request fits under the limit and was
	// recorded.
	Allowed bool
	// Limit is the limit the request was checked against; it is zero when
	// the call was unlimited (limit <= 0).
	Limit int
	// Remaining is the number of requests still allowed in the current
	// window after this one; it is zero when the request was rejected or
	// the call was unlimited.
	Remaining int
	// RetryAfter is how long until the next request for the key would be
	// allowed. It is greater than zero only when Allowed is false.
	RetryAfter time.Duration
	// ResetAfter is how long until the oldest counted request leaves the
	// window. It is zero when nothing is counted.
	ResetAfter time.Duration
}

// Limiter limits requests per key over the rolling Window.
type Limiter interface {
	// Allow records one request for key if it fits under limit per rolling
	// minute. A limit of zero or less means unlimited: the decision is
	// allowed and nothing is recorded.
	Allow(ctx context.Context, key string, limit int) (Decision, error)
}

// unlimited is the decision returned for a limit of zero or less.
var unlimited = Decision{Allowed: true}
