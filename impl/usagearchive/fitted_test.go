package usagearchive

import (
	"bytes"
	"database/sql"
	"encoding/csv"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/usageview"
)

// TestArchiveKeepsTheFittedBound archives two months whose priced requests were fitted to
// their credit and checks that each month's Parquet object carries fitted_output_tokens, row
// by row, and that the request log and the CSV export read it back from the archive. Then it
// rewrites the objects as archives written before the column was (no fitted_output_tokens):
// one month old-shaped and one new, then both old-shaped, the reads still work, and the old
// months' requests read as not fitted (0, an empty cell).
func TestArchiveKeepsTheFittedBound(t *testing.T) {
	w := newWorld(t)
	w.writeMonths(t, 9)
	for m := -3; m < 0; m++ {
		if _, err := w.views.CreatePartition(w.ctx, monthOf(w.now).AddDate(0, m, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.arch.RunOnce(w.ctx); err != nil {
		t.Fatal(err)
	}
	archived, err := w.views.ArchivedMonths(w.ctx)
	if err != nil || len(archived) != 2 {
		t.Fatalf("archived months: %v, %v", archived, err)
	}
	duck, err := openDuck(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer duck.Close()
	paths := make([]string, len(archived))
	for i, m := range archived {
		if paths[i], err = w.storage.LocalPath(w.ctx, m.ObjectKey); err != nil {
			t.Fatal(err)
		}
		// writeMonths fits requests 0, 3 and 6 of each account: 1,024 + i tokens.
		var fitted, sum int64
		q := "SELECT count(*) FILTER (WHERE fitted_output_tokens > 0), sum(fitted_output_tokens)::BIGINT FROM read_parquet('" + paths[i] + "')"
		if err := duck.QueryRowContext(w.ctx, q).Scan(&fitted, &sum); err != nil {
			t.Fatalf("the archive of %s: %v", m.Month.Format("2006-01"), err)
		}
		if fitted != 6 || sum != 2*(3*1024+0+3+6) {
			t.Errorf("the archive of %s has %d fitted rows adding up to %d, want 6 and %d", m.Month.Format("2006-01"), fitted, sum, 2*(3*1024+9))
		}
	}

	// archivedFitted is what account A's reads give for the archived months' requests:
	// request id to the fitted bound, from the request log and from the export's cells.
	archivedFitted := func() (map[string]int64, map[string]string) {
		t.Helper()
		log := map[string]int64{}
		p, err := w.views.RequestLog(w.ctx, w.a, usageview.Filter{}, usageview.Cursor{}, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Requests {
			if r.StartedAt.Before(archived[1].End()) {
				log[r.RequestID] = r.FittedOutputTokens
			}
		}
		var buf bytes.Buffer
		if _, err := w.views.ExportCSV(w.ctx, w.a, usageview.Filter{}, &buf); err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(&buf).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		col := map[string]int{}
		for i, h := range rows[0] {
			col[h] = i
		}
		cells := map[string]string{}
		for _, r := range rows[1:] {
			if _, ok := log[r[col["request_id"]]]; ok {
				cells[r[col["request_id"]]] = r[col["fitted_output_tokens"]]
			}
		}
		return log, cells
	}
	want := func(month int, i int) (int64, string) {
		if month <= -2 && i%3 == 0 {
			n := 1024 + int64(i)
			return n, usageview.FittedCell(usageview.Request{FittedOutputTokens: n})
		}
		return 0, ""
	}
	check := func(when string, oldShaped map[int]bool) {
		t.Helper()
		log, cells := archivedFitted()
		if len(log) != 2*9 || len(cells) != 2*9 {
			t.Fatalf("%s: %d archived requests in the log, %d in the export, want 18", when, len(log), len(cells))
		}
		for _, m := range []int{-3, -2} {
			for i := range 9 {
				id := fmt.Sprintf("r-%s-%d-%d", w.a.String()[:4], m, i)
				n, cell := want(m, i)
				if oldShaped[m] {
					n, cell = 0, ""
				}
				if log[id] != n || cells[id] != cell {
					t.Errorf("%s: %s reads fitted %d (cell %q), want %d (%q)", when, id, log[id], cells[id], n, cell)
				}
			}
		}
	}
	check("archived", nil)
	if cell := usageview.FittedCell(usageview.Request{FittedOutputTokens: 1027}); cell != "1027" {
		t.Errorf("the fitted cell of 1,027 tokens is %q", cell)
	}

	// The archives as they were written before fitted_output_tokens: the older month first.
	oldShape(t, duck, paths[0])
	check("the older month old-shaped", map[int]bool{-3: true})
	oldShape(t, duck, paths[1])
	check("both months old-shaped", map[int]bool{-3: true, -2: true})
}

// oldShape rewrites the Parquet file at path without fitted_output_tokens, as the archiver
// wrote it before migration 0030.
func oldShape(t *testing.T, duck *sql.DB, path string) {
	t.Helper()
	tmp := path + ".old"
	q := "COPY (SELECT * EXCLUDE (fitted_output_tokens) FROM read_parquet('" + path + "')) TO '" + tmp + "' (FORMAT parquet)"
	if _, err := duck.Exec(q); err != nil {
		t.Fatal(err)
	}
	var cols string
	if err := duck.QueryRow("SELECT string_agg(name, ',') FROM parquet_schema('" + tmp + "')").Scan(&cols); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cols, "fitted") || !strings.Contains(cols, "trace_id") {
		t.Fatalf("the old-shaped file's columns: %s", cols)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
