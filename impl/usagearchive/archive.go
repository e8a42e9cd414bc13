// Package usagearchive keeps usage_records at the size of its retention (issue 21): it makes
// the monthly partitions of usage_records ahead of time, and archives each month past the
// configured retention to a Parquet object in the dataset object store (written by DuckDB,
// verified, and only then its partition dropped). The reads of archived months are
// impl/usageview's (archive.go); this package reads and retires months through
// usageview.Service, the only other door to the generated queries besides impl/store.
//
// Every step is safe to repeat and to be cut at any point: the object is written first (an
// object under the same key is replaced whole), read back and checked (row count and total
// cost equal to the partition's), and the archive's row in usage_archives is written in the
// same transaction that drops the partition, under a lock on the partition and after counting
// it again. A crash before that transaction leaves the month in PostgreSQL (the next run
// exports it again); after it, the month is archived. Every replica runs it: one at a time
// archives (a session-level advisory lock), and should two ever export one month, the
// partition's lock and the recount make the second one's drop a no-op.
package usagearchive

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/usageview"
)

// KeyPrefix is where archived months go in the object store: archive/usage/YYYY-MM.parquet.
// Tenants' datasets live under tenant/<account id>/ (impl/dataset), so no dataset name reaches
// an archive.
const KeyPrefix = "archive/usage/"

// ObjectKey is the object store key of the archive of the month that starts at month.
func ObjectKey(month time.Time) string { return KeyPrefix + month.UTC().Format("2006-01") + ".parquet" }

