package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultPort is the port used when Options.Port is zero. The server does not
// listen on TCP; the port only names the socket file (.s.PGSQL.<port>).
const DefaultPort = 5432

// Superuser is the name of the database superuser that initdb creates and
// that connection strings from Cluster.ConnString log in as. It is also the
// OS user the server runs as when the calling process is root.
const Superuser = "postgres"

// ReadyTimeout is how long Start waits at most for the server to accept
// connections, unless the context passed to Start ends sooner.
const ReadyTimeout = 30 * time.Second

// maxSocketPath bounds the length of the socket file's path: sun_path holds
// 108 bytes including the terminating NUL, and we keep one byte of margin.
const maxSocketPath = 107

// ErrNotInstalled is returned, wrapped, by Start when the PostgreSQL
// binaries (initdb, pg_ctl and postgres) are neither on PATH nor under
// /usr/lib/postgresql/*/bin. Test helpers use it to tell a machine without
// PostgreSQL apart from a real failure.
var ErrNotInstalled = errors.New("pgcluster: PostgreSQL binaries (initdb, pg_ctl, postgres) not found")

// Options configures Start.
type Options struct {
	// DataDir is the cluster's data directory. It is created and initialised
	// with initdb when it holds no PG_VERSION file. Required.
	DataDir string
	// SocketDir is the directory that holds the server's Unix socket. When
	// empty, Start creates a short, fresh directory under os.TempDir (or /tmp
	// when that path would be too long, or when the server user cannot reach
	// os.TempDir) and removes it again in Stop. The socket file's path must
	// stay under 107 bytes.
	SocketDir string
	// Port names the socket file (.s.PGSQL.<Port>); 0 means DefaultPort. No
	// TCP port is opened.
	Port int
	// Fsync keeps PostgreSQL's durability settings. When false, the server
	// runs with fsync, synchronous_commit and full_page_writes off and initdb
	// skips its final sync: fast, and fine for throwaway or development data.
	Fsync bool
	// Settings holds extra server settings, passed as "-c key=value" after
	// the package's own, so they override them.
	Settings map[string]string
	// Ephemeral ties the cluster to the calling process: Stop also deletes
	// DataDir, and a small watchdog process stops the server and deletes
	// DataDir (and a socket directory Start created) as soon as the calling
	// process exits without calling Stop, even when it crashes or is killed.
	Ephemeral bool
	// Logf receives everything the package prints. Nil discards it.
	Logf func(format string, args ...any)
}

// Cluster is a running PostgreSQL server started or reused by Start.
// Its methods are safe for concurrent use.
type Cluster struct {
	bins      binaries
	acct      *account
	logf      func(format string, args ...any)
	dataDir   string
	socketDir string
	port      int
	logFile   string
	ephemeral bool

	ownsSocketDir bool
	reused        bool
	pid           int

	// done is closed when the postgres process this Cluster started has
	// exited; nil when the server was reused.
	done    chan struct{}
	waitErr error

	watchdog     *exec.Cmd
	watchdogW    *os.File
	watchdogDone chan struct{}

	mu      sync.Mutex
	stopped bool
}

// liveWatchdogs keeps the write end of each watchdog's pipe reachable, so
// that the garbage collector never closes it (which would fire the watchdog)
// while the process runs, even if the caller drops its *Cluster.
var liveWatchdogs sync.Map // *os.File -> struct{}

