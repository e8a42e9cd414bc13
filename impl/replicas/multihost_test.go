package replicas_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/tollgate/tollgate/impl/devkit/netns"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/devkit/redistest"
	"github.com/tollgate/tollgate/impl/devkit/s3test"
)

// multiHostAgents is the agents section of the hosts' configuration: a step may run for 10 s
// and is rescued by another process 11 s after it started when its process died (the defaults,
// 5 and 10 minutes, would keep the test waiting; River's rescuer looks every 30 s).
const multiHostAgents = `
agents:
  job_timeout: 10s
  rescue_after: 11s
`

// TestThreeHostsShareOneDatabaseRedisAndObjectStore runs three `tollgate serve` processes as
// separate hosts: each in a network namespace of its own (impl/devkit/netns), with its own
// address and its own empty data directory, on one PostgreSQL, one Redis and one object store
// that listen in the test's namespace on the test network's bridge address, and reached by the
// test through the bridge. It shows, in turn:
//
//   - a dataset uploaded through host 1 (the admin command run there) is listed, loaded and
//     queried through hosts 2 and 3 as soon as the upload has returned: it is in the object
//     store's bucket, which every host reads;
//   - a key revoked with the admin command run on host 1 is refused by every host within 1 s of
//     the command's answer, measured per host;
//   - a low-balance account spread over the hosts gets no false 402: requests sent to the hosts
//     in turn are all served until the balance no longer covers one, and every refusal is a
//     real one; a concurrent batch the balance covers is served whole (a replica asked for
//     credit gives back the free part of a hold its own requests are using); the ledger is the
//     balance;
//   - an agent session spawned on host 1, whose step host 1 is running when it is SIGKILLed,
//     is continued by host 2 (host 3 frozen meanwhile): River rescues the step there, the turn
//     is billed once, and host 2 runs the session's next turn.
func TestThreeHostsShareOneDatabaseRedisAndObjectStore(t *testing.T) {
	began := time.Now()
	c, nw, s3 := startHosts(t, 3)
	t.Logf("three hosts on %v (bridge %v) listen after %v", nw.Subnet, nw.Gateway, time.Since(began).Round(time.Millisecond))

	multiHostDataset(t, c, nw.Hosts, s3)
	multiHostRevocation(t, c, nw.Hosts)
	multiHostNoFalse402(t, c)
	multiHostAgentContinuedAfterSIGKILL(t, c, nw.Hosts)
	t.Logf("the whole test took %v", time.Since(began).Round(time.Millisecond))
}

