package billing

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/store"
)

// OutagePolicy is how a meter rides out a database outage (see the package documentation).
// The zero value is the default policy: holds sized for 30 s, refuse what they do not cover.
type OutagePolicy struct {
	// Cover is how long a database outage the hold of an active account is sized to ride out:
	// the meter keeps the hold's free credit (what its open reservations and unwritten costs
	// leave) at what the account settled in Cover at its recent rate, drawing it ahead of need
	// (default DefaultOutageCover, 30 s; negative: no such reserve).
	Cover time.Duration
	// FailureHandling decides what Reserve does with a request that the process's hold does not
	// cover while the database cannot be reached: FailureRefuse (the zero value) answers 503;
	// FailureContinue serves it on credit, up to RiskMicros per account; FailureShare serves it
	// on credit up to the process's share of the account's last-known available credit.
	FailureHandling FailureHandling
	// RiskMicros bounds, per account and process, the credit served on credit under
	// FailureContinue that the ledger has not taken yet (default DefaultRiskMicros, 1 USD).
	RiskMicros int64
	// Replicas reports how many gateway processes share the database, for FailureShare: each
	// process serves on credit at most 1/Replicas of an account's last-known available credit.
	// `tollgate serve` passes the count the Redis rate limiter learns from its heartbeats (or
	// TOLLGATE_REPLICAS); nil, or a result below 1, counts as 1. The meter divides by the
	// larger of it and the number of processes it last saw holding credit in the database
	// (Meter.shareDivisor), so that a count nobody configured does not let N processes each
	// serve an account's whole available credit.
	Replicas func() int
}

// replicas is the configured process count: Replicas(), at least 1.
func (p OutagePolicy) replicas() int64 {
	if p.Replicas == nil {
		return 1
	}
	return int64(max(p.Replicas(), 1))
}

// shareDivisor is the process count FailureShare divides by: the configured one, or the number
// of processes that held credit in the database at the last renewal of this process's holds
// when that is larger (a process serves on credit only accounts it held; the ones that died
// count until their leases end, which only makes the shares smaller).
func (m *Meter) shareDivisor() int64 {
	return max(m.opts.Outage.replicas(), m.liveHolders.Load())
}

// DefaultOutageCover is OutagePolicy.Cover's default: the holds of active accounts are sized
// to ride out a database outage of 30 s at the accounts' recent spend rates.
const DefaultOutageCover = 30 * time.Second

// DefaultRiskMicros is OutagePolicy.RiskMicros's default: 1 USD per account and process.
const DefaultRiskMicros = 1_000_000

// minLease is the shortest default lease, whatever the outage cover.
const minLease = 30 * time.Second

// spendWindow is the time constant of the moving average of an account's spending (the costs
// it settled): long enough that a pause of a few seconds hardly shrinks the outage reserve,
// short enough to follow a change of pace within a minute. minSpendSpan is the shortest
// history the average is taken over, so that the first settlements of an account do not make
// its rate look huge.
const (
	spendWindow  = 10 * time.Second
	minSpendSpan = 2 * time.Second
)

// ErrHoldSpent is the cause of Reserve's refusals while the database cannot be reached: the
// process's hold on the account does not cover the request (it is spent, was never drawn, or
// its lease ran out) and no credit can be drawn. The refusal is a 503 with Retry-After
// (apierror.Unavailable); under FailureContinue it comes only once the account's risk bound is
// reached.
var ErrHoldSpent = errors.New("billing: the credit hold does not cover the request and the database cannot be reached")

// FailureHandling is what a meter does with a request that its hold on the account does not
// cover while the database cannot be reached, as the Credit-Control-Failure-Handling of telecom
// online charging (RFC 4006) does when the credit-control server is gone.
type FailureHandling int