// Start starts a PostgreSQL server for opts.DataDir and waits until it
// accepts connections.
//
// When DataDir holds no PG_VERSION file, Start first runs
// "initdb -U postgres --auth=trust -E UTF8 --locale=C". When a server is
// already running in DataDir (its postmaster.pid names a live process),
// Start reuses that server rather than failing: it then takes the socket
// directory and port from postmaster.pid, ignores opts.SocketDir and
// opts.Port, and Cluster.Reused reports true. Stop stops a reused server too.
//
// When the calling process is root, the binaries run as the "postgres" OS
// user, DataDir (when it holds no cluster yet) and a socket directory Start
// creates are handed to that user, and every parent directory of DataDir and
// of the socket directory must be searchable by it.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	began := time.Now()
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if opts.DataDir == "" {
		return nil, errors.New("pgcluster: Options.DataDir is required")
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: data directory %q: %w", opts.DataDir, err)
	}
	port := opts.Port
	if port == 0 {
		port = DefaultPort
	}
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("pgcluster: port %d out of range 1-65535", port)
	}
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	acct, err := lookupServerUser()
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		bins:      bins,
		acct:      acct,
		logf:      logf,
		dataDir:   dataDir,
		port:      port,
		logFile:   filepath.Join(dataDir, "log", "postgres.log"),
		ephemeral: opts.Ephemeral,
	}

	if err := c.prepareDataDir(); err != nil {
		return nil, err
	}

	running, err := c.runningServer()
	if err != nil {
		return nil, err
	}
	if running {
		logf("pgcluster: reusing the server already running in %s (pid %d, socket %s)", dataDir, c.pid, c.socketPath())
		if err := c.waitReady(ctx); err != nil {
			return nil, fmt.Errorf("pgcluster: a server is running in %s (pid %d) but does not accept connections: %w", dataDir, c.pid, err)
		}
		if err := c.startWatchdog(); err != nil {
			return nil, err
		}
		return c, nil
	}

	if err := c.prepareSocketDir(opts.SocketDir); err != nil {
		return nil, err
	}
	fail := func(err error) (*Cluster, error) {
		c.abort()
		return nil, err
	}

	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
		if err := c.initdb(ctx, opts.Fsync); err != nil {
			return fail(err)
		}
	} else if err != nil {
		return fail(fmt.Errorf("pgcluster: %w", err))
	}

	if err := c.pinSettings(); err != nil {
		return fail(err)
	}
	if err := c.startServer(serverArgs(c, opts)); err != nil {
		return fail(err)
	}
	if err := c.waitReady(ctx); err != nil {
		return fail(fmt.Errorf("pgcluster: server in %s did not become ready: %w", dataDir, err))
	}
	if err := c.startWatchdog(); err != nil {
		return fail(err)
	}
	logf("pgcluster: server ready on %s (pid %d) in %s; log: %s", c.socketPath(), c.pid, time.Since(began).Round(time.Millisecond), c.logFile)
	return c, nil
}

// DataDir returns the cluster's absolute data directory.
func (c *Cluster) DataDir() string { return c.dataDir }

// SocketDir returns the directory that holds the server's Unix socket.
func (c *Cluster) SocketDir() string { return c.socketDir }

// Port returns the port number that names the server's socket file.
func (c *Cluster) Port() int { return c.port }

// LogFile returns the path of the server log written by a server that Start
// started. A reused server keeps logging wherever it logged before.
func (c *Cluster) LogFile() string { return c.logFile }

// PID returns the process id of the server's postmaster.
func (c *Cluster) PID() int { return c.pid }

// Reused reports whether Start found the server already running in the data
// directory and reused it instead of starting a new one.
func (c *Cluster) Reused() bool { return c.reused }

// ConnString returns a key/value connection string, understood by pgx and
// libpq, that reaches database dbname on this cluster over its Unix socket
// as the superuser, for example
// "host=/tmp/pgs123 port=5432 user=postgres dbname=app sslmode=disable".
func (c *Cluster) ConnString(dbname string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable",
		quoteDSNValue(c.socketDir), c.port, Superuser, quoteDSNValue(dbname))
}

// CreateDatabase creates the database name unless it already exists.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("pgcluster: CreateDatabase: empty database name")
	}
	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("pgcluster: look up database %q: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: created concurrently
			return nil
		}
		return fmt.Errorf("pgcluster: create database %q: %w", name, err)
	}
	c.logf("pgcluster: created database %q", name)
	return nil
}

// Stop stops the server with "pg_ctl stop -m fast" and waits until it is
// down, then removes a socket directory that Start created. For an
// Ephemeral cluster it also deletes the data directory; otherwise removing a
// throwaway data directory is up to the caller. Calling Stop again after it
// succeeded does nothing.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	secs := 60
	if dl, ok := ctx.Deadline(); ok {
		secs = max(1, int(time.Until(dl).Seconds()))
	}
	cmd := c.command(ctx, c.bins.pgctl, "stop", "-D", c.dataDir, "-m", "fast", "-w", "-t", strconv.Itoa(secs))
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(c.dataDir, "postmaster.pid")); !errors.Is(statErr, fs.ErrNotExist) {
			return fmt.Errorf("pgcluster: pg_ctl stop -D %s: %w: %s", c.dataDir, err, strings.TrimSpace(string(out)))
		}
		c.logf("pgcluster: server in %s was already stopped", c.dataDir)
	}
	if c.done != nil {
		select {
		case <-c.done:
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: waiting for postgres (pid %d) to exit: %w", c.pid, ctx.Err())
		}
	}
	c.stopped = true
	c.stopWatchdog()
	if c.ownsSocketDir {
		_ = os.RemoveAll(c.socketDir)
	}
	if c.ephemeral {
		if err := os.RemoveAll(c.dataDir); err != nil {
			return fmt.Errorf("pgcluster: remove data directory: %w", err)
		}
	}
	c.logf("pgcluster: stopped the server in %s", c.dataDir)
	return nil
}

