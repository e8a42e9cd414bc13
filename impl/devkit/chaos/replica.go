package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// replica is one `tollgate serve` process of the run.
type replica struct {
	n       int
	bin     string
	env     []string
	addr    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// newReplica prepares replica n: the binary, its environment and a free API port; its log
// goes to a file under root.
func newReplica(n int, bin, root string, env []string) (*replica, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return &replica{n: n, bin: bin, env: env, addr: fmt.Sprintf("127.0.0.1:%d", port),
		logPath: filepath.Join(root, fmt.Sprintf("replica-%d.log", n))}, nil
}

// url is the replica's API base URL.
func (r *replica) url() string { return "http://" + r.addr }

// start starts the process and waits until its API listener answers, for at most wait.
func (r *replica) start(wait time.Duration) error {
	if err := r.spawn(); err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		select {
		case <-r.done:
			return fmt.Errorf("chaos: replica %d exited at start (see %s)", r.n, r.logPath)
		default:
		}
		// Any answer, a 401 included, means the API listener is up.
		if res, err := http.Get(r.url() + "/v1/models"); err == nil {
			res.Body.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("chaos: replica %d did not start listening within %s (see %s)", r.n, wait, r.logPath)
}

// spawn starts the process, its output appended to the replica's log.
func (r *replica) spawn() error {
	log, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(r.bin, "serve", "-listen", r.addr, "-metrics-listen", "off")
	cmd.Env = r.env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(r.done)
	return nil
}

// startListening starts the process and returns as soon as its API port accepts TCP
// connections (for at most wait), whether or not anything answers on them: how a load balancer
// that checks the port sees a replica start. It returns when that happened.
func (r *replica) startListening(wait time.Duration) (time.Time, error) {
	if err := r.spawn(); err != nil {
		return time.Time{}, err
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		select {
		case <-r.done:
			return time.Time{}, fmt.Errorf("chaos: replica %d exited at start (see %s)", r.n, r.logPath)
		default:
		}
		if c, err := net.DialTimeout("tcp", r.addr, time.Second); err == nil {
			c.Close()
			return time.Now(), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("chaos: replica %d did not open its port within %s (see %s)", r.n, wait, r.logPath)
}

// answers reports whether the replica answers HTTP on its API port within timeout with a status
// other than 503 (a 401 included: the process is serving).
func (r *replica) answers(timeout time.Duration) bool {
	client := &http.Client{Timeout: timeout}
	res, err := client.Get(r.url() + "/v1/models")
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode != http.StatusServiceUnavailable
}

// kill ends the process with SIGKILL, as a crash would.
func (r *replica) kill() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
	r.cmd = nil
}

// terminate sends SIGTERM and waits for the process to drain and exit, at most wait; then it is
// killed and an error says so.
func (r *replica) terminate(ctx context.Context, wait time.Duration) error {
	if r.cmd == nil {
		return nil
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-r.done:
		r.cmd = nil
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	r.kill()
	return errors.New("chaos: replica did not exit within the grace period after SIGTERM; killed")
}
