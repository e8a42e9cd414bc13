package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tollgate binary the process tests run, built once per test binary (removeTestBinary,
// called by TestMain, deletes it).
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// testBinary builds the tollgate binary once and returns its path.
func testBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "tollgate-bin-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "tollgate")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = &buildError{err: err, out: string(out)}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "build: " + e.err.Error() + "\n" + e.out }

func removeTestBinary() {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// serveEnv is the environment of a tollgate process on the database db: the built-in
// simulator configuration (no provider keys, no config file), no Redis, JSON logs, its data
// (datasets, usage spill) in a directory of the test.
func serveEnv(t *testing.T, db string) []string {
	data := t.TempDir()
	return append(os.Environ(), "DATABASE_URL="+db, "LOG_FORMAT=json", "LOG_LEVEL=info", "OPENAI_API_KEY=",
		"ANTHROPIC_API_KEY=", "TOLLGATE_CONFIG=", "REDIS_URL=", "TOLLGATE_DATA_DIR="+data,
		"TOLLGATE_DATASETS_DIR="+filepath.Join(data, "datasets"))
}

// serveProc is a running `tollgate serve` process: its API and metrics base URLs, and its log.
type serveProc struct {
	cmd     *exec.Cmd
	api     string // host:port
	base    string // http://api
	metrics string // http://metrics

	mu      sync.Mutex
	lines   []string
	exited  chan struct{}
	waitErr error
}

// startServe starts `tollgate serve` with env, on fresh API and metrics addresses, with extra
// arguments. The test's cleanup kills it if it is still running.
func startServe(t *testing.T, env []string, extra ...string) *serveProc {
	t.Helper()
	p := &serveProc{api: freeAddr(), exited: make(chan struct{})}
	metricsAddr := freeAddr()
	p.base, p.metrics = "http://"+p.api, "http://"+metricsAddr
	args := append([]string{"serve", "-listen", p.api, "-metrics-listen", metricsAddr}, extra...)
	p.cmd = exec.Command(testBinary(t), args...)
	p.cmd.Env = env
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The log is read to its end before Wait, as exec requires; then exited is closed.
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// logs returns the process's log so far.
func (p *serveProc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// signal sends sig to the process.
func (p *serveProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the process to exit (failing the test after limit, a bound against hangs)
// and returns its exit error.
func (p *serveProc) wait(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.waitErr
	case <-time.After(limit):
		t.Fatalf("the process did not exit within %s\n%s", limit, p.logs())
		return nil
	}
}

// readyz asks the readiness probe; code 0 means no answer.
func (p *serveProc) readyz() (int, string) {
	res, err := http.Get(p.metrics + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// waitReadyz polls the readiness probe until it answers want, failing the test after limit.
func (p *serveProc) waitReadyz(t *testing.T, want int, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		code, body := p.readyz()
		if code == want {
			return body
		}
		select {
		case <-p.exited:
			t.Fatalf("the process exited while /readyz was awaited (last %d %s)\n%s", code, body, p.logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not answer %d within %s: last %d %s\n%s", want, limit, code, body, p.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
