package pgbouncertest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/pgbouncertest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

func TestMain(m *testing.M) { apitest.Main(m) }

// TestGatewayBehindPgBouncer runs two real gateways (apitest, as tollgate serve assembles one)
// on one database through a PgBouncer in session pooling, the mode docs/operations.md supports:
// a metered request on one is billed (its usage record written, the balance charged), and a key
// revoked through the other is refused by the first within seconds (the change feed's LISTEN
// works through the pooler). Before the store dropped the session bounds PgBouncer refuses, no
// gateway could open its store through it.
func TestGatewayBehindPgBouncer(t *testing.T) {
	ctx := context.Background()
	bouncer := pgbouncertest.Start(t, pgtest.ConnString(t), pgbouncertest.Options{Mode: pgbouncertest.Session})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pgbouncer's log:\n%s", bouncer.Log())
		}
	})
	serving := apitest.Start(t, apitest.Options{ConnString: bouncer.URL()})
	revoking := apitest.Start(t, apitest.Options{ConnString: bouncer.URL()})
	const credit = 10_000_000
	tenant := revoking.NewTenant(t, "pooled", 0, credit)
	client := serving.Client(t)
	send := func() (int, string) {
		t.Helper()
		req, err := http.NewRequest("POST", serving.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"service-flint","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tenant.Key)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if status, body := send(); status != http.StatusOK {
		t.Fatalf("a request through the gateway behind PgBouncer: %d %s", status, body)
	}
	waitFor(t, "the request's usage record", func() bool {
		n, cost, err := serving.Store.UsageTotals(ctx, tenant.Account.ID)
		return err == nil && n == 1 && cost > 0
	})
	_, cost, err := serving.Store.UsageTotals(ctx, tenant.Account.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ledger, err := serving.Store.LedgerSum(ctx, tenant.Account.ID); err != nil || ledger != credit-cost {
		t.Errorf("the ledger sums to %d (%v), want the credit less the request's cost, %d", ledger, err, credit-cost)
	}

	if _, err := revoking.Accounts.Revoke(ctx, tenant.Account.ID, tenant.KeyID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other gateway to refuse the revoked key", func() bool {
		status, _ := send()
		return status == http.StatusUnauthorized
	})
}

// TestRevocationBehindTransactionPooling runs the change feed and the key cache of a gateway
// (changefeed and auth, as tollgate serve assembles them) on a store opened through a PgBouncer
// in transaction pooling (with default_query_exec_mode=cache_describe, with which the request
// path works there), and revokes a key it has authenticated through a gateway on the database
// directly. PgBouncer takes the feed's LISTEN but delivers no notification: the feed must not
// count as live (it goes degraded within a heartbeat and says why, once), and the key cache,
// degraded with the default MaxStale (5 minutes), must re-check its entry with the database
// that still answers: the revoked key is refused within seconds (a Heartbeat and a request),
// where a feed believed live left it accepted until the entry's TTL (5 minutes), and a degraded
// cache that answered from memory without re-checking, until MaxStale. A key the process has
// never seen still authenticates, from the database.
//
// (Two gateways as in TestGatewayBehindPgBouncer would not do here: apitest waits for the
// feed to be live, and the migrations of a gateway through transaction pooling can leave River's
// advisory lock held; see docs/operations.md.)
func TestRevocationBehindTransactionPooling(t *testing.T) {
	ctx := context.Background()
	direct := pgtest.ConnString(t)
	bouncer := pgbouncertest.Start(t, direct, pgbouncertest.Options{Mode: pgbouncertest.Transaction})
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the feed's log:\n%s\npgbouncer's log:\n%s", logs.String(), bouncer.Log())
		}
	})
	revoking := apitest.Start(t, apitest.Options{ConnString: direct})
	tenant := revoking.NewTenant(t, "pooled", 0, 10_000_000)

	st, err := store.Open(ctx, bouncer.URL()+"&default_query_exec_mode=cache_describe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	const heartbeat, heartbeatWait = 200 * time.Millisecond, time.Second
	feed := changefeed.NewWithOptions(st, changefeed.Options{Heartbeat: heartbeat, HeartbeatWait: heartbeatWait,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}) // the default MaxStale, 5 minutes
	authn := auth.New(st, feed, auth.Options{}) // the default TTL, 5 minutes
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { feed.Run(runCtx) })
	t.Cleanup(func() { stop(); wg.Wait() })
	// The key is first read once the feed listens (its LISTEN taken, in milliseconds), so that
	// its entry is of the feed's connection, not re-checked at the connection: a feed that
	// believes itself live says so at once, one that proves its delivery never does.
	for deadline := time.Now().Add(time.Second); !feed.Live() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}

	if _, err := authn.Authenticate(ctx, "Bearer "+tenant.Key); err != nil {
		t.Fatalf("the key before its revocation: %v", err)
	}
	if _, err := revoking.Accounts.Revoke(ctx, tenant.Account.ID, tenant.KeyID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	// Two heartbeats and their wait: the feed has sent its notification and not received it.
	time.Sleep(2 * (heartbeat + heartbeatWait))
	if degraded, _ := feed.Degraded(); !degraded || feed.Live() {
		_, err := authn.Authenticate(ctx, "Bearer "+tenant.Key)
		t.Fatalf("behind transaction pooling the feed reports itself live after its heartbeats, though no notification reaches it (the revoked key authenticates: %v)", err)
	}
	waitFor(t, "the revoked key to be refused", func() bool {
		_, err := authn.Authenticate(ctx, "Bearer "+tenant.Key)
		return errors.Is(err, auth.ErrUnknown)
	})
	if took, bound := time.Since(revoked), 2*(heartbeat+heartbeatWait)+2*time.Second; took > bound {
		t.Errorf("the revoked key was refused %v after its revocation, beyond %v (two heartbeats and their wait, then a re-check)", took, bound)
	}
	other, _ := revoking.NewKey(t, tenant.Account.ID, 0)
	if _, err := authn.Authenticate(ctx, "Bearer "+other); err != nil {
		t.Errorf("a key never seen, while degraded: %v", err)
	}

	var warnings []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "not delivered") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "level=WARN") || !strings.Contains(warnings[0], "pool_mode = transaction") ||
		!strings.Contains(warnings[0], "Behind a connection pooler") {
		t.Errorf("want one warning naming the pooler in transaction mode as the likely cause, got %d:\n%s", len(warnings), strings.Join(warnings, "\n"))
	}
	if degraded, _ := feed.Degraded(); !degraded {
		t.Error("the feed went live behind transaction pooling")
	}
}

// logBuffer collects log lines for the test to read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls done for up to 10 s, failing t with what it waited for.
func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
