package usageview

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
	"github.com/tollgate/tollgate/impl/sealedid"
)

// The line types of a statement besides the ledger's reasons (grant, usage, adjustment).
const (
	LineOpening = "opening_balance"
	LineClosing = "closing_balance"
)

// usageReason is the ledger's reason for a request's charge (store.ReasonUsage).
const usageReason = "usage"

// statementPageSize is how many ledger entries WriteStatement reads per query.
const statementPageSize = 1000

// StatementHeader is the header row of a statement (WriteStatement). Every row is one of:
//
//   - the opening balance (line_type opening_balance, recorded_at the period's start, the
//     balance in balance_micros and balance_usd, no amount);
//   - one ledger entry of the period (line_type its reason: usage, grant or adjustment), in
//     ledger order, with its id, time, idempotency key (reference) and note, its signed amount
//     (amount_micros, negative for a debit) and the balance after it; a usage line also carries
//     its usage record: the request, its tokens per kind, its price and each kind's cost
//     (KindsHeader), its hosted tools, its cost_micros and not_billed_micros (cost_micros less
//     what the ledger took: the ledger's note says why);
//     A usage line's last column, fitted_output_tokens (added after the others, so that a
//     reader of the old columns by position still reads them), is the output bound its
//     request was fitted to, empty when it was not (FittedCell);
//   - the closing balance (line_type closing_balance, recorded_at the period's end), which is
//     the opening balance plus every amount above, and the balance after the period's last
//     ledger entry.
//
// Amounts are integer micro-units (1 USD = 1,000,000) and, in the _usd columns, the same
// amounts as exact decimal strings with six decimals.
var StatementHeader = append(append([]string{
	"line_type", "entry_id", "recorded_at", "reference", "note",
	"request_id", "started_at", "model", "route", "provider", "expert", "key_id", "key_name",
	"input_tokens", "output_tokens", "hosted_tool_calls", "hosted_tool_micros",
}, KindsHeader...),
	"cost_micros", "not_billed_micros", "amount_micros", "amount_usd", "balance_micros", "balance_usd",
	"fitted_output_tokens",
)

// statementAdded counts StatementHeader's columns after balance_usd.
const statementAdded = 1

// Statement is what WriteStatement wrote: the period, the balances at its two ends and the
// number of ledger entries between them.
type Statement struct {
	// From and To bound the period: ledger entries recorded from From up to (not including) To.
	From, To time.Time
	// OpeningMicros is the balance before the period's first entry, ClosingMicros the balance
	// after its last: OpeningMicros plus the amounts of the Lines entries.
	OpeningMicros, ClosingMicros int64
	Lines                        int
	// UsageMicros is what the period's usage entries took (a positive number), CreditMicros
	// what its other entries added (negative when adjustments took more than grants added).
	UsageMicros, CreditMicros int64
}

// StatementLine is one ledger entry of a statement.
type StatementLine struct {
	// EntryID is the entry's credit_ledger id; the statement shows it sealed (EntryToken).
	EntryID            int64
	RecordedAt         time.Time
	Reason, Reference  string
	Note               string
	AmountMicros       int64
	BalanceAfterMicros int64
	// Usage is the usage record of a usage entry (nil for other entries, and for a usage entry
	// whose record no longer exists).
	Usage *Request
}

// ErrLedgerMismatch reports a ledger whose entries do not add up to their balances: an entry's
// balance after it is not the balance before it plus its amount. It is never expected; a
// statement that meets it stops before its closing balance.
var ErrLedgerMismatch = errors.New("the credit ledger does not add up")

// ledgerTag is the kind of a ledger entry's sealed token (sealedid.Seal.Tagged).
const ledgerTag = 0x7467_6c65_6467_6572 // "tgledger"

// EntryToken is how a statement names the ledger entry with id: "E" and the id sealed with seal
// (the letter keeps a token that would begin with "-" from reading as a spreadsheet formula).
// credit_ledger's ids count every account's entries together (one per settled request), so two
// lines of a statement with plain ids told how many entries the whole gateway recorded between
// them; sealed, an entry keeps one name from statement to statement and says nothing of its
// number.
func EntryToken(seal *sealedid.Seal, id int64) string { return "E" + seal.Tagged(id, ledgerTag) }

