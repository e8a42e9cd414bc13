package usageview

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/sealedid"
)

// The sizes of a request log page.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// Filter narrows the request log (and its CSV export). Its zero value is every request.
type Filter struct {
	// From and To bound the requests' start times: From <= started_at < To (zero: open).
	From, To time.Time
	// Model, Route and Status, when not empty, are the exact values to keep.
	Model, Route, Status string
	// KeyID, when not uuid.Nil, keeps the requests that came with that key.
	KeyID uuid.UUID
}

// Cursor is where a request log page starts: after the row with that start time and id (the
// last row of the previous page). The zero Cursor is the first page.
type Cursor struct {
	StartedAt time.Time
	ID        int64
}

// IsZero reports whether c is the first page's cursor.
func (c Cursor) IsZero() bool { return c.ID == 0 && c.StartedAt.IsZero() }

// Seal is the cursor as a URL parameter ("" for the first page): its start time in
// microseconds since 1970 (PostgreSQL's precision) and its id, sealed (impl/sealedid), since
// the id is usage_records' sequence, which counts every account's requests together.
func (c Cursor) Seal(s *sealedid.Seal) string {
	if c.IsZero() {
		return ""
	}
	return s.Pair(c.StartedAt.UnixMicro(), c.ID)
}

// maxCursorMicros bounds the start time a cursor may hold: the year 10000.
var maxCursorMicros = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// OpenCursor reads a cursor written by Cursor.Seal with the same key ("" is the first page).
func OpenCursor(s *sealedid.Seal, token string) (Cursor, error) {
	if token == "" {
		return Cursor{}, nil
	}
	micros, id, ok := s.OpenPair(token)
	if !ok || id <= 0 || micros < 0 || micros >= maxCursorMicros {
		return Cursor{}, fmt.Errorf("not a page cursor")
	}
	return Cursor{StartedAt: time.UnixMicro(micros).UTC(), ID: id}, nil
}

// Request is one row of the request log: one settled request.
type Request struct {
	ID        int64
	RequestID string
	// StartedAt and FinishedAt bound the request; Latency is their difference.
	StartedAt, FinishedAt time.Time
	Route                 string
	Model                 string
	// Provider and UpstreamModel are the upstream that served the request: for a fusion
	// model, the expert the router chose.
	Provider, UpstreamModel string
	// KeyID is the key the request came with (uuid.Nil: none); KeyName, KeyPrefix and
	// KeySuffix (its last four characters, "" for keys made before they were kept) name it
	// while the key exists.
	KeyID                         uuid.UUID
	KeyName, KeyPrefix, KeySuffix string
	// InputTokens counts every input token; CacheReadTokens, CacheWrite5mTokens and
	// CacheWrite1hTokens are the parts read from and written to the provider's prompt cache
	// (UncachedTokens is the rest). OutputTokens counts every output token; ReasoningTokens is
	// the part spent on reasoning (billed as output).
	InputTokens        int64
	OutputTokens       int64
	CacheReadTokens    int64
	CacheWrite5mTokens int64
	CacheWrite1hTokens int64
	ReasoningTokens    int64
	// FittedOutputTokens is the output bound the gateway fitted to the caller's credit for a
	// request that gave none and could not afford the model's whole bound (0: not fitted;
	// docs/billing.md). Output billed never exceeds it.
	FittedOutputTokens int64
	// ServiceTier is the service tier the upstream reported ("" when it did not say).
	ServiceTier string
	// CostMicros is what the request was billed. For a priced request (Price not nil) it is
	// Costs.Total() + HostedMicros - WaivedMicros; a request billed before per-kind prices
	// (migration 0012) has no Price and no Costs. The requests of one page billed at the same
	// price share their Price: read it, never change it.
	CostMicros int64
	Price      *price.Price
	Costs      price.Breakdown
	// WaivedMicros is the part of the full cost that was not billed (above the request's
	// reservation, or all of it for an answer that never reached its client);
	// CacheSavingsMicros what prompt caching saved against the uncached input price.
	WaivedMicros       int64
	CacheSavingsMicros int64
	// HostedCalls counts the billed calls of the provider's hosted tools by name (nil: none);
	// HostedMicros is their part of CostMicros.
	HostedCalls  map[string]int64
	HostedMicros int64
	Status       string
	// OnCredit marks a request served on credit during a database outage.
	OnCredit bool
	// TraceID is the W3C trace id of the request's trace (all zero: not traced).
	TraceID [16]byte
}

