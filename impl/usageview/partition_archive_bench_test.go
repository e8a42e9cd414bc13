package usageview_test

import (
	"io"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/usagearchive"
	"github.com/tollgate/tollgate/impl/usageview"
)

// benchArchived archives the oldest whole month of BenchmarkUsageAtScale's rows to Parquet and
// times the request log's first page of that month, a day's CSV export and a day's statement,
// read back through DuckDB.
func benchArchived(b *testing.B, f *fixture, main uuid.UUID, end time.Time) {
	var began time.Time
	// The oldest whole month, archived and read back.
	storage, err := dataset.NewDirStorage(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	views := usageview.New(f.pool, usageview.Options{Archive: storage})
	arch := usagearchive.New(usagearchive.Options{Usage: views, Storage: storage, TempDir: b.TempDir()})
	month := time.Date(end.Year()-1, end.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	began = time.Now()
	got, err := arch.ArchiveMonth(f.ctx, month)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("archived %s: %d rows to %d bytes of Parquet (%.1f bytes per row) in %s", month.Format("2006-01"), got.Records,
		got.ObjectBytes, float64(got.ObjectBytes)/float64(got.Records), time.Since(began).Round(time.Millisecond))
	day := month.AddDate(0, 0, 14)
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"archived/log-first-page", func() error {
			p, err := views.RequestLog(f.ctx, main, usageview.Filter{From: month, To: month.AddDate(0, 1, 0)}, usageview.Cursor{}, 50)
			if err == nil && len(p.Requests) != 50 {
				b.Fatalf("archived page has %d rows", len(p.Requests))
			}
			return err
		}},
		{"archived/csv-one-day", func() error {
			_, err := views.ExportCSV(f.ctx, main, usageview.Filter{From: day, To: day.AddDate(0, 0, 1)}, io.Discard)
			return err
		}},
		{"archived/statement-one-day", func() error {
			_, err := views.WriteStatement(f.ctx, main, day, day.AddDate(0, 0, 1), testSeal, io.Discard)
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
