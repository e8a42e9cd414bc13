package store_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
)

// sonnetPrice is Claude Sonnet 4.5's price as Anthropic publishes it (docs.claude.com, "Pricing":
// $3 input, $3.75 five-minute cache write, $6 one-hour write, $0.30 cache read, $15 output per
// million tokens; above 200,000 input tokens the whole request at $6, $7.50, $12, $0.60 and
// $22.50), in micro-units per million tokens.
var sonnetPrice = price.Price{
	Rates: price.Rates{Input: 3_000_000, CacheWrite5m: 3_750_000, CacheWrite1h: 6_000_000, CacheRead: 300_000, Output: 15_000_000},
	LongContext: &price.Tier{AboveInputTokens: 200_000,
		Rates: price.Rates{Input: 6_000_000, CacheWrite5m: 7_500_000, CacheWrite1h: 12_000_000, CacheRead: 600_000, Output: 22_500_000}},
	Catalog: "claude-sonnet-4-5", Effective: "2025-09-29",
}

// pricedRecord is a stream's usage record priced as the meter prices it: 250,000 input tokens
// (200,000 read from the cache, 10,000 written to it for five minutes), output tokens as given,
// and web searches at $10 per thousand (Anthropic's published price), 10,000 micro-units each.
func pricedRecord(acct, key uuid.UUID, request, status string, output, searches int64, at time.Time) store.UsageRecord {
	r := store.UsageRecord{AccountID: acct, RequestID: request, APIKeyID: key, Model: "service-sonnet", Route: "/v1/messages",
		Provider: "anthropic", UpstreamModel: "claude-sonnet-4-5", InputTokens: 250_000, CacheReadTokens: 200_000,
		CacheWrite5mTokens: 10_000, OutputTokens: output, Status: status, StartedAt: at, FinishedAt: at.Add(10 * time.Second),
		HostedCalls: map[string]int64{"web_search": searches}, HostedMicros: searches * 10_000}
	p := sonnetPrice
	if searches > 0 {
		// The meter's record names what each call cost, so that its row reproduces it.
		p.HostedPerCall = map[string]int64{"web_search": 10_000}
	}
	r.Price = &p
	r.Costs = price.Cost(r.Tokens(), p)
	r.CacheSavingsMicros = price.CacheSavings(r.Tokens(), p, r.Costs)
	r.CostMicros = r.Costs.Total() + r.HostedMicros
	return r
}