// binaries holds the paths of the PostgreSQL programs the package runs.
type binaries struct {
	initdb, pgctl, postgres string
}

// findBinaries looks for initdb, pg_ctl and postgres on PATH first, then in
// the highest-versioned /usr/lib/postgresql/*/bin that has all three.
func findBinaries() (binaries, error) {
	var b binaries
	var errs [3]error
	b.initdb, errs[0] = exec.LookPath("initdb")
	b.pgctl, errs[1] = exec.LookPath("pg_ctl")
	b.postgres, errs[2] = exec.LookPath("postgres")
	if errs[0] == nil && errs[1] == nil && errs[2] == nil {
		return b, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		return versionLess(filepath.Base(filepath.Dir(dirs[j])), filepath.Base(filepath.Dir(dirs[i])))
	})
	for _, dir := range dirs {
		cand := binaries{
			initdb:   filepath.Join(dir, "initdb"),
			pgctl:    filepath.Join(dir, "pg_ctl"),
			postgres: filepath.Join(dir, "postgres"),
		}
		if isExecutable(cand.initdb) && isExecutable(cand.pgctl) && isExecutable(cand.postgres) {
			return cand, nil
		}
	}
	return binaries{}, fmt.Errorf("%w on PATH or under /usr/lib/postgresql/*/bin; install PostgreSQL (for example: apt-get install postgresql)", ErrNotInstalled)
}

// versionLess compares dotted version strings such as "9.6" and "15"
// numerically.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, errX := strconv.Atoi(as[i])
		y, errY := strconv.Atoi(bs[i])
		if errX != nil || errY != nil {
			if as[i] != bs[i] {
				return as[i] < bs[i]
			}
			continue
		}
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// account is the OS user the server runs as when the caller is root.
type account struct {
	name string
	uid  int
	gid  int
	gids []int
}

// lookupServerUser returns nil when the process is not root, since the
// server then runs as the calling user.
func lookupServerUser() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(Superuser)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: this process runs as root and PostgreSQL refuses to run as root, so the server must run as the %q OS user, but looking it up failed (%v); create that user (for example: useradd --system --user-group %s) or run as a non-root user", Superuser, err, Superuser)
	}
	a := &account{name: u.Username}
	if a.uid, err = strconv.Atoi(u.Uid); err != nil {
		return nil, fmt.Errorf("pgcluster: user %s: uid %q: %w", Superuser, u.Uid, err)
	}
	if a.gid, err = strconv.Atoi(u.Gid); err != nil {
		return nil, fmt.Errorf("pgcluster: user %s: gid %q: %w", Superuser, u.Gid, err)
	}
	a.gids = []int{a.gid}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if n, err := strconv.Atoi(id); err == nil && n != a.gid {
				a.gids = append(a.gids, n)
			}
		}
	}
	return a, nil
}

// credential returns the credential that runs a child as the account.
func (a *account) credential() *syscall.Credential {
	groups := make([]uint32, len(a.gids))
	for i, g := range a.gids {
		groups[i] = uint32(g)
	}
	return &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.gid), Groups: groups}
}

// chown hands path to the account; a nil account (not root) does nothing.
func (a *account) chown(path string) error {
	if a == nil {
		return nil
	}
	if err := os.Chown(path, a.uid, a.gid); err != nil {
		return fmt.Errorf("pgcluster: hand %s to user %s: %w", path, a.name, err)
	}
	return nil
}

// checkReachable fails when some directory from dir up to / is not
// searchable by the account, which would keep the server from reaching
// target. A nil account (not root) does nothing.
func (a *account) checkReachable(dir, target string) error {
	if a == nil {
		return nil
	}
	d, mode, err := a.firstUnsearchable(dir)
	if err != nil {
		return err
	}
	if d != "" {
		return fmt.Errorf("pgcluster: the server runs as OS user %s, which cannot reach %s: directory %s (mode %v) is not searchable by it; use a path under a directory others may search (such as %s), or allow it with chmod o+x %s",
			a.name, target, d, mode, os.TempDir(), d)
	}
	return nil
}

