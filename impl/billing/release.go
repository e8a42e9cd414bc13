package billing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
)

// DefaultReleaseWait is how long a reservation that the account's credit would cover, were it
// not for other processes' holds, waits for them to release their idle holds before it is
// refused (Options.ReleaseWait).
const DefaultReleaseWait = 500 * time.Millisecond

// maxReleaseAsks bounds how many times one reservation asks the other processes to release
// credit before it is refused: what one released can be drawn by a third process before the
// asker draws again, so it asks once more while the others still hold what would cover it, as
// long as its last ask got something back (an ask nobody answered is not repeated).
const maxReleaseAsks = 3

// releaseRetryEvery is how often a process asked to release an account's hold looks again
// whether the hold has become idle (its settled records written, the database call in flight
// answered), until the requester's wait is over.
const releaseRetryEvery = 10 * time.Millisecond

// The messages on store.ChannelCreditRelease: "want <account> <holder>" asks every other
// process to release its idle hold of the account; "released <account> <amount> <holder>"
// says that holder returned amount micro-units of its hold of the account. The holder comes
// last: it is the only field that may contain spaces.
const (
	releaseWantVerb = "want"
	releaseDoneVerb = "released"
)

// releaseAsks are this process's requests, in flight, for the other processes to release
// their holds of an account: at most one per account, shared by the reservations that wait
// for it.
type releaseAsks struct {
	mu     sync.Mutex
	byAcct map[uuid.UUID]*releaseAsk
}

// releaseAsk is one request in flight: released adds up what the other processes answered
// that they returned, and changed is closed (and replaced) at each answer. Both are guarded by
// releaseAsks.mu.
type releaseAsk struct {
	released int64
	changed  chan struct{}
	waiters  int
}

