package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
)

// TestWriteUsageMixedBatch: a batch over two accounts that repeats some records of an earlier
// batch writes and bills only the new ones, per account, and keeps each record's API key.
func TestWriteUsageMixedBatch(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	first, second := fundedAccount(t, st, 10_000), fundedAccount(t, st, 10_000)
	for _, acct := range []uuid.UUID{first, second} {
		if _, err := st.TakeCreditHold(ctx, store.HoldRequest{AccountID: acct, Holder: "p", NeedMicros: 5_000, WantMicros: 5_000, Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	key := uuid.New()
	now := time.Now()
	record := func(acct uuid.UUID, request string, cost int64, apiKey uuid.UUID) store.UsageRecord {
		return store.UsageRecord{AccountID: acct, RequestID: request, APIKeyID: apiKey, Model: "m", Route: "/v1/messages",
			CostMicros: cost, Status: "completed", StartedAt: now, FinishedAt: now}
	}
	res, err := st.WriteUsage(ctx, "p", []store.UsageRecord{record(first, "a", 100, key), record(second, "a", 200, uuid.Nil)})
	if err != nil || res.Written != 2 || res.Skipped != 0 {
		t.Fatalf("first batch: %+v, %v", res, err)
	}
	res, err = st.WriteUsage(ctx, "p", []store.UsageRecord{
		record(second, "a", 999, key), // billed by the first batch
		record(second, "b", 300, key),
		record(first, "b", 400, uuid.Nil),
		record(first, "a", 999, uuid.Nil), // billed by the first batch
		record(first, "c", 500, key),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 3 || res.Skipped != 2 || res.Dropped != 0 || len(res.Charges) != 2 {
		t.Fatalf("second batch: %+v", res)
	}
	totals := map[uuid.UUID]int64{first: 900, second: 300}
	for _, c := range res.Charges {
		if c.TotalMicros != totals[c.AccountID] || c.BilledMicros != totals[c.AccountID] || !c.HasHold {
			t.Errorf("charge %+v, want %d billed", c, totals[c.AccountID])
		}
	}
	for acct, want := range map[uuid.UUID]int64{first: 10_000 - 100 - 900, second: 10_000 - 200 - 300} {
		if c := checkHeld(t, st, acct); c.BalanceMicros != want {
			t.Errorf("balance %d, want %d", c.BalanceMicros, want)
		}
	}
	recs, err := st.UsageRecords(ctx, first, 10)
	if err != nil || len(recs) != 3 {
		t.Fatalf("records %+v (%v)", recs, err)
	}
	keys := map[string]uuid.UUID{"a": key, "b": uuid.Nil, "c": key}
	for _, r := range recs {
		if r.APIKeyID != keys[r.RequestID] {
			t.Errorf("record %s: API key %v, want %v", r.RequestID, r.APIKeyID, keys[r.RequestID])
		}
	}
}

// TestUsageLedgerKeysAreReserved: only WriteUsage writes usage ledger entries, so Append refuses
// them, and a request id can never be blocked by an entry that has no usage record.
func TestUsageLedgerKeysAreReserved(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	acct := fundedAccount(t, st, 10_000)
	for _, c := range []store.LedgerChange{
		{AccountID: acct, AmountMicros: 5, Reason: store.ReasonGrant, IdempotencyKey: store.UsageLedgerKey("r1")},
		{AccountID: acct, AmountMicros: -5, Reason: store.ReasonUsage, IdempotencyKey: "manual"},
	} {
		if _, _, err := st.Append(ctx, c); err == nil {
			t.Errorf("Append(%+v) succeeded", c)
		}
	}
	now := time.Now()
	res, err := st.WriteUsage(ctx, "p", []store.UsageRecord{{AccountID: acct, RequestID: "r1", CostMicros: 5, StartedAt: now, FinishedAt: now}})
	if err != nil || res.Written != 1 {
		t.Fatalf("write: %+v, %v", res, err)
	}
	if c := checkHeld(t, st, acct); c.BalanceMicros != 10_000-5 {
		t.Errorf("balance %d", c.BalanceMicros)
	}
}
