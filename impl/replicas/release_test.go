package replicas_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
)

// neededMicros reads, from a 402's message, the worst case the request needed.
var neededMicros = regexp.MustCompile(`needs up to (\d+) micro-units`)

// TestNoFalse402WhileTheBalanceCoversTheRequest spreads a low-balance account over three
// processes: requests (chat completions of about 600 micro-units, streamed and not) go to the
// processes in turn, one at a time, until one is refused, and then one more to each process.
// Each process draws its own hold of the account and keeps it, idle, while the others serve
// the next requests; before issue 21 the process whose hold ran out answered 402 while the
// others sat on the account's credit (until their idle release, 5 s later), although the
// balance covered the request. Now a process asks the others to release their idle holds
// before it refuses, so every refusal is a real one: once all usage is written and the holds
// returned, the balance left is less than what each refused request needed. The books balance.
func TestNoFalse402WhileTheBalanceCoversTheRequest(t *testing.T) {
	c := startCluster(t, 3)
	const credit = 8_000 // about 13 requests
	acct, key := c.newAccount("spread", credit, 0)

	body := func(i int) string {
		return fmt.Sprintf(`{"model":"service-flint-base","max_tokens":400,"stream":%t,`+
			`"messages":[{"role":"user","content":"spread %d [[sim words=400]]"}]}`, i%2 == 1, i)
	}
	var served []string
	var needed []int64 // of each refused request
	refusedAt := -1
	for i := 0; i < 60 && (refusedAt < 0 || i < refusedAt+len(c.procs)+1); i++ {
		proc := i % len(c.procs)
		a := c.call(proc, "POST", "/v1/chat/completions", key.Plain, body(i))
		switch {
		case a.err != nil:
			t.Fatalf("request %d: %s", i, a)
		case a.status == http.StatusOK:
			if refusedAt >= 0 {
				t.Errorf("request %d served after request %d was refused (nothing was granted in between): %s", i, refusedAt, a)
			}
			checkServed(t, "/v1/chat/completions", body(i), a)
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
	t.Logf("%d requests served, then %d refused (from request %d on); each refused request needed %v micro-units",
		len(served), len(needed), refusedAt, needed)

	c.checkUsageExactlyOnce(acct, served)
	b := c.checkBooks(acct)
	if b.grants != credit || b.usageRecords != int64(len(served)) {
		t.Errorf("granted %d (want %d), %d usage records for %d answers served", b.grants, credit, b.usageRecords, len(served))
	}
	for i, n := range needed {
		if b.balance >= n {
			t.Errorf("refusal %d: 402 for a request needing %d micro-units, while the balance (%d once every request was billed) covered it",
				i, n, b.balance)
		}
	}
	t.Logf("spent %d of %d micro-units; %d left, %d still held by the processes", b.usageCost, credit, b.balance, b.held)
}