// UncachedTokens is the input neither read from nor written to the prompt cache.
func (r Request) UncachedTokens() int64 {
	return max(r.InputTokens-r.CacheReadTokens-r.CacheWrite5mTokens-r.CacheWrite1hTokens, 0)
}

// CacheWriteTokens is the input written to the prompt cache, for five minutes and for an hour.
func (r Request) CacheWriteTokens() int64 { return r.CacheWrite5mTokens + r.CacheWrite1hTokens }

// Latency is how long the request took.
func (r Request) Latency() time.Duration { return r.FinishedAt.Sub(r.StartedAt) }

// Cursor is the cursor of the page that follows this row.
func (r Request) Cursor() Cursor { return Cursor{StartedAt: r.StartedAt, ID: r.ID} }

// Page is one page of the request log, newest first.
type Page struct {
	Requests []Request
	// Next is the cursor of the next (older) page; zero when this is the last page.
	Next Cursor
}

// farFuture and farPast stand for open bounds: PostgreSQL's timestamptz holds both.
var (
	farFuture = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	farPast   = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
)

// RequestLog returns the page of the account's requests that match f and come after the
// cursor, newest first (by start time, then id), at most limit rows (DefaultPageSize when
// limit <= 0, at most MaxPageSize). Pages are keyset pages: each is one index range scan
// however deep, and rows written while a person pages never make a row appear twice or go
// missing from the pages that follow.
func (s *Service) RequestLog(ctx context.Context, accountID uuid.UUID, f Filter, after Cursor, limit int) (Page, error) {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	limit = min(limit, MaxPageSize)
	rows, err := s.logPage(ctx, accountID, f, after, limit+1)
	if err != nil {
		return Page{}, err
	}
	var p Page
	if len(rows) > limit {
		rows = rows[:limit]
		p.Next = rows[limit-1].Cursor()
	}
	p.Requests = rows
	return p, nil
}

// logPage reads up to n rows after the cursor, through the query whose index fits f.
func (s *Service) logPage(ctx context.Context, accountID uuid.UUID, f Filter, after Cursor, n int) ([]Request, error) {
	from, to := f.From, f.To
	if from.IsZero() {
		from = farPast
	}
	if to.IsZero() {
		to = farFuture
	}
	before := after
	if before.IsZero() {
		before = Cursor{StartedAt: farFuture, ID: math.MaxInt64}
	}
	lim := int32(min(n, math.MaxInt32))
	// usage_records is partitioned by month (migration 0014): a page is first read from the
	// months since the start of the month before the newest row it may hold, a query that
	// touches one or two partitions; only when they do not fill it is the whole span read
	// (the same rows: every row of the recent months is newer than every older one).
	var rows []db.UsageViewLogPageRow
	newest := before.StartedAt
	if now := s.now(); newest.After(now) {
		newest = now
	}
	if to.Before(newest) {
		newest = to
	}
	nu := newest.UTC()
	recent := time.Date(nu.Year(), nu.Month()-1, 1, 0, 0, 0, 0, time.UTC)
	if recent.After(from) {
		got, err := s.logRows(ctx, accountID, f, recent, to, before, lim)
		if err != nil {
			return nil, err
		}
		if len(got) == int(lim) {
			rows = got
		}
	}
	if rows == nil {
		got, err := s.logRows(ctx, accountID, f, from, to, before, lim)
		if err != nil {
			return nil, err
		}
		rows = got
	}
	// Archived months (archive.go) are read when this page may reach into one: when
	// PostgreSQL's rows did not fill it, or its last row is older than the end of the newest
	// archived month.
	if s.archive != nil && (len(rows) < int(lim) || rows[len(rows)-1].StartedAt.Before(s.archivedUntil(ctx))) {
		old, err := s.archivedLogPage(ctx, accountID, f, from, to, before, int(lim))
		if err != nil {
			return nil, err
		}
		rows = mergeLogRows(rows, old, int(lim))
	}
	out := make([]Request, len(rows))
	named := make([]*Request, len(rows))
	prices := priceCache{}
	for i, r := range rows {
		req, err := requestOf(r, prices)
		if err != nil {
			return nil, err
		}
		out[i], named[i] = req, &out[i]
	}
	// The page's keys' names, in one query (a join would look them up row by row).
	if err := s.nameKeys(ctx, accountID, named); err != nil {
		return nil, err
	}
	return out, nil
}