// startHosts makes a test network of n hosts, starts PostgreSQL, Redis and the object store
// (SeaweedFS, impl/devkit/s3test, with the s3 dataset store) on its bridge address, migrates
// the database, and starts `tollgate serve` on each host (host 2 first, so
// that it is likely River's leader, whose rescuer outlives host 1), listening on the host's
// address at port 8080; it returns once every one listens. The processes are c.procs in host
// order (gw1 on h1, and so on).
func startHosts(t *testing.T, n int) (*cluster, *netns.Network, *s3test.Server) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and runs several gateway processes in network namespaces")
	}
	nw := netns.New(t, n)
	bin := binary(t)
	s3 := startObjectStore(t, nw.Gateway.String())
	dbURL := pgtest.OnAddress(t, nw.Gateway, nw.Subnet)
	rs := redistest.NewServerOn(t, nw.Gateway.String())

	defaults, err := os.ReadFile(filepath.Join("..", "config", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(t.TempDir(), "tollgate.yaml")
	if err := os.WriteFile(configPath, append(defaults, multiHostAgents...), 0o644); err != nil {
		t.Fatal(err)
	}

	c := &cluster{t: t, bin: bin, dbURL: dbURL, redisURL: rs.URL(), procEnv: append(s3.Env(), "TOLLGATE_CONFIG="+configPath)}
	c.connect()

	procs := make([]*gatewayProcess, n)
	first := min(1, n-1)
	procs[first] = c.launchOn(nw.Hosts[first], fmt.Sprintf("gw%d", first+1))
	procs[first].waitListening()
	for i := range n {
		if i != first {
			procs[i] = c.launchOn(nw.Hosts[i], fmt.Sprintf("gw%d", i+1))
		}
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		if p.url == "" {
			wg.Go(p.waitListening)
		}
	}
	wg.Wait()
	for i, p := range procs {
		if p.url == "" {
			t.Fatalf("%s on %s did not start: %v\n%s", p.name, nw.Hosts[i], p.startErr, p.log.tail(40))
		}
		if want := "http://" + net.JoinHostPort(nw.Hosts[i].Addr.String(), "8080"); p.url != want {
			t.Fatalf("%s listens at %s, not at its host's address (%s)", p.name, p.url, want)
		}
	}
	c.procs = procs
	return c, nw, s3
}

// startObjectStore starts the object store on ip, before anything else listens or connects
// there, and tries again (on other ports) when it does not come up: s3test draws its ports
// below the ephemeral range, but a port free when drawn can still be taken (by another test
// process) before the part of weed that was to listen on it binds it.
func startObjectStore(t *testing.T, ip string) *s3test.Server {
	t.Helper()
	var errs []error
	for range 3 {
		s, err := s3test.New(t.TempDir(), s3test.Options{IP: ip})
		if err != nil {
			t.Fatal(err)
		}
		if err = s.Restart(); err == nil {
			if err = s.CreateBucket(context.Background(), s.Bucket()); err == nil {
				t.Cleanup(s.Close)
				return s
			}
		}
		s.Close()
		errs = append(errs, err)
		t.Logf("the object store did not start; trying other ports: %v", err)
	}
	t.Fatalf("the object store did not start in 3 tries: %v", errors.Join(errs...))
	return nil
}

// launchOn starts `tollgate serve` on host h, listening on the host's address, with a fresh
// working and data directory of its own; it is stopped when the test ends (after it is thawed,
// if the test froze it).
func (c *cluster) launchOn(h *netns.Host, name string) *gatewayProcess {
	c.t.Helper()
	dir := c.t.TempDir()
	p := &gatewayProcess{t: c.t, name: name, log: newProcessLog(), exited: make(chan struct{})}
	p.cmd = h.Command(c.bin, "serve", "-listen", net.JoinHostPort(h.Addr.String(), "8080"), "-metrics-listen", "off")
	p.cmd.Dir, p.cmd.Env = dir, append(c.env(name, dir), c.procEnv...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	// `ip netns exec` execs the gateway in its own place: the parent death signal holds.
	setParentDeathSignal(p.cmd)
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
		c.t.Fatalf("start %s on %s: %v", name, h, err)
	}
	c.t.Cleanup(p.stop)
	c.t.Cleanup(func() { p.signal(syscall.SIGCONT) }) // runs first: a frozen process cannot stop
	return p
}

// signal sends sig to the process unless it has exited.
func (p *gatewayProcess) signal(sig syscall.Signal) {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// adminOn runs `tollgate admin args...` on host h (in its network namespace, with a fresh
// data directory) and returns its output and when it answered.
func (c *cluster) adminOn(h *netns.Host, args ...string) (string, time.Time) {
	c.t.Helper()
	dir := c.t.TempDir()
	cmd := h.Command(c.bin, append([]string{"admin"}, args...)...)
	cmd.Dir, cmd.Env = dir, append(c.env("admin-"+h.Name, dir), c.procEnv...)
	out, err := cmd.CombinedOutput()
	answered := time.Now()
	if err != nil {
		c.t.Fatalf("tollgate admin %s on %s: %v\n%s", strings.Join(args, " "), h, err, out)
	}
	return string(out), answered
}

// multiHostRevocation revokes, on host 1 with the admin command, a key every host has just
// authenticated, and shows each host refusing it with 401 within 1 s of the command's answer
// (polled every 10 ms, timed per host), then still serving the account's other key.
func multiHostRevocation(t *testing.T, c *cluster, hosts []*netns.Host) {
	t.Helper()
	acct, key := c.newAccount("revoke-hosts", 1_000_000, 0)
	other := c.newKey(acct, 0)
	for i := range c.procs {
		for _, k := range []string{key.Plain, other.Plain} {
			if a := c.call(i, "GET", "/v1/models", k, ""); a.status != http.StatusOK {
				t.Fatalf("before the revocation: %s", a)
			}
		}
	}
	out, answered := c.adminOn(hosts[0], "key", "revoke", key.Key.ID.String(), "-yes")
	if !strings.Contains(out, "revoked") {
		t.Fatalf("admin key revoke on h1: %s", out)
	}

	const bound = time.Second
	refusedAfter := make([]time.Duration, len(c.procs))
	var wg sync.WaitGroup
	for i := range c.procs {
		wg.Go(func() {
			for {
				a := c.call(i, "GET", "/v1/models", key.Plain, "")
				since := time.Since(answered)
				if a.status == http.StatusUnauthorized {
					refusedAfter[i] = since
					if since > bound {
						t.Errorf("gw%d first refused the revoked key %v after the revocation's answer, beyond %v", i+1, since.Round(time.Millisecond), bound)
					}
					return
				}
				if a.status != http.StatusOK {
					t.Errorf("gw%d while the revocation spreads: %s", i+1, a)
					return
				}
				if since > bound {
					t.Errorf("gw%d still served the revoked key %v after the revocation's answer", i+1, since.Round(time.Millisecond))
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	t.Logf("revocation: each host first refused the key %v after the admin command on h1 answered", refusedAfter)
	for i := range c.procs {
		a := c.call(i, "GET", "/v1/models", key.Plain, "")
		typ, msg := errorMessage(a.body)
		if a.status != http.StatusUnauthorized || typ != "authentication_error" || !strings.Contains(msg, "revoked") || leaksInternals(msg) {
			t.Errorf("gw%d, the revoked key: %s", i+1, a)
		}
		path, body := inference(i, "other-key")
		if a := c.call(i, "POST", path, other.Plain, body); a.status != http.StatusOK {
			t.Errorf("gw%d, the account's other key: %s", i+1, a)
		}
	}
}

// multiHostNoFalse402 spreads a low-balance account over the hosts. Chat completions (about 600
// micro-units each) go to the hosts in turn, one at a time, until one is refused, then one more
// to each host: every refusal is a real one (once all usage is written, the balance left is
// less than what the refused request needed). Then a second account, whose balance covers ten
// such requests at their worst case, sends nine at once, three to each host: all are served
// (a refusal would be a false 402, and is checked to be clean besides). Both accounts' books balance: the ledger is the balance, and it went down by exactly what the
// usage records cost.
func multiHostNoFalse402(t *testing.T, c *cluster) {
	t.Helper()
	const credit = 8_000 // about 13 requests
	acct, key := c.newAccount("spread-hosts", credit, 0)
	body := func(tag string, i int) string {
		return fmt.Sprintf(`{"model":"service-flint-base","max_tokens":400,"stream":%t,`+
			`"messages":[{"role":"user","content":"%s %d [[sim words=400]]"}]}`, i%2 == 1, tag, i)
	}
	var served []string
	var needed []int64
	refusedAt := -1
	for i := 0; i < 60 && (refusedAt < 0 || i < refusedAt+len(c.procs)+1); i++ {
		a := c.call(i%len(c.procs), "POST", "/v1/chat/completions", key.Plain, body("spread", i))
		switch {
		case a.err != nil:
			t.Fatalf("request %d: %s", i, a)
		case a.status == http.StatusOK:
			if refusedAt >= 0 {
				t.Errorf("request %d served after request %d was refused (nothing was granted in between): %s", i, refusedAt, a)
			}
			checkServed(t, "/v1/chat/completions", body("spread", i), a)
			served = append(served, a.requestID)
		case a.status == http.StatusPaymentRequired:
			_, msg := errorMessage(a.body)
			m := neededMicros.FindStringSubmatch(msg)
			if m == nil {
				t.Fatalf("request %d: a 402 without the amount needed: %s", i, a)
			}
			n, _ := strconv.ParseInt(m[1], 10, 64)
			needed = append(needed, n)
			if refusedAt < 0 {
				refusedAt = i
			}
		default:
			t.Fatalf("request %d: neither 200 nor 402: %s", i, a)
		}
	}
	if refusedAt < 0 || len(served) < 5 {
		t.Fatalf("the account needs to run out to show anything: %d served, first refusal at %d", len(served), refusedAt)
	}
	c.checkUsageExactlyOnce(acct, served)
	b := c.checkBooks(acct)
	if b.grants != credit || b.usageRecords != int64(len(served)) {
		t.Errorf("granted %d (want %d), %d usage records for %d answers served", b.grants, credit, b.usageRecords, len(served))
	}
	for i, n := range needed {
		if b.balance >= n {
			t.Errorf("refusal %d: 402 for a request needing %d micro-units, while the balance (%d once every request was billed) covered it", i, n, b.balance)
		}
	}
	t.Logf("in turn: %d requests served, then %d refused (each needed %v); %d of %d micro-units left", len(served), len(needed), needed, b.balance, credit)

	// At once: nine requests whose worst case the balance covers, three to each host.
	worst := needed[0]
	acct2, key2 := c.newAccount("batch-hosts", 10*worst, 0)
	const batch = 9
	answers := make([]answer, batch)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range batch {
		wg.Go(func() {
			<-start
			answers[i] = c.call(i%len(c.procs), "POST", "/v1/chat/completions", key2.Plain, body("batch", i))
		})
	}
	close(start)
	wg.Wait()
	served = served[:0]
	var refused []string
	for i, a := range answers {
		switch a.status {
		case http.StatusOK:
			checkServed(t, "/v1/chat/completions", body("batch", i), a)
			served = append(served, a.requestID)
		case http.StatusPaymentRequired:
			typ, msg := errorMessage(a.body)
			if typ != "insufficient_quota" || !insufficientCredit(msg) || leaksInternals(msg) || a.requestID == "" {
				t.Errorf("batch request %d: a 402 that is not clean: %s", i, a)
			}
			t.Errorf("batch request %d, covered by the balance (%d for 9 × at most %d): %s", i, 10*worst, worst, a)
			refused = append(refused, a.String())
		default:
			t.Errorf("batch request %d: neither 200 nor 402: %s", i, a)
		}
	}
	c.checkUsageExactlyOnce(acct2, served)
	b = c.checkBooks(acct2)
	if b.usageRecords != int64(len(served)) {
		t.Errorf("%d usage records for %d answers served", b.usageRecords, len(served))
	}
	t.Logf("at once: %d of %d served; spent %d of %d micro-units", len(served), batch, b.usageCost, b.grants)
	if len(refused) > 0 {
		t.Logf("at once: %d refused although the balance covered the batch (another replica was serving the account, so kept its hold): %v",
			len(refused), refused)
	}
}

// agentSlot is a slot as GET /v1/agents lists it.
type agentSlot struct {
	Slot    string `json:"slot"`
	Session *struct {
		ID          string `json:"id"`
		State       string `json:"state"`
		Turns       int    `json:"turns"`
		SpentMicros int64  `json:"spentMicros"`
	} `json:"session"`
}

// agentState reads, through process i, the session of the account's slot.
func (c *cluster) agentState(i int, key, slot string) (agentSlot, answer) {
	a := c.call(i, "GET", "/v1/agents", key, "")
	var list struct {
		Data []agentSlot `json:"data"`
	}
	if a.status == http.StatusOK {
		_ = json.Unmarshal([]byte(a.body), &list)
	}
	for _, s := range list.Data {
		if s.Slot == slot {
			return s, a
		}
	}
	return agentSlot{}, a
}

// waitTurns waits (up to limit) until the slot's session, read through process i, is ready
// after turns turns, and returns when it was.
func (c *cluster) waitTurns(t *testing.T, i int, key, slot string, turns int, limit time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		s, a := c.agentState(i, key, slot)
		if s.Session != nil {
			switch {
			case s.Session.State == "ready" && s.Session.Turns >= turns:
				if s.Session.Turns != turns {
					t.Fatalf("the session ran %d turns, want %d", s.Session.Turns, turns)
				}
				return time.Now()
			case s.Session.State == "failed" || s.Session.State == "stopped":
				t.Fatalf("the session ended: %s", a)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session was not ready after %d turns within %v: %s", turns, limit, a)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// multiHostAgentContinuedAfterSIGKILL spawns an agent session on host 1 while hosts 2 and 3
// are frozen (SIGSTOP), so that host 1 takes its first step; the step's model call is held 3 s
// by the simulator, and host 1 is SIGKILLed while it runs. Host 2 is then thawed, host 3 stays
// frozen: River's rescuer (on host 2) hands the step over once it has been running past
// rescue_after, host 2 runs it again and the session is ready after its first turn, billed
// once; then a message through host 2 runs the second turn there. The session's two turns have
// exactly one usage record and ledger entry each, which sum to its spend.
func multiHostAgentContinuedAfterSIGKILL(t *testing.T, c *cluster, hosts []*netns.Host) {
	t.Helper()
	ctx := context.Background()
	acct, key := c.newAccount("agents-hosts", 5_000_000, 0)
	c.adminOn(hosts[0], "slot", "assign", "agents-hosts", "main")
	h1, h2, h3 := c.procs[0], c.procs[1], c.procs[2]

	h2.signal(syscall.SIGSTOP)
	h3.signal(syscall.SIGSTOP)
	a := c.call(0, "POST", "/v1/agents", key.Plain,
		`{"slot":"main","prompt":"Summarise the quarter. [[sim words=20 fault=stall_before ms=3000]]"}`)
	if a.status != http.StatusAccepted {
		h2.signal(syscall.SIGCONT)
		t.Fatalf("spawn on h1: %s", a)
	}
	var spawned struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal([]byte(a.body), &spawned); err != nil || spawned.SessionID == "" {
		t.Fatalf("spawn on h1: no session id: %s", a)
	}

	// The step runs on h1 (the only process awake): kill h1 while its model call is held.
	var jobID int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.pool.QueryRow(ctx, `SELECT id FROM river_job WHERE kind = 'agent_step' AND state = 'running'
			AND args->>'session_id' = $1`, spawned.SessionID).Scan(&jobID)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("h1 did not start the session's step within 10 s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h1.kill()
	killed := time.Now()
	h2.signal(syscall.SIGCONT)
	c.waitForBackendsGone(h1.name)
	var state string
	var attempt int
	if err := c.pool.QueryRow(ctx, `SELECT state, attempt FROM river_job WHERE id = $1`, jobID).Scan(&state, &attempt); err != nil {
		t.Fatal(err)
	}
	if state != "running" || attempt != 1 {
		t.Fatalf("the step h1 was running when it was killed is %s (attempt %d), not running its first attempt: h1 was not killed mid-step", state, attempt)
	}

	// rescue_after (11 s from the step's start) plus up to River's rescuer interval (30 s),
	// and the step itself (3 s).
	ready := c.waitTurns(t, 1, key.Plain, "main", 1, 90*time.Second)
	t.Logf("h2 continued the session %v after h1 was killed", ready.Sub(killed).Round(time.Millisecond))
	var attempts int
	var attemptedBy []string
	if err := c.pool.QueryRow(ctx, `SELECT state, attempt, attempted_by FROM river_job WHERE id = $1`, jobID).Scan(&state, &attempts, &attemptedBy); err != nil {
		t.Fatal(err)
	}
	if state != "completed" || attempts != 2 || len(attemptedBy) != 2 || attemptedBy[0] == attemptedBy[1] {
		t.Errorf("the step: %s after %d attempts by %v; want completed on its second attempt, by another process", state, attempts, attemptedBy)
	}

	// The next turn, asked through h2, runs there too (h1 is dead, h3 frozen).
	if a := c.call(1, "POST", "/v1/agents/main/messages", key.Plain, `{"text":"And the next one? [[sim words=20]]"}`); a.status != http.StatusAccepted {
		t.Fatalf("message through h2: %s", a)
	}
	c.waitTurns(t, 1, key.Plain, "main", 2, 30*time.Second)
	h3.signal(syscall.SIGCONT)

	s, a := c.agentState(2, key.Plain, "main")
	if s.Session == nil || s.Session.ID != spawned.SessionID || s.Session.Turns != 2 {
		t.Fatalf("h3 after the thaw: %s", a)
	}
	// The usage records are written in batches: wait for both.
	var records, ledgerEntries int
	var cost, ledger int64
	for wait := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := c.pool.QueryRow(ctx, `SELECT count(*) FROM usage_records WHERE account_id = $1 AND agent_session_id = $2`,
			acct, spawned.SessionID).Scan(&records); err != nil {
			t.Fatal(err)
		}
		if records >= 2 || time.Now().After(wait) {
			break
		}
	}
	if err := c.pool.QueryRow(ctx, `
		SELECT count(*), coalesce(sum(u.cost_micros), 0)::bigint,
		       (SELECT count(*) FROM credit_ledger l JOIN usage_records r ON l.idempotency_key = 'usage:' || r.request_id
		        WHERE r.agent_session_id = $2 AND l.account_id = $1),
		       (SELECT coalesce(sum(l.amount_micros), 0)::bigint FROM credit_ledger l JOIN usage_records r ON l.idempotency_key = 'usage:' || r.request_id
		        WHERE r.agent_session_id = $2 AND l.account_id = $1)
		FROM usage_records u WHERE u.account_id = $1 AND u.agent_session_id = $2`, acct, spawned.SessionID).
		Scan(&records, &cost, &ledgerEntries, &ledger); err != nil {
		t.Fatal(err)
	}
	if records != 2 || ledgerEntries != 2 || ledger != -cost || cost != s.Session.SpentMicros || cost == 0 {
		t.Errorf("the session's 2 turns: %d usage records costing %d, %d ledger entries of %d, the session spent %d",
			records, cost, ledgerEntries, ledger, s.Session.SpentMicros)
	}
}

// mcpTool calls an MCP tool through process i and returns its result's text and whether it is
// a tool error.
func (c *cluster) mcpTool(t *testing.T, i int, key, tool string, args map[string]any) (string, bool) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	if err != nil {
		t.Fatal(err)
	}
	a := c.call(i, "POST", "/api/mcp", key, string(body))
	var rpc struct {
		Result *struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &rpc) != nil || rpc.Result == nil {
		t.Fatalf("%s through gw%d: %s", tool, i+1, a)
	}
	var text []string
	for _, part := range rpc.Result.Content {
		text = append(text, part.Text)
	}
	return strings.Join(text, "\n"), rpc.Result.IsError
}

// multiHostDataset uploads a dataset with the admin command run on host 1 and, as soon as the
// command has returned, lists, loads and queries it through hosts 2 and 3 (over MCP). The
// object is in the store's bucket under the account's prefix; the hosts never shared a disk.
func multiHostDataset(t *testing.T, c *cluster, hosts []*netns.Host, s3 *s3test.Server) {
	t.Helper()
	acct, key := c.newAccount("data-hosts", 1_000_000, 0)
	csv := filepath.Join(t.TempDir(), "sales.csv")
	rows := "region,units\nnorth,12\nsouth,30\nnorth,7\neast,5\nsouth,4\n" // south 34, north 19, east 5
	if err := os.WriteFile(csv, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	out, uploaded := c.adminOn(hosts[0], "dataset", "put", "data-hosts", csv, "-name", "sales")
	t.Logf("upload on h1: %s", strings.TrimSpace(out))

	mc, err := s3.Client()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for obj := range mc.ListObjects(context.Background(), s3.Bucket(), minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	if !slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, "tenant/"+acct.String()+"/sales.csv") }) {
		t.Errorf("the object store holds %v, not the uploaded dataset tenant/%s/sales.csv", keys, acct)
	}

	for i := 1; i < len(c.procs); i++ {
		if text, isErr := c.mcpTool(t, i, key.Plain, "list_storage_datasets", map[string]any{}); isErr || !strings.Contains(text, "sales") {
			t.Errorf("gw%d lists the account's datasets as (error %t): %s", i+1, isErr, text)
		}
		if text, isErr := c.mcpTool(t, i, key.Plain, "load_storage_dataset", map[string]any{"name": "sales"}); isErr {
			t.Errorf("gw%d cannot load the dataset uploaded through h1: %s", i+1, text)
			continue
		}
		text, isErr := c.mcpTool(t, i, key.Plain, "query_data", map[string]any{"dataset": "sales",
			"sql": "SELECT region, SUM(units) AS units FROM sales GROUP BY region ORDER BY units DESC"})
		if isErr || !strings.Contains(text, "south") || !strings.Contains(text, "34") || !strings.Contains(text, "19") ||
			strings.Index(text, "south") > strings.Index(text, "north") {
			t.Errorf("gw%d's answer to the query (error %t): %s", i+1, isErr, text)
		}
	}
	if !t.Failed() {
		t.Logf("h2 and h3 listed, loaded and queried the dataset within %v of its upload through h1 returning", time.Since(uploaded).Round(time.Millisecond))
	}
}
