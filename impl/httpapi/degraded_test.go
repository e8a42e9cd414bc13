package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/metrics"
)

// skewedClock is the real clock moved forward by the test, to pass the staleness bound without
// waiting five minutes.
type skewedClock struct{ skew atomic.Int64 }

func (c *skewedClock) now() time.Time          { return time.Now().Add(time.Duration(c.skew.Load())) }
func (c *skewedClock) advance(d time.Duration) { c.skew.Add(int64(d)) }

// syncBuffer is a log destination the test reads while the gateway writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the lines holding substr.
func (b *syncBuffer) lines(substr string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// scrape reads one series from the metrics handler, as Prometheus would; absent means 0.
func scrape(t *testing.T, m *metrics.Metrics, series string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	match := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(rec.Body.String())
	if match == nil {
		return 0
	}
	v, err := strconv.ParseFloat(match[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// checkUnavailable asserts a 503 with Retry-After in the envelope of the route family of path,
// whose text says nothing of the database's own error.
func checkUnavailable(t *testing.T, what, path string, status int, h http.Header, body []byte) {
	t.Helper()
	if status != http.StatusServiceUnavailable {
		t.Errorf("%s: status %d, want 503 (%s)", what, status, body)
		return
	}
	if h.Get("Retry-After") != "2" || h.Get("retry-after-ms") != "2000" {
		t.Errorf("%s: Retry-After %q, retry-after-ms %q", what, h.Get("Retry-After"), h.Get("retry-after-ms"))
	}
	for _, leak := range []string{"dial", "connect:", "host=", "SQLSTATE", "socket", "refused"} {
		if bytes.Contains(body, []byte(leak)) {
			t.Errorf("%s: the answer quotes the database's error (%q): %s", what, leak, body)
		}
	}
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Errorf("%s: body is not JSON: %s", what, body)
		return
	}
	e, _ := env["error"].(map[string]any)
	switch {
	case path == "/api/mcp":
		if env["jsonrpc"] != "2.0" || e["code"] != float64(-32003) || e["message"] == "" {
			t.Errorf("%s: JSON-RPC envelope %s", what, body)
		}
	case strings.HasPrefix(path, "/v1/messages"):
		if env["type"] != "error" || e["type"] != "api_error" || e["message"] == "" || env["request_id"] == "" {
			t.Errorf("%s: Messages envelope %s", what, body)
		}
	default:
		if e["type"] != "service_unavailable_error" || e["code"] != "dependency_unavailable" || e["message"] == "" {
			t.Errorf("%s: chat-completions envelope %s", what, body)
		}
	}
}

// waitUntil polls cond, failing the test after a generous deadline (nothing here measures
// speed).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDatabaseOutageDegradedMode stops the gateway's PostgreSQL and starts it again. While it is
// down, keys the process already knows keep getting 200 on the simulator (chat, Messages
// streamed and not, MCP), with their caps; a key it has never seen gets 503 with Retry-After in
// each route's envelope; a known key still lists its models (from the grants cache) and reads
// its last known balance, marked stale; once the staleness bound has passed, known keys get 503 too. The degraded gauge,
// the counter of answers from memory, the readiness condition and one log line per change of
// state show it. After the
// restart everything is served again, and a key revoked in the database while this process
// could not hear of it (its notification lost) is refused: the reconnection re-checks what the
// process had cached.
func TestDatabaseOutageDegradedMode(t *testing.T) {
	o := pgtest.NewOutage(t)
	clk := &skewedClock{}
	m := metrics.New()
	logs := &syncBuffer{}
	g := apitest.Start(t, apitest.Options{ConnString: o.ConnString(), ChangeFeed: changefeed.Options{
		Now: clk.now, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	}})
	c := g.Client(t)
	known := g.NewTenant(t, "known", 100, 5_000_000)
	unseen, _ := g.NewKey(t, known.Account.ID, 0) // same account, never used before the outage
	victim := g.NewTenant(t, "victim", 0, 5_000_000)
	bearer := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

	chat := request{"POST", "/v1/chat/completions", `{"model":"service-flint","messages":[{"role":"user","content":"hi"}]}`}
	messages := request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`}
	streamed := request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`}
	mcpList := request{"POST", "/api/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`}
	served := []request{chat, messages, streamed, mcpList}
	billed := 0 // inference answers of 200 for the known account
	expect := func(phase string, key string, r request, want int) (http.Header, []byte) {
		t.Helper()
		status, h, body := do(t, c, g.URL, r, bearer(key))
		if status != want {
			t.Fatalf("%s: %s %s: status %d, want %d (%s)", phase, r.method, r.path, status, want, body)
		}
		if status == 200 && key != victim.Key && (r.path == "/v1/chat/completions" || r.path == "/v1/messages") {
			billed++
		}
		return h, body
	}

	// Before: both tenants are served, so the process knows their keys, caps, model grants,
	// and holds credit for their accounts.
	for _, r := range served {
		expect("before", known.Key, r, 200)
		expect("before", victim.Key, r, 200)
	}
	readiness := func() string { return g.Readiness.Report().Conditions["change_feed"].State }
	if scrape(t, m, "tollgate_degraded") != 0 || readiness() != "ok" {
		t.Fatalf("degraded before the outage (readiness %q)", readiness())
	}

	o.Stop()
	waitUntil(t, "the gateway notices the outage", func() bool { return scrape(t, m, "tollgate_degraded") == 1 })
	outageStart := time.Now()
	if rep := g.Readiness.Report(); readiness() != "degraded" || rep.Status != "degraded" {
		t.Fatalf("readiness during the outage: %+v", rep)
	}

	// During: known keys are served from memory, with their cap, for a few seconds in which the
	// gateway keeps failing to reconnect.
	for i := 0; i < 3 || time.Since(outageStart) < 2*time.Second; i++ {
		time.Sleep(200 * time.Millisecond) // well within the key's cap of 100 a minute
		for _, r := range served {
			h, _ := expect("database down", known.Key, r, 200)
			if r == chat && h.Get("x-ratelimit-limit-requests") != "100" {
				t.Fatalf("the key's cap is not applied while degraded: %q", h.Get("x-ratelimit-limit-requests"))
			}
		}
	}
	if n := scrape(t, m, `tollgate_stale_cache_served_total{cache="api_key"}`); n < 12 {
		t.Fatalf("%v key lookups answered from memory, want at least 12", n)
	}
	if n := scrape(t, m, `tollgate_stale_cache_served_total{cache="model_access"}`); n < 9 {
		t.Fatalf("%v model-access lookups answered from memory, want at least 9", n)
	}
	// A key the process has never seen cannot be checked: 503 in every envelope; on /api/mcp
	// the JSON-RPC error echoes the request's id (h4: it was null).
	for _, r := range []request{chat, messages, mcpList, validRequests["GET /v1/models"]} {
		status, h, body := do(t, c, g.URL, r, bearer(unseen))
		checkUnavailable(t, "unseen key on "+r.path, r.path, status, h, body)
		if r == mcpList && rpcIDOf(body) != "1" {
			t.Errorf("unseen key on /api/mcp: the 503's id is not the request's (1): %s", body)
		}
	}
	// A known key lists its models and reads its balance (issue 23, item 6): the models from
	// the grants cache inference uses, the balance as last read (here with the credit grant
	// of its requests before the outage), marked stale with the time it was read.
	expectModels := func(phase string) {
		t.Helper()
		_, body := expect(phase, known.Key, validRequests["GET /v1/models"], 200)
		if !strings.Contains(string(body), `"id":"service-flint"`) || !strings.Contains(string(body), `"id":"service-sonnet"`) {
			t.Fatalf("%s: the model list %s", phase, body)
		}
		_, body = expect(phase, known.Key, request{"GET", "/v1/models/service-flint", ""}, 200)
		if !strings.Contains(string(body), `"id":"service-flint"`) {
			t.Fatalf("%s: the model %s", phase, body)
		}
		expect(phase, known.Key, request{"GET", "/v1/models/no-such-model", ""}, 404)
	}
	expectModels("database down")
	_, credits := expect("database down", known.Key, validRequests["GET /v1/credits"], 200)
	var balance struct {
		BalanceMicros int64     `json:"balance_micros"`
		Stale         *bool     `json:"stale"`
		AsOf          time.Time `json:"as_of"`
	}
	if err := json.Unmarshal(credits, &balance); err != nil || balance.Stale == nil || !*balance.Stale ||
		balance.AsOf.IsZero() || balance.AsOf.After(outageStart) || balance.BalanceMicros <= 0 || balance.BalanceMicros > 5_000_000 {
		t.Fatalf("the balance during the outage: %s (%v)", credits, err)
	}
	t.Logf("served known keys for %v of outage", time.Since(outageStart).Round(time.Millisecond))

	// Beyond the staleness bound even a known key cannot be vouched for.
	clk.advance(changefeed.DefaultMaxStale + time.Second)
	for _, r := range []request{chat, messages, mcpList, validRequests["GET /v1/models"], validRequests["GET /v1/credits"]} {
		status, h, body := do(t, c, g.URL, r, bearer(known.Key))
		checkUnavailable(t, "known key beyond the staleness bound on "+r.path, r.path, status, h, body)
	}

	// The database comes back; meanwhile the victim's key is revoked there with its trigger off,
	// so no notification tells this process: only the re-check after reconnecting can.
	o.Start()
	revokeSilently(t, o.ConnString(), victim.KeyID.String())
	waitUntil(t, "the gateway reconnects", func() bool { return scrape(t, m, "tollgate_degraded") == 0 })
	if readiness() != "ok" {
		t.Fatalf("readiness after the outage: %q", readiness())
	}

	for _, r := range served {
		expect("after", known.Key, r, 200)
		expect("after", unseen, r, 200)
	}
	for _, r := range []request{chat, messages, mcpList} {
		status, h, body := do(t, c, g.URL, r, bearer(victim.Key))
		checkUnauthenticated(t, r.method+" "+r.path+" [revoked while cut off]", status, h, body)
	}
	expectModels("after")
	if _, credits := expect("after", known.Key, validRequests["GET /v1/credits"], 200); strings.Contains(string(credits), "stale") {
		t.Errorf("a fresh balance marked stale: %s", credits)
	}

	// Credit is another part's (impl/billing); what it did with the answers given during the
	// outage is reported, not judged, here.
	var records int64
	for range 50 {
		n, _, err := g.Store.UsageTotals(context.Background(), known.Account.ID)
		if err != nil {
			t.Fatal(err)
		}
		if records = n; records >= int64(billed) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("usage records of the known account after the outage: %d for %d inference answers of 200", records, billed)

	lost, restored := logs.lines("change notifications lost"), logs.lines("change notifications restored")
	if len(lost) != 1 || len(restored) != 1 || !strings.Contains(lost[0], "level=WARN") {
		t.Fatalf("log lines of the changes of state: lost %q, restored %q", lost, restored)
	}
}

// revokeSilently revokes a key in the database with triggers off (as a replica applies
// changes), so that no notification announces it.
func revokeSilently(t *testing.T, connString, keyID string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, "SET session_replication_role = replica; UPDATE api_keys SET revoked_at = now() WHERE id = '"+keyID+"'")
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("revoke %s: %v (%s)", keyID, err, tag)
	}
}
