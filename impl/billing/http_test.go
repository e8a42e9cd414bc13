package billing_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/store"
)

// TestSpillFullRefusesRequests: through the HTTP surface of a real gateway. PostgreSQL refuses
// every write of usage records (a trigger raises an error; everything else works), so the
// records go to the gateway's spill file, which is small here. Once it is full, inference
// requests get 503 with Retry-After, in their route's envelope, with nothing of the inside in
// the message, instead of being served unbilled. Once PostgreSQL takes usage again the spill
// is written and requests are served; every request answered 200 has exactly one usage record
// and ledger entry, a refused one none, and the ledger sums to the balance.
func TestSpillFullRefusesRequests(t *testing.T) {
	ctx := context.Background()
	g := apitest.Start(t, apitest.Options{UsageSpillDir: t.TempDir(), UsageSpillMaxBytes: 1400})
	tenant := g.NewTenant(t, "spill", 0, 10_000_000)
	client := g.Client(t)
	db, err := pgx.Connect(ctx, g.ConnString)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })

	type answer struct {
		status int
		id     string
		header http.Header
		body   string
	}
	send := func(route, body string) answer {
		t.Helper()
		req, err := http.NewRequest("POST", g.URL+route, strings.NewReader(body))
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
		return answer{res.StatusCode, res.Header.Get("x-request-id"), res.Header, string(b)}
	}
	const (
		chat     = `{"model":"service-flint","messages":[{"role":"user","content":"hi"}]}`
		messages = `{"model":"service-sonnet","max_tokens":32,"messages":[{"role":"user","content":"hi"}]}`
	)
	served := map[string]bool{}
	serve := func() {
		t.Helper()
		a := send("/v1/chat/completions", chat)
		if a.status != http.StatusOK {
			t.Fatalf("%d %s", a.status, a.body)
		}
		served[a.id] = true
	}
	// A request is settled just after its answer is sent: the test waits for its record.
	written := func(n int) func() bool {
		return func() bool {
			got, _, err := g.Store.UsageTotals(ctx, tenant.Account.ID)
			return err == nil && got >= int64(n)
		}
	}
	serve()
	wait(t, "the first record to be written", written(1))

	// PostgreSQL refuses usage records from now on.
	if _, err := db.Exec(ctx, `
		CREATE FUNCTION refuse_usage() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'usage records refused by the test'; END $$;
		CREATE TRIGGER refuse_usage BEFORE INSERT ON usage_records FOR EACH STATEMENT EXECUTE FUNCTION refuse_usage()`); err != nil {
		t.Fatal(err)
	}
	for !g.Meter.WriterStats().Full {
		if len(served) > 20 {
			t.Fatalf("the spill file never filled: %+v", g.Meter.WriterStats())
		}
		before := g.Meter.WriterStats()
		serve()
		wait(t, "the record to go to the spill file or fill it", func() bool {
			s := g.Meter.WriterStats()
			return s.Backlog > before.Backlog || s.Full
		})
	}
	if g.Meter.WriterStats().Backlog == 0 {
		t.Fatal("nothing in the spill file")
	}

	var refused []string
	for _, c := range []struct{ route, body, envelope string }{
		{"/v1/chat/completions", chat, "openai"},
		{"/v1/messages", messages, "anthropic"},
	} {
		a := send(c.route, c.body)
		refused = append(refused, a.id)
		if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
			t.Fatalf("%s with the spill full: %d, Retry-After %q: %s", c.route, a.status, a.header.Get("Retry-After"), a.body)
		}
		var env struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(a.body), &env); err != nil || env.Error.Message == "" || env.Error.Type == "" {
			t.Fatalf("%s: not an error envelope: %s", c.route, a.body)
		}
		if (c.envelope == "anthropic") != (env.Type == "error") {
			t.Errorf("%s: the envelope of the wrong family: %s", c.route, a.body)
		}
		for _, inside := range []string{"spill", "backlog", "usage", "trigger", "refused by the test", "billing"} {
			if strings.Contains(strings.ToLower(env.Error.Message), inside) {
				t.Errorf("%s: the message tells of the inside (%q): %s", c.route, inside, env.Error.Message)
			}
		}
	}

	// PostgreSQL takes usage again: the spill is written, and requests are served.
	if _, err := db.Exec(ctx, `DROP TRIGGER refuse_usage ON usage_records`); err != nil {
		t.Fatal(err)
	}
	wait(t, "the spill to be written", func() bool {
		s := g.Meter.WriterStats()
		return !s.Full && s.Backlog == 0 && s.Queued == 0
	})
	serve()
	wait(t, "every record to be written", written(len(served)))

	records, err := g.Store.UsageRecords(ctx, tenant.Account.ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	billed := map[string]int{}
	for _, r := range records {
		billed[r.RequestID]++
	}
	entries, err := g.Store.LedgerEntries(ctx, tenant.Account.ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ledger := map[string]int{}
	for _, e := range entries {
		if e.Reason == store.ReasonUsage {
			ledger[e.IdempotencyKey]++
		}
	}
	for id := range served {
		if billed[id] != 1 || ledger[store.UsageLedgerKey(id)] != 1 {
			t.Errorf("request %s, answered 200: %d usage records, %d ledger entries", id, billed[id], ledger[store.UsageLedgerKey(id)])
		}
	}
	for _, id := range refused {
		if billed[id] != 0 || ledger[store.UsageLedgerKey(id)] != 0 {
			t.Errorf("request %s, refused: %d usage records, %d ledger entries", id, billed[id], ledger[store.UsageLedgerKey(id)])
		}
	}
	if len(records) != len(served) {
		t.Errorf("%d usage records for %d requests served", len(records), len(served))
	}
	sum, err := g.Store.LedgerSum(ctx, tenant.Account.ID)
	if err != nil {
		t.Fatal(err)
	}
	if balance, err := g.Store.Balance(ctx, tenant.Account.ID); err != nil || balance != sum {
		t.Errorf("balance %d (%v), the ledger sums to %d", balance, err, sum)
	}
	t.Logf("%d requests served (%d of them while PostgreSQL refused usage), %d refused with 503; writer %+v",
		len(served), len(served)-2, len(refused), g.Meter.WriterStats())
}

// wait polls cond until it holds, failing the test after a generous minute.
func wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
