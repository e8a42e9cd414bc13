package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

// call is one inference request through a serve process, as a client sees it.
type call struct {
	name, path, body string
	stream           bool
}

// answer is what the client of a call got.
type answer struct {
	call
	status    int
	requestID string
	body      string
	err       error
}

// paced are requests of every route whose answers the simulator paces: the text holds
// directive, e.g. [[sim words=300 tps=50]]. Chat and Messages streams are relayed (the upstream
// speaks the client's format); the Responses stream is translated from a chat upstream. With
// nonStreamed, a non-streamed chat request comes first.
//
// The order matters to a test that waits for each to start before the next: a non-streamed
// request is known to be started only once it is sent, and its connection may still wait in
// the listener's backlog (where closing the listener resets it); connections are accepted in
// the order they came, so once a later stream has its first bytes, the earlier connection has
// been accepted too, and a shutdown does not close it before its request is read.
func paced(directive string, nonStreamed bool) []call {
	msg := `[{"role":"user","content":"tell me a story ` + directive + `"}]`
	calls := []call{
		{"chat stream", "/v1/chat/completions", `{"model":"service-flint-base","stream":true,"messages":` + msg + `}`, true},
		{"responses stream", "/v1/responses", `{"model":"service-flint-base","stream":true,"input":` + msg + `}`, true},
		{"messages stream", "/v1/messages", `{"model":"service-sonnet","max_tokens":4096,"stream":true,"messages":` + msg + `}`, true},
	}
	if nonStreamed {
		calls = append([]call{{"chat", "/v1/chat/completions", `{"model":"service-flint-base","messages":` + msg + `}`, false}}, calls...)
	}
	return calls
}

// send starts c on p with key; started is closed once the request is in flight (a stream's
// first bytes have arrived; a non-streamed request has been sent), and the whole answer then
// goes to done.
func send(p *serveProc, key string, c call) (started chan struct{}, done chan answer) {
	return sendUntil(p, key, c, "")
}

// sendUntil is send whose stream counts as started only once its body holds marker (a text
// delta, say: the stream's first bytes may be the gateway's own, before the upstream has
// produced anything to bill).
func sendUntil(p *serveProc, key string, c call, marker string) (started chan struct{}, done chan answer) {
	started, done = make(chan struct{}), make(chan answer, 1)
	go func() {
		a := answer{call: c}
		defer func() { done <- a }()
		ctx := context.Background()
		if !c.stream {
			ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
				WroteRequest: func(httptrace.WroteRequestInfo) { close(started) },
			})
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", p.base+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			a.err = err
			if c.stream {
				close(started)
			}
			return
		}
		defer res.Body.Close()
		a.status, a.requestID = res.StatusCode, res.Header.Get("x-request-id")
		br := bufio.NewReader(res.Body)
		var head []byte
		if c.stream {
			_, _ = br.Peek(1)
			for marker != "" && !bytes.Contains(head, []byte(marker)) {
				line, err := br.ReadBytes('\n')
				head = append(head, line...)
				if err != nil {
					break
				}
			}
			close(started)
		}
		b, err := io.ReadAll(br)
		a.body, a.err = string(head)+string(b), err
	}()
	return started, done
}

// setupAccount migrates db, as `tollgate migrate` does, and creates the account acme on it with
// $10 of credit; it returns a key of it.
func setupAccount(t *testing.T, db string) string {
	t.Helper()
	t.Setenv("DATABASE_URL", db)
	t.Setenv("LOG_LEVEL", "error")
	migrateDatabase(t, db)
	mustAdmin(t, "account create acme -plan demo")
	return strings.TrimSpace(mustAdmin(t, "key create acme -quiet"))
}

// books is what the database says of acme's requests once the gateway is gone.
type books struct {
	status    map[string]string // usage record status by request id
	output    map[string]int64  // usage record output tokens by request id
	cost      map[string]int64  // usage record cost by request id
	ledger    map[string]int64  // usage ledger entry amount by request id
	holds     int64             // credit_holds rows of any process
	held      int64             // accounts.held_micros
	balance   int64
	ledgerSum int64
}