// may reports whether the account has the permission bits want (given as
// "other" bits, such as 0o1 for search or 0o3 for write and search) on fi.
func (a *account) may(fi fs.FileInfo, want fs.FileMode) bool {
	perm := fi.Mode().Perm()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return perm&want == want
	}
	if int(st.Uid) == a.uid {
		return perm&(want<<6) == want<<6
	}
	for _, g := range a.gids {
		if int(st.Gid) == g {
			return perm&(want<<3) == want<<3
		}
	}
	return perm&want == want
}

// prepareDataDir creates the data directory when missing and, as root,
// hands it to the server user while it holds no cluster yet.
func (c *Cluster) prepareDataDir() error {
	if _, err := os.Stat(c.dataDir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(c.dataDir), 0o755); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		if err := os.Mkdir(c.dataDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("pgcluster: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if c.acct == nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
		if err := c.acct.chown(c.dataDir); err != nil {
			return err
		}
	}
	return c.acct.checkReachable(filepath.Dir(c.dataDir), c.dataDir)
}

// runningServer reports whether a live postmaster owns the data directory
// and, if so, records its pid, port and socket directory for reuse. A
// postmaster.pid whose pid now belongs to some other process (after a
// reboot, say) is removed, since postgres would refuse to start over it.
func (c *Cluster) runningServer() (bool, error) {
	pidFile := filepath.Join(c.dataDir, "postmaster.pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		return false, nil
	}
	// postmaster.pid lines: pid, data dir, start time, port, first socket
	// directory, listen address, shared memory key, status.
	lines := strings.Split(string(raw), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 || !processAlive(pid) {
		return false, nil // stale: postgres itself checks and replaces it on start
	}
	if !c.servesDataDir(pid) {
		c.logf("pgcluster: removing stale %s: pid %d is not a server of this data directory", pidFile, pid)
		if err := os.Remove(pidFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("pgcluster: remove stale postmaster.pid: %w", err)
		}
		return false, nil
	}
	if len(lines) < 5 || strings.TrimSpace(lines[4]) == "" {
		return false, fmt.Errorf("pgcluster: a server (pid %d) is running in %s without a Unix socket, so it cannot be reused; stop it with: pg_ctl stop -D %s", pid, c.dataDir, c.dataDir)
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil {
		return false, fmt.Errorf("pgcluster: %s: bad port line %q", pidFile, lines[3])
	}
	c.reused = true
	c.pid = pid
	c.port = port
	c.socketDir = strings.TrimSpace(lines[4])
	if _, err := os.Stat(c.socketPath()); err != nil {
		return false, fmt.Errorf("pgcluster: a server (pid %d) is running in %s, but its socket %s is gone (%v), so it cannot be reused; stop it with: pg_ctl stop -D %s", pid, c.dataDir, c.socketPath(), err, c.dataDir)
	}
	return true, nil
}

// servesDataDir reports whether the live process pid works in the data
// directory, as a postmaster does. When that cannot be told (no /proc, or
// no permission to look), it trusts the pid: wrongly taking a stale file for
// a live server only costs an error, while the reverse could start a second
// server on the same data.
func (c *Cluster) servesDataDir(pid int) bool {
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) // ENOENT: it just exited
	}
	want, err := filepath.EvalSymlinks(c.dataDir)
	if err != nil {
		want = c.dataDir
	}
	return cwd == want
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// prepareSocketDir creates (or checks) the socket directory.
func (c *Cluster) prepareSocketDir(dir string) error {
	if dir == "" {
		base := os.TempDir()
		// MkdirTemp appends up to 10 digits to the "pgs" prefix. /tmp serves
		// when the temporary directory gives too long a path, or is private
		// to root (TMPDIR under root's home, say).
		if len(socketPath(filepath.Join(base, "pgs0123456789"), 65535)) >= maxSocketPath || c.acct.checkReachable(base, base) != nil {
			base = "/tmp"
		}
		d, err := os.MkdirTemp(base, "pgs")
		if err != nil {
			return fmt.Errorf("pgcluster: socket directory: %w", err)
		}
		c.socketDir, c.ownsSocketDir = d, true
		if err := c.acct.chown(d); err != nil {
			return err
		}
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fmt.Errorf("pgcluster: socket directory %q: %w", dir, err)
		}
		if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(abs, 0o700); err != nil {
				return fmt.Errorf("pgcluster: socket directory: %w", err)
			}
			if err := c.acct.chown(abs); err != nil {
				return err
			}
		}
		c.socketDir = abs
	}
	if p := c.socketPath(); len(p) >= maxSocketPath {
		return fmt.Errorf("pgcluster: socket path %s is %d bytes long; Unix sockets need it under %d: choose a shorter SocketDir", p, len(p), maxSocketPath)
	}
	if c.acct != nil {
		fi, err := os.Stat(c.socketDir)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		if !c.acct.may(fi, 0o3) {
			return fmt.Errorf("pgcluster: the server runs as OS user %s, which cannot create its socket in %s (mode %v); make the directory writable by it (chown %s %s)", c.acct.name, c.socketDir, fi.Mode().Perm(), c.acct.name, c.socketDir)
		}
		return c.acct.checkReachable(filepath.Dir(c.socketDir), c.socketDir)
	}
	return nil
}