const (
	// FailureRefuse answers such a request 503 with Retry-After: no request is ever served
	// beyond the credit held for it (the default).
	FailureRefuse FailureHandling = iota
	// FailureContinue serves such a request on credit, up to OutagePolicy.RiskMicros per account:
	// its usage is billed from the account's free credit once the database takes it, and its
	// usage record and ledger entry say that it was served on credit.
	FailureContinue
	// FailureShare serves such a request on credit while the credit served so on the account
	// (not yet written) stays within this process's share of what the account had available
	// (balance - held, by every process) at the last grant this process drew: that amount
	// divided by OutagePolicy.Replicas. The processes cut off together thus serve at most what
	// the account had available, besides their holds, however long the outage lasts; it is
	// billed, as under FailureContinue, when the database takes it. An account this process has
	// never drawn credit for is refused as under FailureRefuse.
	FailureShare
)

// String is the handling's name in the configuration: "refuse", "continue" or "share".
func (f FailureHandling) String() string {
	switch f {
	case FailureRefuse:
		return "refuse"
	case FailureContinue:
		return "continue"
	case FailureShare:
		return "share"
	}
	return fmt.Sprintf("FailureHandling(%d)", int(f))
}

// ParseFailureHandling reads "refuse", "continue" or "share".
func ParseFailureHandling(s string) (FailureHandling, error) {
	switch s {
	case "refuse":
		return FailureRefuse, nil
	case "continue":
		return FailureContinue, nil
	case "share":
		return FailureShare, nil
	}
	return 0, fmt.Errorf("billing: credit failure handling %q: want refuse, continue or share", s)
}

// noteSpend adds a settled cost at now to the moving average of the account's spending.
func (a *account) noteSpend(now time.Time, cost int64) {
	a.decaySpent(now)
	if a.spendSince.IsZero() {
		a.spendSince = now
	}
	a.recentSpent += float64(cost)
}

// spendRate is the account's recent rate of settled costs, in micro-units per second: the
// moving sum divided by what a steady rate of one micro-unit per second would have added up to
// over the account's history (at least minSpendSpan), so that the rate is right from the first
// seconds of an account's traffic and not only after a few windows.
func (a *account) spendRate(now time.Time) float64 {
	a.decaySpent(now)
	if a.spendSince.IsZero() {
		return 0
	}
	span := max(now.Sub(a.spendSince), minSpendSpan).Seconds()
	return a.recentSpent / (spendWindow.Seconds() * -math.Expm1(-span/spendWindow.Seconds()))
}

func (a *account) decaySpent(now time.Time) {
	if age := now.Sub(a.spentAt); age > 0 {
		a.recentSpent *= math.Exp(-age.Seconds() / spendWindow.Seconds())
		a.spentAt = now
	} else if a.spentAt.IsZero() {
		a.spentAt = now
	}
}

// outageReserve is the free credit the account's hold should keep, with a.mu held: what the
// account settles in Outage.Cover at its recent rate.
func (m *Meter) outageReserve(a *account, now time.Time) int64 {
	if m.opts.Outage.Cover <= 0 {
		return 0
	}
	return microsOver(a.spendRate(now), m.opts.Outage.Cover)
}

// reserveTopUp is how much credit to draw ahead of need for the outage reserve, with a.mu held,
// given the hold's free credit, the low water mark and the chunk of the account: nothing while
// the free credit is at least the low water mark plus the reserve (the reserve sits on top of
// the credit that keeps requests from waiting for the database, so that it is whole whenever
// the database goes away), else a chunk, or the shortfall when it is larger, up to
// ChunkCapMicros a grant (a reserve above that is drawn in several grants, one at a time),
// and never more than leaves the hold at half of what the account has left (the hold and the
// account's available credit at the last grant), so that the reserve never strands the last
// credit of an account in one process.
func (m *Meter) reserveTopUp(a *account, now time.Time, free, low, chunk int64) int64 {
	reserve := m.outageReserve(a, now)
	if reserve <= 0 || free >= saturatingAdd(low, reserve) {
		return 0
	}
	want := max(chunk, min(saturatingAdd(low, reserve)-free, m.opts.ChunkCapMicros))
	if a.knowsLeft {
		want = min(want, (a.accountLeft-a.dbAmount)/2)
	}
	return max(want, 0)
}