// askRelease asks the other processes to release their idle holds of the account (one
// notification per account at a time, however many reservations wait for it, unless again
// says the reservation asked before) and waits until
// they answered that they returned at least shortfall micro-units, or ReleaseWait has passed,
// or ctx ends. It returns what they answered that they returned (since the ask was made). The caller then tries the database once more: it does not need to know how
// many processes there are, nor which of them answered.
func (m *Meter) askRelease(ctx context.Context, accountID uuid.UUID, shortfall int64, again bool) (released int64) {
	wait := m.opts.ReleaseWait
	m.asks.mu.Lock()
	if m.asks.byAcct == nil {
		m.asks.byAcct = make(map[uuid.UUID]*releaseAsk)
	}
	ask := m.asks.byAcct[accountID]
	// A reservation asking again (what was given back on its first ask was drawn by another
	// before it) makes an ask of its own: the one in flight may have been answered already,
	// for others' shortfalls.
	first := ask == nil || again
	if first {
		ask = &releaseAsk{changed: make(chan struct{})}
		m.asks.byAcct[accountID] = ask
	}
	ask.waiters++
	m.asks.mu.Unlock()
	defer func() {
		m.asks.mu.Lock()
		released = ask.released
		ask.waiters--
		if ask.waiters == 0 && m.asks.byAcct[accountID] == ask {
			delete(m.asks.byAcct, accountID)
		}
		m.asks.mu.Unlock()
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	if first {
		nctx, cancel := context.WithTimeout(ctx, min(m.opts.WriteTimeout, wait))
		err := m.st.NotifyCreditRelease(nctx, fmt.Sprintf("%s %s %s", releaseWantVerb, accountID, m.opts.Holder))
		cancel()
		if err != nil {
			// Nobody was asked: the reservation is refused as it would have been.
			m.opts.Logger.Debug("billing: ask the other processes to release their holds", "account", accountID, "err", err)
			return
		}
		m.releaseAsks.Add(1)
	}
	for {
		m.asks.mu.Lock()
		got, changed := ask.released, ask.changed
		m.asks.mu.Unlock()
		if got >= shortfall {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// noteReleased adds amount, which another process says it returned of its hold of the account,
// to this process's request in flight for that account, if any, and wakes its waiters.
func (m *Meter) noteReleased(accountID uuid.UUID, amount int64) {
	m.asks.mu.Lock()
	defer m.asks.mu.Unlock()
	ask := m.asks.byAcct[accountID]
	if ask == nil {
		return
	}
	ask.released = saturatingAdd(ask.released, max(amount, 0))
	close(ask.changed)
	ask.changed = make(chan struct{})
}

// listenForReleases receives the other processes' requests to release holds, and their
// answers to this process's requests, until ctx ends; then it waits for the releases it
// started.
func (m *Meter) listenForReleases(ctx context.Context) {
	m.st.ListenCreditRelease(ctx, store.Subscription{
		Connected:    func() { m.releaseListening.Store(true) },
		Disconnected: func(error) { m.releaseListening.Store(false) },
		Notify: func(channel, payload string) {
			if channel == store.ChannelCreditRelease {
				m.onReleaseMessage(ctx, payload)
			}
		},
	})
	m.releaseListening.Store(false)
	m.releasers.Wait()
}

// onReleaseMessage handles one message of store.ChannelCreditRelease; it runs on the listening
// goroutine, so it never waits for the database itself.
func (m *Meter) onReleaseMessage(ctx context.Context, payload string) {
	verb, rest, _ := strings.Cut(payload, " ")
	idText, rest, _ := strings.Cut(rest, " ")
	id, err := uuid.Parse(idText)
	if err != nil {
		return
	}
	switch verb {
	case releaseWantVerb:
		if rest == m.opts.Holder {
			return
		}
		a := m.account(id, false)
		if a == nil {
			return
		}
		a.mu.Lock()
		start := a.hasHold && !a.releaseWanted && !a.evicted
		if start {
			a.releaseWanted = true
			m.releasers.Add(1)
		} else if a.releaseWanted {
			// A release already runs for an earlier ask: it answers this one too, for
			// ReleaseWait from now.
			a.releaseAskedAgain = true
		}
		a.mu.Unlock()
		if start {
			go m.releaseWanted(ctx, a)
		}
	case releaseDoneVerb:
		amountText, holder, _ := strings.Cut(rest, " ")
		amount, err := strconv.ParseInt(amountText, 10, 64)
		if err != nil || holder == m.opts.Holder {
			return
		}
		m.noteReleased(id, amount)
	}
}

// releaseWanted gives back this process's hold of the account, which another process asked
// for. When nothing of the account is in flight or waits to be written it returns the whole
// hold, by the path of the idle release. While a reservation of the account is open it gives
// back at once the hold's free part, what no open reservation and no settled cost waiting to
// be written uses (shrinkHold), and keeps what they use. Either way it then says so to the other
// processes. It looks again every releaseRetryEvery for ReleaseWait (having the writer write the
// account's settled records at once), so that a hold that becomes idle in that time goes whole.
func (m *Meter) releaseWanted(ctx context.Context, a *account) {
	defer m.releasers.Done()
	defer func() {
		a.mu.Lock()
		a.releaseWanted = false
		a.mu.Unlock()
	}()
	// said is whether this ask was answered with a release yet: an ask counts once in
	// releasedOnAsk, whether the hold went in one part or in two.
	said := false
	say := func(amount int64) {
		if !said {
			said = true
			m.releasedOnAsk.Add(1)
		}
		nctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
		err := m.st.NotifyCreditRelease(nctx, fmt.Sprintf("%s %s %d %s", releaseDoneVerb, a.id, amount, m.opts.Holder))
		cancel()
		if err != nil {
			m.opts.Logger.Debug("billing: say a hold was released", "account", a.id, "err", err)
		}
	}
	deadline := time.Now().Add(m.opts.ReleaseWait)
	for {
		a.mu.Lock()
		if a.releaseAskedAgain {
			a.releaseAskedAgain = false
			deadline = time.Now().Add(m.opts.ReleaseWait)
		}
		switch {
		case !a.hasHold || a.evicted || a.releasing || m.closed.Load() || m.dbDown():
			a.mu.Unlock()
			return
		case a.idle():
			a.busy = make(chan struct{})
			a.releasing = true
			a.mu.Unlock()
			cctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
			released := m.releaseHolds(cctx, []*account{a})
			cancel()
			if amount := released[a.id]; amount > 0 {
				say(amount)
			}
			return
		case a.busy == nil && (a.open > 0 || a.creditOpen > 0) && a.free() > 0:
			// Requests of the account are in flight: their part of the hold stays, the rest
			// goes now, and again whenever some of it becomes free (a request settled for less
			// than it reserved, say) while the ask lasts.
			amount := a.free()
			a.outstanding += amount
			a.busy = make(chan struct{})
			a.mu.Unlock()
			if m.shrinkHold(ctx, a, amount) {
				say(amount)
			} else if time.Now().After(deadline) {
				return
			}
			continue
		}
		// A reservation of the account is open (it may be about to settle: a stream whose
		// client has read its end), a database call is in flight for it, or its settled
		// records wait to be written: have them written now, and look again. The part of the
		// hold that a reservation or a settled cost uses is never given back.
		a.mu.Unlock()
		select {
		case m.kick <- struct{}{}:
		default:
		}
		if time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(releaseRetryEvery):
		}
	}
}

// shrinkHold gives back amount of the account's hold, which the caller took out of the hold's
// free part (as outstanding, so no reservation can use it) and marked with a database call in
// flight (a.busy); it undoes both when the call returns and reports whether the hold gave it
// back. The answer's version is applied as any other: an older answer never overwrites a newer
// one. When the call fails the hold may or may not have shrunk, so this process counts it as
// shrunk (which is safe: it believes it holds less than it may) until the next answer of the
// database says what it holds, and the next reservation asks the database.
func (m *Meter) shrinkHold(ctx context.Context, a *account, amount int64) bool {
	cctx, cancel := context.WithTimeout(ctx, m.opts.WriteTimeout)
	h, shrunk, err := m.st.ShrinkCreditHold(cctx, m.opts.Holder, a.id, amount)
	cancel()
	if err != nil && !errors.Is(ctx.Err(), context.Canceled) && !m.noteDBError(err) {
		m.opts.Logger.Error("billing: give back the free part of a hold", "account", a.id, "err", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.outstanding -= amount
	switch {
	case err != nil:
		a.dbAmount -= amount
		a.leaseUntil = time.Time{}
	case shrunk:
		a.observe(true, h.AmountMicros, h.Version)
	}
	close(a.busy)
	a.busy = nil
	return err == nil && shrunk
}
