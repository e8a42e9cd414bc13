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