// The database's state as the meter sees it: down from a call that failed because the
// database could not be reached (store.Unavailable) until one succeeds. While it is down, one
// reservation at a time that the hold does not cover asks the database for credit (the others
// go straight to the failure handling), no grant is drawn ahead of need, and the maintenance
// only asks the database whether it is back (once a tick): then it renews the holds at once
// and waits a reap interval before it reaps others' holds.

// dbDown reports whether the database is known to be unreachable.
func (m *Meter) dbDown() bool { return m.downSince.Load() != 0 }

// noteDBError marks the database down when err says it cannot be reached, and reports whether
// it did.
func (m *Meter) noteDBError(err error) bool {
	if !store.Unavailable(err) {
		return false
	}
	if m.downSince.CompareAndSwap(0, m.now().UnixNano()) {
		if m.opts.Outage.FailureHandling == FailureContinue {
			m.opts.Logger.Warn("billing: the database cannot be reached; requests are served from the credit holds, and beyond them on credit up to the risk bound of each account",
				"failure_handling", m.opts.Outage.FailureHandling.String(), "risk_micros", m.opts.Outage.RiskMicros, "err", err)
		} else {
			m.opts.Logger.Warn("billing: the database cannot be reached; requests are served from the credit holds, and those the holds do not cover are refused (503)",
				"failure_handling", m.opts.Outage.FailureHandling.String(), "err", err)
		}
	}
	return true
}

// noteDBUp marks the database reachable after a call succeeded.
func (m *Meter) noteDBUp() {
	since := m.downSince.Load()
	if since == 0 || !m.downSince.CompareAndSwap(since, 0) {
		return
	}
	m.recovered.Store(true)
	m.wakeReplayer()
	m.opts.Logger.Info("billing: the database can be reached again; the credit holds are renewed and credit is drawn again",
		"after", m.now().Sub(time.Unix(0, since)).Round(time.Millisecond).String(), "on_credit_unwritten_micros", m.atRisk.Load())
}

// onOutage is the failure handling of a reservation of worst on the account that its hold does
// not cover while the database cannot be reached (cause says why), with a.mu held; it unlocks
// it. Under FailureContinue the request is served on credit while the account's credit served
// so and not yet written, with this request, stays within RiskMicros and within what the
// account had free at the last grant this process drew (when it drew one); under FailureShare
// while it stays within this process's share of that (when the process ever drew a grant for
// the account); otherwise, and under FailureRefuse, it is refused with a 503.
func (m *Meter) onOutage(a *account, accountID uuid.UUID, requestID string, worst int64, now time.Time, cause error) (*Reservation, error) {
	serve := false
	switch m.opts.Outage.FailureHandling {
	case FailureContinue:
		room := m.opts.Outage.RiskMicros - a.credit
		if a.knowsLeft {
			room = min(room, a.accountLeft-a.credit)
		}
		serve = worst <= room
	case FailureShare:
		if left, known := m.lastAvailable(a); known {
			serve = worst <= left/m.shareDivisor()-a.credit
		}
	}
	if serve {
		a.credit += worst
		a.creditOpen++
		a.lastUsed = now
		a.mu.Unlock()
		m.atRisk.Add(worst)
		return &Reservation{m: m, acct: a, accountID: accountID, requestID: requestID, amount: worst, startedAt: now, onCredit: true}, nil
	}
	a.mu.Unlock()
	m.outageRefused.Add(1)
	return nil, apierror.Unavailable("the database", fmt.Errorf("%w: %w", ErrHoldSpent, cause))
}

// maxAvailableAge bounds how old, at the start of a database outage, the account's available
// credit read with a grant may be for FailureShare to serve on it: an account this process has
// not drawn credit for in the last five minutes before the outage (the change feed's default
// MaxStale, beyond which its keys stop being served anyway) is refused.
const maxAvailableAge = 5 * time.Minute

// lastAvailable is, with a.mu held, what the account had available (balance - held) at the last
// grant this process drew for it: from a's state, or, when the account has been forgotten since
// (its hold returned after idling), from what the meter kept of it, unless that was read more
// than maxAvailableAge before the database went down.
func (m *Meter) lastAvailable(a *account) (int64, bool) {
	if a.knowsLeft {
		return a.accountLeft, true
	}
	v, ok := m.availables.Load(a.id)
	if !ok {
		return 0, false
	}
	last := v.(lastBalance)
	if since := m.downSince.Load(); since != 0 && time.Unix(0, since).Sub(last.at) > maxAvailableAge {
		return 0, false
	}
	return last.micros, true
}

