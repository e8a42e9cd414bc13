package usageview

import (
	"context"
	"encoding/csv"
	"encoding/hex"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// exportPageSize is how many rows ExportCSV reads per query: one short query per page, so that
// a slow download holds no database connection between pages.
const exportPageSize = 1000

// CSVHeader is the header row of ExportCSV: the columns of the first export, then KindsHeader
// (added with per-kind prices), then trace_id (the request's trace, hex, empty when it was not
// traced), then fitted_output_tokens (FittedCell), each addition after the others so that a
// reader of the old columns by position still reads them.
var CSVHeader = append(append([]string{
	"started_at", "request_id", "route", "model", "provider", "expert", "key_id", "key_name",
	"input_tokens", "output_tokens", "cost_micros", "cost_usd", "hosted_tool_calls",
	"hosted_tool_micros", "status", "latency_ms", "on_credit",
}, KindsHeader...), "trace_id", "fitted_output_tokens")

// FittedCell is the fitted_output_tokens cell of an export or a statement: the output bound
// the gateway fitted to the caller's credit for a request that gave none (docs/billing.md),
// empty when the request was not fitted.
func FittedCell(r Request) string {
	if r.FittedOutputTokens <= 0 {
		return ""
	}
	return strconv.FormatInt(r.FittedOutputTokens, 10)
}

// KindsHeader names the columns that explain a request's cost, in the request log's export and
// in a statement's usage lines: the tokens per kind (uncached_input_tokens plus the three cache
// counts is input_tokens; reasoning_tokens is part of output_tokens), the service tier, the
// price (its catalog entry, the date from which that entry holds, whether its long-context
// tier applied, and the rate of each kind in micro-units per million tokens), each kind's cost,
// what was waived and what prompt caching saved, in micro-units. A request billed before
// per-kind prices has empty price, rate and kind cost cells.
var KindsHeader = []string{
	"uncached_input_tokens", "cache_read_tokens", "cache_write_5m_tokens", "cache_write_1h_tokens", "reasoning_tokens",
	"service_tier", "price_catalog", "price_effective", "long_context",
	"uncached_input_rate_micros_per_mtok", "cache_read_rate_micros_per_mtok", "cache_write_5m_rate_micros_per_mtok",
	"cache_write_1h_rate_micros_per_mtok", "output_rate_micros_per_mtok",
	"uncached_input_cost_micros", "cache_read_cost_micros", "cache_write_5m_cost_micros", "cache_write_1h_cost_micros",
	"output_cost_micros", "waived_micros", "cache_savings_micros",
}

// ExportCSV writes the account's requests that match f, newest first, to w as CSV: the header
// row, then every row of every page, read page by page (keyset pages, as RequestLog) and
// written as it is read. Cells are quoted as RFC 4180 says, and a text cell that a spreadsheet
// would take for a formula (one starting with = + - @, a tab or a carriage return) is prefixed
// with a single quote. It returns how many rows it wrote; on an error (a failed write, the
// context done, the database) the output stops after the last whole page written, and when
// the first page fails nothing has been written to w at all.
func (s *Service) ExportCSV(ctx context.Context, accountID uuid.UUID, f Filter, w io.Writer) (int, error) {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return 0, err
	}
	written := 0
	after := Cursor{}
	record := make([]string, len(CSVHeader))
	for {
		rows, err := s.logPage(ctx, accountID, f, after, exportPageSize)
		if err != nil {
			// Rows already written were flushed; a failure before the first page leaves
			// nothing written, not even the header, so the caller can still answer an error.
			return written, err
		}
		for _, r := range rows {
			if err := cw.Write(csvRecord(record, r)); err != nil {
				return written, err
			}
			written++
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return written, err
		}
		if len(rows) < exportPageSize {
			return written, nil
		}
		after = rows[len(rows)-1].Cursor()
	}
}

