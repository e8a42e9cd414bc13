package client

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/tollgate/impl/backoff"
)

// Defaults of [DefaultRetryPolicy], following the design of the official
// Stainless-generated SDKs.
const (
	// DefaultMaxRetries is how many times a request is retried after its first attempt.
	DefaultMaxRetries = 3
	// DefaultInitialBackoff is the backoff before the first retry when the
	// gateway gives no retry hint; it doubles on every further retry.
	DefaultInitialBackoff = 500 * time.Millisecond
	// DefaultMaxBackoff caps the exponential backoff.
	DefaultMaxBackoff = 8 * time.Second
	// DefaultMaxDelay caps any delay between attempts, including one asked for
	// by retry-after-ms or Retry-After.
	DefaultMaxDelay = 30 * time.Second
)

// maxDrain bounds how much of a discarded answer is read so that its
// connection can be reused.
const maxDrain = 64 << 10

// RetryPolicy configures a [RetryTransport]. Start from [DefaultRetryPolicy]
// and change what you need; zero durations and nil functions take their
// defaults.
type RetryPolicy struct {
	// MaxRetries is how many times a request is retried after its first
	// attempt; 0 disables retries, so a request makes at most MaxRetries+1
	// attempts.
	MaxRetries int
	// InitialBackoff is the backoff before the first retry when the gateway
	// gives no usable retry hint; it doubles on every further retry.
	InitialBackoff time.Duration
	// MaxBackoff caps the exponential backoff before jitter.
	MaxBackoff time.Duration
	// MaxDelay caps every delay between attempts, including one asked for by
	// the gateway.
	MaxDelay time.Duration
	// Sleep waits for d or until ctx is done, returning ctx.Err() in the
	// latter case. Tests inject a recorder; nil means a timer-based wait.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) used for jitter; nil means math/rand/v2.
	Rand func() float64
	// Now returns the current time, used to turn an HTTP-date Retry-After into
	// a delay; nil means time.Now.
	Now func() time.Time
}

// DefaultRetryPolicy returns the default policy: 3 retries, backoff 0.5s
// doubling to at most 8s with up to 25% jitter subtracted, and no delay longer
// than 30s.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		MaxRetries:     DefaultMaxRetries,
		InitialBackoff: DefaultInitialBackoff,
		MaxBackoff:     DefaultMaxBackoff,
		MaxDelay:       DefaultMaxDelay,
	}
}

// withDefaults fills zero durations and nil functions.
func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxRetries < 0 {
		p.MaxRetries = 0
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = DefaultInitialBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = DefaultMaxBackoff
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.Sleep == nil {
		p.Sleep = sleepContext
	}
	if p.Rand == nil {
		p.Rand = rand.Float64
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	return p
}

// sleepContext waits for d or until ctx is done.
func sleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RetryTransport is an http.RoundTripper that retries requests the gateway
// asks to be retried. A response is retried when it carries
// x-should-retry: true, or when its status is 429, 502 or 529 and it does not
// carry x-should-retry: false; a transport error (no response at all) is
// retried unless the request's context is done. Only requests without a body
// or with a GetBody to replay it are retried. The delay before a retry is
// retry-after-ms, else Retry-After (seconds or an HTTP-date), else exponential
// backoff with jitter, and never more than the policy's MaxDelay. When the
// retries are exhausted the last response is returned unchanged.
type RetryTransport struct {
	base   http.RoundTripper
	policy RetryPolicy
}

// NewRetryTransport wraps base (http.DefaultTransport when nil) with the
// retry policy p.
func NewRetryTransport(base http.RoundTripper, p RetryPolicy) *RetryTransport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &RetryTransport{base: base, policy: p.withDefaults()}
}

// Policy returns the effective retry policy, with defaults filled in.
func (t *RetryTransport) Policy() RetryPolicy {
	return t.policy
}

// RoundTrip sends req, retrying as the policy allows. It does not modify req;
// retries send clones whose body comes from req.GetBody.
func (t *RetryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	p := t.policy
	if p.MaxRetries == 0 || !replayable(req) {
		return t.base.RoundTrip(req)
	}
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		attemptReq := req
		if attempt > 0 {
			attemptReq = req.Clone(ctx)
			if req.Body != nil && req.Body != http.NoBody {
				body, err := req.GetBody()
				if err != nil {
					return nil, fmt.Errorf("tollgate: replaying request body: %w", err)
				}
				attemptReq.Body = body
			}
		}
		resp, err := t.base.RoundTrip(attemptReq)
		if attempt >= p.MaxRetries || !shouldRetry(ctx, resp, err) {
			return resp, err
		}
		delay := t.delay(attempt, resp)
		if resp != nil {
			discard(resp)
		}
		if serr := p.Sleep(ctx, delay); serr != nil {
			if err != nil {
				return nil, fmt.Errorf("tollgate: waiting to retry after %w: %w", err, serr)
			}
			return nil, fmt.Errorf("tollgate: waiting to retry after status %d: %w", resp.StatusCode, serr)
		}
	}
}

// replayable reports whether req can be sent more than once.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// shouldRetry decides whether an attempt's outcome is retried.
func shouldRetry(ctx context.Context, resp *http.Response, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		return resp == nil
	}
	switch strings.ToLower(strings.TrimSpace(resp.Header.Get("x-should-retry"))) {
	case "true":
		return true
	case "false":
		return false
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, 529:
		return true
	}
	return false
}

// delay returns how long to wait before retry number attempt+1: the gateway's
// hint when it gives a positive one, otherwise exponential backoff with
// jitter, capped at MaxDelay.
func (t *RetryTransport) delay(attempt int, resp *http.Response) time.Duration {
	p := t.policy
	if resp != nil {
		if d, ok := backoff.RetryAfter(resp.Header, p.Now()); ok && d > 0 {
			return min(d, p.MaxDelay)
		}
	}
	return min(backoff.Exponential(p.InitialBackoff, p.MaxBackoff, attempt, p.Rand()), p.MaxDelay)
}

// discard drains a little of a response that will not be returned, so its
// connection can be reused, and closes it.
func discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	_ = resp.Body.Close()
}
