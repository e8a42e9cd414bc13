package dataset_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// BenchmarkSmallQuery is the cost of a small query of a loaded dataset through the Service: the
// engine process's round trip is what it adds to the engine's own work. It also reports the
// resident memory of the dataset's idle engine process (idle-engine-MiB; 0 when the engine runs
// in this process).
func BenchmarkSmallQuery(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.ConnString(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	acct, err := st.CreateAccount(ctx, "bench", "default")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	storage, err := dataset.NewDirStorage(dir)
	if err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(dir, "tenant", acct.ID.String(), "sales.csv")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(salesCSV), 0o644); err != nil {
		b.Fatal(err)
	}
	s := dataset.New(st, storage, dataset.Options{Logger: quiet})
	b.Cleanup(func() { _ = s.Close() })
	if _, err := s.Load(ctx, acct.ID, "sales", dataset.LoadOptions{}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := s.Query(ctx, acct.ID, "sales", "SELECT region, sum(qty * price) AS total FROM sales GROUP BY region ORDER BY region")
		if err != nil || !strings.Contains(r.Text, "rows)") {
			b.Fatal(r, err)
		}
	}
	var rss float64
	for _, pid := range enginePids(b) {
		rss += float64(procStatusBytes(b, strconv.Itoa(pid), "VmRSS:")) / (1 << 20)
	}
	b.ReportMetric(rss, "idle-engine-MiB")
}