// logRows reads up to lim of the account's rows that match f in [from, to) before the cursor,
// newest first, from PostgreSQL, through the query whose index fits f.
func (s *Service) logRows(ctx context.Context, accountID uuid.UUID, f Filter, from, to time.Time, before Cursor, lim int32) ([]db.UsageViewLogPageRow, error) {
	var rows []db.UsageViewLogPageRow
	switch {
	case f.KeyID != uuid.Nil:
		got, err := s.q.UsageViewLogPageByKey(ctx, db.UsageViewLogPageByKeyParams{
			AccountID: accountID, ApiKeyID: f.KeyID, FromTime: from, ToTime: to,
			BeforeStarted: before.StartedAt, BeforeID: before.ID,
			Model: f.Model, Route: f.Route, Status: f.Status, Lim: lim,
		})
		if err != nil {
			return nil, err
		}
		for _, r := range got {
			rows = append(rows, db.UsageViewLogPageRow(r))
		}
	case f.Model != "":
		got, err := s.q.UsageViewLogPageByModel(ctx, db.UsageViewLogPageByModelParams{
			AccountID: accountID, Model: f.Model, FromTime: from, ToTime: to,
			BeforeStarted: before.StartedAt, BeforeID: before.ID,
			Route: f.Route, Status: f.Status, Lim: lim,
		})
		if err != nil {
			return nil, err
		}
		for _, r := range got {
			rows = append(rows, db.UsageViewLogPageRow(r))
		}
	default:
		got, err := s.q.UsageViewLogPage(ctx, db.UsageViewLogPageParams{
			AccountID: accountID, FromTime: from, ToTime: to,
			BeforeStarted: before.StartedAt, BeforeID: before.ID,
			Route: f.Route, Status: f.Status, Lim: lim,
		})
		if err != nil {
			return nil, err
		}
		rows = got
	}
	return rows, nil
}

// requestOf is a row of the request log as a Request (without its key's name), its price read
// through prices.
func requestOf(r db.UsageViewLogPageRow, prices priceCache) (Request, error) {
	req := Request{
		ID: r.ID, RequestID: r.RequestID, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		Route: r.Route, Model: r.Model, Provider: r.Provider, UpstreamModel: r.UpstreamModel,
		KeyID:       keyID(r.ApiKeyID),
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostMicros: r.CostMicros,
		CacheReadTokens: r.CacheReadTokens, CacheWrite5mTokens: r.CacheWrite5mTokens,
		CacheWrite1hTokens: r.CacheWrite1hTokens, ReasoningTokens: r.ReasoningTokens, ServiceTier: r.ServiceTier,
		FittedOutputTokens: r.FittedOutputTokens,
		Costs: price.Breakdown{Input: r.InputCostMicros, CacheRead: r.CacheReadCostMicros,
			CacheWrite5m: r.CacheWrite5mCostMicros, CacheWrite1h: r.CacheWrite1hCostMicros, Output: r.OutputCostMicros},
		WaivedMicros: r.WaivedMicros, CacheSavingsMicros: r.CacheSavingsMicros,
		HostedMicros: r.HostedToolMicros, Status: r.Status, OnCredit: r.OnCredit,
	}
	if len(r.TraceID) == 16 {
		req.TraceID = [16]byte(r.TraceID)
	}
	var err error
	if req.HostedCalls, err = hostedCalls(r.HostedToolCalls); err != nil {
		return Request{}, fmt.Errorf("usage record %d: hosted tool calls: %w", r.ID, err)
	}
	if req.Price, err = prices.read(r.Price); err != nil {
		return Request{}, fmt.Errorf("usage record %d: price: %w", r.ID, err)
	}
	if req.Price != nil {
		_, req.Costs.LongContext = req.Price.RatesFor(req.InputTokens)
	}
	return req, nil
}

// hostedCalls reads a usage record's hosted tool calls (nil for none).
func hostedCalls(raw []byte) (map[string]int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var calls map[string]int64
	err := json.Unmarshal(raw, &calls)
	return calls, err
}

// priceCache holds the prices read from usage records by their JSON text: the requests of a
// page or a statement are billed at a few prices, each read once (reading them row by row was
// a third of a statement's CPU time). Requests read through one cache share their Price.
type priceCache map[string]*price.Price

// read reads a usage record's price (nil for a record billed before per-kind prices).
func (c priceCache) read(raw []byte) (*price.Price, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if p, ok := c[string(raw)]; ok {
		return p, nil
	}
	var p price.Price
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	c[string(raw)] = &p
	return &p, nil
}

// keyID is a nullable key id as a uuid.UUID (uuid.Nil for NULL).
func keyID(id pgtype.UUID) uuid.UUID {
	if !id.Valid {
		return uuid.Nil
	}
	return uuid.UUID(id.Bytes)
}
