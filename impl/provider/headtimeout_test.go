package provider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/upstreamconn"
)

// silentUpstream takes each request whole and never answers it; it counts the requests.
func silentUpstream(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestHeadTimeoutIsNotRetried: an upstream that took the request and sends no head within the
// transport's header timeout is asked once, not MaxAttempts times (trial D4: three 10-minute
// waits per expert, the prompt sent, and maybe billed, each time). The client's error is a 504
// timeout, and the exchange may still try another expert (Retryable). Both transports of
// NewTransport are covered: upstreamconn for http:// and net/http's for the others.
func TestHeadTimeoutIsNotRetried(t *testing.T) {
	transports := map[string]http.RoundTripper{
		"upstreamconn": &upstreamconn.Transport{ResponseHeaderTimeout: 200 * time.Millisecond},
		"net/http":     &http.Transport{ResponseHeaderTimeout: 200 * time.Millisecond},
	}
	for name, transport := range transports {
		t.Run(name, func(t *testing.T) {
			srv, n := silentUpstream(t)
			u := &Upstream{Name: "p", Kind: llm.FormatChat, BaseURL: srv.URL + "/v1", Transport: transport,
				Retry: RetryPolicy{Sleep: func(context.Context, time.Duration) error { return nil }}}
			_, attempts, err := u.Call(context.Background(), []byte(`{"model":"m","messages":[]}`), false, nil)
			var e *apierror.Error
			if !errors.As(err, &e) {
				t.Fatalf("err %v: no client error", err)
			}
			if attempts != 1 || n.Load() != 1 {
				t.Errorf("attempts %d, upstream saw %d: want 1 and 1", attempts, n.Load())
			}
			if e.Kind != apierror.KindGatewayTimeout || e.Kind.Status() != http.StatusGatewayTimeout {
				t.Errorf("kind %v (status %d), want the gateway timeout (504)", e.Kind, e.Kind.Status())
			}
			if e.Message != "the upstream timed out: it accepted the request but did not start its answer in time" {
				t.Errorf("message %q", e.Message)
			}
			if !Retryable(err) {
				t.Error("Retryable is false: the exchange would not try another expert")
			}
			if ErrorType(err) != "connection" {
				t.Errorf("ErrorType %q, want connection (no status was answered)", ErrorType(err))
			}
		})
	}
}

// TestConnectTimeoutIsNotAHeadTimeout: a transport's timeout before the request was sent (a
// dial's) is a connection failure, retried as before.
func TestConnectTimeoutIsNotAHeadTimeout(t *testing.T) {
	dialTimeout := &timeoutError{}
	if isHeadTimeout(dialTimeout) {
		t.Error("a dial timeout counts as a head timeout")
	}
	if !isHeadTimeout(upstreamconn.ErrResponseHeaderTimeout) || !isHeadTimeout(&timeoutError{msg: "net/http: timeout awaiting response headers"}) {
		t.Error("a header timeout is not recognised")
	}
}

// timeoutError is a net.Error that timed out, with the given text.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string {
	if e.msg == "" {
		return "dial tcp 10.0.0.1:443: i/o timeout"
	}
	return e.msg
}
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }
