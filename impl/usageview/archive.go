package usageview

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
)

// This file is the read side of archived months (issue 21). usage_records is partitioned by
// month of started_at (migration 0014); a month past the configured retention is written to a
// Parquet object in the object store by impl/usagearchive and its partition dropped, and
// usage_archives lists it. Every read of the request log (and so the CSV export) and of a
// statement's usage lines reads the archived months that its period covers from their Parquet
// objects through DuckDB, filtered by the account as the PostgreSQL queries are, and merges
// them with what PostgreSQL still has, so that a read gives the same answer before and after a
// month is archived. The daily chart in UTC reads usage_daily, which archival keeps.

// ArchiveFiles gives the local file of an archived month's object (dataset.LocalStorage does:
// a local directory, or the object store's read-through cache).
type ArchiveFiles interface {
	LocalPath(ctx context.Context, key string) (string, error)
}

// ArchiveColumns are the columns of an archived month's Parquet object, in order, with their
// DuckDB types: usage_records' columns, uuids as their canonical text, jsonb as its text.
var ArchiveColumns = []struct{ Name, Type string }{
	{"id", "BIGINT"}, {"account_id", "VARCHAR"}, {"request_id", "VARCHAR"}, {"api_key_id", "VARCHAR"},
	{"model", "VARCHAR"}, {"route", "VARCHAR"}, {"provider", "VARCHAR"}, {"upstream_model", "VARCHAR"},
	{"input_tokens", "BIGINT"}, {"output_tokens", "BIGINT"}, {"cost_micros", "BIGINT"}, {"status", "VARCHAR"},
	{"started_at", "TIMESTAMPTZ"}, {"finished_at", "TIMESTAMPTZ"}, {"recorded_at", "TIMESTAMPTZ"},
	{"hosted_tool_calls", "VARCHAR"}, {"hosted_tool_micros", "BIGINT"}, {"on_credit", "BOOLEAN"},
	{"agent_session_id", "VARCHAR"}, {"cache_read_tokens", "BIGINT"}, {"cache_write_5m_tokens", "BIGINT"},
	{"cache_write_1h_tokens", "BIGINT"}, {"reasoning_tokens", "BIGINT"}, {"service_tier", "VARCHAR"},
	{"price", "VARCHAR"}, {"input_cost_micros", "BIGINT"}, {"cache_read_cost_micros", "BIGINT"},
	{"cache_write_5m_cost_micros", "BIGINT"}, {"cache_write_1h_cost_micros", "BIGINT"},
	{"output_cost_micros", "BIGINT"}, {"waived_micros", "BIGINT"}, {"cache_savings_micros", "BIGINT"},
	{"trace_id", "BLOB"}, {"fitted_output_tokens", "BIGINT"},
}

// ArchivedMonth is a month whose partition was archived.
type ArchivedMonth struct {
	// Month is the month's first day, midnight UTC.
	Month     time.Time
	ObjectKey string
	// Records and CostMicros are what was verified in the object before the partition was
	// dropped; ObjectBytes is the object's size.
	Records, CostMicros, ObjectBytes int64
	ArchivedAt                       time.Time
}

// End is the first instant after the month.
func (m ArchivedMonth) End() time.Time { return m.Month.AddDate(0, 1, 0) }

// ArchivedMonths lists the archived months, oldest first.
func (s *Service) ArchivedMonths(ctx context.Context) ([]ArchivedMonth, error) {
	rows, err := s.q.UsageArchivedMonths(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ArchivedMonth, len(rows))
	for i, r := range rows {
		out[i] = ArchivedMonth{Month: r.Month.Time.UTC(), ObjectKey: r.ObjectKey, Records: r.Records,
			CostMicros: r.CostMicros, ObjectBytes: r.ObjectBytes, ArchivedAt: r.ArchivedAt}
	}
	return out, nil
}

// archiveReader reads archived months through one DuckDB in-memory database, opened at first
// use, that can load no extension.
type archiveReader struct {
	files ArchiveFiles
	once  sync.Once
	db    *sql.DB
	err   error
}

