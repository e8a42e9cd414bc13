package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/impl/pgcluster"
)

// postgres is the run's own PostgreSQL cluster, which the run crashes, hangs and starts again:
// the same data directory and socket, so the replicas' connection string stays valid across
// the outages. Unlike the test suite's throwaway clusters it is durable (fsync,
// synchronous_commit and full_page_writes on, pgcluster's defaults with Options.Fsync): a
// crash must not lose a commit the gateway was told of, or the books could not be held to it.
type postgres struct {
	dataDir, socketDir string
	cluster            *pgcluster.Cluster
	logf               func(string, ...any)
	// hung are the processes a hang stopped (the postmaster first), to be continued.
	hung []int
}

// startPostgres initialises and starts a cluster under root and creates the database tollgate.
func startPostgres(ctx context.Context, root string, logf func(string, ...any)) (*postgres, error) {
	p := &postgres{dataDir: filepath.Join(root, "pg"), socketDir: filepath.Join(root, "s"), logf: logf}
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	if err := p.cluster.CreateDatabase(ctx, "tollgate"); err != nil {
		_ = p.stop(ctx)
		return nil, err
	}
	return p, nil
}

func (p *postgres) start(ctx context.Context) error {
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: p.dataDir, SocketDir: p.socketDir, Fsync: true, Logf: p.logf})
	if err != nil {
		return err
	}
	p.cluster = c
	return nil
}

func (p *postgres) stop(ctx context.Context) error { return p.cluster.Stop(ctx) }

// crash stops the server as `pg_ctl stop -m immediate` does: SIGQUIT to the postmaster, which
// makes every backend quit at once, with no checkpoint and no goodbye to clients, so that the
// next start runs crash recovery from the write-ahead log. It returns once the postmaster has
// exited.
func (p *postgres) crash(ctx context.Context) error {
	if err := syscall.Kill(p.cluster.PID(), syscall.SIGQUIT); err != nil {
		return fmt.Errorf("chaos: SIGQUIT to the postmaster (pid %d): %w", p.cluster.PID(), err)
	}
	// Stop finds the server gone (or waits for its shutdown to end) and forgets it.
	return p.cluster.Stop(ctx)
}

// hang stops the postmaster and every process it started (backends, checkpointer, WAL writer,
// ...) with SIGSTOP: a hung database, whose sockets accept connections and whose backends hold
// their queries, rather than one that refuses. It returns how many processes it stopped.
func (p *postgres) hang() (int, error) {
	pm := p.cluster.PID()
	// The postmaster first, so that it starts no process after its children are listed; a
	// signal is delivered after kill returns, so wait until it has stopped, then stop its
	// children and list them again until none is left running.
	if err := syscall.Kill(pm, syscall.SIGSTOP); err != nil {
		return 0, fmt.Errorf("chaos: SIGSTOP to the postmaster (pid %d): %w", pm, err)
	}
	p.hung = []int{pm}
	waitStopped(pm)
	for {
		stopped := 0
		for _, pid := range childProcesses(pm) {
			if slices.Contains(p.hung, pid) {
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil && !errors.Is(err, syscall.ESRCH) {
				return len(p.hung), fmt.Errorf("chaos: SIGSTOP to server process %d: %w", pid, err)
			}
			p.hung = append(p.hung, pid)
			stopped++
		}
		if stopped == 0 {
			return len(p.hung), nil
		}
	}
}

// resume continues the processes hang stopped, the postmaster last.
func (p *postgres) resume() error {
	var errs []error
	for i := len(p.hung) - 1; i >= 0; i-- {
		if err := syscall.Kill(p.hung[i], syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("chaos: SIGCONT to pid %d: %w", p.hung[i], err))
		}
	}
	p.hung = nil
	return errors.Join(errs...)
}

// waitStopped waits, a few seconds at most, until process pid is in the stopped state.
func waitStopped(pid int) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		fields, ok := procStat(strconv.Itoa(pid))
		if !ok || len(fields) > 0 && (fields[0] == "T" || fields[0] == "t") {
			return
		}
	}
}

// childProcesses lists the processes whose parent is pid, from /proc.
func childProcesses(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var children []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if fields, ok := procStat(e.Name()); ok && len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			children = append(children, child)
		}
	}
	return children
}

// procStat returns the fields of /proc/<pid>/stat after the command name (state, ppid, ...),
// and false when the process is gone. The line is "pid (comm) state ppid ...": comm may hold
// blanks and parentheses, so the fields are read after its last closing parenthesis.
func procStat(pid string) ([]string, bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(stat[i+1:])), true
}

// url is the connection string of the database tollgate.
func (p *postgres) url() string { return p.cluster.ConnString("tollgate") }

// redisServer is a redis-server on a loopback port, stopped with SIGKILL (nothing is saved)
// and started again on the same port.
type redisServer struct {
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts redis-server (found on PATH) on a free loopback port.
func startRedis(root string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("chaos: redis-server is not installed (apt-get install redis-server)")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &redisServer{bin: bin, port: port, dir: filepath.Join(root, "redis")}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return nil, err
	}
	return r, r.start()
}

func (r *redisServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

func (r *redisServer) start() error {
	cmd := exec.Command(r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(r.done)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if redisAnswers(r.port) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.stop()
	return errors.New("chaos: redis-server did not answer PING")
}

func (r *redisServer) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}

// redisAnswers reports whether a Redis server on port answers PING.
func redisAnswers(port int) bool {
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.Ping(ctx).Err() == nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
