package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gen/db"
	"github.com/tollgate/tollgate/impl/price"
)

// UsageRecord is what one settled request used and cost.
type UsageRecord struct {
	AccountID uuid.UUID
	RequestID string
	// APIKeyID is the key the request came with; uuid.Nil when there was none.
	APIKeyID uuid.UUID
	// Model is the gateway model asked for; Route the API route that served it.
	Model string
	Route string
	// Provider and UpstreamModel say which upstream served the request (for a fusion model,
	// the expert the router chose).
	Provider      string
	UpstreamModel string
	// InputTokens counts every input token, those read from and written to the provider's
	// prompt cache included; CacheReadTokens, CacheWrite5mTokens and CacheWrite1hTokens are
	// those parts of it (the rest is uncached input: Tokens().Uncached). OutputTokens counts
	// every output token; ReasoningTokens is the part of it spent on reasoning.
	InputTokens        int64
	OutputTokens       int64
	CacheReadTokens    int64
	CacheWrite5mTokens int64
	CacheWrite1hTokens int64
	ReasoningTokens    int64
	// ServiceTier is the service tier the upstream reported ("" when it did not say).
	ServiceTier string
	// CostMicros is what the request is billed: Costs.Total() + HostedMicros - WaivedMicros
	// for a priced record.
	CostMicros int64
	// Price is the price the tokens were billed at; nil for a record not priced per kind (one
	// written before migration 0012, or settled by an amount alone).
	Price *price.Price
	// Costs is the cost of each token kind at Price; WaivedMicros the part of the full cost
	// that was not billed (above the reservation, or all of it for an answer that never
	// reached its client); CacheSavingsMicros what caching saved against the uncached input
	// price (negative when writes cost more than reads saved).
	Costs              price.Breakdown
	WaivedMicros       int64
	CacheSavingsMicros int64
	// HostedCalls counts, by tool name (web_search, ...), the billed calls of tools the
	// provider ran and bills per call (nil: none); HostedMicros is their part of CostMicros.
	HostedCalls  map[string]int64
	HostedMicros int64
	// Status is how the request ended, as the exchange settles it (impl/exchange):
	// "ok", "client_disconnected", "shutdown", or an upstream failure ("upstream_error",
	// "upstream_stalled", "upstream_cut_off", "upstream_malformed", "upstream_read_failed");
	// "completed" when the meter is given none (billing), "process_lost" for a stream whose
	// gateway process was lost (billed from its last checkpoint: StreamCheckpoint), "unknown"
	// when written empty.
	Status     string
	StartedAt  time.Time
	FinishedAt time.Time
	// OnCredit marks a request served on credit during a database outage: no credit hold
	// backed it, so WriteUsage bills it from the account's free credit only, and its ledger
	// entry's note says that it was served on credit.
	OnCredit bool
	// AgentSessionID is the agent session whose model call this was (uuid.Nil: none).
	AgentSessionID uuid.UUID
	// TraceID is the W3C trace id of the request's trace (all zero: not traced, stored as
	// NULL).
	TraceID [16]byte
	// FittedOutputTokens is the output bound a request without one was fitted to, its
	// caller's credit not covering the model's whole bound (0: not fitted): the upstream was
	// sent it and the output billed is capped at it.
	FittedOutputTokens int64
	// RecordedAt is when the row was written (read back only).
	RecordedAt time.Time
	// Checkpointed says that the request's stream had a checkpoint (StreamCheckpoint):
	// WriteUsage deletes it in the transaction that writes the record. Not stored.
	Checkpointed bool `json:"-"`
	// SettleKey marks a record whose request's reservation against its key's credit cap
	// WriteUsage settles at CostMicros in the same transaction, if nobody has (when the key has
	// one; a settled reservation is left as it is), deleting the request's stream checkpoint:
	// the record of a stream whose process was lost, billed from its checkpoint, and every
	// record of a capped key's request, whose own settlement may have been lost with its
	// process during a database outage while the record waited in the spill file (trial h12
	// D2). Kept in the spill file; not stored in the database.
	SettleKey bool `json:"settle_key,omitempty"`
}

// UsageCharge is what WriteUsage did to one account of a batch.
type UsageCharge struct {
	AccountID uuid.UUID
	// TotalMicros is the cost of the batch's new records on the account; BilledMicros the part
	// of it taken from the balance. They differ only when the holder's hold had been released,
	// or records were served on credit, and the account's free credit could not cover the rest.
	// CreditMicros is the part of TotalMicros served on credit (records with OnCredit).
	TotalMicros  int64
	BilledMicros int64
	CreditMicros int64
	// HasHold reports whether the holder still has a hold on the account; HoldMicros is its
	// amount after the batch. HoldVersion orders this answer against other answers about the
	// holder's hold on the account (it is fresh even when there is no hold).
	HasHold     bool
	HoldMicros  int64
	HoldVersion int64
}

