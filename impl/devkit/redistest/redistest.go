package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/impl/devkit/syncbuf"
)

// startTimeout bounds how long a started redis-server may take to answer.
const startTimeout = 10 * time.Second

var (
	mu sync.Mutex
	// cleanupPromised is set by Begin: someone will call Shutdown.
	cleanupPromised bool
	srv             *server
	srvErr          error

	runID     = newRunID()
	prefixSeq atomic.Uint64
)

// Main runs the tests of m, stops the redis-server that URL may have started
// and exits with the tests' status. Call it from TestMain. A TestMain that
// must also clean up after other helpers calls Begin and Shutdown instead.
func Main(m *testing.M) {
	Begin()
	code := m.Run()
	Shutdown()
	os.Exit(code)
}

// Begin declares that the test process will call Shutdown once its tests are
// done, which allows URL to start a redis-server. Main calls it.
func Begin() {
	mu.Lock()
	defer mu.Unlock()
	cleanupPromised = true
}

// Shutdown stops the redis-server that URL may have started, waiting for it
// to exit. It does nothing if none was started, and URL may start a new one
// afterwards. Main calls it.
func Shutdown() {
	mu.Lock()
	defer mu.Unlock()
	if srv != nil {
		srv.stop()
	}
	srv, srvErr = nil, nil
}

// URL returns the URL of a Redis server for t: the REDIS_URL environment
// variable if set, else that of a redis-server started once per test
// process. It skips t if redis-server is not installed, or fails it if so
// and the CI environment variable is "true". Without REDIS_URL, the test
// package must call Main, or Begin and Shutdown, from its TestMain.
func URL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	path := serverPath(t, "and REDIS_URL is not set")

	mu.Lock()
	defer mu.Unlock()
	if !cleanupPromised {
		t.Fatal("redistest: call redistest.Main(m), or Begin and Shutdown, from TestMain so that the redis-server URL starts is stopped")
	}
	if srv == nil && srvErr == nil {
		srv, srvErr = startServer(path, loopback)
	}
	if srvErr != nil {
		t.Fatalf("redistest: %v", srvErr)
	}
	return srv.url
}

// serverPath returns the path of redis-server. It skips t if redis-server
// is not installed, or fails it if so and the CI environment variable is
// "true"; why completes the message.
func serverPath(t testing.TB, why string) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redistest: redis-server is not installed %s: %v", why, err)
		}
		t.Skipf("redistest: redis-server is not installed %s: %v", why, err)
	}
	return path
}

// Prefix returns a key prefix unique to t within this test process and
// distinct from those of other processes, so that tests sharing a server,
// including one named by REDIS_URL, do not see each other's keys.
func Prefix(t testing.TB) string {
	return fmt.Sprintf("redistest:%s:%d:%s:", runID, prefixSeq.Add(1), t.Name())
}

// NewClient returns a client of the server at URL(t), closed when t ends.
func NewClient(t testing.TB) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(URL(t))
	if err != nil {
		t.Fatalf("redistest: parse Redis URL: %v", err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// server is a redis-server process started by this package.
type server struct {
	url  string
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	out  *syncbuf.Buffer
}

// loopback is the address the package's servers listen on unless a test
// names another (NewServerOn).
const loopback = "127.0.0.1"

// startServer starts redis-server from path on a free port of host,
// retrying a few times in case another process takes the port first.
func startServer(path, host string) (*server, error) {
	var errs []error
	for range 5 {
		port, err := freePort(host)
		if err != nil {
			return nil, err
		}
		s, err := tryStart(path, host, port)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("start redis-server: %w", errors.Join(errs...))
}

// tryStart starts redis-server from path on host's port and waits until it
// answers PING.
func tryStart(path, host string, port int) (*server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	s := &server{
		url:  "redis://" + addr + "/0",
		port: port,
		dir:  dir,
		done: make(chan struct{}),
		out:  &syncbuf.Buffer{},
		cmd: exec.Command(path,
			"--port", strconv.Itoa(port),
			"--bind", host,
			// Off only matters off loopback, where it would refuse every
			// client of a server without a password (NewServerOn).
			"--protected-mode", protectedMode(host),
			"--save", "",
			"--appendonly", "no",
			"--dir", dir,
		),
	}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	setParentDeathSignal(s.cmd)

	// Pdeathsig fires when the thread that started the child exits, so
	// the child is started and waited for on one locked thread, which
	// then lives exactly as long as the server.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := s.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = s.cmd.Wait()
		close(s.done)
	}()
	if err := <-started; err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}

	deadline := time.Now().Add(startTimeout)
	for {
		if ping(addr) == nil {
			return s, nil
		}
		select {
		case <-s.done:
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("redis-server on port %d exited: %s", port, strings.TrimSpace(s.out.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on port %d did not answer within %v: %s", port, startTimeout, strings.TrimSpace(s.out.String()))
		}
	}
}

// stop kills the server, waits for it to exit and removes its directory.
func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
	_ = os.RemoveAll(s.dir)
}

// protectedMode is redis-server's protected-mode setting for a server bound
// to host: Redis's default, yes, on loopback; no on another address, whose
// clients are other hosts.
func protectedMode(host string) string {
	if host == loopback {
		return "yes"
	}
	return "no"
}

// freePort returns a TCP port of host that was free a moment ago.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ping sends PING to the server at addr and expects PONG.
func ping(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("unexpected reply to PING: %q", line)
	}
	return nil
}

// newRunID returns a random identifier for this test process.
func newRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails.
	return hex.EncodeToString(b[:])
}