// csvRecord fills record with r's cells.
func csvRecord(record []string, r Request) []string {
	key := ""
	if r.KeyID != uuid.Nil {
		key = r.KeyID.String()
	}
	record[0] = r.StartedAt.UTC().Format(time.RFC3339Nano)
	record[1] = SafeCell(r.RequestID)
	record[2] = SafeCell(r.Route)
	record[3] = SafeCell(r.Model)
	record[4] = SafeCell(r.Provider)
	record[5] = SafeCell(r.UpstreamModel)
	record[6] = key
	record[7] = SafeCell(KeyLabel(r.KeyName, r.KeyPrefix))
	record[8] = strconv.FormatInt(r.InputTokens, 10)
	record[9] = strconv.FormatInt(r.OutputTokens, 10)
	record[10] = strconv.FormatInt(r.CostMicros, 10)
	record[11] = USD(r.CostMicros)
	record[12] = SafeCell(HostedCallsText(r.HostedCalls))
	record[13] = strconv.FormatInt(r.HostedMicros, 10)
	record[14] = SafeCell(r.Status)
	record[15] = strconv.FormatFloat(float64(r.Latency().Microseconds())/1000, 'f', 3, 64)
	record[16] = strconv.FormatBool(r.OnCredit)
	kindCells(record[17:17+len(KindsHeader)], r)
	record[17+len(KindsHeader)] = ""
	if r.TraceID != ([16]byte{}) {
		record[17+len(KindsHeader)] = hex.EncodeToString(r.TraceID[:])
	}
	record[18+len(KindsHeader)] = FittedCell(r)
	return record
}

// kindCells fills cells (len(KindsHeader) of them) with the columns of KindsHeader.
func kindCells(cells []string, r Request) {
	n := strconv.FormatInt
	cells[0] = n(r.UncachedTokens(), 10)
	cells[1] = n(r.CacheReadTokens, 10)
	cells[2] = n(r.CacheWrite5mTokens, 10)
	cells[3] = n(r.CacheWrite1hTokens, 10)
	cells[4] = n(r.ReasoningTokens, 10)
	cells[5] = SafeCell(r.ServiceTier)
	rates, priced := r.Rates()
	if !priced {
		for i := 6; i <= 18; i++ {
			cells[i] = ""
		}
	} else {
		cells[6] = SafeCell(r.Price.Catalog)
		cells[7] = SafeCell(r.Price.Effective)
		cells[8] = strconv.FormatBool(r.Costs.LongContext)
		for i, v := range []int64{rates.Input, rates.CacheRead, rates.CacheWrite5m, rates.CacheWrite1h, rates.Output,
			r.Costs.Input, r.Costs.CacheRead, r.Costs.CacheWrite5m, r.Costs.CacheWrite1h, r.Costs.Output} {
			cells[9+i] = n(v, 10)
		}
	}
	cells[19] = n(r.WaivedMicros, 10)
	cells[20] = n(r.CacheSavingsMicros, 10)
}

// SafeCell is a text cell that no spreadsheet evaluates: one starting with = + - @ (a formula),
// a tab or a carriage return is prefixed with a single quote (OWASP's advice on CSV injection).
func SafeCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// USD is micro-units as dollars with six decimals and no currency sign, e.g. "1.250000".
func USD(micros int64) string {
	sign := ""
	if micros < 0 {
		sign, micros = "-", -micros
	}
	frac := strconv.FormatInt(micros%1_000_000, 10)
	return sign + strconv.FormatInt(micros/1_000_000, 10) + "." + strings.Repeat("0", 6-len(frac)) + frac
}

// HostedCallsText is hosted tool calls as "name=count" pairs in name order, separated by
// spaces ("" for none).
func HostedCallsText(calls map[string]int64) string {
	names := make([]string, 0, len(calls))
	for n := range calls {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(n + "=" + strconv.FormatInt(calls[n], 10))
	}
	return b.String()
}
