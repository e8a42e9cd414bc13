package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/client"
)

func TestRetryAfterSecondsIsHonoured(t *testing.T) {
	var attempts atomic.Int32
	c, rec := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.Header().Set("Retry-After", "2")
			w.Header().Set("x-request-id", "req_429")
			writeOpenAIError(w, http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded", "slow down")
			return
		}
		writeCredits(w)
	}))

	got, err := c.Credits(context.Background())
	if err != nil {
		t.Fatalf("Credits: %v", err)
	}
	if got.BalanceMicros != 12_500_000 || got.BalanceUsd != 12.5 {
		t.Errorf("Credits = %+v", got)
	}
	if n := attempts.Load(); n != 2 {
		t.Errorf("attempts = %d, want 2", n)
	}
	if d := rec.Delays(); len(d) != 1 || d[0] != 2*time.Second {
		t.Errorf("delays = %v, want [2s]", d)
	}
}

func TestRetryAfterHTTPDateIsHonoured(t *testing.T) {
	clock := &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	var attempts atomic.Int32
	c, rec := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.Header().Set("Retry-After", clock.Now().Add(5*time.Second).Format(http.TimeFormat))
			writeOpenAIError(w, 529, "overloaded_error", "", "overloaded")
			return
		}
		writeCredits(w)
	}), client.WithClock(clock.Now))

	if _, err := c.Credits(context.Background()); err != nil {
		t.Fatalf("Credits: %v", err)
	}
	if d := rec.Delays(); len(d) != 1 || d[0] != 5*time.Second {
		t.Errorf("delays = %v, want [5s]", d)
	}
}

func TestRetryAfterMsWinsOverRetryAfter(t *testing.T) {
	var attempts atomic.Int32
	c, rec := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.Header().Set("Retry-After", "7")
			w.Header().Set("retry-after-ms", "150")
			writeOpenAIError(w, http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded", "slow down")
			return
		}
		writeCredits(w)
	}))

	if _, err := c.Credits(context.Background()); err != nil {
		t.Fatalf("Credits: %v", err)
	}
	if d := rec.Delays(); len(d) != 1 || d[0] != 150*time.Millisecond {
		t.Errorf("delays = %v, want [150ms]", d)
	}
}

func TestRetryAfterIsCappedAtMaxDelay(t *testing.T) {
	var attempts atomic.Int32
	c, rec := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.Header().Set("Retry-After", "3600")
			writeOpenAIError(w, http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded", "slow down")
			return
		}
		writeCredits(w)
	}))

	if _, err := c.Credits(context.Background()); err != nil {
		t.Fatalf("Credits: %v", err)
	}
	if d := rec.Delays(); len(d) != 1 || d[0] != client.DefaultMaxDelay {
		t.Errorf("delays = %v, want [%s]", d, client.DefaultMaxDelay)
	}
}

func TestBadGatewayRetriedWithGrowingBackoff(t *testing.T) {
	var attempts atomic.Int32
	c, rec := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) <= 2 {
			writeOpenAIError(w, http.StatusBadGateway, "upstream_error", "", "upstream failed")
			return
		}
		writeCredits(w)
	}))

	if _, err := c.Credits(context.Background()); err != nil {
		t.Fatalf("Credits: %v", err)
	}
	if n := attempts.Load(); n != 3 {
		t.Errorf("attempts = %d, want 3", n)
	}
	d := rec.Delays()
	if len(d) != 2 {
		t.Fatalf("delays = %v, want 2 of them", d)
	}
	// Backoff 0.5s then 1s, each less up to 25% jitter.
	if d[0] < 375*time.Millisecond || d[0] > 500*time.Millisecond {
		t.Errorf("first delay %s outside [375ms, 500ms]", d[0])
	}
	if d[1] < 750*time.Millisecond || d[1] > time.Second {
		t.Errorf("second delay %s outside [750ms, 1s]", d[1])
	}
	if d[1] <= d[0] {
		t.Errorf("delays %v do not grow", d)
	}
}

