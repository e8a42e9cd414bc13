package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/mcp"
	"github.com/tollgate/tollgate/impl/metrics"
)

// The thresholds and delays of the body budget.
const (
	// largeBodyBytes is the size from which a request body is admitted against the budget,
	// once that many of its bytes have arrived: for its whole Content-Length when it announces
	// one, else step by step as more arrive. Smaller bodies never touch the budget, nor do
	// uploads that stall before sending that much: what those hold is bounded by the
	// connections (server.max_connections), 16 KiB each. (It was 1 MiB: trial h5 held 3,000
	// uploads stalled just below it, 3 GB of heap against a 1 GiB limit, the budget untouched.)
	largeBodyBytes = 16 << 10
	// bodyBudgetWait is how long a large body waits for room in a spent budget before it is
	// answered 503 (the request's context ends the wait sooner).
	bodyBudgetWait = 2 * time.Second
	// bodyBudgetRetryAfter is the Retry-After of that 503.
	bodyBudgetRetryAfter = 2 * time.Second
	// giveBackFloor is the least a burst must have held of the budget for its end to give
	// memory back to the operating system: smaller ones leave little to give.
	giveBackFloor = 32 << 20
	// giveBackQuiet is how long the budget must have stayed unused after a burst before
	// memory is given back, so that a burst arriving in waves is not interrupted by it.
	giveBackQuiet = time.Second
	// giveBackEvery is the least time between two give-backs, each a full garbage collection.
	giveBackEvery = 10 * time.Second
)

// bodyBudget bounds the bytes of large request bodies held in memory at once. Once its first
// largeBodyBytes have arrived, a large body is admitted for its whole announced length (so an
// admitted body is always read to its end: bodies admitted piecemeal could each hold part of
// the budget and all wait for more), or, without a Content-Length, for the bytes that arrive, in
// growing steps. When the budget is spent it waits up to bodyBudgetWait for room and is then
// refused with a 503 and Retry-After. What a body holds is given back when its request is
// done: until then its bytes, the decoded text and the upstream's copy are alive (the
// transport keeps the upstream request until its answer has been read).
//
// Each byte of body admitted costs up to about three in the heap (the body, its decoded text,
// the upstream's request), so a budget of a quarter of the memory limit (the default) keeps the
// live heap within the limit. When the budget, after holding at least giveBackFloor, is idle
// again for giveBackQuiet, the memory the burst left behind is returned to the operating
// system (debug.FreeOSMemory, at most once every giveBackEvery): Go's own scavenger would keep
// most of it for minutes.
//
// One account holds at most half the budget (or the largest body, when that is more), so that
// uploads of one tenant that announce large bodies and then stall cannot leave every other
// tenant's large bodies waiting: they wait for room in their own account's half.
type bodyBudget struct {
	// accountShares (guarded by mu) bounds the bytes held: limit in all, accountLimit for one
	// account (unauthenticated bodies count as one account).
	accountShares
	// wait, quiet and every are bodyBudgetWait, giveBackQuiet and giveBackEvery (tests
	// shorten them).
	wait, quiet, every time.Duration
	// giveBack returns unused memory to the operating system (debug.FreeOSMemory).
	giveBack func()

	// refused counts the large bodies answered 503 because the budget stayed spent.
	refused atomic.Int64

	mu sync.Mutex
	// room is closed, and replaced, whenever bytes are released: the admissions waiting for
	// room try again.
	room chan struct{}
	// peak is the most held since memory was last given back; scheduled says a give-back is
	// due; lastGiveBack is when the last one ran.
	peak         int64
	scheduled    bool
	lastGiveBack time.Time
}

// newBodyBudget returns a budget of limit bytes; nil (no budget) when limit is not positive.
func newBodyBudget(limit int64) *bodyBudget {
	if limit <= 0 {
		return nil
	}
	return &bodyBudget{accountShares: newAccountShares(limit, min(limit, max(limit/2, maxBodyBytes))),
		wait: bodyBudgetWait, quiet: giveBackQuiet, every: giveBackEvery, giveBack: debug.FreeOSMemory}
}

// bodyLease is what one request body holds of the budget. Its methods are called by the
// request's own goroutine only.
type bodyLease struct {
	budget *bodyBudget
	ctx    context.Context
	// account is the caller's (from ctx), whose share the lease takes.
	account uuid.UUID
	held    int64
}

// newBodyLease returns an empty lease of the budget for the caller in ctx.
func newBodyLease(b *bodyBudget, ctx context.Context) bodyLease {
	l := bodyLease{budget: b, ctx: ctx}
	if p, ok := auth.FromContext(ctx); ok {
		l.account = p.AccountID
	}
	return l
}

// admit takes n more bytes of the budget for the lease, waiting up to the budget's wait for
// room; it reports whether they were taken.
func (l *bodyLease) admit(n int64) bool {
	if l.budget.take(l.ctx, l.account, n) {
		l.held += n
		return true
	}
	return false
}

// release gives back everything the lease holds; it may be called more than once, and on nil.
func (l *bodyLease) release() {
	if l == nil || l.held == 0 {
		return
	}
	l.budget.put(l.account, l.held)
	l.held = 0
}

