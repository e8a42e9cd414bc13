package httpapi_test

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/redistest"
	"github.com/tollgate/tollgate/impl/ratelimit"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// checkRateLimited asserts a 429 in the route's envelope whose message states retrySeconds.
func checkRateLimited(t *testing.T, op string, status int, h http.Header, body []byte, retrySeconds string) {
	t.Helper()
	if status != http.StatusTooManyRequests {
		t.Fatalf("%s: status %d, want 429 (%s)", op, status, body)
	}
	if retrySeconds != "" && h.Get("Retry-After") != retrySeconds {
		t.Errorf("%s: Retry-After %q, want %q", op, h.Get("Retry-After"), retrySeconds)
	}
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("%s: %s", op, body)
	}
	e, _ := env["error"].(map[string]any)
	msg, _ := e["message"].(string)
	switch {
	case opPath(op) == "/api/mcp":
		if e["code"] != float64(-32029) {
			t.Errorf("%s: JSON-RPC error %s", op, body)
		}
	case strings.HasPrefix(opPath(op), "/v1/messages"):
		if env["type"] != "error" || e["type"] != "rate_limit_error" {
			t.Errorf("%s: Messages envelope %s", op, body)
		}
	default:
		if e["code"] != "rate_limit_exceeded" {
			t.Errorf("%s: chat-completions envelope %s", op, body)
		}
	}
	if retrySeconds != "" && !strings.Contains(msg, "retry in "+retrySeconds+" seconds") {
		t.Errorf("%s: message %q does not state the retry interval %ss", op, msg, retrySeconds)
	}
}

// TestRPMCapRollingWindow: with cap N, N requests pass, the next gets 429 with the retry
// seconds; once the oldest leaves the window, requests pass again.
func TestRPMCapRollingWindow(t *testing.T) {
	clock := newFakeClock()
	g := apitest.Start(t, apitest.Options{Limiter: ratelimit.NewLocal(clock.Now)})
	tenant := g.NewTenant(t, "acme", 3, 0)
	c := g.Client(t)
	credits := request{"GET", "/v1/credits", ""}
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	for i := range 3 {
		if status, _, body := do(t, c, g.URL, credits, bearer); status != 200 {
			t.Fatalf("request %d: %d %s", i+1, status, body)
		}
		clock.Advance(10 * time.Second)
	}
	// Now t0+30s: the oldest request (t0) leaves the window at t0+60s.
	status, h, body := do(t, c, g.URL, credits, bearer)
	checkRateLimited(t, "GET /v1/credits", status, h, body, "30")
	clock.Advance(29*time.Second + 900*time.Millisecond) // t0+59.9s: still inside the window
	status, h, body = do(t, c, g.URL, credits, bearer)
	checkRateLimited(t, "GET /v1/credits", status, h, body, "1")
	clock.Advance(200 * time.Millisecond) // t0+60.1s: the first request has left
	if status, _, body := do(t, c, g.URL, credits, bearer); status != 200 {
		t.Fatalf("after the oldest left the window: %d %s", status, body)
	}
	// The window now holds t0+10s, t0+20s, t0+60.1s: the next passes at t0+70s.
	status, h, body = do(t, c, g.URL, credits, bearer)
	checkRateLimited(t, "GET /v1/credits", status, h, body, "10")
	// Another key of the same account has its own cap.
	other, _ := g.NewKey(t, tenant.Account.ID, 1)
	if status, _, body := do(t, c, g.URL, credits, map[string]string{"Authorization": "Bearer " + other}); status != 200 {
		t.Fatalf("another key: %d %s", status, body)
	}
}

// TestRPMCapOnEveryRoute: a key capped at one request per minute is limited on every route, in
// the route's envelope.
func TestRPMCapOnEveryRoute(t *testing.T) {
	clock := newFakeClock()
	g := apitest.Start(t, apitest.Options{Limiter: ratelimit.NewLocal(clock.Now)})
	tenant := g.NewTenant(t, "acme", 1, 1_000_000)
	c := g.Client(t)
	ops := apitest.Operations(t)
	sort.Strings(ops)
	for _, op := range ops {
		key, _ := g.NewKey(t, tenant.Account.ID, 1)
		bearer := map[string]string{"Authorization": "Bearer " + key}
		if status, _, body := do(t, c, g.URL, validRequests[op], bearer); status == http.StatusTooManyRequests {
			t.Fatalf("%s: first request limited: %s", op, body)
		}
		before := time.Now()
		status, h, body := do(t, c, g.URL, validRequests[op], bearer)
		checkRateLimited(t, op, status, h, body, "60")
		// The limit's headers, in the route's family: Anthropic's names and an RFC 3339 reset
		// time on the Messages routes (wire-protocols.md §3.1), OpenAI's elsewhere.
		if strings.HasPrefix(opPath(op), "/v1/messages") {
			reset, err := time.Parse(time.RFC3339, h.Get("anthropic-ratelimit-requests-reset"))
			if h.Get("anthropic-ratelimit-requests-limit") != "1" || h.Get("anthropic-ratelimit-requests-remaining") != "0" || err != nil ||
				reset.Before(before.Truncate(time.Second)) || reset.After(time.Now().Add(61*time.Second)) || h.Get("x-ratelimit-limit-requests") != "" {
				t.Errorf("%s: rate-limit headers %v", op, h)
			}
		} else if h.Get("x-ratelimit-limit-requests") != "1" || h.Get("x-ratelimit-remaining-requests") != "0" ||
			h.Get("x-ratelimit-reset-requests") != "60s" || h.Get("anthropic-ratelimit-requests-limit") != "" {
			t.Errorf("%s: rate-limit headers %v", op, h)
		}
	}
}

// TestRPMCapSharedThroughRedis: two gateways sharing one Redis share one cap.
func TestRPMCapSharedThroughRedis(t *testing.T) {
	clock := newFakeClock()
	prefix := redistest.Prefix(t)
	a := apitest.Start(t, apitest.Options{Limiter: ratelimit.NewRedis(redistest.NewClient(t), prefix, clock.Now)})
	b := apitest.Start(t, apitest.Options{ConnString: a.ConnString, Limiter: ratelimit.NewRedis(redistest.NewClient(t), prefix, clock.Now)})
	tenant := a.NewTenant(t, "acme", 5, 0)
	credits := request{"GET", "/v1/credits", ""}
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	for i, g := range []*apitest.Gateway{a, a, a, b, b} {
		if status, _, body := do(t, g.Client(t), g.URL, credits, bearer); status != 200 {
			t.Fatalf("request %d: %d %s", i+1, status, body)
		}
		clock.Advance(time.Second)
	}
	for _, g := range []*apitest.Gateway{a, b} {
		status, h, body := do(t, g.Client(t), g.URL, credits, bearer)
		checkRateLimited(t, "GET /v1/credits", status, h, body, "55")
	}
	clock.Advance(55 * time.Second)
	if status, _, body := do(t, b.Client(t), b.URL, credits, bearer); status != 200 {
		t.Fatalf("after the window moved: %d %s", status, body)
	}
}