// Options configure an Archiver.
type Options struct {
	// Usage reads months and retires their partitions.
	Usage *usageview.Service
	// Storage is the object store the archives go to (the datasets' store).
	Storage dataset.Storage
	// RetentionMonths is how many whole months before the current one stay in PostgreSQL;
	// older months are archived. 0 turns archival off.
	RetentionMonths int
	// AheadMonths is how many months after the current one get their partition ahead of time
	// (default 2).
	AheadMonths int
	// BatchRows is how many rows each read of a month takes (default 50,000).
	BatchRows int
	// TempDir holds the Parquet file and DuckDB's spill while a month is written (default:
	// the system's).
	TempDir string
	// Logger logs what each run did (default slog.Default).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Archiver makes partitions ahead and archives months past the retention.
type Archiver struct {
	o Options
}

// New returns an Archiver.
func New(o Options) *Archiver {
	if o.AheadMonths <= 0 {
		o.AheadMonths = 2
	}
	if o.BatchRows <= 0 {
		o.BatchRows = 50_000
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Archiver{o: o}
}

// monthOf is the first instant of t's UTC month.
func monthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// EnsurePartitions makes the partitions of the current month and the AheadMonths after it that
// do not exist yet, and returns how many it made.
func (a *Archiver) EnsurePartitions(ctx context.Context) (int, error) {
	made := 0
	m := monthOf(a.o.Now())
	for i := 0; i <= a.o.AheadMonths; i++ {
		ok, err := a.o.Usage.CreatePartition(ctx, m.AddDate(0, i, 0))
		if err != nil {
			return made, fmt.Errorf("usage partition %s: %w", m.AddDate(0, i, 0).Format("2006-01"), err)
		}
		if ok {
			made++
		}
	}
	return made, nil
}

// DueMonths are the months that have a partition and ended before the retention: those
// before the current month less RetentionMonths. None when archival is off.
func (a *Archiver) DueMonths(ctx context.Context) ([]time.Time, error) {
	if a.o.RetentionMonths <= 0 {
		return nil, nil
	}
	cut := monthOf(a.o.Now()).AddDate(0, -a.o.RetentionMonths, 0)
	months, err := a.o.Usage.PartitionMonths(ctx)
	if err != nil {
		return nil, err
	}
	var due []time.Time
	for _, m := range months {
		if m.Before(cut) {
			due = append(due, m)
		}
	}
	return due, nil
}

// RunOnce makes the partitions ahead and archives every due month, oldest first, under the
// advisory lock of archival (a process that finds it held leaves the archiving to its holder);
// it stops at the first month that fails.
func (a *Archiver) RunOnce(ctx context.Context) error {
	if _, err := a.EnsurePartitions(ctx); err != nil {
		return err
	}
	if a.o.RetentionMonths <= 0 {
		return nil
	}
	_, err := a.o.Usage.WithArchiveLock(ctx, func() error { return a.archiveDue(ctx) })
	return err
}

// archiveDue archives the due months, oldest first.
func (a *Archiver) archiveDue(ctx context.Context) error {
	due, err := a.DueMonths(ctx)
	if err != nil {
		return err
	}
	for _, m := range due {
		res, err := a.ArchiveMonth(ctx, m)
		if err != nil {
			return fmt.Errorf("archive usage of %s: %w", m.Format("2006-01"), err)
		}
		a.o.Logger.Info("usage month archived", "month", m.Format("2006-01"), "records", res.Records,
			"cost_micros", res.CostMicros, "object", res.ObjectKey, "bytes", res.ObjectBytes)
	}
	return nil
}

// Run calls RunOnce at once and then every interval until ctx ends, logging failures (the next
// run takes up what one left).
func (a *Archiver) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := a.RunOnce(ctx); err != nil && ctx.Err() == nil {
			a.o.Logger.Error("usage retention", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Step names the points between the steps of ArchiveMonth, where a test stops it.
type Step int

// The steps of ArchiveMonth, in order.
const (
	StepWritten  Step = iota + 1 // the Parquet file is written and checked locally
	StepStored                   // the object is in the store
	StepVerified                 // the object was read back from the store and checked
)

// errStopped is what ArchiveMonth returns when stopAfter stopped it.
var errStopped = errors.New("usagearchive: stopped (test)")

// stopAfter, when set (tests only), stops ArchiveMonth after the step it returns true for, as
// a crash there would.
var stopAfter func(Step) bool

// ArchiveMonth archives the month that starts at month: its rows, read from PostgreSQL in
// batches, are appended to a DuckDB table and written to a Parquet file, whose row count and
// total cost are checked against the partition's; the file goes to the object store under
// ObjectKey, is read back from it and checked again; then the month's partition is dropped in
// the transaction that records the archive, if it still holds what was exported
// (usageview.ErrPartitionChanged otherwise: run again).
func (a *Archiver) ArchiveMonth(ctx context.Context, month time.Time) (usageview.ArchivedMonth, error) {
	month = monthOf(month)
	end := month.AddDate(0, 1, 0)
	res := usageview.ArchivedMonth{Month: month, ObjectKey: ObjectKey(month)}
	records, cost, err := a.o.Usage.MonthTotals(ctx, month, end)
	if err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp(a.o.TempDir, "usage-archive-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, month.Format("2006-01")+".parquet")
	duck, err := openDuck(dir)
	if err != nil {
		return res, err
	}
	defer duck.Close()
	n, c, err := a.export(ctx, duck, month, end, file)
	if err != nil {
		return res, err
	}
	if n != records || c != cost {
		return res, fmt.Errorf("%w: %d records costing %d were read, the month has %d costing %d",
			usageview.ErrPartitionChanged, n, c, records, cost)
	}
	if err := check(ctx, duck, file, records, cost); err != nil {
		return res, err
	}
	if stopAfter != nil && stopAfter(StepWritten) {
		return res, errStopped
	}
	if err := a.store(ctx, file, res.ObjectKey); err != nil {
		return res, err
	}
	if stopAfter != nil && stopAfter(StepStored) {
		return res, errStopped
	}
	size, err := a.verifyStored(ctx, duck, dir, res.ObjectKey, records, cost)
	if err != nil {
		return res, err
	}
	if stopAfter != nil && stopAfter(StepVerified) {
		return res, errStopped
	}
	res.Records, res.CostMicros, res.ObjectBytes = records, cost, size
	return res, a.o.Usage.RetirePartition(ctx, res)
}

// openDuck opens a DuckDB database in a file under dir (a month may be larger than memory:
// DuckDB spills to dir), with extension loading off: Parquet is in DuckDB's core.
func openDuck(dir string) (*sql.DB, error) {
	v := url.Values{}
	v.Set("threads", "2")
	v.Set("memory_limit", "512MB")
	v.Set("temp_directory", filepath.Join(dir, "spill"))
	v.Set("autoinstall_known_extensions", "false")
	v.Set("autoload_known_extensions", "false")
	v.Set("allow_community_extensions", "false")
	v.Set("allow_unsigned_extensions", "false")
	v.Set("allow_persistent_secrets", "false")
	c, err := duckdb.NewConnector(filepath.Join(dir, "month.duckdb")+"?"+v.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("usagearchive: open duckdb: %w", err)
	}
	return sql.OpenDB(c), nil
}

// export appends the month's rows to a DuckDB table in batches of BatchRows and writes the
// table to file as Parquet (zstd), returning the rows and the cost it wrote.
func (a *Archiver) export(ctx context.Context, duck *sql.DB, from, to time.Time, file string) (records, cost int64, err error) {
	cols := make([]string, len(usageview.ArchiveColumns))
	for i, c := range usageview.ArchiveColumns {
		cols[i] = c.Name + " " + c.Type
	}
	conn, err := duck.Conn(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "CREATE TABLE usage ("+strings.Join(cols, ", ")+")"); err != nil {
		return 0, 0, fmt.Errorf("usagearchive: %w", err)
	}
	err = conn.Raw(func(dc any) error {
		app, err := duckdb.NewAppenderFromConn(dc.(driver.Conn), "", "usage")
		if err != nil {
			return err
		}
		after := int64(0)
		for {
			rows, err := a.o.Usage.MonthRows(ctx, from, to, after, a.o.BatchRows)
			if err != nil {
				_ = app.Close()
				return err
			}
			for _, r := range rows {
				if err := app.AppendRow(r.Values...); err != nil {
					_ = app.Close()
					return fmt.Errorf("append usage record %d: %w", r.ID, err)
				}
				records++
				cost += r.CostMicros
				after = r.ID
			}
			if len(rows) < a.o.BatchRows {
				return app.Close()
			}
		}
	})
	if err != nil {
		return 0, 0, fmt.Errorf("usagearchive: %w", err)
	}
	// Sorted by account and start time: an archived read of one account's log reads a few
	// row groups (the Parquet statistics of each row group bound its accounts and times).
	q := "COPY (SELECT * FROM usage ORDER BY account_id, started_at, id) TO '" + strings.ReplaceAll(file, "'", "''") +
		"' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 100000)"
	if _, err := conn.ExecContext(ctx, q); err != nil {
		return 0, 0, fmt.Errorf("usagearchive: write parquet: %w", err)
	}
	return records, cost, nil
}

// check reads the Parquet file and compares its row count and total cost with the month's.
func check(ctx context.Context, duck *sql.DB, file string, records, cost int64) error {
	var n, c int64
	q := "SELECT count(*), COALESCE(sum(cost_micros), 0)::BIGINT FROM read_parquet('" + strings.ReplaceAll(file, "'", "''") + "')"
	if err := duck.QueryRowContext(ctx, q).Scan(&n, &c); err != nil {
		return fmt.Errorf("usagearchive: read back %s: %w", filepath.Base(file), err)
	}
	if n != records || c != cost {
		return fmt.Errorf("usagearchive: %s holds %d records costing %d, the month %d costing %d", filepath.Base(file), n, c, records, cost)
	}
	return nil
}

// store puts the file in the object store under key.
func (a *Archiver) store(ctx context.Context, file, key string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := a.o.Storage.Put(ctx, key, f); err != nil {
		return fmt.Errorf("usagearchive: store %s: %w", key, err)
	}
	return nil
}

// verifyStored reads the object back from the store (its local file when the store is a
// LocalStorage, a downloaded copy otherwise), checks it, and returns its size.
func (a *Archiver) verifyStored(ctx context.Context, duck *sql.DB, dir, key string, records, cost int64) (int64, error) {
	var path string
	if ls, ok := a.o.Storage.(dataset.LocalStorage); ok {
		p, err := ls.LocalPath(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("usagearchive: read back %s: %w", key, err)
		}
		path = p
	} else {
		r, err := a.o.Storage.Open(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("usagearchive: read back %s: %w", key, err)
		}
		path = filepath.Join(dir, "stored.parquet")
		f, err := os.Create(path)
		if err == nil {
			_, err = io.Copy(f, r)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		_ = r.Close()
		if err != nil {
			return 0, fmt.Errorf("usagearchive: read back %s: %w", key, err)
		}
	}
	if err := check(ctx, duck, path, records, cost); err != nil {
		return 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