// take takes n bytes for account, waiting for room (in the budget and in the account's share)
// until the budget's wait has passed or ctx has ended.
func (b *bodyBudget) take(ctx context.Context, account uuid.UUID, n int64) bool {
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		if b.accountShares.take(account, n) {
			b.peak = max(b.peak, b.used)
			b.mu.Unlock()
			return true
		}
		if n > b.accountLimit {
			b.mu.Unlock()
			return false
		}
		if b.room == nil {
			b.room = make(chan struct{})
		}
		room := b.room
		b.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(b.wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-room:
		case <-timeout:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// put releases n bytes of account's and wakes the admissions waiting for room. When the budget
// becomes idle after a burst, a give-back is scheduled.
func (b *bodyBudget) put(account uuid.UUID, n int64) {
	b.mu.Lock()
	b.accountShares.put(account, n)
	room := b.room
	b.room = nil
	if b.used == 0 && b.peak >= min(giveBackFloor, b.limit) && !b.scheduled {
		b.scheduled = true
		delay := max(b.quiet, time.Until(b.lastGiveBack.Add(b.every)))
		time.AfterFunc(delay, b.giveBackIfIdle)
	}
	b.mu.Unlock()
	if room != nil {
		close(room)
	}
}

// giveBackIfIdle returns the memory a burst left behind to the operating system, unless the
// budget is in use again (the next time it becomes idle schedules another try).
func (b *bodyBudget) giveBackIfIdle() {
	b.mu.Lock()
	b.scheduled = false
	if b.used != 0 {
		b.mu.Unlock()
		return
	}
	b.peak = 0
	b.lastGiveBack = time.Now()
	b.mu.Unlock()
	b.giveBack()
}

// stats is what the budget holds and has refused, for the metrics.
func (b *bodyBudget) stats() metrics.BodyBudgetStats {
	return metrics.BodyBudgetStats{LimitBytes: b.limit, InUseBytes: b.inUse(), Refused: b.refused.Load()}
}

// inUse returns the bytes held now.
func (b *bodyBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// refusal is the 503 of a large body refused because the budget stayed spent; it counts it.
func (b *bodyBudget) refusal() *apierror.Error {
	b.refused.Add(1)
	return &apierror.Error{Kind: apierror.KindUnavailable, Code: "server_busy", RetryAfter: bodyBudgetRetryAfter,
		Message: fmt.Sprintf("the gateway is reading as many large request bodies as it holds at once (%d MiB); retry in %d seconds",
			b.limit>>20, apierror.Seconds(bodyBudgetRetryAfter))}
}

// budgetSpent is the error of a body read whose lease could not grow: the budget stayed spent.
type budgetSpent struct{}

func (budgetSpent) Error() string { return "the body budget is spent" }

// bodyReader reads a request body of at most limit bytes (beyond that its error is an
// *http.MaxBytesError, as http.MaxBytesReader's is). With a budget (lease.budget set), the
// bytes beyond largeBodyBytes that the lease does not hold yet are admitted as they arrive, in
// steps that double what it holds; the lease is part of the reader, so that a small body costs
// no more than the one allocation http.MaxBytesReader made.
type bodyReader struct {
	r     io.Reader
	limit int64
	read  int64
	lease bodyLease
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.read > b.limit {
		return 0, &http.MaxBytesError{Limit: b.limit}
	}
	if room := b.limit + 1 - b.read; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.r.Read(p)
	if b.read+int64(n) > b.limit {
		// As http.MaxBytesReader: the bytes up to the limit, and the error.
		n, b.read = int(b.limit-b.read), b.limit+1
		return n, &http.MaxBytesError{Limit: b.limit}
	}
	b.read += int64(n)
	if l := &b.lease; l.budget != nil && b.read > max(l.held, largeBodyBytes) {
		for b.read > l.held {
			if !l.admit(min(max(l.held, largeBodyBytes), b.limit+1-l.held)) {
				return n, budgetSpent{}
			}
		}
	}
	return n, err
}

// budgetMCP reads the body of a POST to the MCP endpoint of more than largeBodyBytes against the
// body budget, as the inference routes read theirs (validator.read), and hands the handler the
// bytes read; the share it holds is given back once the handler has answered. A body the spent
// budget does not admit is answered 503 with Retry-After in the JSON-RPC envelope (CodeUnavailable),
// and one announcing more than the handler takes (mcp.DefaultMaxBodyBytes) 413, unread, in the
// handler's words; a read that fails otherwise reaches the handler, which answers it as its own.
// Before, the handler read up to 4 MiB a request outside the budget: 200 uploads stalled just
// short of it took the heap to 1.2 GB against a 1 GiB memory limit (trial h3), and the
// connection limit allowed 8,192 of them. A small body goes through untouched, without an
// allocation.
func (s *Server) budgetMCP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || s.validate.budget == nil || (r.ContentLength >= 0 && r.ContentLength <= largeBodyBytes) {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > mcp.DefaultMaxBodyBytes {
			w.Header().Set("Connection", "close")
			mcp.WriteError(w, http.StatusRequestEntityTooLarge, nil, -32600, fmt.Sprintf("request body exceeds %d bytes", mcp.DefaultMaxBodyBytes))
			return
		}
		body, lease, err := s.validate.read(r.Context(), http.MaxBytesReader(w, r.Body, mcp.DefaultMaxBodyBytes), r.ContentLength)
		defer lease.release()
		switch {
		case errors.As(err, new(budgetSpent)):
			writeError(w, r, s.validate.budget.refusal())
			return
		case err != nil:
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), failedRead{err}))
		default:
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

// failedRead is a reader that fails with err.
type failedRead struct{ err error }

func (f failedRead) Read([]byte) (int, error) { return 0, f.err }
