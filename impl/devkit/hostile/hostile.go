package hostile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/impl/pgcluster"
)

// Options configure a run. Zero values take the defaults.
type Options struct {
	// Binary is the tollgate executable the run starts (required).
	Binary string
	// Bad is how many bad requests are sent (default 1000).
	Bad int
	// Workers is how many bad requests are in flight at once (default 16).
	Workers int
	// Rate is normal traffic's requests per second (default 50).
	Rate int
	// Before is how long normal traffic runs alone before the bad requests (default 10 s).
	Before time.Duration
	// After is how long normal traffic runs alone after them, before the gateway's resident
	// memory is read again (default 30 s).
	After time.Duration
	// MemoryLimitMB and BodyBudgetMB are the gateway's server.memory_limit_mb and
	// server.body_budget_mb (0: their defaults).
	MemoryLimitMB, BodyBudgetMB int
	// Seed orders the bad requests (default 1).
	Seed int64
	// Keep leaves the run's directory (database, logs) in place.
	Keep bool
	// Logf receives progress lines (nil: discarded).
	Logf func(format string, args ...any)
}

func (o *Options) defaults() {
	if o.Bad <= 0 {
		o.Bad = 1000
	}
	if o.Workers <= 0 {
		o.Workers = 16
	}
	if o.Rate <= 0 {
		o.Rate = 50
	}
	if o.Before <= 0 {
		o.Before = 10 * time.Second
	}
	if o.After <= 0 {
		o.After = 30 * time.Second
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Run starts the run's database, simulator and gateway, drives normal traffic and the burst of
// bad requests, writes the report to out and returns it. The error says when the run could not
// be made or a bound does not hold (the report is written either way, when there is one).
func Run(ctx context.Context, o Options, out io.Writer) (*Report, error) {
	if o.Binary == "" {
		return nil, errors.New("hostile: no tollgate binary")
	}
	o.defaults()
	root, err := os.MkdirTemp("", "tollgate-hostile-")
	if err != nil {
		return nil, err
	}
	// The postgres OS user (when run as root) must reach the cluster under it.
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, err
	}
	if !o.Keep {
		defer os.RemoveAll(root)
	}
	o.Logf("run directory %s", root)
	pg, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(root, "pg"), Ephemeral: !o.Keep})
	if err != nil {
		return nil, fmt.Errorf("hostile: start PostgreSQL: %w", err)
	}
	defer func() { _ = pg.Stop(context.WithoutCancel(ctx)) }()
	if err := pg.CreateDatabase(ctx, "tollgate"); err != nil {
		return nil, err
	}
	simAddr, gwAddr := freeAddr(), freeAddr()
	cfgPath := filepath.Join(root, "hostile.yaml")
	if err := os.WriteFile(cfgPath, []byte(gatewayConfig(simAddr, o.MemoryLimitMB, o.BodyBudgetMB)), 0o644); err != nil {
		return nil, err
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + pg.ConnString("tollgate"), "TOLLGATE_CONFIG=" + cfgPath,
		"TOLLGATE_DATA_DIR=" + filepath.Join(root, "data"), "LOG_LEVEL=info"}

	sim, err := startProcess(o.Binary, env, filepath.Join(root, "sim.log"), "sim", "-listen", simAddr)
	if err != nil {
		return nil, err
	}
	defer sim.kill()
	if err := tollgate(ctx, o.Binary, env, "migrate"); err != nil {
		return nil, err
	}
	normalKey, err := account(ctx, o.Binary, env, "normal")
	if err != nil {
		return nil, err
	}
	badKey, err := account(ctx, o.Binary, env, "hostile")
	if err != nil {
		return nil, err
	}
	gwLog := filepath.Join(root, "gateway.log")
	gw, err := startProcess(o.Binary, env, gwLog, "serve", "-listen", gwAddr, "-metrics-listen", "off")
	if err != nil {
		return nil, err
	}
	defer gw.kill()
	base := "http://" + gwAddr
	if err := waitServing(ctx, base, normalKey, 60*time.Second, gw); err != nil {
		return nil, fmt.Errorf("hostile: the gateway did not start (see %s): %w", gwLog, err)
	}
	limitMB, budgetMB, from := memorySettings(gwLog)
	o.Logf("gateway pid %d serving on %s (memory limit %d MiB from %s, body budget %d MiB)", gw.cmd.Process.Pid, base, limitMB, from, budgetMB)

	rep := &Report{Options: o, MemoryLimitMB: limitMB, MemoryLimitFrom: from, BodyBudgetMB: budgetMB}
	mem := &memoryWatch{pid: gw.cmd.Process.Pid}
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watched sync.WaitGroup
	watched.Go(func() { mem.run(watchCtx) })

	normalCtx, stopNormal := context.WithCancel(ctx)
	var normal []normalOutcome
	var traffic sync.WaitGroup
	traffic.Go(func() { normal = normalTraffic(normalCtx, base, normalKey, o.Rate) })

	sleep(ctx, o.Before)
	rep.RSSBefore = mem.current()
	rep.BurstStart = time.Now()
	cpu0 := [3]time.Duration{cpuTime(gw.cmd.Process.Pid), cpuTime(sim.cmd.Process.Pid), cpuTime(os.Getpid())}
	o.Logf("normal traffic at %d/s for %s; now %d bad requests, %d at a time", o.Rate, o.Before, o.Bad, o.Workers)
	rep.Bad = badTraffic(ctx, base, badKey, o)
	rep.BurstEnd = time.Now()
	rep.RSSBurstEnd = mem.current()
	rep.CPUGateway = cpuTime(gw.cmd.Process.Pid) - cpu0[0]
	rep.CPUSimulator = cpuTime(sim.cmd.Process.Pid) - cpu0[1]
	rep.CPUTool = cpuTime(os.Getpid()) - cpu0[2]
	o.Logf("bad requests done in %s; normal traffic alone for %s", rep.BurstEnd.Sub(rep.BurstStart).Round(time.Second), o.After)
	sleep(ctx, o.After)
	rep.RSSAfter = mem.current()
	stopNormal()
	traffic.Wait()
	stopWatch()
	watched.Wait()
	rep.Normal = normal
	rep.PeakRSS = mem.hwm()
	rep.Timeline = mem.timeline()
	rep.GatewayExited = gw.exited()
	if !rep.GatewayExited {
		rep.GatewayExitErr = gw.terminate(30 * time.Second)
	}
	rep.write(out)
	return rep, errors.Join(rep.failures()...)
}

