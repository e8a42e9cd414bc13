package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testDir returns a fresh directory that the server user may search (the
// directories t.TempDir makes are private to root), removed after the test.
func testDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgcluster-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// start starts a cluster for a test, skipping when PostgreSQL is not
// installed (failing instead under CI), and stops it after the test.
func start(t *testing.T, opts Options) *Cluster {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	c, err := Start(ctx, opts)
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start took %s (reused=%v)", time.Since(began).Round(time.Millisecond), c.Reused())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("cleanup Stop: %v", err)
		}
	})
	return c
}

func query(t *testing.T, connString, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		t.Fatalf("connect %q: %v", connString, err)
	}
	defer conn.Close(ctx)
	var out string
	if err := conn.QueryRow(ctx, sql).Scan(&out); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

func TestStartCreateDatabaseStopRestart(t *testing.T) {
	dataDir := filepath.Join(testDir(t), "data")
	c := start(t, Options{DataDir: dataDir})
	if c.Reused() {
		t.Fatal("fresh cluster reported as reused")
	}
	if got := query(t, c.ConnString("postgres"), "SELECT current_user || ' ' || current_setting('listen_addresses') || '|' || current_setting('fsync') || ' ' || current_setting('max_connections')"); got != "postgres |off 200" {
		t.Fatalf("settings = %q", got)
	}
	if _, err := os.Stat(c.LogFile()); err != nil {
		t.Fatalf("log file: %v", err)
	}

	ctx := context.Background()
	for range 2 { // idempotent
		if err := c.CreateDatabase(ctx, "app db"); err != nil {
			t.Fatal(err)
		}
	}
	if got := query(t, c.ConnString("app db"), "SELECT current_database()"); got != "app db" {
		t.Fatalf("current_database = %q", got)
	}

	sockDir := c.SocketDir()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(sockDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket directory %s not removed: %v", sockDir, err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err != nil {
		t.Fatalf("non-ephemeral data directory lost: %v", err)
	}

	// A restart on the existing data directory skips initdb and keeps data.
	c2 := start(t, Options{DataDir: dataDir})
	if got := query(t, c2.ConnString("app db"), "SELECT current_database()"); got != "app db" {
		t.Fatalf("after restart current_database = %q", got)
	}
}

func TestReuseRunningServer(t *testing.T) {
	dataDir := filepath.Join(testDir(t), "data")
	first := start(t, Options{DataDir: dataDir})
	second := start(t, Options{DataDir: dataDir, Port: 6543})
	if !second.Reused() {
		t.Fatal("second Start did not reuse the running server")
	}
	if second.PID() != first.PID() || second.SocketDir() != first.SocketDir() || second.Port() != first.Port() {
		t.Fatalf("reused server differs: pid %d/%d socket %s/%s port %d/%d",
			second.PID(), first.PID(), second.SocketDir(), first.SocketDir(), second.Port(), first.Port())
	}
	query(t, second.ConnString("postgres"), "SELECT '1'")
	// Stopping through the reusing handle stops the server; stopping the
	// first handle afterwards finds it already down.
	ctx := context.Background()
	if err := second.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestParallelClustersSamePort(t *testing.T) {
	base := testDir(t)
	var wg sync.WaitGroup
	clusters := make([]*Cluster, 3)
	errs := make([]error, 3)
	for i := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clusters[i], errs[i] = Start(context.Background(), Options{DataDir: filepath.Join(base, fmt.Sprint(i)), Logf: t.Logf})
		}()
	}
	wg.Wait()
	for i, c := range clusters {
		if c != nil {
			t.Cleanup(func() { _ = c.Stop(context.Background()) })
		}
		if errors.Is(errs[i], ErrNotInstalled) && os.Getenv("CI") != "true" {
			t.Skip(errs[i])
		}
		if errs[i] != nil {
			t.Fatalf("cluster %d: %v", i, errs[i])
		}
	}
	for i, c := range clusters {
		if err := c.CreateDatabase(context.Background(), fmt.Sprintf("db%d", i)); err != nil {
			t.Fatal(err)
		}
		if got := query(t, c.ConnString("postgres"), "SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database WHERE datname LIKE 'db%'"); got != fmt.Sprintf("db%d", i) {
			t.Fatalf("cluster %d sees databases %q", i, got)
		}
	}
}

func TestSocketDirTooLong(t *testing.T) {
	base := testDir(t)
	long := filepath.Join(base, strings.Repeat("s", 100))
	_, err := Start(context.Background(), Options{DataDir: filepath.Join(base, "data"), SocketDir: long})
	if errors.Is(err, ErrNotInstalled) {
		t.Skip(err)
	}
	if err == nil || !strings.Contains(err.Error(), "socket path") {
		t.Fatalf("err = %v, want a socket path length error", err)
	}
	if _, statErr := os.Stat(filepath.Join(base, "data", "PG_VERSION")); statErr == nil {
		t.Fatal("initdb ran despite the bad socket directory")
	}
}

func TestUnreachableDataDirAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root hands directories to another user")
	}
	private, err := os.MkdirTemp("", "pgcluster-private")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(private) })
	_, err = Start(context.Background(), Options{DataDir: filepath.Join(private, "data")})
	if errors.Is(err, ErrNotInstalled) {
		t.Skip(err)
	}
	if err == nil || !strings.Contains(err.Error(), "not searchable") {
		t.Fatalf("err = %v, want a not-searchable error", err)
	}
}

// TestEphemeralWatchdog starts an Ephemeral cluster in a child process that
// exits without calling Stop, and checks that the watchdog stops the server
// and deletes its directories.
func TestEphemeralWatchdog(t *testing.T) {
	if dir := os.Getenv("PGCLUSTER_TEST_CHILD_DATADIR"); dir != "" {
		c, err := Start(context.Background(), Options{DataDir: dir, Ephemeral: true})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		fmt.Printf("READY %d %s\n", c.PID(), c.SocketDir())
		os.Exit(0) // no Stop: the watchdog must clean up
	}
	if _, err := findBinaries(); err != nil && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	dataDir := filepath.Join(testDir(t), "data")
	cmd := exec.Command(os.Args[0], "-test.run=^TestEphemeralWatchdog$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PGCLUSTER_TEST_CHILD_DATADIR="+dataDir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var pid int
	var sockDir string
	if _, err := fmt.Sscanf(string(out), "READY %d %s", &pid, &sockDir); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, dataErr := os.Stat(dataDir)
		_, sockErr := os.Stat(sockDir)
		alive := syscall.Kill(pid, 0) == nil && !isZombie(pid)
		if errors.Is(dataErr, fs.ErrNotExist) && errors.Is(sockErr, fs.ErrNotExist) && !alive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: data dir err=%v, socket dir err=%v, postmaster %d alive=%v", dataErr, sockErr, pid, alive)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// isZombie reports whether pid has exited but was not reaped yet.
func isZombie(pid int) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(raw)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

func TestEphemeralStopRemovesDataDir(t *testing.T) {
	dataDir := filepath.Join(testDir(t), "data")
	c := start(t, Options{DataDir: dataDir, Ephemeral: true})
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("data dir still there: %v", err)
	}
}

func TestVersionLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{{"9.6", "15", true}, {"15", "9.6", false}, {"14", "15", true}, {"15", "15", false}, {"10", "9.6", false}} {
		if got := versionLess(tc.a, tc.b); got != tc.want {
			t.Errorf("versionLess(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

func TestQuoteDSNValue(t *testing.T) {
	for in, want := range map[string]string{"app": "app", "": "''", "a b": "'a b'", `it's\`: `'it\'s\\'`} {
		if got := quoteDSNValue(in); got != want {
			t.Errorf("quoteDSNValue(%q) = %q, want %q", in, got, want)
		}
	}
	cfg, err := pgx.ParseConfig("host=/tmp port=5432 user=postgres dbname=" + quoteDSNValue(`it's a \db`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database != `it's a \db` {
		t.Fatalf("round trip: %q", cfg.Database)
	}
}

func TestStalePidFileOfOtherProcess(t *testing.T) {
	dataDir := filepath.Join(testDir(t), "data")
	c := start(t, Options{DataDir: dataDir})
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A postmaster.pid left by a crash whose pid now belongs to an
	// unrelated live process (this test binary, working elsewhere).
	stale := fmt.Sprintf("%d\n%s\n1700000000\n5432\n/nonexistent\n\n  1234  5678\nready   \n", os.Getpid(), dataDir)
	if err := os.WriteFile(filepath.Join(dataDir, "postmaster.pid"), []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	c2 := start(t, Options{DataDir: dataDir})
	if c2.Reused() {
		t.Fatal("stale postmaster.pid taken for a running server")
	}
	query(t, c2.ConnString("postgres"), "SELECT '1'")
}

// TestSettingsPinnedInTheCluster: the settings that keep a cluster private are in its own
// configuration, not only on the command line, so that a server started by hand on the data
// directory (as an operator restarting the development cluster would) listens on the same
// socket and on no TCP port.
func TestSettingsPinnedInTheCluster(t *testing.T) {
	c := start(t, Options{DataDir: filepath.Join(testDir(t), "data")})
	pinned, err := os.ReadFile(filepath.Join(c.DataDir(), pinnedConf))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"listen_addresses = ''", "unix_socket_directories = '" + c.SocketDir() + "'"} {
		if !strings.Contains(string(pinned), want) {
			t.Errorf("%s lacks %q:\n%s", pinnedConf, want, pinned)
		}
	}
	main, err := os.ReadFile(filepath.Join(c.DataDir(), "postgresql.conf"))
	if err != nil || strings.Count(string(main), "include_if_exists '"+pinnedConf+"'") != 1 {
		t.Errorf("postgresql.conf does not include %s once (%v)", pinnedConf, err)
	}
	// What the server itself reads from its files, whatever its command line says.
	if got := query(t, c.ConnString("postgres"), "SELECT COALESCE((SELECT setting FROM pg_file_settings WHERE name = 'listen_addresses' AND sourcefile LIKE '%/"+pinnedConf+"' LIMIT 1), 'missing')"); got != "" {
		t.Errorf("listen_addresses from the files: %q, want ''", got)
	}
}