// duck opens the reader's database once.
func (a *archiveReader) duck() (*sql.DB, error) {
	a.once.Do(func() {
		v := url.Values{}
		v.Set("threads", "2")
		v.Set("memory_limit", "256MB")
		v.Set("temp_directory", "")
		v.Set("autoinstall_known_extensions", "false")
		v.Set("autoload_known_extensions", "false")
		v.Set("allow_community_extensions", "false")
		v.Set("allow_unsigned_extensions", "false")
		v.Set("allow_persistent_secrets", "false")
		c, err := duckdb.NewConnector("?"+v.Encode(), nil)
		if err != nil {
			a.err = fmt.Errorf("usageview: open duckdb for archived usage: %w", err)
			return
		}
		a.db = sql.OpenDB(c)
	})
	return a.db, a.err
}

// months returns the archived months that overlap [from, to), with their objects' local files.
func (s *Service) archivedFiles(ctx context.Context, from, to time.Time) ([]ArchivedMonth, []string, error) {
	if s.archive == nil {
		return nil, nil, nil
	}
	all, err := s.ArchivedMonths(ctx)
	if err != nil {
		return nil, nil, err
	}
	var months []ArchivedMonth
	var paths []string
	for _, m := range all {
		if !m.End().After(from) || !m.Month.Before(to) {
			continue
		}
		p, err := s.archive.files.LocalPath(ctx, m.ObjectKey)
		if err != nil {
			return nil, nil, fmt.Errorf("usageview: the archive of %s: %w", m.Month.Format("2006-01"), err)
		}
		months = append(months, m)
		paths = append(paths, p)
	}
	return months, paths, nil
}

// parquetList is the rows of the files as one relation, for a FROM clause. Columns were
// added to the archive over time (fitted_output_tokens with migration 0030), so the files are
// read by column name and a column a file does not have is NULL in its rows; every column
// added since the first archives is in the relation even when no file has it (the empty
// SELECT of addedColumns), and its readers read NULL as 0.
func parquetList(paths []string) string {
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = "'" + strings.ReplaceAll(p, "'", "''") + "'"
	}
	return "(SELECT * FROM read_parquet([" + strings.Join(quoted, ", ") + "], union_by_name = true)" +
		" UNION ALL BY NAME SELECT " + addedColumns + " WHERE false)"
}

// addedColumns are the archive's columns that files written before them lack, typed.
const addedColumns = "NULL::BIGINT AS fitted_output_tokens"

// logColumns are the request log's columns in the archive, in UsageViewLogPageRow's order.
const logColumns = `id, request_id, started_at, finished_at, route, model, provider, upstream_model, api_key_id,
	input_tokens, output_tokens, cost_micros, hosted_tool_calls, hosted_tool_micros, status, on_credit,
	cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, reasoning_tokens, service_tier, price,
	input_cost_micros, cache_read_cost_micros, cache_write_5m_cost_micros, cache_write_1h_cost_micros,
	output_cost_micros, waived_micros, cache_savings_micros, trace_id, COALESCE(fitted_output_tokens, 0)`

// scanLogRow reads one archived row in logColumns' order.
func scanLogRow(rows *sql.Rows) (db.UsageViewLogPageRow, error) {
	var r db.UsageViewLogPageRow
	var key, calls, price sql.NullString
	err := rows.Scan(&r.ID, &r.RequestID, &r.StartedAt, &r.FinishedAt, &r.Route, &r.Model, &r.Provider, &r.UpstreamModel,
		&key, &r.InputTokens, &r.OutputTokens, &r.CostMicros, &calls, &r.HostedToolMicros, &r.Status, &r.OnCredit,
		&r.CacheReadTokens, &r.CacheWrite5mTokens, &r.CacheWrite1hTokens, &r.ReasoningTokens, &r.ServiceTier, &price,
		&r.InputCostMicros, &r.CacheReadCostMicros, &r.CacheWrite5mCostMicros, &r.CacheWrite1hCostMicros,
		&r.OutputCostMicros, &r.WaivedMicros, &r.CacheSavingsMicros, &r.TraceID, &r.FittedOutputTokens)
	if err != nil {
		return r, err
	}
	if key.Valid {
		id, err := uuid.Parse(key.String)
		if err != nil {
			return r, fmt.Errorf("archived usage record %d: key id: %w", r.ID, err)
		}
		r.ApiKeyID = pgtype.UUID{Bytes: id, Valid: true}
	}
	if calls.Valid {
		r.HostedToolCalls = []byte(calls.String)
	}
	if price.Valid {
		r.Price = []byte(price.String)
	}
	return r, nil
}