// gatewayConfig is the run's configuration: the built-in one's models and plan, with every
// provider pointed at the simulator process at simAddr.
// Settings left at 0 are not written, so that a gateway that does not know them (an older
// build, measured for comparison) reads the file too.
func gatewayConfig(simAddr string, memoryLimitMB, bodyBudgetMB int) string {
	server := "server: {}\n"
	if memoryLimitMB != 0 || bodyBudgetMB != 0 {
		server = "server:\n"
		if memoryLimitMB != 0 {
			server += fmt.Sprintf("  memory_limit_mb: %d\n", memoryLimitMB)
		}
		if bodyBudgetMB != 0 {
			server += fmt.Sprintf("  body_budget_mb: %d\n", bodyBudgetMB)
		}
	}
	return server + fmt.Sprintf(`providers:
  - {name: sim-openai-chat, kind: openai-chat, base_url: "http://%[1]s/v1"}
  - {name: sim-openai-responses, kind: openai-responses, base_url: "http://%[1]s/v1"}
  - {name: sim-anthropic, kind: anthropic-messages, base_url: "http://%[1]s"}
models:
  - id: service-flint
    family: chat
    owned_by: tollgate
    price: {catalog: gpt-4.1}
    max_output_tokens: 65536
    context_tokens: 200000
    experts:
      - {provider: sim-openai-chat, model: sim-general, strengths: [general, fast], max_output_tokens: 32768}
      - {provider: sim-anthropic, model: sim-coder, strengths: [code, tools], price: {catalog: claude-sonnet-4-5}, max_output_tokens: 64000}
      - {provider: sim-openai-responses, model: sim-reasoner, strengths: [long], price: {catalog: gpt-5}}
plans:
  - {name: default, models: [service-flint], default_rpm: 0}
`, simAddr)
}

