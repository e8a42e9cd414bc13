package store

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
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
	InputTokens   int64
	OutputTokens  int64
	CostMicros    int64
	// HostedCalls counts, by tool name (web_search, ...), the billed calls of tools the
	// provider ran and bills per call (nil: none); HostedMicros is their part of CostMicros.
	HostedCalls  map[string]int64
	HostedMicros int64
	// Status is how the request ended, as the HTTP API settles it (impl/httpapi/inference.go):
	// "ok", "client_disconnected", "shutdown", or an upstream failure ("upstream_error",
	// "upstream_stalled", "upstream_cut_off", "upstream_malformed", "upstream_read_failed");
	// "completed" when the meter is given none (billing), "unknown" when written empty.
	Status     string
	StartedAt  time.Time
	FinishedAt time.Time
	// OnCredit marks a request served on credit during a database outage: no credit hold
	// backed it, so WriteUsage bills it from the account's free credit only, and its ledger
	// entry's note says that it was served on credit.
	OnCredit bool
	// AgentSessionID is the agent session whose model call this was (uuid.Nil: none).
	AgentSessionID uuid.UUID
	// RecordedAt is when the row was written (read back only).
	RecordedAt time.Time
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
	// Charges has one entry per existing account of the batch.
	Charges []UsageCharge
}

// UsageLedgerKey is the idempotency key of a request's usage entry in the credit ledger.
func UsageLedgerKey(requestID string) string { return "usage:" + requestID }

// WriteUsage writes a batch of usage records and bills them, in one transaction of two
// statements whatever the batch size: it locks the batch's accounts (in id order, so that
// writers never deadlock), then one statement inserts the records, skipping those whose
// (account, request id) is already in usage_records (so that a batch written twice bills
// once), and for the records it inserted appends their usage ledger entries and moves balance,
// held credit and the holder's hold, set-based. The cost comes out of the holder's hold (that of
// records served on credit out of the account's free credit); see UsageCharge for when it
// cannot.
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
			return nil
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
		return nil
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
	status := clean(r.Status)
	if status == "" {
		status = "unknown"
	}
	p.RecordAccountIds = append(p.RecordAccountIds, r.AccountID)
	p.RequestIds = append(p.RequestIds, clean(r.RequestID))
	p.ApiKeyIds = append(p.ApiKeyIds, r.APIKeyID)
	p.Models = append(p.Models, clean(r.Model))
	p.Routes = append(p.Routes, clean(r.Route))
	p.Providers = append(p.Providers, clean(r.Provider))
	p.UpstreamModels = append(p.UpstreamModels, clean(r.UpstreamModel))
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
	p.HostedToolMicros = append(p.HostedToolMicros, min(max(r.HostedMicros, 0), max(r.CostMicros, 0)))
	p.OnCredit = append(p.OnCredit, r.OnCredit)
	p.AgentSessionIds = append(p.AgentSessionIds, r.AgentSessionID)
}

func clean(s string) string {
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
		out[i] = UsageRecord{
			AccountID: r.AccountID, RequestID: r.RequestID, APIKeyID: uuid.UUID(r.ApiKeyID.Bytes),
			Model: r.Model, Route: r.Route, Provider: r.Provider, UpstreamModel: r.UpstreamModel,
			InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostMicros: r.CostMicros, Status: r.Status,
			StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, RecordedAt: r.RecordedAt,
			HostedMicros: r.HostedToolMicros, OnCredit: r.OnCredit,
		}
		if r.AgentSessionID.Valid {
			out[i].AgentSessionID = uuid.UUID(r.AgentSessionID.Bytes)
		}
		if len(r.HostedToolCalls) > 0 {
			if err := json.Unmarshal(r.HostedToolCalls, &out[i].HostedCalls); err != nil {
				return nil, err
			}
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