// TestLostStreamRestIsBilled: trial h2's D2. A stream finished during a graceful stop in a
// database outage longer than the lease; another process billed its checkpoint (process_lost,
// 400 of its 2,000 output tokens, one of its two searches); then its own record arrived from
// the spill file. The request is not billed twice, and not left at the checkpoint: a second
// record, <id>_rest, bills the difference per kind at the long-context rates the whole request
// was billed at, reproducible from its row; the account and the capped key are charged what the
// stream's own record says, once, however often the record is written again. A stream whose
// process settled its key at the full cost before the reap is not counted twice on the key; a
// record that counts no more than its checkpoint bills nothing more; a record whose own cost was
// waived in part (above its reservation) never takes the two records past it.
func TestLostStreamRestIsBilled(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	const funded = 10_000_000
	acct := fundedAccount(t, st, funded)
	key := cappedKey(t, st, acct, 5_000_000)
	period := store.CapPeriodMonthly.Start(time.Now())
	reserve := func(request string) {
		t.Helper()
		kr, err := st.ReserveKeyBudget(ctx, store.KeyReservationRequest{KeyID: key, PeriodStart: period, CapMicros: 5_000_000,
			AmountMicros: 1_000_000, RequestID: request, Holder: "lost", Lease: time.Minute})
		if err != nil || !kr.Reserved {
			t.Fatalf("reserve %s: %+v %v", request, kr, err)
		}
	}
	spent := func() int64 {
		t.Helper()
		b, err := st.GetKeyBudget(ctx, key, period)
		if err != nil {
			t.Fatal(err)
		}
		return b.SpentMicros
	}
	at := time.Now().Add(-time.Minute)

	reserve("s1")
	lost := pricedRecord(acct, key, "s1", "process_lost", 400, 1, at)
	lost.Checkpointed, lost.SettleKey = true, true
	// 40,000 × $6 + 200,000 × $0.60 + 10,000 × $7.50 + 400 × $22.50 per million, and a search.
	if lost.CostMicros != 240_000+120_000+75_000+9_000+10_000 {
		t.Fatalf("the checkpoint costs %d", lost.CostMicros)
	}
	if res, err := st.WriteUsage(ctx, "reaper", []store.UsageRecord{lost}); err != nil || res.Written != 1 {
		t.Fatalf("the reaper's write: %+v %v", res, err)
	}
	if got := spent(); got != lost.CostMicros {
		t.Fatalf("key spend %d after the reap, want %d", got, lost.CostMicros)
	}

	full := pricedRecord(acct, key, "s1", "ok", 2_000, 2, at)
	// Served at a named service tier (whose rates, here, are the base ones): the rest's price
	// names it as its row does.
	full.ServiceTier, full.Price.ServiceTier = "priority", "priority"
	for i := range 2 { // the spill replayed, then replayed again (a crash before its reset)
		res, err := st.WriteUsage(ctx, "restarted", []store.UsageRecord{full})
		if err != nil || res.Skipped != 1 || res.Rest != 1-i || res.Written != 1-i {
			t.Fatalf("write %d: %+v %v", i+1, res, err)
		}
		if c := checkHeld(t, st, acct); c.BalanceMicros != funded-full.CostMicros {
			t.Errorf("balance %d, want %d: the stream's own record charges %d", c.BalanceMicros, funded-full.CostMicros, full.CostMicros)
		}
		if got := spent(); got != full.CostMicros {
			t.Errorf("key spend %d, want %d", got, full.CostMicros)
		}
	}
	recs := recordsByRequest(t, st, acct)
	if got := recs["s1"]; got.Status != "process_lost" || got.CostMicros != lost.CostMicros {
		t.Errorf("the checkpoint's record changed: %+v", got)
	}
	rest, ok := recs["s1"+store.RestSuffix]
	if !ok {
		t.Fatalf("no rest record: %v", recs)
	}
	if rest.Status != "ok" || rest.InputTokens != 0 || rest.CacheReadTokens != 0 || rest.OutputTokens != 1_600 ||
		rest.HostedCalls["web_search"] != 1 || rest.HostedMicros != 10_000 || rest.APIKeyID != key ||
		rest.Costs.Output != 36_000 || rest.CostMicros != 46_000 || rest.WaivedMicros != 0 || !rest.StartedAt.Equal(recs["s1"].StartedAt) {
		t.Errorf("rest record %+v: want 1,600 output tokens at $22.50 and one search, 46,000 micro-units", rest)
	}
	if rest.Price == nil || rest.Price.LongContext != nil || rest.Price.Output != 22_500_000 || rest.Price.Catalog != "claude-sonnet-4-5" {
		t.Errorf("rest price %+v: want the long-context rates the request was billed at, as its own rates", rest.Price)
	}
	if rest.Price != nil {
		if c := price.Cost(rest.Tokens(), *rest.Price); c != rest.Costs || c.Total()+rest.HostedMicros-rest.WaivedMicros != rest.CostMicros {
			t.Errorf("the rest's bill is not reproducible from its row: %+v against %+v", c, rest.Costs)
		}
		// Money trial D3: the rest's price dropped the per-call prices (its hosted cost read
		// as calls at no price) and the tier's name.
		if n := rest.HostedCalls["web_search"] * rest.Price.HostedPerCall["web_search"]; n != rest.HostedMicros {
			t.Errorf("the rest's hosted cost %d is not its calls %v at its price's %v a call", rest.HostedMicros, rest.HostedCalls, rest.Price.HostedPerCall)
		}
		if rest.Price.ServiceTier != "priority" || rest.ServiceTier != "priority" {
			t.Errorf("the rest's price names tier %q, its row %q: want the whole request's, priority", rest.Price.ServiceTier, rest.ServiceTier)
		}
	}

	// The lost process had settled the key at the full cost before the reaper billed the
	// checkpoint (the settlement's write went through, the usage record's did not).
	reserve("s2")
	full2 := pricedRecord(acct, key, "s2", "ok", 2_000, 2, at)
	if ok, err := st.SettleKeyReservation(ctx, key, "s2", full2.CostMicros); err != nil || !ok {
		t.Fatalf("settle s2: %v %v", ok, err)
	}
	lost2 := pricedRecord(acct, key, "s2", "process_lost", 400, 1, at)
	lost2.Checkpointed, lost2.SettleKey = true, true
	before := spent()
	if _, err := st.WriteUsage(ctx, "reaper", []store.UsageRecord{lost2}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteUsage(ctx, "restarted", []store.UsageRecord{full2}); err != nil {
		t.Fatal(err)
	}
	if got := spent(); got != before {
		t.Errorf("key spend %d, want %d: s2 was counted at its full cost already", got, before)
	}

	// A record that counts less than its checkpoint (the checkpoint's estimate of the output
	// was above what the upstream reported) bills nothing more.
	lost3 := pricedRecord(acct, uuid.Nil, "s3", "process_lost", 400, 0, at)
	full3 := pricedRecord(acct, uuid.Nil, "s3", "ok", 300, 0, at)
	// A record whose output was waived in part: its cost is 5,000 above the checkpoint's.
	lost4 := pricedRecord(acct, uuid.Nil, "s4", "process_lost", 400, 0, at)
	full4 := pricedRecord(acct, uuid.Nil, "s4", "ok", 2_000, 0, at)
	full4.WaivedMicros = full4.CostMicros - lost4.CostMicros - 5_000
	full4.CostMicros -= full4.WaivedMicros
	if _, err := st.WriteUsage(ctx, "reaper", []store.UsageRecord{lost3, lost4}); err != nil {
		t.Fatal(err)
	}
	res, err := st.WriteUsage(ctx, "restarted", []store.UsageRecord{full3, full4})
	if err != nil || res.Written != 1 || res.Rest != 1 || res.Skipped != 2 {
		t.Fatalf("%+v %v: want one rest record written, the two records skipped", res, err)
	}
	recs = recordsByRequest(t, st, acct)
	if _, ok := recs["s3"+store.RestSuffix]; ok {
		t.Errorf("a rest record for a stream that counted less than its checkpoint")
	}
	if r := recs["s4"+store.RestSuffix]; r.CostMicros != 5_000 || r.WaivedMicros != 36_000-5_000 || r.OutputTokens != 1_600 {
		t.Errorf("rest of s4 %+v: want 5,000 micro-units billed, the rest of the 1,600 tokens' 36,000 waived", r)
	}
	checkHeld(t, st, acct)
}

// cappedKey is a key of the account with a monthly credit cap.
func cappedKey(t *testing.T, st *store.Store, acct uuid.UUID, capMicros int64) uuid.UUID {
	t.Helper()
	hash := make([]byte, 32)
	rand.Read(hash)
	k, err := st.CreateAPIKey(context.Background(), store.NewAPIKey{AccountID: acct, Name: "capped", Hash: hash,
		DisplayPrefix: "tgk_", DisplaySuffix: "abcd", CreditCapMicros: &capMicros, CapPeriod: store.CapPeriodMonthly})
	if err != nil {
		t.Fatal(err)
	}
	return k.ID
}

// recordsByRequest is the account's usage records by request id.
func recordsByRequest(t *testing.T, st *store.Store, acct uuid.UUID) map[string]store.UsageRecord {
	t.Helper()
	recs, err := st.UsageRecords(context.Background(), acct, 100)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]store.UsageRecord, len(recs))
	for _, r := range recs {
		out[r.RequestID] = r
	}
	return out
}
