package dataset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
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
// error with the engine alive. Under the race detector (make test's go test -race) the engine
// is a race-built test binary, whose bound gets raceAllowance on top (its runtime counts about
// 300 MiB more idle), so that the test reads the same there.
func TestSmallestEngineBoundServes(t *testing.T) {
	ctx := t.Context()
	const bound = 640 << 20
	s, acct := loadedService(t, "smallest", Options{EngineMemoryBytes: bound, QueryTimeout: 30 * time.Second})
	e := s.entries[entryKey{acct.ID, "t"}]
	data := statusBytes(fmt.Sprint(e.proc.cmd.Process.Pid), "VmData:")
	t.Logf("an idle engine's VmData: %d MiB", data>>20)
	if data == 0 || data+s.opts.DatabaseMemoryLimit > bound+raceAllowance {
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

// The tests below are trial s16h6's, as a tenant attacking the engine processes with one
// account and with several (docs/operations.md, "Follow-up s16h6"): each held on the code as
// it was.

// TestManyLoadsKeepTheProcessBound: two accounts loading six datasets each, all at once, leave
// at most MaxLoaded engine processes once the evicted ones have exited, and no zombie.
func TestManyLoadsKeepTheProcessBound(t *testing.T) {
	ctx := t.Context()
	st, a := testStore(t, "many-a")
	b, err := st.CreateAccount(ctx, "many-b", "default")
	if err != nil {
		t.Fatal(err)
	}
	storage, err := NewDirStorage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := New(st, storage, Options{MaxLoaded: 3})
	t.Cleanup(func() { _ = s.Close() })
	var wg sync.WaitGroup
	for _, acct := range []uuid.UUID{a.ID, b.ID} {
		for i := range 6 {
			name := fmt.Sprintf("d%d", i)
			if _, err := s.Put(ctx, acct, name, CSV, strings.NewReader("a\n1\n")); err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				if _, err := s.Load(ctx, acct, name, LoadOptions{}); err != nil {
					t.Errorf("load %s: %v", name, err)
				}
			})
		}
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for len(engineChildren(t)) > 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(engineChildren(t)); n > 3 {
		t.Errorf("%d engine processes after twelve loads, want at most MaxLoaded (3)", n)
	}
	noZombies(t)
}

// TestCancelledLoadLeavesNoEngine: a load whose caller goes away half-way (the MCP client
// disconnecting) has its engine killed and waited for.
func TestCancelledLoadLeavesNoEngine(t *testing.T) {
	ctx := t.Context()
	s, acct := loadedService(t, "cancelled", Options{})
	s.Close()
	s = New(s.store, s.storage, Options{})
	t.Cleanup(func() { _ = s.Close() })
	for _, d := range []time.Duration{time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond} {
		lctx, cancel := context.WithTimeout(ctx, d)
		_, err := s.Load(lctx, acct.ID, "t", LoadOptions{})
		cancel()
		t.Logf("a load cancelled after %v: %v", d, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(engineChildren(t)) > 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(engineChildren(t)); n > 1 {
		t.Errorf("%d engine processes after cancelled loads", n)
	}
	noZombies(t)
}

// TestAnotherAccountCannotStopARunningQuery: another account that loads enough datasets to
// evict this one's from memory (the only thing an account does to another's engine) does not
// stop its running query: an engine in use is closed once its queries end, and the next query
// loads the dataset again.
func TestAnotherAccountCannotStopARunningQuery(t *testing.T) {
	ctx := t.Context()
	s, a := loadedService(t, "victim", Options{MaxLoaded: 1})
	b, err := s.store.CreateAccount(ctx, "evictor", "default")
	if err != nil {
		t.Fatal(err)
	}
	running := make(chan error, 1)
	go func() {
		_, err := s.Query(ctx, a.ID, "t", slowQuery)
		running <- err
	}()
	time.Sleep(200 * time.Millisecond)
	for _, name := range []string{"x", "y"} {
		if _, err := s.Put(ctx, b.ID, name, CSV, strings.NewReader("a\n2\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(ctx, b.ID, name, LoadOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-running; err != nil {
		t.Errorf("the victim's query while another account evicted its dataset: %v", err)
	}
	if r, err := s.Query(ctx, a.ID, "t", "SELECT * FROM t"); err != nil || !strings.Contains(r.Text, "1\n(1 row)") {
		t.Fatalf("the victim's next query: %+v %v", r, err)
	}
	noZombies(t)
}

// TestEngineStuckInAReadIsKilled: a query whose engine blocks in a read, using no core and
// deaf to interrupts, is killed at its timeout and grace like one that spins: SIGKILL ends a
// process in any sleep.
func TestEngineStuckInAReadIsKilled(t *testing.T) {
	s, acct := loadedService(t, "stuck", Options{QueryTimeout: time.Second})
	e := s.entries[entryKey{acct.ID, "t"}]
	began := time.Now()
	_, err := s.Query(t.Context(), acct.ID, "t", hangInReadQuery)
	var ue *Error
	if !errors.As(err, &ue) || ue.Code != CodeTimeout {
		t.Errorf("the query stuck in a read: %v, want the timeout's error", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the query stuck in a read was answered after %v", took)
	}
	if e.proc.wait(5 * time.Second); e.proc.alive() {
		t.Error("the engine stuck in a read is still running")
	}
	if r, err := s.Query(t.Context(), acct.ID, "t", "SELECT * FROM t"); err != nil || !strings.Contains(r.Text, "1\n(1 row)") {
		t.Fatalf("the next query: %+v %v", r, err)
	}
	noZombies(t)
}

// TestEngineDyingUnderAWriteCostsOnlyItsQueries: an engine that dies while the gateway is
// blocked writing a request to it (it stopped reading, then was killed, as the kernel's
// out-of-memory killer would) fails that write with EPIPE, not a SIGPIPE of the gateway: Go
// turns SIGPIPE into an error for every descriptor but 1 and 2, and the engine's pipes are
// never those in the gateway. Both queries on it are answered with an error, the next one works.
func TestEngineDyingUnderAWriteCostsOnlyItsQueries(t *testing.T) {
	ctx := t.Context()
	s, acct := loadedService(t, "epipe", Options{QueryTimeout: 20 * time.Second})
	e := s.entries[entryKey{acct.ID, "t"}]
	pid := e.proc.cmd.Process.Pid
	stopped := make(chan error, 1)
	go func() {
		_, err := s.Query(ctx, acct.ID, "t", stopQuery)
		stopped <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !processState(pid, "T") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !processState(pid, "T") {
		t.Fatal("the engine did not stop")
	}
	// A statement of the largest size: its frame is larger than the pipe's 64 KiB buffer, which
	// the stopped engine does not drain, so the gateway blocks writing it.
	large := "SELECT '" + strings.Repeat("x", maxSQLLen-len("SELECT '' AS x")) + "' AS x"
	written := make(chan error, 1)
	go func() {
		_, err := s.Query(ctx, acct.ID, "t", large)
		written <- err
	}()
	select {
	case err := <-written:
		t.Fatalf("the large request was answered by a stopped engine: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan error{"the query that stopped it": stopped, "the query being written": written} {
		select {
		case err := <-ch:
			if err == nil {
				t.Errorf("%s was answered by a dead engine", name)
			}
			t.Logf("%s: %v", name, err)
		case <-time.After(10 * time.Second):
			t.Errorf("%s was not answered", name)
		}
	}
	if r, err := s.Query(ctx, acct.ID, "t", "SELECT * FROM t"); err != nil || !strings.Contains(r.Text, "1\n(1 row)") {
		t.Fatalf("the next query: %+v %v", r, err)
	}
	noZombies(t)
}

// processState reports whether process pid is in state (its /proc status's first letter).
func processState(pid int, state string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "State:"); ok {
			return strings.HasPrefix(strings.TrimSpace(rest), state)
		}
	}
	return false
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