func socketPath(dir string, port int) string {
	return filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))
}

func (c *Cluster) socketPath() string { return socketPath(c.socketDir, c.port) }

// command prepares a PostgreSQL program, run as the server user when root,
// in its own session so that a terminal's Ctrl-C does not reach it. A nil
// ctx leaves the process unbound to any context.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if ctx == nil {
		cmd = exec.Command(name, args...)
	} else {
		cmd = exec.CommandContext(ctx, name, args...)
	}
	cmd.Dir = "/"
	cmd.Env = serverEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if c.acct != nil {
		cmd.SysProcAttr.Credential = c.acct.credential()
	}
	return cmd
}

// serverEnv is the calling environment without libpq's PG* variables, which
// could otherwise redirect pg_ctl, and with the C locale for messages.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_ALL=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

func (c *Cluster) initdb(ctx context.Context, fsync bool) error {
	began := time.Now()
	args := []string{"-D", c.dataDir, "-U", Superuser, "--auth=trust", "-E", "UTF8", "--locale=C"}
	if !fsync {
		args = append(args, "--no-sync")
	}
	out, err := c.command(ctx, c.bins.initdb, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgcluster: initdb -D %s: %w\n%s", c.dataDir, err, lastLines(string(out), 20))
	}
	c.logf("pgcluster: initialised a new cluster in %s in %s", c.dataDir, time.Since(began).Round(time.Millisecond))
	return nil
}

// pinnedConf is the configuration file, included by postgresql.conf, where the cluster keeps
// the settings that must hold however the server is started.
const pinnedConf = "tollgate.conf"