// UsageBatch is the outcome of WriteUsage.
type UsageBatch struct {
	// Written counts the records written and billed now; Skipped those already billed (their
	// usage record existed), or repeated within the batch; Dropped those of accounts that no
	// longer exist.
	Written, Skipped, Dropped int
	// Rest counts the records, among Written, that bill the rest of a request already billed
	// from its stream's checkpoint after its process was taken for lost (request id +
	// RestSuffix); the request's own record is among Skipped.
	Rest int
	// Charges has one entry per existing account of the batch.
	Charges []UsageCharge
}

// addRest adds to b what the statement that billed the rest of lost streams did (see
// restOfLostStreams): its records count as written, its charges join the accounts', and its
// report of the holder's hold, the later one, replaces the first's.
func (b *UsageBatch) addRest(rest UsageBatch) {
	b.Written += rest.Written
	b.Rest += rest.Written
	for _, r := range rest.Charges {
		for i := range b.Charges {
			if c := &b.Charges[i]; c.AccountID == r.AccountID {
				c.TotalMicros += r.TotalMicros
				c.BilledMicros += r.BilledMicros
				c.CreditMicros += r.CreditMicros
				c.HasHold, c.HoldMicros, c.HoldVersion = r.HasHold, r.HoldMicros, r.HoldVersion
			}
		}
	}
}

// UsageLedgerKey is the idempotency key of a request's usage entry in the credit ledger.
func UsageLedgerKey(requestID string) string { return "usage:" + requestID }

