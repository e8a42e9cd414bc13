package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/price"
)

// TestUsageKindsMigrationKeepsOldRows: usage records written before migration 0012 stay valid
// after it: they read back unpriced (no price, no cache counts, every input token uncached, as
// they were billed), the usage_daily rollup gains their token counts, and a priced record
// written after it must add up (the database refuses one whose parts do not make its cost).
func TestUsageKindsMigrationKeepsOldRows(t *testing.T) {
	ctx := context.Background()
	s := migratedBefore(t, "0012")
	var account string
	if err := s.pool.QueryRow(ctx, `INSERT INTO accounts (name, balance_micros) VALUES ('old', 1000000) RETURNING id`).Scan(&account); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO usage_records (account_id, request_id, model, route, provider, upstream_model,
		input_tokens, output_tokens, cost_micros, status, started_at, finished_at)
		VALUES ($1, 'old-1', 'm', '/v1/messages', 'p', 'u', 62000, 500, 193500, 'ok', now(), now())`, account); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	acct := mustUUID(t, account)
	recs, err := s.UsageRecords(ctx, acct, 10)
	if err != nil {
		t.Fatal(err)
	}
	old := recs[0]
	if old.Price != nil || old.CacheReadTokens != 0 || old.Tokens().Uncached != 62_000 || old.CostMicros != 193_500 || old.Costs.Total() != 0 {
		t.Errorf("the old row reads back as %+v", old)
	}
	var in, out int64
	if err := s.pool.QueryRow(ctx, `SELECT input_tokens, output_tokens FROM usage_daily WHERE account_id = $1`, account).Scan(&in, &out); err != nil || in != 62_000 || out != 500 {
		t.Errorf("usage_daily after the backfill: %d input, %d output, %v", in, out, err)
	}

	// A priced row whose parts do not add up to its cost is refused by the database itself.
	_, err = s.pool.Exec(ctx, `INSERT INTO usage_records (account_id, request_id, model, route, provider, upstream_model,
		input_tokens, output_tokens, cost_micros, status, started_at, finished_at, price, input_cost_micros, output_cost_micros)
		VALUES ($1, 'bad', 'm', '/v1/messages', 'p', 'u', 10, 10, 999, 'ok', now(), now(), '{}', 30, 150)`, account)
	if err == nil || !strings.Contains(err.Error(), "usage_records_cost_reproducible") {
		t.Errorf("an inconsistent priced row: %v", err)
	}
	// WriteUsage writes a consistent priced record as it is, and an inconsistent one unpriced.
	p := price.Price{Rates: price.Rates{Input: 3_000_000, CacheRead: 300_000, CacheWrite5m: 3_750_000, CacheWrite1h: 6_000_000, Output: 15_000_000}}
	tok := price.Tokens{Uncached: 2_000, CacheWrite1h: 10_000, CacheRead: 50_000, Output: 500}
	costs := price.Cost(tok, p)
	now := time.Now()
	good := UsageRecord{AccountID: acct, RequestID: "new-1", Model: "m", Route: "/v1/messages", Status: "ok", StartedAt: now, FinishedAt: now,
		InputTokens: tok.Input(), OutputTokens: 500, CacheReadTokens: 50_000, CacheWrite1hTokens: 10_000,
		Price: &p, Costs: costs, CostMicros: costs.Total()}
	bad := good
	bad.RequestID, bad.CostMicros = "new-2", costs.Total()+1
	if _, err := s.WriteUsage(ctx, "p", []UsageRecord{good, bad}); err != nil {
		t.Fatal(err)
	}
	recs, err = s.UsageRecords(ctx, acct, 10)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]UsageRecord{}
	for _, r := range recs {
		byID[r.RequestID] = r
	}
	if g := byID["new-1"]; g.Price == nil || g.Costs != costs || g.CostMicros != 88_500 || g.CacheWrite1hTokens != 10_000 {
		t.Errorf("the priced record reads back as %+v", g)
	}
	if b := byID["new-2"]; b.Price != nil || b.CostMicros != 88_501 {
		t.Errorf("the inconsistent record reads back as %+v", b)
	}
}

func mustUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
