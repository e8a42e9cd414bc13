package provider

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/apierror"
)

// TestShouldRetryFalseIsObeyed: a 429 with x-should-retry: false (OpenAI's and Anthropic's
// exhausted quota or credit) is not asked again (trial D5: three tries), the client is told not
// to retry either (NoRetry) and why, and the exchange may still try another expert (Retryable).
func TestShouldRetryFalseIsObeyed(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, 529, http.StatusInternalServerError} {
		u, n, slept := upstream(t, []int{status, 200}, http.Header{"X-Should-Retry": {"false"}})
		_, attempts, err := u.Call(context.Background(), []byte(`{}`), false, nil)
		var e *apierror.Error
		if !errors.As(err, &e) || attempts != 1 || n.Load() != 1 || len(*slept) != 0 {
			t.Fatalf("%d: err %v, attempts %d, calls %d, slept %v: want one try", status, err, attempts, n.Load(), *slept)
		}
		if !e.NoRetry || !Retryable(err) {
			t.Errorf("%d: NoRetry %v, Retryable %v: want both", status, e.NoRetry, Retryable(err))
		}
		if status == http.StatusTooManyRequests && e.Message != "the upstream is rate limited; its quota will not allow the request soon: retry later" {
			t.Errorf("429 message %q", e.Message)
		}
	}
	// x-should-retry: true does not make a refusal of the client's request retried.
	u, n, _ := upstream(t, []int{400, 200}, http.Header{"X-Should-Retry": {"true"}})
	if _, _, err := u.Call(context.Background(), []byte(`{}`), false, nil); err == nil || n.Load() != 1 || apierror.As(err).NoRetry {
		t.Errorf("400 with x-should-retry true: err %v after %d calls", err, n.Load())
	}
}

// TestLongRetryAfterIsExplained: an upstream's Retry-After beyond what a client is sent reaches
// the client's error whole (the edge bounds the header and adds x-should-retry: false), with the
// wait in its message.
func TestLongRetryAfterIsExplained(t *testing.T) {
	u, n, _ := upstream(t, []int{429}, http.Header{"Retry-After": {"3600"}})
	_, _, err := u.Call(context.Background(), []byte(`{}`), false, nil)
	e := apierror.As(err)
	if n.Load() != 1 || e.Kind != apierror.KindRateLimited || e.RetryAfter != time.Hour ||
		e.Message != "the upstream is rate limited; it asks for a wait of 60 minutes: retry later" {
		t.Errorf("after %d calls: %+v", n.Load(), e)
	}
	// A wait a client may be sent is not remarked on.
	u, _, _ = upstream(t, []int{429}, http.Header{"Retry-After": {"30"}})
	_, _, err = u.Call(context.Background(), []byte(`{}`), false, nil)
	if e := apierror.As(err); e.RetryAfter != 30*time.Second || e.NoRetry || e.Message != "the upstream is rate limited" {
		t.Errorf("30 s: %+v", e)
	}
}