// UsageBilled reports whether the account's request has its usage entry in the ledger: the
// check by which WriteUsage skips a request billed already.
func (s *Store) UsageBilled(ctx context.Context, accountID uuid.UUID, requestID string) (bool, error) {
	_, err := s.q.GetLedgerEntryByKey(ctx, db.GetLedgerEntryByKeyParams{AccountID: accountID, IdempotencyKey: UsageLedgerKey(requestID)})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// WriteUsage writes a batch of usage records and bills them, in one transaction of two
// statements whatever the batch size: it locks the batch's accounts (in id order, so that
// writers never deadlock), then one statement inserts the records, skipping those whose
// request already has its usage entry in the ledger (so that a batch written twice bills
// once, even after the month of the first write was archived), and for the records it inserted appends their usage ledger entries and moves balance,
// held credit and the holder's hold, set-based. The cost comes out of the holder's hold (that of
// records served on credit out of the account's free credit); see UsageCharge for when it
// cannot. When the batch has records of checkpointed streams (Checkpointed, SettleKey), their
// checkpoints are deleted in the same transaction, and the key reservations of SettleKey
// records made to count what the ledger billed for their request ids, whether the records
// were written now or before (endStreamCheckpoints). A record whose request was
// billed already from its stream's checkpoint (status process_lost: its process was taken for
// lost, yet the stream went on and settled) bills the rest of its usage as a second record in
// the same transaction (restOfLostStreams), so that the two records together charge what the
// request's own record says.
func (s *Store) WriteUsage(ctx context.Context, holder string, records []UsageRecord) (UsageBatch, error) {
	var out UsageBatch
	if len(records) == 0 {
		return out, nil
	}
	type key struct {
		account uuid.UUID
		request string
	}
	seen := make(map[key]bool, len(records))
	unique := make([]UsageRecord, 0, len(records))
	var accounts []uuid.UUID
	repeated := 0
	for _, r := range records {
		k := key{r.AccountID, r.RequestID}
		if seen[k] {
			repeated++
			continue
		}
		seen[k] = true
		unique = append(unique, r)
		accounts = append(accounts, r.AccountID)
	}
	slices.SortFunc(accounts, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	accounts = slices.Compact(accounts)

	err := s.inTx(ctx, func(q *db.Queries) error {
		out = UsageBatch{Skipped: repeated}
		existing, err := q.LockAccounts(ctx, accounts)
		if err != nil {
			return err
		}
		live := make(map[uuid.UUID]bool, len(existing))
		for _, id := range existing {
			live[id] = true
		}
		params := db.WriteUsageBatchParams{Holder: holder, AccountIds: existing}
		for _, r := range unique {
			if live[r.AccountID] {
				appendUsage(&params, r)
			} else {
				out.Dropped++
			}
		}
		if len(existing) == 0 {
			// Nothing to bill; the checkpoints of deleted accounts go all the same.
			return endStreamCheckpoints(ctx, q, unique)
		}
		charges, err := q.WriteUsageBatch(ctx, params)
		if err != nil {
			return err
		}
		out.Charges = make([]UsageCharge, len(charges))
		for i, c := range charges {
			out.Charges[i] = UsageCharge{
				AccountID: c.AccountID, TotalMicros: c.TotalMicros, BilledMicros: c.BilledMicros, CreditMicros: c.CreditMicros,
				HasHold: c.HasHold, HoldMicros: c.HoldMicros, HoldVersion: c.HoldVersion,
			}
			out.Written += int(c.WrittenRecords)
		}
		out.Skipped += len(params.RequestIds) - out.Written
		if out.Written < len(params.RequestIds) {
			rest, err := restOfLostStreams(ctx, q, holder, existing, unique)
			if err != nil {
				return err
			}
			out.addRest(rest)
		}
		return endStreamCheckpoints(ctx, q, unique)
	})
	if err != nil {
		return UsageBatch{}, err
	}
	return out, nil
}

// appendUsage adds a record to the columns of a batch, made safe for PostgreSQL: text without
// NUL bytes or invalid UTF-8, no negative counts, and a status, so that one odd record can
// never make every retry of its batch fail. A record without an API key (or agent session) has
// uuid.Nil, which the statement stores as NULL.
func appendUsage(p *db.WriteUsageBatchParams, r UsageRecord) {
	status := CleanText(r.Status)
	if status == "" {
		status = "unknown"
	}
	p.RecordAccountIds = append(p.RecordAccountIds, r.AccountID)
	p.RequestIds = append(p.RequestIds, CleanText(r.RequestID))
	p.ApiKeyIds = append(p.ApiKeyIds, r.APIKeyID)
	p.Models = append(p.Models, CleanText(r.Model))
	p.Routes = append(p.Routes, CleanText(r.Route))
	p.Providers = append(p.Providers, CleanText(r.Provider))
	p.UpstreamModels = append(p.UpstreamModels, CleanText(r.UpstreamModel))
	p.InputTokens = append(p.InputTokens, max(r.InputTokens, 0))
	p.OutputTokens = append(p.OutputTokens, max(r.OutputTokens, 0))
	p.CostMicros = append(p.CostMicros, max(r.CostMicros, 0))
	p.Statuses = append(p.Statuses, status)
	p.StartedAt = append(p.StartedAt, r.StartedAt)
	p.FinishedAt = append(p.FinishedAt, r.FinishedAt)
	var calls []byte // NULL when there were none
	if len(r.HostedCalls) > 0 {
		calls, _ = json.Marshal(r.HostedCalls) // a map of strings to integers always marshals
	}
	p.HostedToolCalls = append(p.HostedToolCalls, calls)
	p.OnCredit = append(p.OnCredit, r.OnCredit)
	p.AgentSessionIds = append(p.AgentSessionIds, r.AgentSessionID)
	// The database refuses a record whose cache counts exceed its input or whose reasoning
	// exceeds its output; an upstream that reports so is clamped, not allowed to stop the batch.
	in := max(r.InputTokens, 0)
	read := min(max(r.CacheReadTokens, 0), in)
	w5 := min(max(r.CacheWrite5mTokens, 0), in-read)
	w1 := min(max(r.CacheWrite1hTokens, 0), in-read-w5)
	p.CacheReadTokens = append(p.CacheReadTokens, read)
	p.CacheWrite5mTokens = append(p.CacheWrite5mTokens, w5)
	p.CacheWrite1hTokens = append(p.CacheWrite1hTokens, w1)
	p.ReasoningTokens = append(p.ReasoningTokens, min(max(r.ReasoningTokens, 0), max(r.OutputTokens, 0)))
	p.ServiceTiers = append(p.ServiceTiers, CleanText(r.ServiceTier))
	var priceJSON []byte // NULL for a record not priced per kind
	c, waived := r.Costs, max(r.WaivedMicros, 0)
	if r.Price != nil && consistent(r) {
		priceJSON, _ = json.Marshal(r.Price) // integers and strings always marshal
	} else {
		c, waived = price.Breakdown{}, 0
	}
	hosted := min(max(r.HostedMicros, 0), max(r.CostMicros, 0))
	if priceJSON != nil {
		hosted = r.HostedMicros // part of the identity; the waived amount covers what was not billed
	}
	p.HostedToolMicros = append(p.HostedToolMicros, hosted)
	p.Prices = append(p.Prices, priceJSON)
	p.InputCostMicros = append(p.InputCostMicros, c.Input)
	p.CacheReadCostMicros = append(p.CacheReadCostMicros, c.CacheRead)
	p.CacheWrite5mCostMicros = append(p.CacheWrite5mCostMicros, c.CacheWrite5m)
	p.CacheWrite1hCostMicros = append(p.CacheWrite1hCostMicros, c.CacheWrite1h)
	p.OutputCostMicros = append(p.OutputCostMicros, c.Output)
	p.WaivedMicros = append(p.WaivedMicros, waived)
	p.CacheSavingsMicros = append(p.CacheSavingsMicros, r.CacheSavingsMicros)
	var trace []byte // NULL when the request was not traced
	if r.TraceID != ([16]byte{}) {
		trace = r.TraceID[:]
	}
	p.TraceIds = append(p.TraceIds, trace)
	p.FittedOutputTokens = append(p.FittedOutputTokens, max(r.FittedOutputTokens, 0))
}

// consistent reports whether a priced record's parts add up to its cost (the database's
// usage_records_cost_reproducible check) with every part non-negative; a record that does not
// is written unpriced rather than refused, so one bad record never stops its batch.
func consistent(r UsageRecord) bool {
	c := r.Costs
	if c.Input < 0 || c.CacheRead < 0 || c.CacheWrite5m < 0 || c.CacheWrite1h < 0 || c.Output < 0 || r.WaivedMicros < 0 ||
		r.HostedMicros < 0 || r.CacheReadTokens+r.CacheWrite5mTokens+r.CacheWrite1hTokens > r.InputTokens {
		return false
	}
	return c.Total() != math.MaxInt64 && price.SaturatingAdd(c.Total(), r.HostedMicros)-r.WaivedMicros == r.CostMicros
}

// CleanText returns s as PostgreSQL's text and jsonb store it: without U+0000, which both
// refuse, and with invalid UTF-8 replaced by U+FFFD.
func CleanText(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
}

// UsageRecords returns the account's newest usage records, newest first, at most limit.
func (s *Store) UsageRecords(ctx context.Context, accountID uuid.UUID, limit int) ([]UsageRecord, error) {
	rows, err := s.q.ListUsageRecords(ctx, db.ListUsageRecordsParams{AccountID: accountID, Limit: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]UsageRecord, len(rows))
	for i, r := range rows {
		if out[i], err = recordOf(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// recordOf is a usage row as a UsageRecord.
func recordOf(r db.UsageRecord) (UsageRecord, error) {
	out := UsageRecord{
		AccountID: r.AccountID, RequestID: r.RequestID, APIKeyID: uuid.UUID(r.ApiKeyID.Bytes),
		Model: r.Model, Route: r.Route, Provider: r.Provider, UpstreamModel: r.UpstreamModel,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostMicros: r.CostMicros, Status: r.Status,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, RecordedAt: r.RecordedAt,
		HostedMicros: r.HostedToolMicros, OnCredit: r.OnCredit,
		CacheReadTokens: r.CacheReadTokens, CacheWrite5mTokens: r.CacheWrite5mTokens,
		CacheWrite1hTokens: r.CacheWrite1hTokens, ReasoningTokens: r.ReasoningTokens, ServiceTier: r.ServiceTier,
		Costs: price.Breakdown{Input: r.InputCostMicros, CacheRead: r.CacheReadCostMicros,
			CacheWrite5m: r.CacheWrite5mCostMicros, CacheWrite1h: r.CacheWrite1hCostMicros, Output: r.OutputCostMicros},
		WaivedMicros: r.WaivedMicros, CacheSavingsMicros: r.CacheSavingsMicros, FittedOutputTokens: r.FittedOutputTokens,
	}
	if len(r.Price) > 0 {
		var p price.Price
		if err := json.Unmarshal(r.Price, &p); err != nil {
			return UsageRecord{}, err
		}
		out.Price = &p
		out.Costs.LongContext = p.LongContext != nil && r.InputTokens > p.LongContext.AboveInputTokens
	}
	if r.AgentSessionID.Valid {
		out.AgentSessionID = uuid.UUID(r.AgentSessionID.Bytes)
	}
	if len(r.TraceID) == 16 {
		out.TraceID = [16]byte(r.TraceID)
	}
	if len(r.HostedToolCalls) > 0 {
		if err := json.Unmarshal(r.HostedToolCalls, &out.HostedCalls); err != nil {
			return UsageRecord{}, err
		}
	}
	return out, nil
}

// UsageTotals counts the account's usage records and adds up their cost.
func (s *Store) UsageTotals(ctx context.Context, accountID uuid.UUID) (records, costMicros int64, err error) {
	row, err := s.q.SumUsageRecords(ctx, accountID)
	if err != nil {
		return 0, 0, err
	}
	return row.Records, row.CostMicros, nil
}

// Tokens are the record's counts by the kinds they are priced at.
func (r UsageRecord) Tokens() price.Tokens {
	return price.Tokens{Uncached: max(r.InputTokens-r.CacheReadTokens-r.CacheWrite5mTokens-r.CacheWrite1hTokens, 0),
		CacheRead: r.CacheReadTokens, CacheWrite5m: r.CacheWrite5mTokens, CacheWrite1h: r.CacheWrite1hTokens,
		Output: r.OutputTokens, Reasoning: r.ReasoningTokens}
}
