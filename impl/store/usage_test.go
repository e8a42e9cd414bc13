package store_test

import (
	"context"
	"strings"
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

// TestUsageBilledWhileTheBalanceCovers: usage the holds do not back (served on credit during an
// outage) is billed in full while the account's balance covers it, even when other processes'
// holds leave little free (trial h2: three replicas held 7/8 of a funded account and half of
// what was served on credit went unbilled). The holds give up what they must, the writer's own
// first, then the largest, each with a new version; held stays within the balance. Past the
// balance, what is not billed is noted and the balance ends at zero.
func TestUsageBilledWhileTheBalanceCovers(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	acct := fundedAccount(t, st, 300_000)
	versions := map[string]int64{}
	for _, h := range []struct {
		holder string
		amount int64
	}{{"writer", 20_000}, {"big", 150_000}, {"small", 100_000}} {
		g, err := st.TakeCreditHold(ctx, store.HoldRequest{AccountID: acct, Holder: h.holder, NeedMicros: h.amount, WantMicros: h.amount, Lease: time.Minute})
		if err != nil || !g.Granted {
			t.Fatalf("hold %s: %+v %v", h.holder, g, err)
		}
		versions[h.holder] = g.Hold.Version
	}
	// Free: 300,000 - 270,000 = 30,000. The writer served 10,000 from its hold and 45,000 on
	// credit: 15,000 beyond what is free, taken from what its own hold has left (10,000) and
	// then from the largest other (5,000).
	now := time.Now()
	rec := func(id string, cost int64, onCredit bool) store.UsageRecord {
		return store.UsageRecord{AccountID: acct, RequestID: id, Model: "m", Route: "/v1/messages", CostMicros: cost,
			Status: "completed", StartedAt: now, FinishedAt: now, OnCredit: onCredit}
	}
	res, err := st.WriteUsage(ctx, "writer", []store.UsageRecord{rec("h1", 10_000, false), rec("c1", 20_000, true), rec("c2", 25_000, true)})
	if err != nil || len(res.Charges) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if c := res.Charges[0]; c.TotalMicros != 55_000 || c.BilledMicros != 55_000 || c.CreditMicros != 45_000 || !c.HasHold || c.HoldMicros != 0 {
		t.Errorf("charge %+v", c)
	}
	credit := checkHeld(t, st, acct)
	holds, err := st.CreditHolds(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"writer": 0, "big": 145_000, "small": 100_000}
	for _, h := range holds {
		if h.AmountMicros != want[h.Holder] {
			t.Errorf("hold %s: %d, want %d", h.Holder, h.AmountMicros, want[h.Holder])
		}
		if changed := h.Version != versions[h.Holder]; changed != (h.Holder != "small") {
			t.Errorf("hold %s: version %d (was %d)", h.Holder, h.Version, versions[h.Holder])
		}
	}
	if credit.BalanceMicros != 245_000 || credit.HeldMicros != 245_000 {
		t.Errorf("balance %d held %d, want 245000 and 245000", credit.BalanceMicros, credit.HeldMicros)
	}

	// Beyond the balance: 300,000 more on credit bills the 245,000 left, and says so.
	if _, err := st.WriteUsage(ctx, "writer", []store.UsageRecord{rec("c3", 300_000, true)}); err != nil {
		t.Fatal(err)
	}
	credit = checkHeld(t, st, acct)
	entries, err := st.LedgerEntries(ctx, acct, 10)
	if err != nil {
		t.Fatal(err)
	}
	var last store.LedgerEntry
	for _, e := range entries {
		if e.IdempotencyKey == store.UsageLedgerKey("c3") {
			last = e
		}
	}
	if credit.BalanceMicros != 0 || credit.HeldMicros != 0 || last.AmountMicros != -245_000 || !strings.Contains(last.Note, "55000 not billed") {
		t.Errorf("balance %d held %d; entry %+v", credit.BalanceMicros, credit.HeldMicros, last)
	}
}

// TestUsageBilledAsksTheAccountsLedger: UsageBilled, by which the dry run of `admin usage
// import-spill` tells a record billed already, reports a request WriteUsage billed, not one it
// did not, and not the request of the same id of another account (request ids are unique per
// account only).
func TestUsageBilledAsksTheAccountsLedger(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	acct, other := fundedAccount(t, st, 10_000), fundedAccount(t, st, 10_000)
	now := time.Now()
	res, err := st.WriteUsage(ctx, "", []store.UsageRecord{{AccountID: acct, RequestID: "billed", Model: "m", Route: "/v1/messages",
		CostMicros: 5, Status: "completed", StartedAt: now, FinishedAt: now}})
	if err != nil || res.Written != 1 {
		t.Fatalf("write: %+v, %v", res, err)
	}
	for _, c := range []struct {
		acct    uuid.UUID
		request string
		want    bool
	}{{acct, "billed", true}, {acct, "not-billed", false}, {other, "billed", false}} {
		got, err := st.UsageBilled(ctx, c.acct, c.request)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("UsageBilled(%s, %q) = %v, want %v", c.acct, c.request, got, c.want)
		}
	}
}