// memorySettings reads the memory limit and body budget the gateway logged at start-up.
func memorySettings(logPath string) (limitMB, budgetMB int, from string) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return 0, 0, "unknown"
	}
	for line := range strings.Lines(string(b)) {
		var rec struct {
			Msg      string `json:"msg"`
			LimitMB  int    `json:"limit_mb"`
			From     string `json:"from"`
			BudgetMB int    `json:"body_budget_mb"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "memory limit" {
			return rec.LimitMB, rec.BudgetMB, rec.From
		}
	}
	return 0, 0, "unknown"
}

// process is one child process of the run.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startProcess starts the binary with args, its output going to logPath; it is killed if the
// run's process dies.
func startProcess(bin string, env []string, logPath string, args ...string) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) kill() {
	if !p.exited() {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// terminate sends SIGTERM and waits up to wait for the process to exit; then it is killed.
func (p *process) terminate(wait time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if s := p.cmd.ProcessState; s != nil && !s.Success() {
			return fmt.Errorf("the gateway exited with %s after SIGTERM", s)
		}
		return nil
	case <-time.After(wait):
		p.kill()
		return fmt.Errorf("the gateway did not exit within %s of SIGTERM", wait)
	}
}

// waitServing waits until the gateway answers an authenticated GET /v1/models with 200.
func waitServing(ctx context.Context, base, key string, within time.Duration, p *process) error {
	deadline := time.Now().Add(within)
	for {
		if p.exited() {
			return errors.New("it exited")
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
			err = errors.New(res.Status)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tollgate runs a tollgate command to its end and returns its output.
func tollgate(ctx context.Context, bin string, env []string, args ...string) error {
	_, err := tollgateOutput(ctx, bin, env, args...)
	return err
}

func tollgateOutput(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(env[:len(env):len(env)], "LOG_LEVEL=error")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("tollgate %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// account creates an account with $1,000,000 of credit and a key without a rate cap, and
// returns the key.
func account(ctx context.Context, bin string, env []string, name string) (string, error) {
	if err := tollgate(ctx, bin, env, "admin", "account", "create", name); err != nil {
		return "", err
	}
	if err := tollgate(ctx, bin, env, "admin", "credit", "grant", name, "1000000000000", "-note", "hostile run"); err != nil {
		return "", err
	}
	key, err := tollgateOutput(ctx, bin, env, "admin", "key", "create", name, "-rpm", "0", "-quiet")
	return strings.TrimSpace(key), err
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// memoryWatch samples a process's resident memory (VmRSS) every 100 ms; VmHWM, its peak, is
// read from the kernel at the end.
type memoryWatch struct {
	pid     int
	mu      sync.Mutex
	samples []rssSample
}

// rssSample is the resident memory at a time.
type rssSample struct {
	at  time.Time
	rss int64
}

func (m *memoryWatch) run(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if rss := m.current(); rss > 0 {
			m.mu.Lock()
			m.samples = append(m.samples, rssSample{time.Now(), rss})
			m.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// current is the process's VmRSS in bytes (0 when it cannot be read).
func (m *memoryWatch) current() int64 { return procStatus(m.pid, "VmRSS:") }

// hwm is the process's VmHWM, its peak resident memory, in bytes.
func (m *memoryWatch) hwm() int64 { return procStatus(m.pid, "VmHWM:") }

func (m *memoryWatch) timeline() []rssSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]rssSample(nil), m.samples...)
}

// cpuTime is the CPU time a process has used (user and system, all its threads), from
// /proc/PID/stat; 0 when it cannot be read.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command (which may hold spaces) start after its closing ')':
	// state is the 3rd field, utime and stime the 14th and 15th.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux
// architecture Go runs on.
const clockTicks = 100

// procStatus reads a field in kB of /proc/PID/status, in bytes.
func procStatus(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
