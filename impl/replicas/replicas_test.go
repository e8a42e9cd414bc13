package replicas_test

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// realLease makes TestKilledProcessHoldIsReapedAndOthersKeepServing wait for the killed
// process's lease to run out on its own (40 s, the meter's default with the default outage
// cover, which no setting of `tollgate serve` changes directly) instead of ending it in the
// database.
var realLease = flag.Bool("replicas.real-lease", false, "wait for the killed process's credit-hold lease to expire on its own (up to 50 s)")

// inference is one of the four kinds of inference request the tests send: Messages and chat
// completions, each streamed and not. A Messages request costs about 3,000 micro-units
// (service-sonnet at $15 per million output tokens, a 200-word reply: the simulator's words
// are tokens), a chat completion about 600 (service-flint-base at $1.50, 400 words); the
// worst case reserved is close to the real cost, because the reply fills max_tokens.
func inference(i int, tag string) (path, body string) {
	stream := i%2 == 1
	if i/2%2 == 0 {
		return "/v1/messages", fmt.Sprintf(`{"model":"service-sonnet","max_tokens":200,"stream":%t,`+
			`"messages":[{"role":"user","content":"%s %d [[sim words=200]]"}]}`, stream, tag, i)
	}
	return "/v1/chat/completions", fmt.Sprintf(`{"model":"service-flint-base","max_tokens":400,"stream":%t,`+
		`"messages":[{"role":"user","content":"%s %d [[sim words=400]]"}]}`, stream, tag, i)
}

// checkServed checks that a 200 answer is a whole answer of its route: a JSON message or
// completion, or a stream that ran to its end.
func checkServed(t *testing.T, path, body string, a answer) {
	t.Helper()
	streamed := strings.Contains(body, `"stream":true`)
	var ok bool
	switch {
	case path == "/v1/messages" && streamed:
		ok = strings.Contains(a.body, "event: message_stop")
	case path == "/v1/messages":
		ok = strings.Contains(a.body, `"type":"message"`)
	case streamed:
		ok = strings.HasSuffix(a.body, "data: [DONE]\n\n")
	default:
		ok = strings.Contains(a.body, `"object":"chat.completion"`)
	}
	if !ok || a.requestID == "" {
		t.Errorf("%s: a 200 that is not a whole answer: %s", path, a)
	}
}

// TestSpendNeverExceedsBalanceAcrossProcesses races 200 requests (Messages and chat
// completions, streamed and not) of one account, spread round-robin over three processes, when
// the account's balance covers well under half of what they would cost (0.15 USD of 0.36). Every answer is a whole 200 or a
// clean 402 (the route's envelope, x-should-retry: false, no internal text); every 200 has
// exactly one usage record and ledger entry of its cost, no 402 has any, the balance never goes
// below zero and is the sum of the ledger, and it went down by exactly what was billed. A
// request whose reservation the account covered but whose credit moved during each of its draws
// may get the meter's 503 to retry (billing.ErrContended), billed nothing.
func TestSpendNeverExceedsBalanceAcrossProcesses(t *testing.T) {
	c := startCluster(t, 3)
	const credit = 150_000 // the 200 requests would cost about 360,000: 100 × 3,000 + 100 × 600
	acct, key := c.newAccount("race", credit, 0)

	const n = 200
	answers := make([]answer, n)
	paths, bodies := make([]string, n), make([]string, n)
	for i := range n {
		paths[i], bodies[i] = inference(i, "race")
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		proc := c.nextProcess()
		wg.Go(func() {
			<-start
			answers[i] = c.call(proc, "POST", paths[i], key.Plain, bodies[i])
		})
	}
	raced := time.Now()
	close(start)
	wg.Wait()
	t.Logf("the race took %v", time.Since(raced).Round(time.Millisecond))

	var served, refused []string
	contended := 0
	byProcess := make([][2]int, len(c.procs))
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("request %d: %s", i, a)
		case a.status == http.StatusOK:
			checkServed(t, paths[i], bodies[i], a)
			served = append(served, a.requestID)
			byProcess[a.proc][0]++
		case a.status == http.StatusPaymentRequired:
			typ, msg := errorMessage(a.body)
			want := "insufficient_quota"
			if paths[i] == "/v1/messages" {
				want = "billing_error"
			}
			if typ != want || !insufficientCredit(msg) || leaksInternals(msg) ||
				a.header.Get("x-should-retry") != "false" || a.requestID == "" {
				t.Errorf("request %d: a 402 that is not clean: %s (x-should-retry %q)", i, a, a.header.Get("x-should-retry"))
			}
			refused = append(refused, a.requestID)
			byProcess[a.proc][1]++
		case a.status == http.StatusServiceUnavailable && strings.Contains(string(a.body), "being drawn by many requests at once") &&
			a.header.Get("Retry-After") != "" && !leaksInternals(string(a.body)):
			// The meter's answer to a reservation the account covers but whose credit moved
			// during each of its round trips (billing.ErrContended, impl/billing's doc): a 503
			// to retry, never a 402, and billed nothing (the books below count only the 200s).
			// Rare, and seen under a loaded CI host (one of 200).
			contended++
		default:
			t.Errorf("request %d: neither 200, 402 nor the contended 503: %s", i, a)
		}
	}
	t.Logf("%d served, %d refused with 402, %d contended (503); per process (served, refused): %v", len(served), len(refused), contended, byProcess)
	if len(served) == 0 || len(refused) == 0 {
		t.Fatalf("the race needs both outcomes to show anything: %d served, %d refused", len(served), len(refused))
	}

	c.checkUsageExactlyOnce(acct, served)
	b := c.checkBooks(acct)
	if b.grants != credit || b.usageRecords != int64(len(served)) {
		t.Errorf("granted %d (want %d), %d usage records for %d answers served", b.grants, credit, b.usageRecords, len(served))
	}
	t.Logf("spent %d of %d micro-units in %d requests; %d left, %d still held by the processes",
		b.usageCost, credit, b.usageRecords, b.balance, b.held)
}