// WriteStatement writes the account's statement for the ledger entries recorded in
// [from, to) to w as CSV (StatementHeader): the opening balance, one line per ledger entry in
// ledger order, and the closing balance. The lines are exactly the ledger's: their amounts add
// up to closing - opening, and the closing balance is the balance after the period's last
// entry. An entry belongs to the period by its place in the ledger: the period's entries follow
// the last entry recorded before from and end with the last one recorded before to (an entry's
// time is when its transaction began, and a transaction may wait for another's lock, so an entry
// stamped a moment after a boundary may precede in the ledger one stamped before it; it then
// belongs to the earlier period, and consecutive periods neither overlap nor leave a gap).
//
// Entries are read 1,000 at a time, each page written as it is read, as ExportCSV does: when
// the first page fails, nothing has been written to w; a later failure, or a ledger that does
// not add up (ErrLedgerMismatch), stops the output before the closing balance, so that a cut
// statement never looks whole. The entries are named by their sealed ids (EntryToken with
// seal, which is required).
func (s *Service) WriteStatement(ctx context.Context, accountID uuid.UUID, from, to time.Time, seal *sealedid.Seal, w io.Writer) (Statement, error) {
	if !to.After(from) {
		return Statement{}, fmt.Errorf("usageview: a statement's period must end after it starts")
	}
	if seal == nil {
		return Statement{}, fmt.Errorf("usageview: a statement needs the seal of its entry ids")
	}
	b, err := s.q.UsageViewStatementBounds(ctx, db.UsageViewStatementBoundsParams{AccountID: accountID, FromTime: from, ToTime: to})
	if err != nil {
		return Statement{}, err
	}
	st := Statement{From: from, To: to, OpeningMicros: b.OpeningMicros}
	cw := csv.NewWriter(w)
	record := make([]string, len(StatementHeader))
	if err := cw.Write(StatementHeader); err != nil {
		return Statement{}, err
	}
	if err := cw.Write(balanceRecord(record, LineOpening, from, openingNote(seal, b.OpeningID, from), b.OpeningMicros)); err != nil {
		return Statement{}, err
	}
	balance, after := b.OpeningMicros, b.OpeningID
	prices := priceCache{}
	for {
		lines, err := s.statementPage(ctx, accountID, after, b.ClosingID, prices)
		if err != nil {
			return st, err
		}
		for _, l := range lines {
			if l.BalanceAfterMicros != balance+l.AmountMicros {
				return st, fmt.Errorf("%w: entry %d moves the balance from %d by %d to %d", ErrLedgerMismatch,
					l.EntryID, balance, l.AmountMicros, l.BalanceAfterMicros)
			}
			balance = l.BalanceAfterMicros
			st.add(l)
			if err := cw.Write(lineRecord(record, l, seal)); err != nil {
				return st, err
			}
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return st, err
		}
		if len(lines) < statementPageSize {
			break
		}
		after = lines[len(lines)-1].EntryID
	}
	if balance != b.ClosingMicros {
		return st, fmt.Errorf("%w: the period's entries end at %d, its last entry's balance is %d", ErrLedgerMismatch, balance, b.ClosingMicros)
	}
	st.ClosingMicros = balance
	note := fmt.Sprintf("opening balance plus the %d lines above", st.Lines)
	if err := cw.Write(balanceRecord(record, LineClosing, to, note, balance)); err != nil {
		return st, err
	}
	cw.Flush()
	return st, cw.Error()
}

// add counts a line into the statement's totals.
func (st *Statement) add(l StatementLine) {
	st.Lines++
	if l.Reason == usageReason {
		st.UsageMicros -= l.AmountMicros
	} else {
		st.CreditMicros += l.AmountMicros
	}
}

