package replicas_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/devkit/redistest"
	"github.com/tollgate/tollgate/impl/store"
)

// TestMain stops the throwaway PostgreSQL cluster and redis-server the tests started, and
// deletes the binary they built.
func TestMain(m *testing.M) {
	redistest.Begin()
	code := m.Run()
	redistest.Shutdown()
	if err := pgtest.Shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// The gateway binary is built once per test run, into binDir, which TestMain deletes.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// binary returns the path of the tollgate binary built from ./cmd/tollgate, building it on
// first use.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tollgate-replicas-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		path := filepath.Join(dir, "tollgate")
		began := time.Now()
		out, err := exec.Command("go", "build", "-o", path, "github.com/tollgate/tollgate/cmd/tollgate").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/tollgate: %v\n%s", err, out)
			return
		}
		t.Logf("built the gateway binary in %v", time.Since(began).Round(time.Millisecond))
		binPath = path
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// cluster is several gateway processes on one database and one Redis, and a round-robin client
// in front of them.
type cluster struct {
	t        *testing.T
	bin      string
	dbURL    string
	redisURL string
	procs    []*gatewayProcess
	// store and pool reach the test's database directly: accounts and keys are made through
	// store (as the operator's CLI does), and the books are read with plain SQL on pool.
	store    *store.Store
	pool     *pgxpool.Pool
	accounts *accounts.Service
	http     *http.Client
	next     atomic.Uint64
	// procEnv is added to the environment of every gateway process (startClusterEnv).
	procEnv []string
}

// startCluster starts n gateway processes (`tollgate serve` on the built-in configuration,
// whose upstreams are each process's own built-in simulator) on a fresh database and the test
// Redis, and returns once every one of them listens.
func startCluster(t *testing.T, n int) *cluster {
	t.Helper()
	return startClusterEnv(t, n)
}

// startClusterEnv is startCluster with env (NAME=value) added to every process's environment.
func startClusterEnv(t *testing.T, n int, env ...string) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and runs several gateway processes")
	}
	c := &cluster{t: t, bin: binary(t), dbURL: pgtest.ConnString(t), redisURL: redistest.URL(t), procEnv: env}
	c.connect()

	procs := make([]*gatewayProcess, n)
	var wg sync.WaitGroup
	for i := range n {
		procs[i] = c.launch(fmt.Sprintf("gw%d", i+1))
		wg.Go(procs[i].waitListening)
	}
	wg.Wait()
	for _, p := range procs {
		if p.url == "" {
			t.Fatalf("%s did not start: %v\n%s", p.name, p.startErr, p.log.tail(40))
		}
	}
	c.procs = procs
	return c
}

// env is the environment of a gateway process or the admin CLI: the test's database (its
// connections named after the process, so the test can find them in pg_stat_activity) and
// Redis, the built-in configuration (no provider keys, so every upstream is the simulator), and
// scratch directories for anything a process would keep on disk.
func (c *cluster) env(name, dir string) []string {
	return append(os.Environ(),
		"DATABASE_URL="+withApplicationName(c.dbURL, name), "REDIS_URL="+c.redisURL,
		"TOLLGATE_CONFIG=", "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=",
		"TOLLGATE_DATA_DIR="+filepath.Join(dir, "data"), "TOLLGATE_DATASETS_DIR="+filepath.Join(dir, "datasets"),
		"LOG_FORMAT=json", "LOG_LEVEL=info")
}

