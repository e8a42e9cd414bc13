package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/api"
)

// testBudget is a budget of limit bytes with short waits whose give-backs are counted.
func testBudget(limit int64, gaveBack *atomic.Int64) *bodyBudget {
	b := newBodyBudget(limit)
	b.wait, b.quiet, b.every = 50*time.Millisecond, 20*time.Millisecond, 300*time.Millisecond
	b.giveBack = func() { gaveBack.Add(1) }
	return b
}

// waitFor polls cond for up to two seconds.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestBodyBudgetTakesWaitsAndRefuses: bytes are taken while they fit; beyond, a taker waits
// for a release (and gets its bytes), or is refused at the end of the wait or of its context.
// Each lease is another account's (an account's share is the next test's subject).
func TestBodyBudgetTakesWaitsAndRefuses(t *testing.T) {
	var gaveBack atomic.Int64
	b := testBudget(64<<20, &gaveBack)
	ctx := context.Background()
	lease := func(ctx context.Context) *bodyLease { return &bodyLease{budget: b, ctx: ctx, account: uuid.New()} }
	first, beside := lease(ctx), lease(ctx)
	if !first.admit(30<<20) || !beside.admit(30<<20) || b.inUse() != 60<<20 {
		t.Fatalf("twice 30 MiB of an empty 64 MiB budget: not taken (in use %d)", b.inUse())
	}
	second := lease(ctx)
	start := time.Now()
	if second.admit(30 << 20) {
		t.Fatal("30 MiB with 4 MiB free: taken")
	}
	if waited := time.Since(start); waited < b.wait {
		t.Errorf("refused after %s, before the %s wait", waited, b.wait)
	}
	if second.admit(65 << 20) {
		t.Error("more than the whole budget: taken")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if lease(cancelled).admit(30 << 20) {
		t.Error("taken for a request whose context has ended")
	}
	// A release wakes a waiting taker.
	b.wait = 5 * time.Second
	released := make(chan struct{})
	go func() { defer close(released); time.Sleep(20 * time.Millisecond); first.release() }()
	if !second.admit(30 << 20) {
		t.Fatal("30 MiB: still refused after 30 MiB were released")
	}
	<-released
	first.release() // a second release gives nothing back
	if b.inUse() != 60<<20 {
		t.Errorf("in use %d, want the 60 MiB still held", b.inUse())
	}
	second.release()
	beside.release()
	if b.inUse() != 0 {
		t.Errorf("in use %d after every lease was released", b.inUse())
	}
}

// TestBodyBudgetSharesPerAccount: one account holds at most half the budget (here 32 MiB of
// 64, the largest body): its second 30 MiB body waits and is refused while another account's
// is taken; once the first is released the account's next one is taken. A budget no larger
// than the largest body lets one account hold all of it.
func TestBodyBudgetSharesPerAccount(t *testing.T) {
	var gaveBack atomic.Int64
	b := testBudget(64<<20, &gaveBack)
	ctx := context.Background()
	greedy, other := uuid.New(), uuid.New()
	first := &bodyLease{budget: b, ctx: ctx, account: greedy}
	if !first.admit(30 << 20) {
		t.Fatal("an account's first 30 MiB: refused")
	}
	second := &bodyLease{budget: b, ctx: ctx, account: greedy}
	if second.admit(30 << 20) {
		t.Fatal("an account's second 30 MiB, beyond its half of the budget: taken")
	}
	neighbour := &bodyLease{budget: b, ctx: ctx, account: other}
	if !neighbour.admit(30 << 20) {
		t.Fatal("another account's 30 MiB beside the first one's: refused")
	}
	first.release()
	if !second.admit(30 << 20) {
		t.Fatal("the account's next 30 MiB once its first was released: refused")
	}
	second.release()
	neighbour.release()
	if b.inUse() != 0 || len(b.byAccount) != 0 {
		t.Errorf("in use %d, %d accounts, after every lease was released", b.inUse(), len(b.byAccount))
	}
	small := testBudget(32<<20, &gaveBack)
	if l := (&bodyLease{budget: small, ctx: ctx, account: greedy}); !l.admit(32 << 20) {
		t.Error("the whole of a 32 MiB budget for one account's largest body: refused")
	}
}

// TestBodyBudgetGivesMemoryBackAfterABurst: when the budget is idle after holding at least
// giveBackFloor, memory is given back once, after the quiet time; a small burst gives nothing
// back, a burst still running delays it, and two bursts close together give back at most once
// per interval.
func TestBodyBudgetGivesMemoryBackAfterABurst(t *testing.T) {
	var gaveBack atomic.Int64
	b := testBudget(256<<20, &gaveBack)
	hold := func(n int64) *bodyLease {
		l := &bodyLease{budget: b, ctx: context.Background()}
		if !l.admit(n) {
			t.Fatalf("%d bytes not admitted", n)
		}
		return l
	}
	small := hold(2 << 20)
	small.release()
	time.Sleep(3 * b.quiet)
	if gaveBack.Load() != 0 {
		t.Fatal("memory given back after a burst of 2 MiB")
	}
	a, c := hold(30<<20), hold(30<<20)
	a.release()
	time.Sleep(3 * b.quiet)
	if gaveBack.Load() != 0 {
		t.Fatal("memory given back while a large body was still held")
	}
	c.release()
	if !waitFor(func() bool { return gaveBack.Load() == 1 }) {
		t.Fatalf("given back %d times after the burst, want once", gaveBack.Load())
	}
	// Another burst at once: its give-back waits for the interval.
	hold(40 << 20).release()
	time.Sleep(3 * b.quiet)
	if gaveBack.Load() != 1 {
		t.Fatalf("given back again %s after the last time, within the %s interval", 3*b.quiet, b.every)
	}
	if !waitFor(func() bool { return gaveBack.Load() == 2 }) {
		t.Fatalf("given back %d times, want the second burst's after the interval", gaveBack.Load())
	}
}

// TestChunkedBodyIsAdmittedAsItArrives: a body without a Content-Length takes the budget as
// its bytes arrive beyond largeBodyBytes (never much more than twice what arrived), and one
// larger than the budget is refused once the budget is spent.
func TestChunkedBodyIsAdmittedAsItArrives(t *testing.T) {
	var gaveBack atomic.Int64
	v := &validator{budget: testBudget(8<<20, &gaveBack)}
	read := func(n int) ([]byte, *bodyLease, error) {
		r, _ := http.NewRequest("POST", "/", struct{ io.Reader }{bytes.NewReader(bytes.Repeat([]byte("x"), n))})
		r.ContentLength = -1
		return v.readBody(r)
	}
	body, lease, err := read(8 << 10)
	if err != nil || len(body) != 8<<10 || lease != nil || v.budget.inUse() != 0 {
		t.Fatalf("a small chunked body: %d bytes, lease %v, %v; in use %d", len(body), lease, err, v.budget.inUse())
	}
	body, lease, err = read(3 << 20)
	if err != nil || len(body) != 3<<20 {
		t.Fatalf("3 MiB chunked: %d bytes, %v", len(body), err)
	}
	if held := v.budget.inUse(); held < 3<<20 || held > 6<<20 || lease.held != held {
		t.Errorf("3 MiB chunked: %d bytes held, lease %d", held, lease.held)
	}
	lease.release()
	_, lease, err = read(9 << 20)
	if !errors.As(err, new(budgetSpent)) {
		t.Errorf("9 MiB chunked with an 8 MiB budget: %v, want the budget spent", err)
	}
	lease.release()
	if v.budget.inUse() != 0 {
		t.Errorf("in use %d after the leases were released", v.budget.inUse())
	}
}

// TestSmallBodiesSkipTheBudget: a body of up to largeBodyBytes never touches the budget, and
// validating one costs the same allocations with a budget as without.
func TestSmallBodiesSkipTheBudget(t *testing.T) {
	doc, err := api.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	plain, err := newValidator(doc)
	if err != nil {
		t.Fatal(err)
	}
	var gaveBack atomic.Int64
	budgeted := &validator{operations: plain.operations, budget: testBudget(64<<20, &gaveBack)}
	body := `{"model":"service-flint-base","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}`
	// The least of a few measures: under the race detector sync.Pool drops some of what is
	// put back, so one measure may count an allocation the code does not make.
	allocs := func(v *validator) float64 {
		least := math.Inf(1)
		for range 5 {
			least = min(least, testing.AllocsPerRun(200, func() {
				r, _ := http.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				r.Pattern = "POST /v1/chat/completions"
				if lease, err := v.validate(r); err != nil || lease != nil {
					t.Fatalf("%v, lease %v", err, lease)
				}
			}))
		}
		return least
	}
	// Under the race detector sync.Pool drops puts at random, so counts there differ by one in
	// either direction between measures of the same code (14 against 13 in CI); the counts are
	// compared without it, and the budget's untouched state is asserted either way.
	without, with := allocs(plain), allocs(budgeted)
	if !raceEnabled && with != without {
		t.Errorf("a small body costs %v allocations with a budget, %v without", with, without)
	}
	if budgeted.budget.inUse() != 0 || budgeted.budget.peak != 0 {
		t.Errorf("a small body touched the budget (in use %d, peak %d)", budgeted.budget.inUse(), budgeted.budget.peak)
	}
}

// TestAnnouncedLargeBodyIsReadInPlace: a large body with a Content-Length is admitted for it
// once its first MiB has arrived, and read into one buffer of its size (no growth, no copies
// but of that first MiB), which the lease holds until it is released; one the budget cannot
// hold is refused.
func TestAnnouncedLargeBodyIsReadInPlace(t *testing.T) {
	var gaveBack atomic.Int64
	v := &validator{budget: testBudget(32<<20, &gaveBack)}
	const n = 20 << 20
	r, _ := http.NewRequest("POST", "/", io.NopCloser(bytes.NewReader(bytes.Repeat([]byte("x"), n))))
	r.ContentLength = n
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	body, lease, err := v.readBody(r)
	runtime.ReadMemStats(&after)
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > n+n/8 {
		t.Errorf("reading a 20 MiB body allocated %d bytes; its buffer growing as bytes arrived allocated about twice its size", allocated)
	}
	if err != nil || len(body) != n || lease == nil || v.budget.inUse() != n {
		t.Fatalf("20 MiB announced: %d bytes, %v; in use %d", len(body), err, v.budget.inUse())
	}
	if cap(body) != n+1 {
		t.Errorf("read into %d bytes of room, want exactly the %d announced and one for the probe", cap(body), n+1)
	}
	r2, _ := http.NewRequest("POST", "/", io.NopCloser(bytes.NewReader(bytes.Repeat([]byte("x"), n))))
	r2.ContentLength = n
	if _, l2, err := v.readBody(r2); !errors.As(err, new(budgetSpent)) || l2 != nil {
		t.Errorf("a second 20 MiB body in a 32 MiB budget: %v, want the budget spent", err)
	}
	lease.release()
	if v.budget.inUse() != 0 {
		t.Errorf("in use %d after release", v.budget.inUse())
	}
}

// TestMidSizedBodiesAreCounted: a body of 100 KB is admitted against the budget, for its whole
// length, and one of 10 KB is not (trial h5: every body under 1 MiB skipped the budget, and
// 3,000 uploads stalled just below it held 3 GB against a 1 GiB memory limit).
func TestMidSizedBodiesAreCounted(t *testing.T) {
	var gaveBack atomic.Int64
	v := &validator{budget: testBudget(32<<20, &gaveBack)}
	for _, c := range []struct {
		n       int
		counted bool
	}{{100_000, true}, {10_000, false}} {
		r, _ := http.NewRequest("POST", "/", io.NopCloser(bytes.NewReader(bytes.Repeat([]byte("x"), c.n))))
		r.ContentLength = int64(c.n)
		body, lease, err := v.readBody(r)
		if err != nil || len(body) != c.n {
			t.Fatalf("%d bytes: %d read, %v", c.n, len(body), err)
		}
		if got := v.budget.inUse(); (lease != nil) != c.counted || (c.counted && got != int64(c.n)) || (!c.counted && got != 0) {
			t.Errorf("%d bytes: lease %v, %d in use, want counted %v", c.n, lease != nil, got, c.counted)
		}
		if lease != nil {
			lease.release()
		}
	}
}
