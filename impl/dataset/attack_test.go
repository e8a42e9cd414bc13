package dataset

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestUploadChecksAreBoundedPerProcess: DescribeFile (the console's upload check, one at a time
// per account but every account's at once) runs at most maxDescribing engine processes at once,
// however many callers ask together; each of them is answered. Before, eight callers, as eight
// accounts uploading together, had eight engine processes running, each allowed the engine's
// whole memory bound.
func TestUploadChecksAreBoundedPerProcess(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,name,amount\n")
	for i := range 200000 {
		fmt.Fprintf(&b, "%d,name %d,%d.5\n", i, i%97, i%1013)
	}
	path := filepath.Join(t.TempDir(), "upload.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	peak := make(chan int)
	go func() {
		most := 0
		for {
			select {
			case <-stop:
				peak <- most
				return
			default:
			}
			most = max(most, len(engineChildren(t)))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if cols, err := DescribeFile(t.Context(), path, CSV); err != nil || len(cols) != 3 {
				t.Errorf("DescribeFile: %v %v", cols, err)
			}
		})
	}
	wg.Wait()
	close(stop)
	if most := <-peak; most > maxDescribing {
		t.Errorf("%d engine processes ran at once for upload checks, want at most %d", most, maxDescribing)
	}
	noZombies(t)
}

// engineChildren lists the engine processes of this one: its children that run its executable
// (not the test database's server).
func engineChildren(t testing.TB) []int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, pid := range childPids(t, "") {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && target == exe {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestSmallestEngineBoundServes: at the smallest bound the configuration allows
// (datasets.engine_memory_mb 640), an engine loads and answers, what it counts against the
// bound idle (VmData, 234-302 MiB in our runs) leaves DuckDB its whole memory limit under the
// bound, and a query that needs more than DuckDB's limit ends in DuckDB's own out-of-memory
// error with the engine alive.
func TestSmallestEngineBoundServes(t *testing.T) {
	ctx := t.Context()
	const bound = 640 << 20
	s, acct := loadedService(t, "smallest", Options{EngineMemoryBytes: bound, QueryTimeout: 30 * time.Second})
	e := s.entries[entryKey{acct.ID, "t"}]
	data := statusBytes(fmt.Sprint(e.proc.cmd.Process.Pid), "VmData:")
	t.Logf("an idle engine's VmData: %d MiB", data>>20)
	if data == 0 || data+s.opts.DatabaseMemoryLimit > bound {
		t.Errorf("an idle engine counts %d MiB against the bound: DuckDB's %d MiB do not fit under %d MiB", data>>20, s.opts.DatabaseMemoryLimit>>20, bound>>20)
	}
	_, err := s.Query(ctx, acct.ID, "t", "SELECT count(*) AS n FROM (SELECT DISTINCT x::VARCHAR || 'some padding to take room' AS v FROM range(30000000) t(x))")
	if err == nil || !strings.Contains(err.Error(), "Out of Memory Error") {
		t.Errorf("a query past DuckDB's memory limit: %v, want DuckDB's out-of-memory error", err)
	}
	if !e.proc.alive() {
		t.Errorf("the engine died of a query within DuckDB's limit: %s", e.proc.stderr.String())
	}
	if r, err := s.Query(ctx, acct.ID, "t", "SELECT * FROM t"); err != nil || !strings.Contains(r.Text, "1\n(1 row)") {
		t.Fatalf("the next query: %+v %v", r, err)
	}
}