// admin runs `tollgate admin args...` against the cluster's database.
func (c *cluster) admin(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(c.bin, append([]string{"admin"}, args...)...)
	dir := c.t.TempDir()
	cmd.Dir, cmd.Env = dir, c.env("replicas-admin", dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("tollgate admin %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// withApplicationName adds application_name to a connection string, a URL or key/value pairs.
func withApplicationName(connString, name string) string {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		if u, err := url.Parse(connString); err == nil {
			q := u.Query()
			q.Set("application_name", name)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return strings.TrimSpace(connString) + " application_name=" + name
}

// waitForBackendsGone waits (up to 10 s) until the database has no session of the process
// named name. A process killed with SIGKILL can leave a statement running: its backend ends
// only when it finds the client gone, after the statement (which may be waiting for a lock).
func (c *cluster) waitForBackendsGone(name string) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := c.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND datname = current_database()`, name).Scan(&n); err != nil {
			c.t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d database sessions of the killed process %s are still there after 10 s", n, name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gatewayProcess is one `tollgate serve` process.
type gatewayProcess struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	log  *processLog
	// url is the base URL of its API listener, set once it listens.
	url      string
	startErr error
	// exited is closed when the process has exited; waitErr is then its exit status.
	exited  chan struct{}
	waitErr error
}

// connect migrates the cluster's database (here, once, rather than by the processes racing
// for the advisory lock) and opens the test's own ways in: the store, a pool, the accounts
// service, and an HTTP client that checks every answer against the contract (statuses,
// envelopes, stream events).
func (c *cluster) connect() {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, c.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, c.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c.store, c.pool = st, pool
	c.accounts = &accounts.Service{Store: st, Config: config.Default()}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 512, 256
	tr.DisableCompression = true
	c.http = &http.Client{Transport: apitest.NewValidatingTransport(t, tr)}
	t.Cleanup(tr.CloseIdleConnections)
}

// launch starts one gateway process, stopped (SIGTERM, then SIGKILL) when the test ends. On
// Linux the kernel also kills it if the test binary dies first.
func (c *cluster) launch(name string) *gatewayProcess {
	c.t.Helper()
	dir := c.t.TempDir()
	p := &gatewayProcess{t: c.t, name: name, log: newProcessLog(), exited: make(chan struct{})}
	p.cmd = exec.Command(c.bin, "serve", "-listen", "127.0.0.1:0", "-metrics-listen", "off")
	p.cmd.Dir, p.cmd.Env = dir, append(c.env(name, dir), c.procEnv...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	setParentDeathSignal(p.cmd)
	// The parent death signal fires when the thread that started the child exits, so the child
	// is started and waited for on one locked thread, which lives exactly as long as the child.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			close(p.exited)
			return
		}
		started <- nil
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	c.t.Cleanup(p.stop)
	return p
}

// waitListening waits until the process logs its API address, and sets url.
func (p *gatewayProcess) waitListening() {
	select {
	case addr := <-p.log.listening:
		p.url = "http://" + addr
	case <-p.exited:
		p.startErr = fmt.Errorf("exited: %v", p.waitErr)
	case <-time.After(time.Minute):
		p.startErr = fmt.Errorf("no 'tollgate listening' line within a minute")
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *gatewayProcess) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatalf("kill %s: %v", p.name, err)
	}
	<-p.exited
}

// holder is the prefix of the name the process's meter gives itself in credit_holds: host
// name, process id and a random suffix (see billing.Options.Holder).
func (p *gatewayProcess) holder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/", host, p.cmd.Process.Pid)
}

// stop ends the process gracefully (SIGTERM), or with SIGKILL when it does not exit within
// 20 s, and shows its log when the test failed.
func (p *gatewayProcess) stop() {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			p.t.Errorf("%s did not exit within 20 s of SIGTERM", p.name)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	if p.t.Failed() {
		p.t.Logf("%s (exit: %v), warnings and errors:\n%s\nlast lines:\n%s", p.name, p.waitErr, p.log.warnings(), p.log.tail(15))
	}
}

// processLog collects a process's output (JSON log lines) and finds its listening address.
type processLog struct {
	mu        sync.Mutex
	lines     []string
	partial   []byte
	listening chan string
	sent      bool
}

func newProcessLog() *processLog { return &processLog{listening: make(chan string, 1)} }

// Write implements io.Writer.
func (l *processLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		l.lines = append(l.lines, line)
		if !l.sent && strings.Contains(line, `"msg":"tollgate listening"`) {
			var rec struct {
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Addr != "" {
				l.listening <- rec.Addr
				l.sent = true
			}
		}
	}
	return len(b), nil
}

// tail returns the last n lines.
func (l *processLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines[max(0, len(l.lines)-n):], "\n")
}

// warnings returns the lines logged at warning level or above (and any line that is not JSON).
func (l *processLog) warnings() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if !strings.HasPrefix(line, "{") || strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// nextProcess is the round robin: the index of the process the next request goes to.
func (c *cluster) nextProcess() int {
	return int((c.next.Add(1) - 1) % uint64(len(c.procs)))
}

// answer is what one request got.
type answer struct {
	proc      int
	status    int
	header    http.Header
	body      string
	requestID string
	err       error
}

// call sends one request to process i and reads the whole answer (a stream to its end).
func (c *cluster) call(i int, method, path, key, body string) answer {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.procs[i].url+path, rd)
	if err != nil {
		return answer{proc: i, err: err}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return answer{proc: i, err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{proc: i, status: res.StatusCode, header: res.Header, body: string(b), requestID: res.Header.Get("x-request-id"), err: err}
}

// String describes the answer for a failure message.
func (a answer) String() string {
	body := a.body
	if len(body) > 400 {
		body = body[:400] + "…"
	}
	return fmt.Sprintf("gw%d: status %d, err %v, request id %q: %s", a.proc+1, a.status, a.err, a.requestID, body)
}

// newAccount creates an account on the default plan with creditMicros of credit, and a key
// with the given requests-per-minute cap (0: none).
func (c *cluster) newAccount(name string, creditMicros int64, rpm int) (uuid.UUID, accounts.NewKey) {
	c.t.Helper()
	ctx := context.Background()
	acct, err := c.accounts.CreateAccount(ctx, name, "default")
	if err != nil {
		c.t.Fatal(err)
	}
	if creditMicros > 0 {
		if _, _, err := c.accounts.GrantCredit(ctx, acct.ID, creditMicros, "", "test credit"); err != nil {
			c.t.Fatal(err)
		}
	}
	return acct.ID, c.newKey(acct.ID, rpm)
}

// newKey mints another key for the account.
func (c *cluster) newKey(accountID uuid.UUID, rpm int) accounts.NewKey {
	c.t.Helper()
	k, err := c.accounts.CreateKey(context.Background(), accountID, "replicas", rpm)
	if err != nil {
		c.t.Fatal(err)
	}
	return k
}

// waitForUsage waits (up to 20 s: usage is written in batches every 200 ms) until every
// request id in want has its usage record, and returns the account's usage records by request
// id with their counts.
func (c *cluster) waitForUsage(accountID uuid.UUID, want []string) map[string]int {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := c.usageCounts(accountID)
		missing := 0
		for _, id := range want {
			if got[id] == 0 {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		if time.Now().After(deadline) {
			c.t.Errorf("%d of %d answers served with 200 have no usage record after 20 s", missing, len(want))
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// usageCounts returns how many usage records the account has for each request id.
func (c *cluster) usageCounts(accountID uuid.UUID) map[string]int {
	c.t.Helper()
	rows, err := c.pool.Query(context.Background(),
		`SELECT request_id, count(*) FROM usage_records WHERE account_id = $1 GROUP BY request_id`, accountID)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			c.t.Fatal(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// books is an account's money as the database has it.
type books struct {
	balance, held     int64 // accounts.balance_micros, held_micros
	ledgerSum, grants int64 // the sum of all ledger entries; of the grants
	holds             int64 // the sum of the credit_holds amounts
	usageRecords      int64
	usageCost         int64 // the sum of usage_records.cost_micros
}

// readBooks reads the account's books.
func (c *cluster) readBooks(accountID uuid.UUID) books {
	c.t.Helper()
	var b books
	err := c.pool.QueryRow(context.Background(), `
		SELECT a.balance_micros, a.held_micros,
		       (SELECT coalesce(sum(amount_micros), 0)::bigint FROM credit_ledger WHERE account_id = a.id),
		       (SELECT coalesce(sum(amount_micros), 0)::bigint FROM credit_ledger WHERE account_id = a.id AND reason = 'grant'),
		       (SELECT coalesce(sum(amount_micros), 0)::bigint FROM credit_holds WHERE account_id = a.id),
		       (SELECT count(*) FROM usage_records WHERE account_id = a.id),
		       (SELECT coalesce(sum(cost_micros), 0)::bigint FROM usage_records WHERE account_id = a.id)
		FROM accounts a WHERE a.id = $1`, accountID).
		Scan(&b.balance, &b.held, &b.ledgerSum, &b.grants, &b.holds, &b.usageRecords, &b.usageCost)
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// checkBooks checks the account's invariants: the balance is the sum of its ledger and never
// below zero, what processes hold is the sum of their holds and within the balance, and every
// usage record has exactly one usage ledger entry, of exactly its cost (and no usage entry
// lacks a record), so the balance went down by exactly what the usage records say was spent.
func (c *cluster) checkBooks(accountID uuid.UUID) books {
	c.t.Helper()
	b := c.readBooks(accountID)
	if b.balance < 0 {
		c.t.Errorf("the balance is below zero: %d", b.balance)
	}
	if b.ledgerSum != b.balance {
		c.t.Errorf("the ledger sums to %d, the balance is %d", b.ledgerSum, b.balance)
	}
	if b.held != b.holds || b.held < 0 || b.held > b.balance {
		c.t.Errorf("held_micros %d, the holds sum to %d, the balance is %d", b.held, b.holds, b.balance)
	}
	if spent := b.grants - b.balance; spent != b.usageCost {
		c.t.Errorf("the balance went down by %d (granted %d, left %d), the usage records cost %d", spent, b.grants, b.balance, b.usageCost)
	}
	rows, err := c.pool.Query(context.Background(), `
		SELECT u.request_id, u.cost_micros, count(l.id), coalesce(sum(l.amount_micros), 0)::bigint
		FROM usage_records u
		LEFT JOIN credit_ledger l ON l.account_id = u.account_id AND l.idempotency_key = 'usage:' || u.request_id
		WHERE u.account_id = $1
		GROUP BY u.request_id, u.cost_micros
		HAVING count(l.id) <> 1 OR coalesce(sum(l.amount_micros), 0) <> -u.cost_micros`, accountID)
	if err != nil {
		c.t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var cost, n, amount int64
		if err := rows.Scan(&id, &cost, &n, &amount); err != nil {
			c.t.Fatal(err)
		}
		c.t.Errorf("usage record %s costs %d but has %d ledger entries summing to %d", id, cost, n, amount)
	}
	rows.Close()
	var orphans int64
	if err := c.pool.QueryRow(context.Background(), `
		SELECT count(*) FROM credit_ledger l
		WHERE l.account_id = $1 AND l.reason = 'usage' AND NOT EXISTS (
			SELECT 1 FROM usage_records u WHERE u.account_id = l.account_id AND 'usage:' || u.request_id = l.idempotency_key)`,
		accountID).Scan(&orphans); err != nil {
		c.t.Fatal(err)
	}
	if orphans != 0 {
		c.t.Errorf("%d usage ledger entries have no usage record", orphans)
	}
	return b
}

// checkUsageExactlyOnce checks that every request id in served has exactly one usage record
// and that no other request of the account has one, except those in mayHave.
func (c *cluster) checkUsageExactlyOnce(accountID uuid.UUID, served []string, mayHave ...string) {
	c.t.Helper()
	got := c.waitForUsage(accountID, served)
	for _, id := range served {
		if got[id] != 1 {
			c.t.Errorf("request %s was served with 200 and has %d usage records", id, got[id])
		}
	}
	for id, n := range got {
		if !slices.Contains(served, id) && !slices.Contains(mayHave, id) {
			c.t.Errorf("request %s has %d usage records but was not served with 200", id, n)
		}
	}
}

// errorMessage returns the message of an error envelope of either format.
func errorMessage(body string) (typ, message string) {
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &env)
	return env.Error.Type, env.Error.Message
}

// internalWords are fragments of internal error text that must never reach a client.
var internalWords = []string{"pgx", "SQLSTATE", "postgres", "redis", "billing:", "store:", "dial tcp", "context deadline", "goroutine"}

// leaksInternals reports whether a client-facing message carries internal error text.
func leaksInternals(message string) bool {
	for _, w := range internalWords {
		if strings.Contains(strings.ToLower(message), strings.ToLower(w)) {
			return true
		}
	}
	return false
}
