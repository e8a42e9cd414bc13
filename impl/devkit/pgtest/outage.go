package pgtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/pgcluster"
)

// Outage is a PostgreSQL cluster of one test's own, which the test may take away and bring
// back: stopped and started again (a database restart), or frozen and thawed (a database that
// stops answering without closing its connections, as behind a network partition). Its
// database keeps its data and its connection string across both. It is a separate cluster from
// the shared one (which other tests use at the same time), started from the installed binaries
// even when TEST_DATABASE_URL names a server; with no binaries the test is skipped, or fails
// when CI is "true".
type Outage struct {
	t       testing.TB
	opts    pgcluster.Options
	baseDir string

	mu      sync.Mutex
	cluster *pgcluster.Cluster // nil while stopped
	frozen  []int
}

// outageDatabase is the database an Outage creates and ConnString names.
const outageDatabase = "tollgate"

// NewOutage starts a cluster for the calling test, with an empty database, and stops it and
// deletes its directories when the test ends.
func NewOutage(t testing.TB) *Outage {
	t.Helper()
	dataDir, err := os.MkdirTemp("", "pgoutage")
	if err != nil {
		t.Fatal(err)
	}
	// A socket directory of a fixed path that Start does not own, so that it survives a stop
	// and the connection string stays valid; Start creates it for the server's user.
	sockParent, err := os.MkdirTemp("", "pgos")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sockParent, 0o755); err != nil {
		t.Fatal(err)
	}
	o := &Outage{t: t, baseDir: sockParent, opts: pgcluster.Options{
		DataDir:   dataDir,
		SocketDir: filepath.Join(sockParent, "s"),
		Settings:  map[string]string{"shared_buffers": "16MB"},
		Logf:      t.Logf,
	}}
	t.Cleanup(func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.thawLocked()
		if o.cluster != nil {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			if err := o.cluster.Stop(ctx); err != nil {
				t.Errorf("pgtest: stop the outage cluster: %v", err)
			}
		}
		_ = os.RemoveAll(dataDir)
		_ = os.RemoveAll(sockParent)
	})
	o.Start()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := o.cluster.CreateDatabase(ctx, outageDatabase); err != nil {
		t.Fatal(err)
	}
	return o
}

// ConnString is the connection string of the cluster's database, valid across stops.
func (o *Outage) ConnString() string {
	return "host=" + quoteDSNValue(o.opts.SocketDir) + " port=" +
		strconv.Itoa(pgcluster.DefaultPort) + " user=" + pgcluster.Superuser + " dbname=" + outageDatabase + " sslmode=disable"
}

// Start starts the cluster (again) and waits until it accepts connections.
func (o *Outage) Start() {
	o.t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cluster != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	c, err := pgcluster.Start(ctx, o.opts)
	if err != nil {
		if errors.Is(err, pgcluster.ErrNotInstalled) && os.Getenv("CI") != "true" {
			o.t.Skipf("pgtest: %v", err)
		}
		o.t.Fatalf("pgtest: start the outage cluster: %v", err)
	}
	o.cluster = c
}

// Stop stops the cluster (a fast shutdown: its connections are closed) and waits until it is
// down.
func (o *Outage) Stop() {
	o.t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cluster == nil {
		return
	}
	o.thawLocked()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := o.cluster.Stop(ctx); err != nil {
		o.t.Fatalf("pgtest: stop the outage cluster: %v", err)
	}
	o.cluster = nil
}

// Freeze stops every process of the running server with SIGSTOP: connections stay open and
// new ones are accepted by the kernel, but nothing answers, as when the network to the
// database is cut. Thaw (or Stop, or the test's end) resumes them.
func (o *Outage) Freeze() {
	o.t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cluster == nil || o.frozen != nil {
		return
	}
	// The postmaster first, so that it forks no backend after its children are listed.
	pids := []int{o.cluster.PID()}
	if err := syscall.Kill(pids[0], syscall.SIGSTOP); err != nil {
		o.t.Fatalf("pgtest: freeze the postmaster %d: %v", pids[0], err)
	}
	o.frozen = pids
	// A signal is delivered after kill returns: until the postmaster has really stopped it may
	// still fork a backend, which the listing below would miss and which would go on
	// answering. Wait for it to stop, then stop every child, and list again until no child is
	// left running.
	waitStopped(pids[0])
	for {
		stopped := 0
		for _, pid := range childrenOf(pids[0]) {
			if slices.Contains(o.frozen, pid) {
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil && !errors.Is(err, syscall.ESRCH) {
				o.t.Fatalf("pgtest: freeze server process %d: %v", pid, err)
			}
			o.frozen = append(o.frozen, pid)
			stopped++
		}
		if stopped == 0 {
			return
		}
	}
}

// waitStopped waits, at most a few seconds, until process pid is in the stopped state.
func waitStopped(pid int) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		fields, ok := procStat(strconv.Itoa(pid))
		if !ok {
			return
		}
		if len(fields) > 0 && (fields[0] == "T" || fields[0] == "t") {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Thaw resumes the processes Freeze stopped.
func (o *Outage) Thaw() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.thawLocked()
}

func (o *Outage) thawLocked() {
	for _, pid := range o.frozen {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	o.frozen = nil
}

// childrenOf lists the processes whose parent is pid (the server's backends and helpers).
func childrenOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fields, ok := procStat(e.Name())
		if ok && len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// procStat returns the fields of /proc/<pid>/stat after the command name (state, ppid, ...),
// and false when the process is gone. The line is "pid (comm) state ppid ...": comm may hold
// spaces and parentheses, so the fields are read after its last closing paren.
func procStat(pid string) ([]string, bool) {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, false
	}
	return strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])), true
}