// archivedLogPage reads up to n of the account's archived rows that match f in [from, to)
// before the cursor, newest first, from the archived months in that span.
func (s *Service) archivedLogPage(ctx context.Context, accountID uuid.UUID, f Filter, from, to time.Time, before Cursor, n int) ([]db.UsageViewLogPageRow, error) {
	if to.After(before.StartedAt) {
		to = before.StartedAt.Add(time.Microsecond)
	}
	months, paths, err := s.archivedFiles(ctx, from, to)
	if err != nil || len(months) == 0 {
		return nil, err
	}
	duck, err := s.archive.duck()
	if err != nil {
		return nil, err
	}
	keyFilter := ""
	if f.KeyID != uuid.Nil {
		keyFilter = f.KeyID.String()
	}
	// The account filter is always applied: an archived month holds every account's rows.
	query := `SELECT ` + logColumns + ` FROM ` + parquetList(paths) + `
		WHERE account_id = ? AND started_at >= ? AND started_at < ? AND (started_at, id) < (?, ?)
		  AND (? = '' OR model = ?) AND (? = '' OR api_key_id = ?) AND (? = '' OR route = ?) AND (? = '' OR status = ?)
		ORDER BY started_at DESC, id DESC LIMIT ?`
	rows, err := duck.QueryContext(ctx, query, accountID.String(), from, to, before.StartedAt, before.ID,
		f.Model, f.Model, keyFilter, keyFilter, f.Route, f.Route, f.Status, f.Status, n)
	if err != nil {
		return nil, fmt.Errorf("usageview: read archived usage: %w", err)
	}
	defer rows.Close()
	var out []db.UsageViewLogPageRow
	for rows.Next() {
		r, err := scanLogRow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// mergeLogRows merges two lists of rows, each newest first (by start time, then id), into at
// most n rows newest first. A row in both (never expected: a month is either archived or in
// PostgreSQL) is kept once.
func mergeLogRows(a, b []db.UsageViewLogPageRow, n int) []db.UsageViewLogPageRow {
	out := make([]db.UsageViewLogPageRow, 0, min(n, len(a)+len(b)))
	newer := func(x, y db.UsageViewLogPageRow) bool {
		if !x.StartedAt.Equal(y.StartedAt) {
			return x.StartedAt.After(y.StartedAt)
		}
		return x.ID > y.ID
	}
	for len(out) < n && (len(a) > 0 || len(b) > 0) {
		switch {
		case len(b) == 0 || (len(a) > 0 && newer(a[0], b[0])):
			out, a = append(out, a[0]), a[1:]
		case len(a) == 0 || newer(b[0], a[0]):
			out, b = append(out, b[0]), b[1:]
		default: // the same row
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return out
}

// archivedStatementRecords reads the account's archived usage records of the request ids, by
// request id, from every archived month that began before until.
func (s *Service) archivedStatementRecords(ctx context.Context, accountID uuid.UUID, requestIDs []string, until time.Time) (map[string]db.UsageViewLogPageRow, error) {
	if len(requestIDs) == 0 {
		return nil, nil
	}
	months, paths, err := s.archivedFiles(ctx, farPast, until.Add(24*time.Hour))
	if err != nil || len(months) == 0 {
		return nil, err
	}
	duck, err := s.archive.duck()
	if err != nil {
		return nil, err
	}
	args := []any{accountID.String()}
	marks := make([]string, len(requestIDs))
	for i, id := range requestIDs {
		marks[i] = "?"
		args = append(args, id)
	}
	query := `SELECT ` + logColumns + ` FROM ` + parquetList(paths) + `
		WHERE account_id = ? AND request_id IN (` + strings.Join(marks, ", ") + `)`
	rows, err := duck.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("usageview: read archived usage: %w", err)
	}
	defer rows.Close()
	out := map[string]db.UsageViewLogPageRow{}
	for rows.Next() {
		r, err := scanLogRow(rows)
		if err != nil {
			return nil, err
		}
		out[r.RequestID] = r
	}
	return out, rows.Err()
}

// ArchiveRow is one usage record as an archived month's Parquet object holds it: Values are in
// ArchiveColumns' order, as DuckDB's appender takes them.
type ArchiveRow struct {
	ID         int64
	CostMicros int64
	Values     []driver.Value
}

// MonthRows reads one batch of the usage records of every account that started in
// [from, to), at most n, in id order after afterID: what the archiver writes to a month's
// Parquet object.
func (s *Service) MonthRows(ctx context.Context, from, to time.Time, afterID int64, n int) ([]ArchiveRow, error) {
	rows, err := s.q.UsageMonthRows(ctx, db.UsageMonthRowsParams{FromTime: from, ToTime: to, AfterID: afterID, Lim: int32(n)})
	if err != nil {
		return nil, err
	}
	out := make([]ArchiveRow, len(rows))
	for i, r := range rows {
		out[i] = ArchiveRow{ID: r.ID, CostMicros: r.CostMicros, Values: []driver.Value{
			r.ID, r.AccountID.String(), r.RequestID, nullUUID(r.ApiKeyID), r.Model, r.Route, r.Provider, r.UpstreamModel,
			r.InputTokens, r.OutputTokens, r.CostMicros, r.Status, r.StartedAt, r.FinishedAt, r.RecordedAt,
			nullText(r.HostedToolCalls), r.HostedToolMicros, r.OnCredit, nullUUID(r.AgentSessionID),
			r.CacheReadTokens, r.CacheWrite5mTokens, r.CacheWrite1hTokens, r.ReasoningTokens, r.ServiceTier,
			nullText(r.Price), r.InputCostMicros, r.CacheReadCostMicros, r.CacheWrite5mCostMicros,
			r.CacheWrite1hCostMicros, r.OutputCostMicros, r.WaivedMicros, r.CacheSavingsMicros, nullBytes(r.TraceID),
			r.FittedOutputTokens,
		}}
	}
	return out, nil
}

func nullUUID(id pgtype.UUID) driver.Value {
	if !id.Valid {
		return nil
	}
	return uuid.UUID(id.Bytes).String()
}

func nullText(b []byte) driver.Value {
	if b == nil {
		return nil
	}
	return string(b)
}

func nullBytes(b []byte) driver.Value {
	if b == nil {
		return nil
	}
	return b
}

// MonthTotals counts the usage records of every account that started in [from, to) and adds
// up their cost.
func (s *Service) MonthTotals(ctx context.Context, from, to time.Time) (records, costMicros int64, err error) {
	r, err := s.q.UsageMonthTotals(ctx, db.UsageMonthTotalsParams{FromTime: from, ToTime: to})
	return r.Records, r.CostMicros, err
}

// PartitionMonths lists the months (first days, UTC) that have a partition of usage_records.
func (s *Service) PartitionMonths(ctx context.Context) ([]time.Time, error) {
	rows, err := s.q.UsagePartitionMonths(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]time.Time, len(rows))
	for i, r := range rows {
		out[i] = r.Time.UTC()
	}
	return out, nil
}

// CreatePartition makes the partition of the UTC month that starts at month unless it exists or
// the month is archived, and reports whether it made it. Several processes may call it at once.
func (s *Service) CreatePartition(ctx context.Context, month time.Time) (bool, error) {
	return s.q.UsageCreatePartition(ctx, utcDate(month))
}

// ErrPartitionChanged reports that a month's partition no longer holds what was archived (a
// record came after the export began): nothing was dropped, and the month must be exported
// again.
var ErrPartitionChanged = errors.New("usageview: the month's partition changed since it was exported")

// RetirePartition records the month's archive (its object's key, the records and cost verified
// in it, its size) and drops the month's partition, in one transaction, if the partition holds
// exactly records rows costing costMicros; otherwise it drops nothing and returns
// ErrPartitionChanged.
func (s *Service) RetirePartition(ctx context.Context, m ArchivedMonth) error {
	ok, err := s.q.UsageRetirePartition(ctx, db.UsageRetirePartitionParams{Month: utcDate(m.Month), ObjectKey: m.ObjectKey,
		Records: m.Records, CostMicros: m.CostMicros, ObjectBytes: m.ObjectBytes})
	if err != nil {
		return err
	}
	if !ok {
		return ErrPartitionChanged
	}
	return nil
}

// archivedUntil is the end of the newest archived month (the zero time when none is): rows
// older than it may be in an archive.
func (s *Service) archivedUntil(ctx context.Context) time.Time {
	months, err := s.ArchivedMonths(ctx)
	if err != nil || len(months) == 0 {
		// On an error the archive is read all the same (archivedLogPage reports the error).
		if err != nil {
			return farFuture
		}
		return time.Time{}
	}
	return months[len(months)-1].End()
}

// archivedDaily adds up the account's archived requests in [from, to) per quarter of an hour
// (UTC) and model or key (the key's id as text, "" for none), and calls add with each
// quarter's start: every time zone's midnight is a quarter of an hour in UTC, so the caller
// places each quarter in its day. DuckDB is asked nothing of time zones (its time zone support
// is an extension).
func (s *Service) archivedDaily(ctx context.Context, accountID uuid.UUID, from, to time.Time, by GroupBy, add func(time.Time, string, dailySums)) error {
	months, paths, err := s.archivedFiles(ctx, from, to)
	if err != nil || len(months) == 0 {
		return err
	}
	duck, err := s.archive.duck()
	if err != nil {
		return err
	}
	group := "model"
	if by == GroupByKey {
		group = "COALESCE(api_key_id, '')"
	}
	const quarter = 15 * 60 * 1_000_000
	query := `SELECT epoch_us(started_at) // ` + fmt.Sprint(quarter) + ` AS q, ` + group + ` AS g,
		sum(cost_micros)::BIGINT, count(*)::BIGINT, sum(input_tokens)::BIGINT, sum(cache_read_tokens)::BIGINT,
		sum(cache_write_5m_tokens + cache_write_1h_tokens)::BIGINT, sum(output_tokens)::BIGINT, sum(cache_savings_micros)::BIGINT
		FROM ` + parquetList(paths) + `
		WHERE account_id = ? AND started_at >= ? AND started_at < ?
		GROUP BY 1, 2`
	rows, err := duck.QueryContext(ctx, query, accountID.String(), from, to)
	if err != nil {
		return fmt.Errorf("usageview: read archived usage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var q int64
		var key string
		var r dailySums
		if err := rows.Scan(&q, &key, &r.CostMicros, &r.Requests, &r.InputTokens, &r.CacheReadTokens, &r.CacheWriteTokens,
			&r.OutputTokens, &r.CacheSavingsMicros); err != nil {
			return err
		}
		add(time.UnixMicro(q*quarter).UTC(), key, r)
	}
	return rows.Err()
}

// WithArchiveLock runs fn while holding the advisory lock of usage archival on one of the
// pool's connections, so that one gateway process archives at a time; it returns false,
// without running fn, when another holds it.
func (s *Service) WithArchiveLock(ctx context.Context, fn func() error) (bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	q := db.New(conn)
	locked, err := q.UsageTryArchiveLock(ctx)
	if err != nil || !locked {
		return false, err
	}
	defer func() {
		// A lock that cannot be released goes with its connection.
		if _, err := q.UsageArchiveUnlock(context.WithoutCancel(ctx)); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	return true, fn()
}
