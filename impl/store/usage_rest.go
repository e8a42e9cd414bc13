package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
	"github.com/tollgate/tollgate/impl/price"
)

// RestSuffix ends the request id of the record that bills the rest of a stream's usage: the
// part its own record counts beyond the record a reaper billed from the stream's last
// checkpoint after its process was lost (status process_lost). See WriteUsage.
const RestSuffix = "_rest"

// restOfLostStreams bills, in WriteUsage's transaction, the rest of the usage of the records
// of batch whose requests were billed already from a checkpoint (status process_lost): a stream
// whose process was taken for lost (its hold's lease expired) although it went on and settled,
// its record kept in a spill file (a graceful stop during a database outage, replayed after a
// reaper billed the checkpoint) or written by a process that was cut off from the database for
// longer than a lease. For each, a second record (request id + RestSuffix, the record's own
// status, route, key and times) carries the difference per token kind and per hosted tool,
// priced at the rates the whole request was billed at; its cost never takes the request's
// total past what its own record says. The key's spend is raised to match. It returns what the
// second statement did (nothing when no record of the batch found a lost one).
func restOfLostStreams(ctx context.Context, q *db.Queries, holder string, accounts []uuid.UUID, batch []UsageRecord) (UsageBatch, error) {
	var find db.LostStreamUsageParams
	byRequest := make(map[restKey]UsageRecord)
	for _, r := range batch {
		if r.Status == "process_lost" {
			continue // a reaper's own record: the race the ledger key settles
		}
		k := restKey{r.AccountID, CleanText(r.RequestID)}
		byRequest[k] = r
		find.AccountIds = append(find.AccountIds, k.account)
		find.RequestIds = append(find.RequestIds, k.request)
	}
	if len(find.RequestIds) == 0 {
		return UsageBatch{}, nil
	}
	lost, err := q.LostStreamUsage(ctx, find)
	if err != nil {
		return UsageBatch{}, fmt.Errorf("find the lost streams' records: %w", err)
	}
	if len(lost) == 0 {
		return UsageBatch{}, nil
	}
	params := db.WriteUsageBatchParams{Holder: holder, AccountIds: accounts}
	var keys db.RaiseLostStreamKeySpendParams
	for _, row := range lost {
		was, err := recordOf(row)
		if err != nil {
			return UsageBatch{}, err
		}
		full, ok := byRequest[restKey{row.AccountID, row.RequestID}]
		if !ok {
			continue
		}
		rest, ok := restOf(full, was)
		if !ok {
			continue
		}
		appendUsage(&params, rest)
		if full.APIKeyID != uuid.Nil {
			keys.KeyIds = append(keys.KeyIds, full.APIKeyID)
			keys.RequestIds = append(keys.RequestIds, row.RequestID)
			keys.Totals = append(keys.Totals, price.SaturatingAdd(max(was.CostMicros, 0), max(rest.CostMicros, 0)))
		}
	}
	var out UsageBatch
	if len(params.RequestIds) == 0 {
		return out, nil
	}
	charges, err := q.WriteUsageBatch(ctx, params)
	if err != nil {
		return UsageBatch{}, fmt.Errorf("bill the rest of the lost streams: %w", err)
	}
	for _, c := range charges {
		out.Charges = append(out.Charges, UsageCharge{
			AccountID: c.AccountID, TotalMicros: c.TotalMicros, BilledMicros: c.BilledMicros, CreditMicros: c.CreditMicros,
			HasHold: c.HasHold, HoldMicros: c.HoldMicros, HoldVersion: c.HoldVersion,
		})
		out.Written += int(c.WrittenRecords)
	}
	if len(keys.KeyIds) > 0 {
		if _, err := q.RaiseLostStreamKeySpend(ctx, keys); err != nil {
			return UsageBatch{}, fmt.Errorf("raise the lost streams' key spend: %w", err)
		}
	}
	return out, nil
}

