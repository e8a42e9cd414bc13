package pgbouncertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate/tollgate/impl/devkit/syncbuf"
)

// Mode is PgBouncer's pool_mode: when a client's server connection goes back to the pool.
type Mode string

const (
	// Session pooling: a client keeps its server connection until it disconnects.
	Session Mode = "session"
	// Transaction pooling: a client holds a server connection for one transaction (or one
	// statement outside a transaction) only.
	Transaction Mode = "transaction"
)

// Options configure a PgBouncer.
type Options struct {
	// Mode is the pool mode (empty: Session).
	Mode Mode
	// IgnoreStartupParameters are the start-up parameters PgBouncer accepts from a client and
	// drops (its ignore_startup_parameters); any other it does not know is refused.
	IgnoreStartupParameters []string
}

// startTimeout bounds how long a started pgbouncer may take to accept connections.
const startTimeout = 10 * time.Second

// Bouncer is a running pgbouncer of one test.
type Bouncer struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	out  *syncbuf.Buffer
}

// URL is a postgres:// URL that reaches, through the PgBouncer, the database of the connection
// string given to Start, as its user.
func (b *Bouncer) URL() string { return b.url }

// Log is what pgbouncer has written so far (its log goes to its standard error).
func (b *Bouncer) Log() string { return b.out.String() }

// Start starts a PgBouncer of t's own in front of the server of connString (a pgtest connection
// string: a key/value string or a URL; over a Unix socket or TCP) and stops it when t ends.
// Every database name a client asks for is passed on to that server, as that user; the
// PgBouncer lets its clients in without a password (auth_type trust) and logs in to the server
// with connString's password, if any. It skips t when pgbouncer is not installed, or fails it
// when so and the CI environment variable is "true".
func Start(t testing.TB, connString string, o Options) *Bouncer {
	t.Helper()
	path := binaryPath(t)
	server, err := pgconn.ParseConfig(connString)
	if err != nil {
		t.Fatalf("pgbouncertest: parse the server's connection string: %v", err)
	}
	if o.Mode == "" {
		o.Mode = Session
	}
	dir, err := os.MkdirTemp("", "pgbouncertest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	attr, otherUser, err := processAttr()
	if err != nil {
		t.Fatalf("pgbouncertest: %v", err)
	}
	if otherUser { // pgbouncer must read its files
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	var errs []error
	for range 5 { // another process may take the free port first
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		ini := filepath.Join(dir, "pgbouncer.ini")
		if err := writeConfig(dir, ini, port, server, o); err != nil {
			t.Fatal(err)
		}
		b, err := tryStart(path, ini, port, server.User, server.Database, attr)
		if err == nil {
			t.Cleanup(b.stop)
			return b
		}
		errs = append(errs, err)
	}
	t.Fatalf("pgbouncertest: start pgbouncer: %v", errors.Join(errs...))
	return nil
}

// binaryPath returns the path of pgbouncer: on PATH, or in /usr/sbin where Debian installs it
// (not on an ordinary user's PATH). It skips t if pgbouncer is not installed, or fails it when so
// and the CI environment variable is "true".
func binaryPath(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("pgbouncer")
	if err == nil {
		return path
	}
	if _, statErr := os.Stat("/usr/sbin/pgbouncer"); statErr == nil {
		return "/usr/sbin/pgbouncer"
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("pgbouncertest: pgbouncer is not installed (apt-get install pgbouncer): %v", err)
	}
	t.Skipf("pgbouncertest: pgbouncer is not installed (apt-get install pgbouncer): %v", err)
	return ""
}

// writeConfig writes pgbouncer's configuration, ini, and its users' file in dir.
func writeConfig(dir, ini string, port int, server *pgconn.Config, o Options) error {
	users := filepath.Join(dir, "userlist.txt")
	// auth_type trust still wants the user listed; the password is not checked.
	if err := os.WriteFile(users, []byte(quote(server.User)+` ""`+"\n"), 0o644); err != nil {
		return err
	}
	target := []string{"host=" + server.Host, "port=" + strconv.Itoa(int(server.Port)), "user=" + server.User}
	if server.Password != "" {
		target = append(target, "password="+server.Password)
	}
	cfg := fmt.Sprintf(`[databases]
* = %s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
max_client_conn = 200
default_pool_size = 20
ignore_startup_parameters = %s
`, strings.Join(target, " "), port, users, o.Mode, strings.Join(o.IgnoreStartupParameters, ","))
	return os.WriteFile(ini, []byte(cfg), 0o644)
}

// quote quotes a name for pgbouncer's users' file.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// tryStart starts pgbouncer with its configuration ini and waits until it accepts connections on
// port, as attr says (processAttr); the Bouncer's URL reaches database as userName.
func tryStart(path, ini string, port int, userName, database string, attr *syscall.SysProcAttr) (*Bouncer, error) {
	b := &Bouncer{
		url: (&url.URL{Scheme: "postgres", User: url.User(userName), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Path: "/" + database, RawQuery: "sslmode=disable"}).String(),
		cmd:  exec.Command(path, ini),
		done: make(chan struct{}),
		out:  &syncbuf.Buffer{},
	}
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	b.cmd.SysProcAttr = attr

	// The parent-death signal fires when the thread that started the child exits, so the child is
	// started and waited for on one locked thread, which then lives exactly as long as it.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := b.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = b.cmd.Wait()
		close(b.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		cancel()
		if err == nil {
			_ = c.Close()
			return b, nil
		}
		select {
		case <-b.done:
			return nil, fmt.Errorf("pgbouncer on port %d exited: %s", port, strings.TrimSpace(b.out.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.stop()
			return nil, fmt.Errorf("pgbouncer on port %d did not accept connections within %v: %s", port, startTimeout, strings.TrimSpace(b.out.String()))
		}
	}
}

// stop kills pgbouncer and waits for it to exit.
func (b *Bouncer) stop() {
	_ = b.cmd.Process.Kill()
	<-b.done
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