// TestRevokedKeyRefusedByEveryProcessWithinASecond revokes, with `tollgate admin key revoke`,
// a key that every one of three processes has just authenticated (so it is in each one's
// cache), and shows that every process refuses it with 401 within a second of the revocation
// (polling each every 10 ms, timed from the start of the command), keeps refusing it, and
// still serves the account's other key.
func TestRevokedKeyRefusedByEveryProcessWithinASecond(t *testing.T) {
	c := startCluster(t, 3)
	acct, key := c.newAccount("revoke", 1_000_000, 0)
	other := c.newKey(acct, 0)
	for i := range c.procs {
		for _, k := range []string{key.Plain, other.Plain} {
			if a := c.call(i, "GET", "/v1/models", k, ""); a.status != http.StatusOK {
				t.Fatalf("before the revocation: %s", a)
			}
		}
	}

	// The revocation commits while the command runs: timed from the command's start, the bound
	// is checked with a margin of the command's own run time.
	revoked := time.Now()
	out := c.admin("key", "revoke", key.Key.ID.String(), "-yes")
	ran := time.Since(revoked)
	if !strings.Contains(out, "revoked") {
		t.Fatalf("admin key revoke: %s", out)
	}

	const bound = time.Second
	refusedAfter := make([]time.Duration, len(c.procs))
	var wg sync.WaitGroup
	for i := range c.procs {
		wg.Go(func() {
			for {
				a := c.call(i, "GET", "/v1/models", key.Plain, "")
				since := time.Since(revoked)
				if a.status == http.StatusUnauthorized {
					refusedAfter[i] = since
					return
				}
				if a.status != http.StatusOK {
					t.Errorf("while the revocation spreads: %s", a)
					return
				}
				if since > bound {
					t.Errorf("gw%d still served the revoked key %v after the revoking command started", i+1, since.Round(time.Millisecond))
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	t.Logf("the admin command ran for %v; each process refused the key (from the command's start) after %v",
		ran.Round(time.Millisecond), refusedAfter)

	for round := range 3 {
		for i := range c.procs {
			a := c.call(i, "GET", "/v1/models", key.Plain, "")
			typ, msg := errorMessage(a.body)
			if a.status != http.StatusUnauthorized || typ != "authentication_error" || !strings.Contains(msg, "revoked") || leaksInternals(msg) {
				t.Errorf("round %d, the revoked key: %s", round, a)
			}
			path, body := inference(round*len(c.procs)+i, "other")
			if a := c.call(i, "POST", path, other.Plain, body); a.status != http.StatusOK {
				t.Errorf("round %d, the account's other key: %s", round, a)
			}
		}
	}
}

// TestRPMCapHoldsAcrossProcesses gives a key a cap of 9 requests per minute and sends it 27
// requests at once (models, chat completions and Messages), 9 to each of three processes that
// share Redis: exactly 9 are allowed in all, the other 18 get 429 in the route's envelope with
// Retry-After, retry-after-ms and the rate-limit headers of the route's family; afterwards every process refuses the
// key with 429, while another key of the same account is served by each.
func TestRPMCapHoldsAcrossProcesses(t *testing.T) {
	c := startCluster(t, 3)
	const rpm = 9
	acct, key := c.newAccount("rpm", 1_000_000, rpm)
	other := c.newKey(acct, 0)

	request := func(i int) (method, path, body string) {
		switch i / len(c.procs) % 3 { // every process gets every kind
		case 0:
			return "GET", "/v1/models", ""
		case 1:
			return "POST", "/v1/chat/completions", fmt.Sprintf(`{"model":"service-flint-base","messages":[{"role":"user","content":"rpm %d"}]}`, i)
		default:
			return "POST", "/v1/messages", fmt.Sprintf(`{"model":"service-sonnet","max_tokens":32,"messages":[{"role":"user","content":"rpm %d"}]}`, i)
		}
	}
	checkLimited := func(what string, path string, a answer) {
		t.Helper()
		retryAfter, err := strconv.Atoi(a.header.Get("Retry-After"))
		typ, msg := errorMessage(a.body)
		// The limit's headers in the route's family: Anthropic's names on Messages.
		limit, remaining := "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests"
		if path == "/v1/messages" {
			limit, remaining = "anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining"
		}
		if a.status != http.StatusTooManyRequests || err != nil || retryAfter < 1 || retryAfter > 60 ||
			typ != "rate_limit_error" || !strings.Contains(msg, "9 requests per minute") ||
			a.header.Get(limit) != "9" || a.header.Get(remaining) != "0" ||
			(path != "/v1/messages" && a.header.Get("retry-after-ms") == "") {
			t.Errorf("%s: not a 429 with Retry-After: %s (Retry-After %q, retry-after-ms %q, limit %q, remaining %q)", what, a,
				a.header.Get("Retry-After"), a.header.Get("retry-after-ms"), a.header.Get(limit), a.header.Get(remaining))
		}
	}

	const n = 3 * rpm
	answers := make([]answer, n)
	paths := make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		proc := c.nextProcess()
		method, path, body := request(i)
		paths[i] = path
		wg.Go(func() {
			<-start
			answers[i] = c.call(proc, method, path, key.Plain, body)
		})
	}
	close(start)
	wg.Wait()
	allowed := make([]int, len(c.procs))
	total := 0
	for i, a := range answers {
		switch a.status {
		case http.StatusOK:
			allowed[a.proc]++
			total++
		case http.StatusTooManyRequests:
			checkLimited(fmt.Sprintf("request %d", i), paths[i], a)
		default:
			t.Errorf("request %d: neither 200 nor 429: %s", i, a)
		}
	}
	t.Logf("allowed per process: %v", allowed)
	if total != rpm {
		t.Errorf("%d of %d requests were allowed across the processes; the key's cap is %d a minute", total, n, rpm)
	}

	for i := range c.procs {
		method, path, body := request(i + len(c.procs)) // a chat completion
		checkLimited(fmt.Sprintf("gw%d after the burst", i+1), path, c.call(i, method, path, key.Plain, body))
		if a := c.call(i, method, path, other.Plain, body); a.status != http.StatusOK {
			t.Errorf("gw%d, the account's uncapped key: %s", i+1, a)
		}
	}
}

// TestKilledProcessHoldIsReapedAndOthersKeepServing kills one of three processes with SIGKILL
// while it relays a stream, with steady traffic of the same account on the other two. The
// killed process's credit hold stays until its lease expires and is then reaped by the
// others; the other processes answer 200 to every request throughout; and afterwards the
// books are consistent: the balance is the sum of the ledger and not below zero, held credit
// is the sum of the live holds, and every 200 has exactly one usage record and ledger entry,
// the killed stream too (which delivered its first words and then went silent): a reaper
// billed it from the checkpoint of what it had delivered.
//
// The lease is the meter's default of 40 s (4/3 of the 30 s outage cover), renewed every 6.7 s,
// and the reapers run every 10 s; `tollgate serve` has no setting for them (billing.Options.Lease and ReapInterval are
// not reachable from the configuration or gateway.Options). To keep the test short, once the
// test has checked that the dead process's hold expires within a lease of the kill, it ends
// the lease in the database (expires_at = now(), what 40 s would do) and waits for a surviving
// process's reaper. With -replicas.real-lease it waits for the lease to expire on its own.
func TestKilledProcessHoldIsReapedAndOthersKeepServing(t *testing.T) {
	c := startCluster(t, 3)
	const credit = 10_000_000
	acct, key := c.newAccount("crash", credit, 0)
	victim := c.procs[0]
	ctx := context.Background()

	// Every process serves the account once; the victim's answer is written before the kill.
	var served []string
	for i := range c.procs {
		path, body := inference(i, "warm")
		a := c.call(i, "POST", path, key.Plain, body)
		if a.status != http.StatusOK {
			t.Fatalf("warm-up: %s", a)
		}
		served = append(served, a.requestID)
	}
	c.waitForUsage(acct, served)

	// Steady traffic on the survivors, until the end of the test.
	stopTraffic := make(chan struct{})
	trafficDone := make(chan struct{})
	var trafficMu sync.Mutex
	var trafficServed []string
	var trafficFailed int
	go func() {
		defer close(trafficDone)
		for i := 0; ; i++ {
			select {
			case <-stopTraffic:
				return
			default:
			}
			path, body := inference(i, "steady")
			a := c.call(1+i%2, "POST", path, key.Plain, body)
			trafficMu.Lock()
			if a.status == http.StatusOK && a.err == nil {
				trafficServed = append(trafficServed, a.requestID)
			} else {
				trafficFailed++
				t.Errorf("a survivor failed a request: %s", a)
			}
			trafficMu.Unlock()
		}
	}()
	defer func() {
		select {
		case <-stopTraffic:
		default:
			close(stopTraffic)
		}
		<-trafficDone
	}()

	// A stream on the victim that stalls after its first words.
	streaming := make(chan string, 1)
	streamEnd := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("POST", victim.url+"/v1/messages", strings.NewReader(
			`{"model":"service-sonnet","max_tokens":400,"stream":true,"messages":[{"role":"user","content":"crash [[sim words=400 fault=stall ms=60000 after=3]]"}]}`))
		req.Header.Set("Authorization", "Bearer "+key.Plain)
		// The client's own transport: the stream's connection dies with the process.
		res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
		if err != nil {
			streaming <- ""
			streamEnd <- err
			return
		}
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sent := false
		for sc.Scan() {
			if !sent && strings.Contains(sc.Text(), "content_block_delta") {
				streaming <- res.Header.Get("x-request-id")
				sent = true
			}
			if strings.Contains(sc.Text(), "message_stop") {
				streamEnd <- fmt.Errorf("the stream ended normally")
				return
			}
		}
		if !sent {
			streaming <- ""
		}
		streamEnd <- sc.Err()
	}()
	streamID := <-streaming
	if streamID == "" {
		t.Fatalf("the victim's stream did not start: %v", <-streamEnd)
	}
	var hold struct {
		holder    string
		amount    int64
		expiresIn time.Duration
	}
	victimHold := func() (found bool) {
		err := c.pool.QueryRow(ctx, `SELECT holder, amount_micros, expires_at - now() FROM credit_holds
			WHERE account_id = $1 AND starts_with(holder, $2)`, acct, victim.holder()).Scan(&hold.holder, &hold.amount, &hold.expiresIn)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return err == nil
	}
	if !victimHold() {
		t.Fatalf("the victim (pid %d) holds no credit of the account while it streams", victim.cmd.Process.Pid)
	}
	// The stream delivered its first words and went silent: the victim checkpoints what it
	// delivered (every 2 s), and a reaper bills that once the victim is gone.
	var checkpointed int64
	waitCheckpoint := time.Now().Add(10 * time.Second)
	for {
		err := c.pool.QueryRow(ctx, `SELECT (record->>'OutputTokens')::bigint FROM stream_checkpoints
			WHERE account_id = $1 AND request_id = $2`, acct, streamID).Scan(&checkpointed)
		if err == nil {
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if time.Now().After(waitCheckpoint) {
			t.Fatal("the stalled stream's progress was not checkpointed within 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !victimHold() {
		t.Fatal("the victim's hold went while it streamed")
	}

	atKill := hold.amount

	victim.kill()
	killed := time.Now()
	if err := <-streamEnd; err == nil {
		t.Errorf("the stream through the killed process ended without an error")
	} else {
		t.Logf("the stream through the killed process ended with: %v", err)
	}
	// What the dead process sent last may still be running in PostgreSQL (a grant of credit
	// waiting for the account's row lock, say), and may still grow its hold and renew its lease
	// (from the statement's start, before the kill). The hold is read once that is over.
	c.waitForBackendsGone(victim.name)
	if !victimHold() {
		t.Fatal("the killed process's hold was gone before its lease expired")
	}
	if hold.amount != atKill {
		t.Logf("a grant of %d micro-units sent before the kill landed after it", hold.amount-atKill)
	}
	t.Logf("the killed process holds %d micro-units; its lease expires in %v", hold.amount, hold.expiresIn.Round(time.Millisecond))
	const lease = 40 * time.Second // billing.Options.Lease's default (4/3 of the default outage cover)
	if hold.expiresIn > lease {
		t.Errorf("the killed process's lease runs for %v more, beyond a lease of %v", hold.expiresIn, lease)
	}
	wait := 20 * time.Second // a reap interval (10 s) and a margin
	if *realLease {
		wait += hold.expiresIn
	} else if _, err := c.pool.Exec(ctx, `UPDATE credit_holds SET expires_at = now() WHERE holder = $1`, hold.holder); err != nil {
		t.Fatal(err)
	}
	for victimHold() {
		if time.Since(killed) > wait {
			t.Fatalf("the killed process's hold was not reaped within %v of the kill", wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the killed process's hold was reaped %v after the kill", time.Since(killed).Round(time.Millisecond))

	// The survivors keep serving after the reap too.
	time.Sleep(500 * time.Millisecond)
	close(stopTraffic)
	<-trafficDone
	trafficMu.Lock()
	served = append(served, trafficServed...)
	t.Logf("the survivors served %d requests during and after the kill, and failed %d", len(trafficServed), trafficFailed)
	trafficMu.Unlock()
	if len(trafficServed) == 0 {
		t.Error("no traffic reached the survivors")
	}

	// The killed stream was settled by nobody: the reaper billed it from its checkpoint, once.
	c.checkUsageExactlyOnce(acct, append(served, streamID))
	b := c.checkBooks(acct)
	t.Logf("books: balance %d (spent %d in %d usage records), held %d by the survivors", b.balance, b.usageCost, b.usageRecords, b.held)
	var status string
	var output int64
	if err := c.pool.QueryRow(ctx, `SELECT status, output_tokens FROM usage_records WHERE account_id = $1 AND request_id = $2`,
		acct, streamID).Scan(&status, &output); err != nil {
		t.Fatalf("the killed stream %s: %v", streamID, err)
	}
	if status != "process_lost" || output != checkpointed || output == 0 {
		t.Errorf("the killed stream's record: status %q, %d output tokens; want process_lost and the %d of its checkpoint", status, output, checkpointed)
	}
}

// insufficientCredit reports whether msg is the 402 of a request its account's credit does not
// cover: the meter's message, led, for a request that gave an output bound, by what the credit
// affords, or, for one whose input alone is more than the credit, by what the input holds and
// what is free (docs/billing.md, "A request without an output bound is fitted to the credit").
func insufficientCredit(msg string) bool {
	if strings.HasPrefix(msg, "The request's input") {
		_, meter, ok := strings.Cut(msg, " free. ")
		return ok && strings.HasPrefix(meter, "Insufficient credit:")
	}
	if strings.HasPrefix(msg, "You requested up to ") {
		_, meter, ok := strings.Cut(msg, ", but can only afford ")
		return ok && strings.Contains(meter, ". Insufficient credit:")
	}
	return strings.HasPrefix(msg, "insufficient credit:")
}
