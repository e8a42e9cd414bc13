package pgbouncertest_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/pgbouncertest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
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