// pinSettings writes the settings that keep the cluster private into the cluster's own
// configuration, not only its command line: no TCP listener (initdb's pg_hba.conf trusts every
// local TCP connection as any user, superuser included) and this cluster's socket. A server
// started by hand (pg_ctl start on the data directory) then listens where the gateway looks,
// and on no TCP port.
func (c *Cluster) pinSettings() error {
	conf := filepath.Join(c.dataDir, "postgresql.conf")
	main, err := os.ReadFile(conf)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	include := "include_if_exists '" + pinnedConf + "'"
	if !strings.Contains(string(main), include) {
		f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		_, err = f.WriteString("\n# Written by tollgate's pgcluster: the settings that keep this cluster private.\n" + include + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	pinned := filepath.Join(c.dataDir, pinnedConf)
	body := "# Rewritten by tollgate's pgcluster at every start.\n" +
		"listen_addresses = ''\n" +
		"unix_socket_directories = '" + strings.ReplaceAll(c.socketDir, "'", "''") + "'\n" +
		"port = " + strconv.Itoa(c.port) + "\n"
	if err := os.WriteFile(pinned, []byte(body), 0o600); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return c.acct.chown(pinned)
}

// serverArgs builds the postgres command line for a new server.
func serverArgs(c *Cluster, opts Options) []string {
	args := []string{
		"-D", c.dataDir,
		"-c", "listen_addresses=",
		"-c", "unix_socket_directories=" + quoteListItem(c.socketDir),
		"-c", "port=" + strconv.Itoa(c.port),
		"-c", "max_connections=200",
	}
	if !opts.Fsync {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	keys := make([]string, 0, len(opts.Settings))
	for k := range opts.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-c", k+"="+opts.Settings[k])
	}
	return args
}

// startServer launches postgres in the background with its output going to
// the log file.
func (c *Cluster) startServer(args []string) error {
	logDir := filepath.Dir(c.logFile)
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: log directory: %w", err)
	}
	if err := c.acct.chown(logDir); err != nil {
		return err
	}
	f, err := os.OpenFile(c.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("pgcluster: log file: %w", err)
	}
	defer f.Close()
	if err := c.acct.chown(c.logFile); err != nil {
		return err
	}
	cmd := c.command(nil, c.bins.postgres, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgcluster: start postgres: %w", err)
	}
	c.pid = cmd.Process.Pid
	c.done = make(chan struct{})
	go func() {
		err := cmd.Wait()
		c.waitErr = err // read only after done is closed
		close(c.done)
	}()
	return nil
}

// waitReady connects repeatedly until the server accepts a connection, the
// server process exits, ReadyTimeout passes or ctx ends.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	var lastErr error
	for {
		cfg, err := pgx.ParseConfig(c.ConnString("postgres"))
		if err != nil {
			return err
		}
		cfg.ConnectTimeout = 2 * time.Second
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		lastErr = err
		select {
		case <-c.done: // nil (blocks forever) for a reused server
			return fmt.Errorf("postgres exited during startup (%v); end of %s:\n%s", c.waitErr, c.logFile, c.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%w (last connection error: %v); end of %s:\n%s", ctx.Err(), lastErr, c.logFile, c.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *Cluster) logTail() string {
	raw, err := os.ReadFile(c.logFile)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return lastLines(string(raw), 20)
}

// abort undoes a failed Start: it kills a server it started and removes a
// socket directory it created.
func (c *Cluster) abort() {
	if c.done != nil {
		_ = syscall.Kill(c.pid, syscall.SIGQUIT) // immediate shutdown
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(c.pid, syscall.SIGKILL)
			<-c.done
		}
	}
	if c.ownsSocketDir {
		_ = os.RemoveAll(c.socketDir)
	}
	if c.ephemeral {
		_ = os.RemoveAll(c.dataDir)
	}
}

// watchdogScript waits for its standard input to reach end of file, which
// happens when the process holding the pipe's write end exits, then stops
// the server with SIGQUIT (immediate shutdown) when postmaster.pid still
// names it, waits up to a minute for the server to remove postmaster.pid,
// and deletes the cluster's directories. Arguments: the postmaster's pid,
// the data directory, and the socket directory to delete (or "").
const watchdogScript = `read line
first=
{ read -r first; } < "$2/postmaster.pid" 2>/dev/null
if [ "$first" = "$1" ]; then
	kill -QUIT "$1" 2>/dev/null
	i=0
	while [ -e "$2/postmaster.pid" ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i+1)); done
fi
rm -rf "$2"
if [ -n "$3" ]; then rm -rf "$3"; fi
`

// startWatchdog starts the watchdog of an Ephemeral cluster. It runs as the
// calling user (so that, as root, it may delete the data directory even
// where the server user could not), in its own session so that a terminal's
// Ctrl-C does not reach it, with a pipe from this process as its standard
// input.
func (c *Cluster) startWatchdog() error {
	if !c.ephemeral {
		return nil
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		sh = "/bin/sh"
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pgcluster: watchdog pipe: %w", err)
	}
	sockDir := ""
	if c.ownsSocketDir {
		sockDir = c.socketDir
	}
	cmd := exec.Command(sh, "-c", watchdogScript, "pgcluster-watchdog", strconv.Itoa(c.pid), c.dataDir, sockDir)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("pgcluster: start watchdog: %w", err)
	}
	r.Close()
	c.watchdog, c.watchdogW, c.watchdogDone = cmd, w, make(chan struct{})
	liveWatchdogs.Store(w, struct{}{})
	go func() {
		_ = cmd.Wait()
		close(c.watchdogDone)
	}()
	return nil
}

// stopWatchdog disarms the watchdog: it is killed before its pipe closes, so
// it never acts.
func (c *Cluster) stopWatchdog() {
	if c.watchdog == nil {
		return
	}
	_ = c.watchdog.Process.Kill()
	<-c.watchdogDone
	liveWatchdogs.Delete(c.watchdogW)
	_ = c.watchdogW.Close()
	c.watchdog = nil
}

// quoteDSNValue quotes a value for a key/value connection string when needed.
func quoteDSNValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\r\n'\\") {
		return v
	}
	v = strings.ReplaceAll(v, `\`, `\\`)
	v = strings.ReplaceAll(v, `'`, `\'`)
	return "'" + v + "'"
}

// quoteListItem double-quotes one element of a comma-separated server list
// setting such as unix_socket_directories.
func quoteListItem(v string) string {
	return `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
