package jaegertest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/syncbuf"
)

// startWait bounds the wait for a started jaeger to answer.
const startWait = 60 * time.Second

// Jaeger is one running jaeger all-in-one with in-memory storage.
type Jaeger struct {
	// OTLPHTTP is the OTLP/HTTP endpoint ("http://127.0.0.1:port"; spans go to its
	// /v1/traces), OTLPGRPC the OTLP/gRPC one; QueryURL the query API's base URL.
	OTLPHTTP, OTLPGRPC, QueryURL string

	bin, config string
	mu          sync.Mutex
	cmd         *exec.Cmd
	exited      chan struct{}
	log         *syncbuf.Buffer
}

// Start runs jaeger on free loopback ports until the end of the test, and returns once its
// query API and OTLP receivers answer. It fails the test when jaeger cannot be built or
// started.
func Start(t testing.TB) *Jaeger {
	t.Helper()
	bin, err := BinaryPath()
	if err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			t.Fatal(err)
		}
	}
	grpcQuery, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	j := &Jaeger{
		OTLPHTTP: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		OTLPGRPC: fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		QueryURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
		bin:      bin,
		config:   filepath.Join(t.TempDir(), "jaeger.yaml"),
	}
	cfg := fmt.Sprintf(configTemplate, ports[2], grpcQuery, ports[1], ports[0])
	if err := os.WriteFile(j.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Stop)
	j.Restart(t)
	return j
}

// configTemplate is jaeger v2's configuration: OTLP in, memory storage, the query API out.
// Its own metrics and its own traces are off, so that it takes no fixed port.
const configTemplate = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// Restart starts jaeger again after Stop, on the same ports and with empty storage, and
// waits until it answers. (Start calls it the first time.)
func (j *Jaeger) Restart(t testing.TB) {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cmd != nil {
		t.Fatal("jaegertest: Restart while jaeger is running; Stop it first")
	}
	j.log = new(syncbuf.Buffer)
	cmd := exec.Command(j.bin, "--config", j.config)
	cmd.Stdout, cmd.Stderr = j.log, j.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("jaegertest: start %s: %v", j.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	j.cmd, j.exited = cmd, exited
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	for {
		if j.answers(ctx) {
			return
		}
		select {
		case <-exited:
			j.cmd = nil
			t.Fatalf("jaegertest: jaeger exited at start:\n%s", j.log.String())
		case <-ctx.Done():
			t.Fatalf("jaegertest: jaeger did not answer within %s:\n%s", startWait, j.log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// answers reports whether the query API and both OTLP receivers accept connections.
func (j *Jaeger) answers(ctx context.Context) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, j.QueryURL+"/api/services", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false
	}
	for _, u := range []string{j.OTLPHTTP, j.OTLPGRPC} {
		c, err := net.DialTimeout("tcp", u[len("http://"):], time.Second)
		if err != nil {
			return false
		}
		c.Close()
	}
	return true
}

// Stop kills jaeger (its stored traces go with it), as a backend that goes down does; the
// ports stay free for Restart.
func (j *Jaeger) Stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cmd == nil {
		return
	}
	// Killed, not asked: its memory storage goes with it either way, and the collector's
	// graceful shutdown takes seconds.
	_ = j.cmd.Process.Kill()
	<-j.exited
	j.cmd = nil
}

// Log is what jaeger printed since it was last started.
func (j *Jaeger) Log() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.log == nil {
		return ""
	}
	return j.log.String()
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return strconv.Atoi(port)
}