// noteAvailable remembers, with a.mu held, what the account had available after a grant sent at
// at, for lastAvailable once the account's state has been forgotten.
func (m *Meter) noteAvailable(a *account, at time.Time) {
	m.availables.Store(a.id, lastBalance{micros: a.accountLeft, at: at})
}

// errDatabaseDown is the cause of a refusal while the database is known to be down (no call
// was made for the request).
var errDatabaseDown = errors.New("billing: the database is unreachable")

// CreditStats is what the meter did with credit through database outages, for the metrics.
type CreditStats struct {
	// DatabaseDown reports that the meter cannot reach the database now.
	DatabaseDown bool
	// OutageRefused counts the requests refused (503) because the hold did not cover them
	// while the database could not be reached.
	OutageRefused int64
	// OnCreditRequests and OnCreditMicros count the requests settled on credit (under
	// FailureContinue) and their cost; AtRiskMicros is the credit served on credit (settled,
	// or reserved by requests in flight) that the ledger has not taken yet.
	OnCreditRequests int64
	OnCreditMicros   int64
	AtRiskMicros     int64
	// ReleaseAsks counts the times this process asked the others to release their idle holds of
	// an account before answering 402; ReleasedOnAsk the holds it released when asked.
	ReleaseAsks   int64
	ReleasedOnAsk int64
	// BeyondReservationRequests and BeyondReservationMicros count the requests that cost more
	// than their reservation and were charged the excess out of the hold's free credit (see
	// Settle), and the excess charged; WaivedRequests and WaivedMicros the requests whose cost
	// was not charged whole, and the part not charged. Either growing says that reservations
	// fall short of what upstreams bill: an estimate to look at.
	BeyondReservationRequests int64
	BeyondReservationMicros   int64
	WaivedRequests            int64
	WaivedMicros              int64
}

// CreditStats reports what the meter did with credit through database outages.
func (m *Meter) CreditStats() CreditStats {
	return CreditStats{
		DatabaseDown: m.dbDown(), OutageRefused: m.outageRefused.Load(),
		OnCreditRequests: m.onCreditRequests.Load(), OnCreditMicros: m.onCreditMicros.Load(), AtRiskMicros: m.atRisk.Load(),
		ReleaseAsks: m.releaseAsks.Load(), ReleasedOnAsk: m.releasedOnAsk.Load(),
		BeyondReservationRequests: m.beyondRequests.Load(), BeyondReservationMicros: m.beyondMicros.Load(),
		WaivedRequests: m.waivedRequests.Load(), WaivedMicros: m.waivedMicros.Load(),
	}
}

// creditCounters are the meter's atomics for CreditStats and the database's state.
type creditCounters struct {
	// availables maps an account's id to what it had available after this process's last grant
	// on it (a lastBalance), for FailureShare once the account's state has been forgotten.
	availables sync.Map
	// downSince is when the database was found unreachable (Unix nanoseconds; 0: reachable).
	downSince atomic.Int64
	// recovered is set when the database is found reachable again, for the maintenance to
	// renew the holds at once and hold its reaper back.
	recovered atomic.Bool
	// probing is set while a reservation asks the database for credit although it is down.
	probing          atomic.Bool
	outageRefused    atomic.Int64
	onCreditRequests atomic.Int64
	onCreditMicros   atomic.Int64
	atRisk           atomic.Int64
	// beyondRequests and beyondMicros count the settlements charged beyond their reservation and
	// the excess; waivedRequests and waivedMicros those not charged whole and what was not.
	beyondRequests atomic.Int64
	beyondMicros   atomic.Int64
	waivedRequests atomic.Int64
	waivedMicros   atomic.Int64
	// liveHolders is how many processes held credit in the database at the last renewal of this
	// process's holds (countHolders), for FailureShare's divisor.
	liveHolders atomic.Int64
}
