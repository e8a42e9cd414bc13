package dataset

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// TestEngineReachesNothingOfTheGateway: an engine's environment holds only its own variable
// and TZ; the gateway's environment is out of its SQL's reach through /proc (read_text,
// read_blob, read_csv of /proc/self/environ and of /proc/<the gateway's pid>/environ are
// refused, external access being off and locked before any tenant SQL); and the engine's open
// descriptors are its three pipes and its Go runtime's own (the poller, the cgroup files it
// reads its CPU limit from), none of the gateway's: no socket (its database connections), and
// not a descriptor the gateway holds without close-on-exec (as one it inherited from a shell
// would be), which before this test was passed on to every engine (fd 251, a pipe of the shell
// that ran the tests, and fd 10, its /dev/null, were in each engine).
func TestEngineReachesNothingOfTheGateway(t *testing.T) {
	ctx := t.Context()
	// A descriptor of the gateway's without close-on-exec, as an inherited one would be.
	var leak [2]int
	if err := syscall.Pipe(leak[:]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(leak[0]); _ = syscall.Close(leak[1]) })
	leaked, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", leak[0]))
	if err != nil {
		t.Fatal(err)
	}
	s, acct := loadedService(t, "reach", Options{})
	e := s.entries[entryKey{acct.ID, "t"}]
	pid := e.proc.cmd.Process.Pid
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(strings.TrimRight(string(env), "\x00"), "\x00") {
		if !strings.HasPrefix(kv, engineEnv+"=") && !strings.HasPrefix(kv, "TZ=") {
			t.Errorf("the engine's environment holds %q", kv)
		}
	}
	gateway := strconv.Itoa(os.Getpid())
	for _, q := range []string{
		"SELECT * FROM read_text('/proc/self/environ')",
		"SELECT * FROM read_blob('/proc/self/environ')",
		"SELECT * FROM read_text('/proc/" + gateway + "/environ')",
		"SELECT * FROM read_text('/proc/' || " + gateway + " || '/environ')",
		"SELECT * FROM read_text('/proc/' || (SELECT " + gateway + ") || '/environ')",
		"SELECT * FROM read_csv('/proc/" + gateway + "/environ', delim = '\\0', header = false)",
		"SELECT * FROM read_text('/proc/self/fd/0')",
	} {
		r, err := s.Query(ctx, acct.ID, "t", q)
		if err == nil {
			t.Errorf("%s: served %q", q, r.Text)
			continue
		}
		t.Logf("%s: %v", q, err)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	pipes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err != nil {
			continue
		}
		t.Logf("engine fd %s: %s", fd.Name(), target)
		switch {
		case target == leaked:
			t.Errorf("the engine holds fd %s: the gateway's descriptor %s", fd.Name(), target)
		case strings.HasPrefix(target, "pipe:"):
			pipes[target] = true
		case strings.HasPrefix(target, "anon_inode:"), strings.HasPrefix(target, "/sys/fs/cgroup/"):
		default:
			t.Errorf("the engine holds fd %s: %s", fd.Name(), target)
		}
	}
	if len(pipes) > 3 {
		t.Errorf("the engine holds %d pipes, want its stdin, stdout and stderr only", len(pipes))
	}
	// The gateway does hold sockets (its database connections), so the check above means it.
	own, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	sockets := 0
	for _, fd := range own {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasPrefix(target, "socket:") {
			sockets++
		}
	}
	if sockets == 0 {
		t.Error("the gateway holds no socket: the descriptor check proves nothing")
	}
}