// openingNote says where the opening balance comes from.
func openingNote(seal *sealedid.Seal, openingID int64, from time.Time) string {
	if openingID == 0 {
		return "no ledger entry before " + from.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("balance after ledger entry %s, the last before %s", EntryToken(seal, openingID), from.UTC().Format(time.RFC3339Nano))
}

// statementPage reads the account's ledger entries after the entry after, up to closingID,
// with the usage records of the usage entries (their prices read through prices) and the names
// of their keys.
func (s *Service) statementPage(ctx context.Context, accountID uuid.UUID, after, closingID int64, prices priceCache) ([]StatementLine, error) {
	rows, err := s.q.UsageViewStatementLines(ctx, db.UsageViewStatementLinesParams{
		AccountID: accountID, AfterID: after, ClosingID: closingID, Lim: statementPageSize})
	if err != nil {
		return nil, err
	}
	lines := make([]StatementLine, len(rows))
	var usage []*Request
	// The records of usage entries whose months were archived come from the archives.
	var missing []string
	var until time.Time
	if s.archive != nil {
		for _, r := range rows {
			if r.Reason == usageReason && !r.HasRecord && strings.HasPrefix(r.IdempotencyKey, "usage:") {
				missing = append(missing, strings.TrimPrefix(r.IdempotencyKey, "usage:"))
				until = r.CreatedAt
			}
		}
	}
	archived, err := s.archivedStatementRecords(ctx, accountID, missing, until)
	if err != nil {
		return nil, err
	}
	for i, r := range rows {
		lines[i] = StatementLine{EntryID: r.ID, RecordedAt: r.CreatedAt, Reason: r.Reason, Reference: r.IdempotencyKey,
			Note: r.Note, AmountMicros: r.AmountMicros, BalanceAfterMicros: r.BalanceAfterMicros}
		if a, ok := archived[strings.TrimPrefix(r.IdempotencyKey, "usage:")]; ok && r.Reason == usageReason && !r.HasRecord {
			req, err := archivedStatementUsage(a, prices)
			if err != nil {
				return nil, fmt.Errorf("ledger entry %d: %w", r.ID, err)
			}
			lines[i].Usage = &req
			usage = append(usage, lines[i].Usage)
			continue
		}
		if !r.HasRecord {
			continue
		}
		req, err := statementUsage(r, prices)
		if err != nil {
			return nil, err
		}
		lines[i].Usage = &req
		usage = append(usage, lines[i].Usage)
	}
	if err := s.nameKeys(ctx, accountID, usage); err != nil {
		return nil, err
	}
	return lines, nil
}

// statementUsage is the usage record of a statement's line as a Request, read as the request
// log reads its rows.
func statementUsage(r db.UsageViewStatementLinesRow, prices priceCache) (Request, error) {
	row := db.UsageViewLogPageRow{
		RequestID: r.RequestID, StartedAt: r.StartedAt, Model: r.Model, Route: r.Route, Provider: r.Provider,
		UpstreamModel: r.UpstreamModel, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
		CostMicros: r.CostMicros, HostedToolCalls: r.HostedToolCalls, HostedToolMicros: r.HostedToolMicros,
		OnCredit: r.OnCredit, CacheReadTokens: r.CacheReadTokens, CacheWrite5mTokens: r.CacheWrite5mTokens,
		CacheWrite1hTokens: r.CacheWrite1hTokens, ReasoningTokens: r.ReasoningTokens, ServiceTier: r.ServiceTier,
		Price: r.Price, InputCostMicros: r.InputCostMicros, CacheReadCostMicros: r.CacheReadCostMicros,
		CacheWrite5mCostMicros: r.CacheWrite5mCostMicros, CacheWrite1hCostMicros: r.CacheWrite1hCostMicros,
		OutputCostMicros: r.OutputCostMicros, WaivedMicros: r.WaivedMicros, CacheSavingsMicros: r.CacheSavingsMicros,
		FittedOutputTokens: r.FittedOutputTokens,
	}
	row.ApiKeyID.Bytes, row.ApiKeyID.Valid = r.ApiKeyID, r.ApiKeyID != uuid.Nil
	req, err := requestOf(row, prices)
	if err != nil {
		return Request{}, fmt.Errorf("ledger entry %d: %w", r.ID, err)
	}
	return req, nil
}

// archivedStatementUsage is an archived usage record as a statement's line reads it: with
// what the statement's query gives (statementUsage), nothing more.
func archivedStatementUsage(r db.UsageViewLogPageRow, prices priceCache) (Request, error) {
	r.ID, r.FinishedAt, r.TraceID, r.Status = 0, time.Time{}, nil, ""
	return requestOf(r, prices)
}

// balanceRecord fills record with an opening or closing balance row.
func balanceRecord(record []string, lineType string, at time.Time, note string, balance int64) []string {
	clear(record)
	record[0] = lineType
	record[2] = at.UTC().Format(time.RFC3339Nano)
	record[4] = SafeCell(note)
	last := len(record) - statementAdded
	record[last-2] = strconv.FormatInt(balance, 10)
	record[last-1] = USD(balance)
	return record
}

// lineRecord fills record with a ledger entry's row.
func lineRecord(record []string, l StatementLine, seal *sealedid.Seal) []string {
	clear(record)
	n := strconv.FormatInt
	record[0] = SafeCell(l.Reason)
	record[1] = EntryToken(seal, l.EntryID)
	record[2] = l.RecordedAt.UTC().Format(time.RFC3339Nano)
	record[3] = SafeCell(l.Reference)
	record[4] = SafeCell(l.Note)
	last := len(record) - statementAdded
	if r := l.Usage; r != nil {
		usageCells(record[5:17+len(KindsHeader)], *r)
		record[last-6] = n(r.CostMicros, 10)
		record[last-5] = n(r.CostMicros+l.AmountMicros, 10)
		record[last] = FittedCell(*r)
	}
	record[last-4] = n(l.AmountMicros, 10)
	record[last-3] = USD(l.AmountMicros)
	record[last-2] = n(l.BalanceAfterMicros, 10)
	record[last-1] = USD(l.BalanceAfterMicros)
	return record
}

// usageCells fills a usage line's cells from request_id to the end of KindsHeader's columns.
func usageCells(cells []string, r Request) {
	key := ""
	if r.KeyID != uuid.Nil {
		key = r.KeyID.String()
	}
	cells[0] = SafeCell(r.RequestID)
	cells[1] = r.StartedAt.UTC().Format(time.RFC3339Nano)
	cells[2] = SafeCell(r.Model)
	cells[3] = SafeCell(r.Route)
	cells[4] = SafeCell(r.Provider)
	cells[5] = SafeCell(r.UpstreamModel)
	cells[6] = key
	cells[7] = SafeCell(KeyLabel(r.KeyName, r.KeyPrefix))
	cells[8] = strconv.FormatInt(r.InputTokens, 10)
	cells[9] = strconv.FormatInt(r.OutputTokens, 10)
	cells[10] = SafeCell(HostedCallsText(r.HostedCalls))
	cells[11] = strconv.FormatInt(r.HostedMicros, 10)
	kindCells(cells[12:], r)
}

// Period is a statement's period: from From (included) to To (excluded).
type Period struct{ From, To time.Time }

// ThisMonth is the period from the first day of now's month in loc (nil: UTC) to the end of
// now's day: the page's statement when the URL names no period.
func ThisMonth(now time.Time, loc *time.Location) Period {
	if loc == nil {
		loc = time.UTC
	}
	today := midnight(now, loc)
	return Period{From: today.AddDate(0, 0, 1-today.Day()), To: today.AddDate(0, 0, 1)}
}

// MonthLayout is how a calendar month is named: 2026-11.
const MonthLayout = "2006-01"

// MonthPeriod is the calendar month named s (MonthLayout) in UTC: from its first midnight
// (included) to the next month's (excluded), the period ThisMonth starts with and the one a
// statement's from and to of the month's first and last days name.
func MonthPeriod(s string) (Period, error) {
	t, err := time.Parse(MonthLayout, s)
	if err != nil {
		return Period{}, fmt.Errorf("%q is not a calendar month: want one such as 2026-11 (year and month)", s)
	}
	return Period{From: t, To: t.AddDate(0, 1, 0)}, nil
}

// Values is the period as the URL query values ParseStatementQuery reads (days as days, to
// included).
func (p Period) Values(loc *time.Location) url.Values {
	if loc == nil {
		loc = time.UTC
	}
	return url.Values{ParamFrom: {formatTime(p.From, loc, false)}, ParamTo: {formatTime(p.To, loc, true)}}
}

// ParseStatementQuery reads a statement's period from URL query values: from and to, each a day
// in loc (nil: UTC; to=DAY is included: the period ends at the next midnight) or an RFC 3339
// time (to excluded), as the request log's filters are read. An empty from is the first day of
// now's month, an empty to the end of now's day.
func ParseStatementQuery(v url.Values, now time.Time, loc *time.Location) (Period, error) {
	if loc == nil {
		loc = time.UTC
	}
	p := ThisMonth(now, loc)
	var probs []Problem
	for _, f := range []struct {
		param string
		end   bool
		dst   *time.Time
	}{{ParamFrom, false, &p.From}, {ParamTo, true, &p.To}} {
		s := v.Get(f.param)
		if s == "" {
			continue
		}
		t, err := parseTime(s, loc, f.end)
		if err != nil {
			probs = append(probs, Problem{f.param, err.Error()})
			continue
		}
		*f.dst = t
	}
	if len(probs) == 0 && !p.To.After(p.From) {
		probs = append(probs, Problem{ParamTo, "must be after " + ParamFrom})
	}
	if len(probs) == 0 && p.To.Year() > 9999 {
		// The statement's closing line is dated at its end, which RFC 3339 writes with four
		// digits of year at most.
		probs = append(probs, Problem{ParamTo, "must be before 9999-12-31"})
	}
	if len(probs) > 0 {
		return Period{}, &QueryError{Problems: probs}
	}
	return p, nil
}

// nameKeys sets the key names of requests, in one query for all their keys.
func (s *Service) nameKeys(ctx context.Context, accountID uuid.UUID, reqs []*Request) error {
	var ids []uuid.UUID
	seen := map[uuid.UUID]bool{}
	for _, r := range reqs {
		if r.KeyID != uuid.Nil && !seen[r.KeyID] {
			seen[r.KeyID] = true
			ids = append(ids, r.KeyID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	labels, err := s.q.UsageViewKeyLabels(ctx, db.UsageViewKeyLabelsParams{AccountID: accountID, Ids: ids})
	if err != nil {
		return err
	}
	for _, l := range labels {
		for _, r := range reqs {
			if r.KeyID == l.ID {
				r.KeyName, r.KeyPrefix, r.KeySuffix = l.Name, l.DisplayPrefix, l.DisplaySuffix
			}
		}
	}
	return nil
}