func TestBackoffJitterAndCap(t *testing.T) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		writeOpenAIError(w, http.StatusBadGateway, "upstream_error", "", "upstream failed")
	}))
	t.Cleanup(srv.Close)
	rec := &sleepRecorder{}
	p := client.DefaultRetryPolicy()
	p.MaxRetries = 7
	p.Sleep = rec.Sleep
	p.Rand = func() float64 { return 0.5 } // subtract 12.5%
	c, err := client.New(srv.URL, testKey, client.WithRetryPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Credits(context.Background())
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadGateway {
		t.Fatalf("err = %v, want a 502 *APIError", err)
	}
	want := []time.Duration{}
	for _, base := range []time.Duration{500, 1000, 2000, 4000, 8000, 8000, 8000} {
		want = append(want, base*time.Millisecond*7/8)
	}
	got := rec.Delays()
	if len(got) != len(want) {
		t.Fatalf("delays = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("delay %d = %s, want %s", i, got[i], want[i])
		}
	}
	if n := attempts.Load(); n != 8 {
		t.Errorf("attempts = %d, want 8", n)
	}
}

func TestOverloadedBeyondMaxRetriesReturnsAPIError(t *testing.T) {
	var attempts atomic.Int32
	c, rec := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		w.Header().Set("x-request-id", "req_529")
		writeOpenAIError(w, 529, "overloaded_error", "", "upstream overloaded")
	}))

	_, err := c.Models(context.Background())
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v (%T), want *APIError", err, err)
	}
	if apiErr.Status != 529 || apiErr.Type != "overloaded_error" || apiErr.Message != "upstream overloaded" || apiErr.RequestID != "req_529" {
		t.Errorf("APIError = %+v", apiErr)
	}
	if n := attempts.Load(); n != client.DefaultMaxRetries+1 {
		t.Errorf("attempts = %d, want %d", n, client.DefaultMaxRetries+1)
	}
	if d := rec.Delays(); len(d) != client.DefaultMaxRetries {
		t.Errorf("delays = %v, want %d of them", d, client.DefaultMaxRetries)
	}
}

func TestShouldRetryFalseIsNotRetried(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusTooManyRequests} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var attempts atomic.Int32
			c, rec := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				attempts.Add(1)
				w.Header().Set("x-should-retry", "false")
				w.Header().Set("x-request-id", "req_no")
				writeOpenAIError(w, status, "authentication_error", "invalid_api_key", "bad key")
			}))

			_, err := c.Credits(context.Background())
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) || apiErr.Status != status || apiErr.Code != "invalid_api_key" || apiErr.RequestID != "req_no" {
				t.Fatalf("err = %#v, want a %d *APIError", err, status)
			}
			if n := attempts.Load(); n != 1 {
				t.Errorf("attempts = %d, want 1", n)
			}
			if d := rec.Delays(); len(d) != 0 {
				t.Errorf("delays = %v, want none", d)
			}
		})
	}
}

func TestOtherStatusesAreNotRetried(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusPaymentRequired, http.StatusNotFound, http.StatusInternalServerError, http.StatusNotImplemented} {
		var attempts atomic.Int32
		c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			attempts.Add(1)
			writeOpenAIError(w, status, "x", "", "no")
		}))
		_, err := c.Credits(context.Background())
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != status {
			t.Errorf("%d: err = %v", status, err)
		}
		if n := attempts.Load(); n != 1 {
			t.Errorf("%d: attempts = %d, want 1", status, n)
		}
	}
}

func TestShouldRetryTrueIsRetried(t *testing.T) {
	var attempts atomic.Int32
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.Header().Set("x-should-retry", "true")
			writeOpenAIError(w, http.StatusInternalServerError, "server_error", "", "transient")
			return
		}
		writeCredits(w)
	}))
	if _, err := c.Credits(context.Background()); err != nil {
		t.Fatalf("Credits: %v", err)
	}
	if n := attempts.Load(); n != 2 {
		t.Errorf("attempts = %d, want 2", n)
	}
}

