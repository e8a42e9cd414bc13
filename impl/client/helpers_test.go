package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/client"
)

// testKey is a well-formed looking API key; the client does not validate it.
const testKey = "tgk_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGabcdef"

// sleepRecorder is an injected sleeper that records the delays it is asked
// for and returns at once.
type sleepRecorder struct {
	mu     sync.Mutex
	delays []time.Duration
}

// Sleep records d and returns without waiting.
func (s *sleepRecorder) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	return ctx.Err()
}

// Delays returns a copy of the recorded delays.
func (s *sleepRecorder) Delays() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.delays...)
}

// fakeClock is a settable clock for cache TTL tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// Now returns the clock's time.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newTestClient starts an httptest server with h and returns a client for it
// whose retry sleeps are recorded instead of waited.
func newTestClient(t *testing.T, h http.Handler, opts ...client.Option) (*client.Client, *sleepRecorder) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	rec := &sleepRecorder{}
	p := client.DefaultRetryPolicy()
	p.Sleep = rec.Sleep
	c, err := client.New(srv.URL, testKey, append([]client.Option{client.WithRetryPolicy(p)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, rec
}

// writeJSON writes v as a JSON answer with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeOpenAIError writes the gateway's {"error":{...}} envelope.
func writeOpenAIError(w http.ResponseWriter, status int, typ, code, msg string) {
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	writeJSON(w, status, map[string]any{"error": e})
}

// credits writes a credit balance answer.
func writeCredits(w http.ResponseWriter) {
	w.Header().Set("x-request-id", "req_ok")
	writeJSON(w, http.StatusOK, map[string]any{"balance_micros": 12_500_000, "balance_usd": 12.5})
}

// modelList is the body of a /v1/models answer with the given ids.
func modelList(ids ...string) map[string]any {
	data := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		data = append(data, map[string]any{"id": id, "object": "model", "created": 1700000000, "owned_by": "tollgate"})
	}
	return map[string]any{"object": "list", "data": data, "has_more": false}
}