type restKey struct {
	account uuid.UUID
	request string
}

// restOf is the record that bills what full, a request's own record, counts beyond was, the
// record a reaper billed the request with from its stream's checkpoint: per token kind and per
// hosted tool the difference (never negative), at the rates the whole request was billed at
// (full's, its long-context tier resolved by full's input, so that the rest's bill is
// reproducible from its own row), and at most what full costs beyond was. It reports false when
// full counts nothing beyond was.
func restOf(full, was UsageRecord) (UsageRecord, bool) {
	ft, wt := full.Tokens(), was.Tokens()
	t := price.Tokens{
		Uncached:     max(ft.Uncached-wt.Uncached, 0),
		CacheRead:    max(ft.CacheRead-wt.CacheRead, 0),
		CacheWrite5m: max(ft.CacheWrite5m-wt.CacheWrite5m, 0),
		CacheWrite1h: max(ft.CacheWrite1h-wt.CacheWrite1h, 0),
		Output:       max(ft.Output-wt.Output, 0),
	}
	t.Reasoning = min(max(ft.Reasoning-wt.Reasoning, 0), t.Output)
	var calls map[string]int64
	for name, n := range full.HostedCalls {
		if d := n - was.HostedCalls[name]; d > 0 {
			if calls == nil {
				calls = make(map[string]int64)
			}
			calls[name] = d
		}
	}
	hosted := max(full.HostedMicros-max(was.HostedMicros, 0), 0)
	if full.Price != nil && full.Price.HostedPerCall != nil {
		// The calls beyond was at the price each call of them cost, so that the rest's hosted
		// cost is its calls times its own row's prices (money trial D3).
		hosted = 0
		for name, n := range calls {
			hosted = price.SaturatingAdd(hosted, n*full.Price.HostedPerCall[name])
		}
	}
	if t == (price.Tokens{}) && len(calls) == 0 && hosted == 0 {
		return UsageRecord{}, false
	}
	rest := full
	rest.RequestID = full.RequestID + RestSuffix
	rest.InputTokens, rest.OutputTokens = t.Input(), t.Output
	rest.CacheReadTokens, rest.CacheWrite5mTokens, rest.CacheWrite1hTokens = t.CacheRead, t.CacheWrite5m, t.CacheWrite1h
	rest.ReasoningTokens = t.Reasoning
	rest.HostedCalls, rest.HostedMicros = calls, hosted
	rest.Checkpointed, rest.SettleKey = false, false
	budget := max(full.CostMicros-max(was.CostMicros, 0), 0)
	if full.Price == nil {
		// A record settled by an amount alone: the rest is the difference of the amounts.
		rest.Costs, rest.WaivedMicros, rest.CacheSavingsMicros = price.Breakdown{}, 0, 0
		rest.CostMicros = budget
		return rest, true
	}
	rates, _ := full.Price.RatesFor(full.InputTokens)
	// The rest's price keeps what makes its row reproducible alone (money trial D3: the
	// per-call prices and the tier's name were dropped, so its hosted cost read as calls at
	// no price, and its price named no tier where its row's service_tier did).
	p := price.Price{Rates: rates, ServiceTier: full.Price.ServiceTier, Catalog: full.Price.Catalog, Effective: full.Price.Effective}
	if len(calls) > 0 && full.Price.HostedPerCall != nil {
		p.HostedPerCall = make(map[string]int64, len(calls))
		for name := range calls {
			p.HostedPerCall[name] = full.Price.HostedPerCall[name]
		}
	}
	rest.Price = &p
	rest.Costs = price.Cost(t, p)
	rest.CacheSavingsMicros = price.CacheSavings(t, p, rest.Costs)
	whole := price.SaturatingAdd(rest.Costs.Total(), hosted)
	rest.WaivedMicros = max(whole-budget, 0)
	rest.CostMicros = whole - rest.WaivedMicros
	return rest, true
}