func TestPostBodyIsReplayedIdentically(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies []string
	)
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		n := len(bodies)
		mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			t.Errorf("got %s %s", r.Method, r.URL.Path)
		}
		if n < 3 {
			w.Header().Set("retry-after-ms", "1")
			writeOpenAIError(w, http.StatusTooManyRequests, "rate_limit_error", "", "later")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "service-flint", "choices": []any{}})
	}))

	body := `{"model":"service-flint","messages":[{"role":"user","content":"hi"}]}`
	resp, err := c.API.CreateChatCompletionWithResponse(context.Background(), api.CreateChatCompletionJSONRequestBody(body))
	if err != nil {
		t.Fatalf("CreateChatCompletion: %v", err)
	}
	if resp.StatusCode() != http.StatusOK {
		t.Fatalf("status = %d", resp.StatusCode())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 3 {
		t.Fatalf("attempts = %d, want 3", len(bodies))
	}
	for i, b := range bodies {
		if b != bodies[0] || !strings.Contains(b, `"service-flint"`) {
			t.Errorf("body %d = %q, want %q", i, b, bodies[0])
		}
	}
}

// onceReader is a body the transport cannot replay: it has no GetBody.
type onceReader struct{ io.Reader }

func TestUnreplayableBodyIsNotRetried(t *testing.T) {
	var attempts atomic.Int32
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		writeOpenAIError(w, http.StatusBadGateway, "upstream_error", "", "upstream failed")
	}))
	resp, err := c.API.CreateChatCompletionWithBody(context.Background(), "application/json",
		onceReader{bytes.NewReader([]byte(`{"model":"service-flint"}`))})
	if err != nil {
		t.Fatalf("CreateChatCompletionWithBody: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	apiErr, ok := client.ErrorFromResponse(resp, nil).(*client.APIError)
	if !ok || apiErr.Status != http.StatusBadGateway || apiErr.Type != "upstream_error" {
		t.Errorf("ErrorFromResponse = %v", apiErr)
	}
	if n := attempts.Load(); n != 1 {
		t.Errorf("attempts = %d, want 1", n)
	}
}

func TestContextCancelledDuringBackoffReturnsPromptly(t *testing.T) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		w.Header().Set("Retry-After", "20")
		writeOpenAIError(w, http.StatusTooManyRequests, "rate_limit_error", "", "later")
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, testKey) // the real, timer-based sleeper
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)

	start := time.Now()
	_, err = c.Credits(ctx)
	elapsed := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if elapsed > 5*time.Second {
		t.Errorf("returned after %s, want promptly after cancellation", elapsed)
	}
	if n := attempts.Load(); n != 1 {
		t.Errorf("attempts = %d, want 1", n)
	}
}

// flakyTransport fails its first failures round trips with a connection error.
type flakyTransport struct {
	failures atomic.Int32
	base     http.RoundTripper
}

// RoundTrip fails while failures remain, then delegates to base.
func (f *flakyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.failures.Add(-1) >= 0 {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errors.New("dial tcp: connection refused")
	}
	return f.base.RoundTrip(req)
}

func TestConnectionErrorsAreRetried(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeCredits(w) }))
	t.Cleanup(srv.Close)
	ft := &flakyTransport{base: http.DefaultTransport}
	ft.failures.Store(2)
	rec := &sleepRecorder{}
	p := client.DefaultRetryPolicy()
	p.Sleep = rec.Sleep
	hc := &http.Client{Transport: ft}
	c, err := client.New(srv.URL, testKey, client.WithHTTPClient(hc), client.WithRetryPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	if hc.Transport != ft {
		t.Error("WithHTTPClient modified the caller's client")
	}
	if _, err := c.Credits(context.Background()); err != nil {
		t.Fatalf("Credits: %v", err)
	}
	if d := rec.Delays(); len(d) != 2 {
		t.Errorf("delays = %v, want 2", d)
	}

	ft.failures.Store(100)
	if _, err := c.Credits(context.Background()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("err = %v, want the connection error once retries are exhausted", err)
	}
	if left := ft.failures.Load(); left != 100-int32(client.DefaultMaxRetries+1) {
		t.Errorf("attempts = %d, want %d", 100-left, client.DefaultMaxRetries+1)
	}
}

func TestMaxRetriesZeroDisablesRetries(t *testing.T) {
	var attempts atomic.Int32
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		writeOpenAIError(w, http.StatusTooManyRequests, "rate_limit_error", "", "later")
	}), client.WithMaxRetries(0))
	var apiErr *client.APIError
	if _, err := c.Credits(context.Background()); !errors.As(err, &apiErr) || apiErr.Status != 429 {
		t.Errorf("err = %v", err)
	}
	if n := attempts.Load(); n != 1 {
		t.Errorf("attempts = %d, want 1", n)
	}
}