func readBooks(t *testing.T, db string) books {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	b := books{status: map[string]string{}, output: map[string]int64{}, cost: map[string]int64{}, ledger: map[string]int64{}}
	rows, err := pool.Query(ctx, `SELECT request_id, status, output_tokens, cost_micros FROM usage_records`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, status string
		var out, cost int64
		if err := rows.Scan(&id, &status, &out, &cost); err != nil {
			t.Fatal(err)
		}
		b.status[id], b.output[id], b.cost[id] = status, out, cost
	}
	if rows.Close(); rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	rows, err = pool.Query(ctx, `SELECT substr(idempotency_key, 7), amount_micros FROM credit_ledger WHERE reason = 'usage'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var amount int64
		if err := rows.Scan(&id, &amount); err != nil {
			t.Fatal(err)
		}
		b.ledger[id] = amount
	}
	if rows.Close(); rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	err = pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM credit_holds), a.held_micros, a.balance_micros,
		(SELECT coalesce(sum(amount_micros), 0) FROM credit_ledger l WHERE l.account_id = a.id)::bigint
		FROM accounts a WHERE a.name = 'acme'`).Scan(&b.holds, &b.held, &b.balance, &b.ledgerSum)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkBilled checks that every answer has exactly one usage record, with status and some
// output, and its ledger entry; that nothing else was billed; that no credit is held any more
// (the holds were returned by the shutdown, not left to expire: no other process could have
// reaped them); and that the balance is the ledger's sum.
func checkBilled(t *testing.T, b books, answers []answer, status func(answer) string) {
	t.Helper()
	if len(b.status) != len(answers) || len(b.ledger) != len(answers) {
		t.Errorf("%d usage records and %d usage ledger entries for %d requests", len(b.status), len(b.ledger), len(answers))
	}
	for _, a := range answers {
		got, ok := b.status[a.requestID]
		switch {
		case !ok:
			t.Errorf("%s (%s): no usage record", a.name, a.requestID)
		case got != status(a):
			t.Errorf("%s: usage record status %q, want %q", a.name, got, status(a))
		case b.output[a.requestID] <= 0 || b.cost[a.requestID] <= 0:
			t.Errorf("%s: billed %d output tokens, %d micros: what it produced is not billed", a.name, b.output[a.requestID], b.cost[a.requestID])
		case b.ledger[a.requestID] != -b.cost[a.requestID]:
			t.Errorf("%s: ledger entry %d for a cost of %d", a.name, b.ledger[a.requestID], b.cost[a.requestID])
		}
	}
	if b.holds != 0 || b.held != 0 {
		t.Errorf("credit still held after the shutdown: %d holds, held_micros %d", b.holds, b.held)
	}
	if b.balance != b.ledgerSum {
		t.Errorf("balance %d, ledger sum %d", b.balance, b.ledgerSum)
	}
}

// TestServeSIGTERMDrains sends SIGTERM to a serve process with streams of every format (and a
// non-streamed request) in flight: readiness goes not ready at once, new connections are
// refused while the process drains, every request completes with its terminal event, and once
// the process has exited every request has its usage record and ledger entry and no credit is
// held.
func TestServeSIGTERMDrains(t *testing.T) {
	db := migratedDatabase(t)
	key := setupAccount(t, db)
	p := startServe(t, serveEnv(t, db)) // the default grace period (20 s)
	// 200 may come first with "degraded": the change feed reports itself degraded until its
	// first LISTEN is in place, a moment after the gateway starts serving.
	p.waitReadyz(t, http.StatusOK, 30*time.Second)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := p.readyz()
		if code == http.StatusOK && strings.Contains(body, `"status":"ready"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never said ready: %d %s", code, body)
		}
	}

	// Each answer takes about 6 s: 300 words at 50 a second.
	calls := paced("[[sim words=300 tps=50]]", true)
	var dones []chan answer
	for _, c := range calls {
		started, done := send(p, key, c)
		<-started
		dones = append(dones, done)
	}
	// The requests in flight hold credit (so that its absence at the end means it was returned).
	if b := readBooks(t, db); b.holds == 0 || b.held == 0 {
		t.Fatalf("no credit held while requests are in flight: %d holds, held_micros %d", b.holds, b.held)
	}
	p.signal(t, syscall.SIGTERM)

	body := p.waitReadyz(t, http.StatusServiceUnavailable, 10*time.Second)
	if !strings.Contains(body, `"shutdown":{"state":"down","reason":"shutting down"}`) {
		t.Errorf("/readyz while shutting down: %s", body)
	}
	// New connections are refused while the process drains (its metrics listener still
	// answers, so it has not exited).
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", p.api, time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("the API listener still accepts connections after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, body := p.readyz(); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after the API listener closed: %d %s (the process should be draining its streams)", code, body)
	}

	var answers []answer
	for _, done := range dones {
		a := <-done
		answers = append(answers, a)
		if a.err != nil || a.status != 200 {
			t.Errorf("%s: %d %v\n%s", a.name, a.status, a.err, a.body)
			continue
		}
		var terminal string
		switch a.name {
		case "chat stream":
			terminal = `"finish_reason":"stop"`
			if !strings.HasSuffix(a.body, "data: [DONE]\n\n") {
				t.Errorf("chat stream cut:\n%s", tail(a.body))
			}
		case "responses stream":
			terminal = "event: response.completed\n"
		case "messages stream":
			terminal = "event: message_stop\n"
		case "chat":
			terminal = `"finish_reason":"stop"`
		}
		if !strings.Contains(a.body, terminal) || strings.Contains(a.body, "shutting down") {
			t.Errorf("%s did not complete (want %s):\n%s", a.name, terminal, tail(a.body))
		}
	}
	if err := p.wait(t, 60*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs())
	}
	if logs := p.logs(); !strings.Contains(logs, `"msg":"shutdown: usage written, credit holds returned"`) ||
		strings.Contains(logs, "grace period over") {
		t.Errorf("logs:\n%s", logs)
	}
	checkBilled(t, readBooks(t, db), answers, func(answer) string { return "ok" })
}

// TestServeShutdownGraceEndsStreams gives the streams in flight a grace period far shorter than
// they need: when it is over, each ends with its format's in-band error (chat: an error chunk
// then [DONE]; Responses: error then response.failed; Messages: an error event, no
// message_stop), and is billed for what it produced.
func TestServeShutdownGraceEndsStreams(t *testing.T) {
	db := migratedDatabase(t)
	key := setupAccount(t, db)
	p := startServe(t, serveEnv(t, db), "-shutdown-grace", "1s")
	p.waitReadyz(t, http.StatusOK, 30*time.Second)

	// A minute of words at 50 a second: far beyond the grace period.
	var dones []chan answer
	for _, c := range paced("[[sim words=3000 tps=50]]", false) {
		started, done := send(p, key, c)
		<-started
		dones = append(dones, done)
	}
	p.signal(t, syscall.SIGTERM)

	const msg = `"the gateway is shutting down; retry the request"`
	var answers []answer
	for _, done := range dones {
		a := <-done
		answers = append(answers, a)
		if a.err != nil || a.status != 200 {
			t.Errorf("%s: %d %v\n%s", a.name, a.status, a.err, tail(a.body))
			continue
		}
		var want []string
		switch a.name {
		case "chat stream":
			want = []string{`data: {"error":{"message":` + msg + `,"type":"overloaded_error","param":null,"code":"overloaded"}}` + "\n\ndata: [DONE]\n\n"}
		case "responses stream":
			want = []string{"event: error\n", `"code":"overloaded"`, msg, "event: response.failed\n"}
		case "messages stream":
			want = []string{"event: error\n" + `data: {"type":"error","error":{"type":"overloaded_error","message":` + msg + `}}`}
		}
		for _, w := range want {
			if !strings.Contains(a.body, w) {
				t.Errorf("%s lacks %s:\n%s", a.name, w, tail(a.body))
			}
		}
		if !strings.Contains(a.body, "delta") {
			t.Errorf("%s produced nothing before the end:\n%s", a.name, tail(a.body))
		}
		if a.name == "messages stream" && strings.Contains(a.body, "message_stop") {
			t.Errorf("messages stream ended with message_stop after its error:\n%s", tail(a.body))
		}
	}
	if err := p.wait(t, 60*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs())
	}
	if logs := p.logs(); !strings.Contains(logs, "grace period over") || !strings.Contains(logs, `"msg":"shutdown: usage written, credit holds returned"`) {
		t.Errorf("logs:\n%s", logs)
	}
	checkBilled(t, readBooks(t, db), answers, func(answer) string { return "shutdown" })
}

// TestServeShutdownGraceEndsSilentUpstreams: requests whose upstream has not begun its answer
// when the grace period ends (a stalled upstream), streamed or not, of every route, are
// answered with their route's overloaded error (529, "the gateway is shutting down"), and are
// not billed: each has a usage record with status shutdown and a cost of 0, and no credit stays
// held. Trial h12 D3: they were cut by the connections' close 5 s later (the client got no
// reply at all) and billed their input as client_disconnected.
func TestServeShutdownGraceEndsSilentUpstreams(t *testing.T) {
	db := migratedDatabase(t)
	key := setupAccount(t, db)
	p := startServe(t, serveEnv(t, db), "-shutdown-grace", "1s")
	p.waitReadyz(t, http.StatusOK, 30*time.Second)

	msg := `[{"role":"user","content":"hello [[sim fault=stall_before ms=60000]]"}]`
	calls := []call{
		{"chat", "/v1/chat/completions", `{"model":"service-flint-base","messages":` + msg + `}`, false},
		{"chat stream", "/v1/chat/completions", `{"model":"service-flint-base","stream":true,"messages":` + msg + `}`, false},
		{"responses", "/v1/responses", `{"model":"service-flint-base","input":` + msg + `}`, false},
		{"messages stream", "/v1/messages", `{"model":"service-sonnet","max_tokens":100,"stream":true,"messages":` + msg + `}`, false},
	}
	var dones []chan answer
	for _, c := range calls {
		started, done := send(p, key, c) // started once the request is written: nothing comes back
		<-started
		dones = append(dones, done)
	}
	// The requests were written; let the process read them before the listener closes.
	time.Sleep(500 * time.Millisecond)
	p.signal(t, syscall.SIGTERM)

	const msgText = "the gateway is shutting down; retry the request"
	var ids []string
	for _, done := range dones {
		a := <-done
		if a.err != nil || a.status != 529 || !strings.Contains(a.body, msgText) || !strings.Contains(a.body, "overloaded_error") {
			t.Errorf("%s: %d %v\n%s", a.name, a.status, a.err, tail(a.body))
		}
		if a.requestID == "" {
			t.Errorf("%s: no request id", a.name)
		}
		ids = append(ids, a.requestID)
	}
	if err := p.wait(t, 60*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs())
	}
	b := readBooks(t, db)
	for i, id := range ids {
		if b.status[id] != "shutdown" || b.cost[id] != 0 || b.ledger[id] != 0 {
			t.Errorf("%s (%s): usage record status %q, cost %d, ledger %d; want shutdown, 0, 0", calls[i].name, id, b.status[id], b.cost[id], b.ledger[id])
		}
	}
	if b.holds != 0 || b.held != 0 || b.balance != b.ledgerSum {
		t.Errorf("after the shutdown: %d holds, %d held, balance %d, ledger sum %d", b.holds, b.held, b.balance, b.ledgerSum)
	}
}

// TestServeSecondSignalEndsGrace: a second SIGTERM during a long grace period ends the streams
// in flight at once, with the in-band error, and they are billed.
func TestServeSecondSignalEndsGrace(t *testing.T) {
	db := migratedDatabase(t)
	key := setupAccount(t, db)
	p := startServe(t, serveEnv(t, db), "-shutdown-grace", "10m")
	p.waitReadyz(t, http.StatusOK, 30*time.Second)
	c := paced("[[sim words=3000 tps=50]]", false)[2] // a Messages stream of a minute
	// Signalled once text flows: a stream cut before the upstream produced anything has
	// nothing to bill, which the books check below would take for a loss (a CI flake).
	started, done := sendUntil(p, key, c, "content_block_delta")
	<-started
	p.signal(t, syscall.SIGTERM)
	// Readiness turns once the second signal is listened for.
	p.waitReadyz(t, http.StatusServiceUnavailable, 10*time.Second)
	p.signal(t, syscall.SIGTERM)
	a := <-done
	if a.err != nil || a.status != 200 || !strings.Contains(a.body, `"type":"overloaded_error"`) {
		t.Errorf("%s: %d %v\n%s", a.name, a.status, a.err, tail(a.body))
	}
	if err := p.wait(t, 60*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs())
	}
	if logs := p.logs(); !strings.Contains(logs, "second signal") {
		t.Errorf("logs:\n%s", logs)
	}
	checkBilled(t, readBooks(t, db), []answer{a}, func(answer) string { return "shutdown" })
}

// TestServeWaitsForDatabase starts serve while its database server is stopped: it does not
// exit, logs each attempt with the reason, and says not ready; once the server is started it
// comes up and serves.
func TestServeWaitsForDatabase(t *testing.T) {
	testBinary(t)
	pg := pgtest.NewOutage(t) // a cluster of the test's own, which it can stop and start
	db := pg.ConnString()
	key := setupAccount(t, db)
	pg.Stop()

	p := startServe(t, serveEnv(t, db))
	body := p.waitReadyz(t, http.StatusServiceUnavailable, 30*time.Second)
	// Wait for a few attempts, then start the server again.
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(p.logs(), `"msg":"database not reachable; retrying"`) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no retries logged:\n%s", p.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, b := p.readyz(); code != http.StatusServiceUnavailable || !strings.Contains(b, `"startup":{"state":"down","reason":"waiting for the database"}`) {
		t.Errorf("/readyz while the database is down: %d %s (first answer %s)", code, b, body)
	}
	logs := p.logs()
	if !strings.Contains(logs, `"attempt":2`) || !strings.Contains(logs, "failed to connect") {
		t.Errorf("the attempts are not logged with their reason:\n%s", logs)
	}
	pg.Start()

	p.waitReadyz(t, http.StatusOK, 60*time.Second)
	req, _ := http.NewRequest("GET", p.base+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), "service-flint") {
		t.Fatalf("models once the database is back: %d %s", res.StatusCode, b)
	}
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t, 30*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs())
	}
	if !strings.Contains(p.logs(), `"msg":"database reachable"`) {
		t.Errorf("logs:\n%s", p.logs())
	}
}

// TestServeGivesUpWaitingForDatabase: with -database-wait, start-up that cannot reach the
// database exits with an error once the wait is over.
func TestServeGivesUpWaitingForDatabase(t *testing.T) {
	// Nothing listens in this socket directory.
	db := "host=" + unusedDir(t, "tgs-") + " port=5433 user=postgres dbname=tollgate"
	p := startServe(t, serveEnv(t, db), "-database-wait", "1s")
	err := p.wait(t, 30*time.Second)
	if err == nil || !strings.Contains(p.logs(), "the database was not reachable within 1s (-database-wait)") ||
		!strings.Contains(p.logs(), `"msg":"database not reachable; retrying"`) {
		t.Fatalf("exit: %v\n%s", err, p.logs())
	}
}

// unusedDir is a short path under /tmp that does not exist yet (pgcluster creates a socket
// directory there for the server's OS user), removed after the test.
func unusedDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// tail is the end of a long answer, for failure messages.
func tail(s string) string {
	if len(s) > 1500 {
		return "…" + s[len(s)-1500:]
	}
	return s
}
