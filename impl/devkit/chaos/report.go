package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/impl/price"
)

// flushBound is the most usage a SIGKILL may lose: what was settled in the killed process's
// last flush interval (200 ms), with room for the batch in flight.
const flushBound = time.Second

// checkpointBound is the most output of a stream cut by a SIGKILL that may go unbilled: the
// stream's progress is checkpointed with its credit hold, and the reaper bills a dead process's
// stream from its last checkpoint (docs/operations.md).
const checkpointBound = 2 * time.Second

// runFacts are what the run did and when, as the checks need them.
type runFacts struct {
	faults []fault
	// victim is the replica killed with SIGKILL, at killedAt.
	victim   int
	killedAt time.Time
	// restarted is the replica restarted during the database outage; restartFrom is when its
	// port accepted connections again and restartTill when the database was back: requests sent
	// to it between them must be answered within answerWithin.
	restarted                int
	restartFrom, restartTill time.Time
	answerWithin             time.Duration
	// databaseOutage is how long the crashed database stayed down; creditCover the gateway's
	// credit outage cover it was to outlast.
	databaseOutage, creditCover time.Duration
	// redisFrom and redisTill bound the Redis outage, during which the capped keys were to
	// reach their caps.
	redisFrom, redisTill time.Time
	// cappedKeys are the keys with a credit cap; probeAccount the account of the requests sent
	// to the restarted replica to see whether it answers.
	cappedKeys   []*apiKey
	probeAccount string
	// longStreams is how many long streams were sent around the kill.
	longStreams int
	// requireCutBilling makes unbilled cut streams a failure.
	requireCutBilling bool
}

// cutStream is a stream that the SIGKILL cut, and what the books made of it.
type cutStream struct {
	o outcome
	// billed is set when a usage record covers it; billedOutput is its output tokens, required
	// the words its client had received by checkpointBound before the kill.
	billed       bool
	billedOutput int64
	required     int
}

// capOutcome is what a capped key's requests got and what the books say of its spend.
type capOutcome struct {
	key                    *apiKey
	books                  keyBooks
	known                  bool
	answered, refused      int
	firstRefusal           time.Time
	refusedDuringRedisDown bool
}

// reachedCase says whether the run reached one of the hard cases it exists for.
type reachedCase struct {
	name, detail string
	reached      bool
}

// report is the outcome of a run.
type report struct {
	faults   []fault
	requests int
	byKind   map[string]int
	// asked counts the requests not answered whole that asked the simulator for a fault,
	// inWindow the others that overlapped a fault window, capRefused the capped keys' 402s,
	// wrong those of none of these (with examples).
	inWindow, asked, capRefused int
	wrong                       []outcome
	// lost are 200 answers without their usage record or ledger entry; lostToKill those of
	// them answered by the killed replica within flushBound of the kill; twice answers billed
	// more than once.
	lost, lostToKill, twice []string
	// badBalances are accounts whose balance is not the sum of their ledger or is below zero.
	badBalances []string
	holds       int
	heldMicros  int64
	// perFault counts, per fault, the requests that overlapped it and asked the simulator for
	// no fault, by outcome.
	perFault map[string]map[string]int
	// internal counts 500 answers: a dependency failure must be a 503, never a 500.
	internal int

	// records counts the usage records; mispriced are those whose costs are not the price
	// arithmetic of their tokens, unpriced those that carry no price to check them against.
	records             int
	mispriced, unpriced []string
	// shownChecked counts whole answers whose usage was compared with their record;
	// billedLess and billedMore those billed for fewer or more tokens than their client was
	// shown; waivedWhole whole answers part of whose cost was waived, waivedOther other records
	// with a waived part.
	shownChecked                        int
	billedLess, billedMore, waivedWhole []string
	waivedOther                         int
	// unseen counts the usage records of requests no client saw an answer head for.
	unseen int

	// caps are the capped keys; keyReservations and keyReservedMicros what their budgets still
	// hold once the replicas have stopped.
	caps              []capOutcome
	keyReservations   int
	keyReservedMicros int64

	// restart counts the requests sent to the replica restarted during the database outage,
	// by outcome; restartHung those not answered within answerWithin; billedAfterLeaving the
	// probe requests billed though their client never saw an answer.
	restart            map[string]int
	restartSent        int
	restartHung        []outcome
	billedAfterLeaving []string
	answerWithin       time.Duration

	// cut are the streams the SIGKILL cut; longSent, longWhole the long streams sent and
	// answered whole.
	cut                 []cutStream
	longSent, longWhole int
	requireCutBilling   bool

	reached []reachedCase
}

// check compares what the clients saw with the books.
func check(outcomes []outcome, b *books, f runFacts) *report {
	r := &report{faults: f.faults, requests: len(outcomes), byKind: map[string]int{}, holds: b.holds, heldMicros: b.heldMicros,
		perFault: map[string]map[string]int{}, restart: map[string]int{}, answerWithin: f.answerWithin,
		keyReservations: b.keyReservations, keyReservedMicros: b.keyReservedMicros, requireCutBilling: f.requireCutBilling}
	faults := f.faults
	seen := map[string]outcome{}
	caps := map[*apiKey]*capOutcome{}
	for _, k := range f.cappedKeys {
		kb, known := b.keys[k.name]
		caps[k] = &capOutcome{key: k, books: kb, known: known}
	}
	for _, o := range outcomes {
		r.byKind[o.kind()]++
		if o.id != "" {
			seen[o.id] = o
		}
		if o.status == 500 {
			r.internal++
		}
		for _, fl := range faults {
			if hits(fl, o) && o.fault == "" {
				if r.perFault[fl.name] == nil {
					r.perFault[fl.name] = map[string]int{}
				}
				r.perFault[fl.name][o.kind()]++
			}
		}
		if c := caps[o.key]; c != nil {
			switch {
			case o.ok():
				c.answered++
			case o.status == 402:
				c.refused++
				if c.firstRefusal.IsZero() || o.end.Before(c.firstRefusal) {
					c.firstRefusal = o.end
				}
				if !o.start.Before(f.redisFrom) && o.start.Before(f.redisTill) {
					c.refusedDuringRedisDown = true
				}
			}
		}
		if o.flow == flowLong {
			r.longSent++
			if o.ok() {
				r.longWhole++
			}
		}
		if o.replica == f.restarted && !f.restartFrom.IsZero() && !o.start.Before(f.restartFrom) && o.start.Before(f.restartTill) {
			r.restartSent++
			r.restart[o.kind()]++
			if o.head.IsZero() || o.head.Sub(o.start) > f.answerWithin {
				r.restartHung = append(r.restartHung, o)
			}
		}
		if !o.ok() {
			switch {
			case o.fault != "":
				r.asked++
			case o.key.capped && o.status == 402:
				r.capRefused++
			case inFaultWindow(o, faults):
				r.inWindow++
			default:
				r.wrong = append(r.wrong, o)
			}
		}
		if cutByKill(o, f) {
			c := cutStream{o: o, required: o.wordsBy(f.killedAt.Add(-checkpointBound))}
			if rec, ok := b.records[o.id]; ok {
				c.billed, c.billedOutput = true, rec.OutputTokens
			}
			r.cut = append(r.cut, c)
			continue
		}
		if o.status != 200 || o.id == "" {
			continue
		}
		switch u, l := b.usage[o.id], b.ledger[o.id]; {
		case u > 1 || l > 1:
			r.twice = append(r.twice, o.id)
		case u == 0 || l == 0:
			if o.replica == f.victim && !f.killedAt.IsZero() && o.end.Before(f.killedAt) && f.killedAt.Sub(o.end) < flushBound {
				r.lostToKill = append(r.lostToKill, o.id)
			} else {
				r.lost = append(r.lost, o.id)
			}
		}
	}
	for _, a := range b.accounts {
		if a.balance != a.ledger || a.balance < 0 {
			r.badBalances = append(r.badBalances, fmt.Sprintf("%s: balance %d, ledger sum %d", a.name, a.balance, a.ledger))
		}
	}
	r.checkRecords(b, seen, f.probeAccount)
	for _, k := range f.cappedKeys {
		r.caps = append(r.caps, *caps[k])
	}
	r.reached = reached(r, f)
	return r
}

// cutByKill reports whether o is a stream the SIGKILL cut: a 200 stream of the killed replica,
// in flight at the kill, that did not end whole.
func cutByKill(o outcome, f runFacts) bool {
	return o.stream && o.status == 200 && !o.complete && !o.inBand && o.replica == f.victim && !f.killedAt.IsZero() &&
		o.start.Before(f.killedAt) && !o.end.Before(f.killedAt)
}

// checkRecords checks every usage record against the price arithmetic of its own tokens and,
// for a whole answer, against the usage its client was shown.
func (r *report) checkRecords(b *books, seen map[string]outcome, probeAccount string) {
	for _, id := range sortedKeys(b.records) {
		rec := b.records[id]
		r.records++
		if rec.Price == nil {
			r.unpriced = append(r.unpriced, id)
		} else {
			again := price.Cost(rec.Tokens(), *rec.Price)
			if again != rec.Costs || rec.CostMicros != rec.Costs.Total()+rec.HostedMicros-rec.WaivedMicros {
				r.mispriced = append(r.mispriced, fmt.Sprintf("%s: cost %d, parts %+v, hosted %d, waived %d; its tokens %+v at its price cost %+v",
					id, rec.CostMicros, rec.Costs, rec.HostedMicros, rec.WaivedMicros, rec.Tokens(), again))
			}
		}
		o, known := seen[id]
		if !known {
			r.unseen++
			if b.accountOf[id] == probeAccount {
				r.billedAfterLeaving = append(r.billedAfterLeaving, id)
			}
			continue
		}
		if !o.ok() {
			if rec.WaivedMicros > 0 {
				r.waivedOther++
			}
			continue
		}
		if rec.WaivedMicros > 0 {
			r.waivedWhole = append(r.waivedWhole, fmt.Sprintf("%s: %d of %d waived", id, rec.WaivedMicros, rec.CostMicros+rec.WaivedMicros))
		}
		if !o.usage.seen {
			continue
		}
		r.shownChecked++
		detail := fmt.Sprintf("%s (%s): billed %d in, %d out; shown %d in, %d out", id, o.route, rec.InputTokens, rec.OutputTokens, o.usage.input, o.usage.output)
		switch {
		case rec.InputTokens < o.usage.input || rec.OutputTokens < o.usage.output:
			r.billedLess = append(r.billedLess, detail)
		case rec.InputTokens > o.usage.input || rec.OutputTokens > o.usage.output:
			r.billedMore = append(r.billedMore, detail)
		}
	}
}

// reached says which of the hard cases the run reached.
func reached(r *report, f runFacts) []reachedCase {
	var out []reachedCase
	out = append(out, reachedCase{name: "database outage longer than the credit cover",
		detail:  fmt.Sprintf("%s down against a %s cover", f.databaseOutage.Round(100*time.Millisecond), f.creditCover),
		reached: f.databaseOutage > f.creditCover})
	atCap, duringRedis := 0, 0
	for _, c := range r.caps {
		if c.refused > 0 {
			atCap++
		}
		if c.refusedDuringRedisDown {
			duringRedis++
		}
	}
	out = append(out, reachedCase{name: "keys driven to their credit caps during the Redis outage",
		detail:  fmt.Sprintf("%d of %d capped keys refused by their cap, %d of them during the Redis outage", atCap, len(r.caps), duringRedis),
		reached: len(r.caps) > 0 && duringRedis == len(r.caps)})
	long := 0
	for _, c := range r.cut {
		if c.o.flow == flowLong {
			long++
		}
	}
	out = append(out, reachedCase{name: "long streams cut by the SIGKILL",
		detail:  fmt.Sprintf("%d of the %d long streams (%d streams cut in all)", long, f.longStreams, len(r.cut)),
		reached: long > 0})
	out = append(out, reachedCase{name: "a replica restarted during the database outage",
		detail:  fmt.Sprintf("%d requests sent to it while it started without the database", r.restartSent),
		reached: r.restartSent > 0})
	return out
}

// inFaultWindow reports whether a request overlapped a fault that could hit it, or the
// recovery after it.
func inFaultWindow(o outcome, faults []fault) bool {
	return slices.ContainsFunc(faults, func(f fault) bool { return hits(f, o) })
}

// hits reports whether fault f could hit request o: o was sent to a replica f hits and
// overlapped f or the recovery after it.
func hits(f fault, o outcome) bool {
	return (f.replica < 0 || f.replica == o.replica) && o.start.Before(f.till.Add(recovery)) && o.end.After(f.from)
}

// cutUnder are the cut streams billed for less than their clients received, beyond the
// checkpoint bound; cutUnbilled those no usage record covers.
func (r *report) cutUnder() (under, unbilled int) {
	for _, c := range r.cut {
		switch {
		case !c.billed:
			unbilled++
		case c.billedOutput < int64(c.required):
			under++
		}
	}
	return under, unbilled
}

// failures are the invariants that do not hold.
func (r *report) failures() []error {
	var errs []error
	if r.internal > 0 {
		errs = append(errs, fmt.Errorf("%d answers were 500: a dependency failure must reach clients as 503 with Retry-After", r.internal))
	}
	if len(r.wrong) > 0 {
		errs = append(errs, fmt.Errorf("%d requests refused outside the fault windows", len(r.wrong)))
	}
	if len(r.lost) > 0 {
		errs = append(errs, fmt.Errorf("%d answers without their usage record or ledger entry", len(r.lost)))
	}
	if len(r.twice) > 0 {
		errs = append(errs, fmt.Errorf("%d answers billed more than once", len(r.twice)))
	}
	if len(r.badBalances) > 0 {
		errs = append(errs, fmt.Errorf("accounts whose balance is not their ledger: %s", strings.Join(r.badBalances, "; ")))
	}
	if r.holds > 0 {
		errs = append(errs, fmt.Errorf("%d credit holds (%d micro-units) not returned", r.holds, r.heldMicros))
	}
	if len(r.mispriced) > 0 {
		errs = append(errs, fmt.Errorf("%d usage records whose cost is not the price arithmetic of their tokens (first: %s)", len(r.mispriced), r.mispriced[0]))
	}
	if len(r.unpriced) > 0 {
		errs = append(errs, fmt.Errorf("%d usage records without a price (their cost cannot be checked; first: %s)", len(r.unpriced), r.unpriced[0]))
	}
	if len(r.billedLess) > 0 {
		errs = append(errs, fmt.Errorf("%d whole answers billed for fewer tokens than their client was shown (first: %s)", len(r.billedLess), r.billedLess[0]))
	}
	if len(r.billedMore) > 0 {
		errs = append(errs, fmt.Errorf("%d whole answers billed for more tokens than their client was shown (first: %s)", len(r.billedMore), r.billedMore[0]))
	}
	if len(r.waivedWhole) > 0 {
		errs = append(errs, fmt.Errorf("%d whole answers with part of their cost waived (first: %s)", len(r.waivedWhole), r.waivedWhole[0]))
	}
	for _, c := range r.caps {
		switch {
		case !c.known:
			errs = append(errs, fmt.Errorf("capped key %s: not found in the database", c.key.name))
		case c.books.periodSpendMicros > c.books.capMicros:
			errs = append(errs, fmt.Errorf("capped key %s spent %d micro-units in a period, over its cap of %d", c.key.name, c.books.periodSpendMicros, c.books.capMicros))
		}
		if c.known && c.books.budgetSpentMicros != c.books.usageMicros {
			errs = append(errs, fmt.Errorf("capped key %s: its budget counts %d micro-units spent, its usage records charge %d", c.key.name, c.books.budgetSpentMicros, c.books.usageMicros))
		}
	}
	if r.keyReservations > 0 || r.keyReservedMicros > 0 {
		errs = append(errs, fmt.Errorf("%d key reservations (%d micro-units reserved in the key budgets) not returned", r.keyReservations, r.keyReservedMicros))
	}
	if len(r.restartHung) > 0 {
		errs = append(errs, fmt.Errorf("%d requests to the replica restarted during the database outage got no answer within %s", len(r.restartHung), r.answerWithin))
	}
	if len(r.billedAfterLeaving) > 0 {
		errs = append(errs, fmt.Errorf("%d requests billed though their client never saw an answer (it had left)", len(r.billedAfterLeaving)))
	}
	under, unbilled := r.cutUnder()
	if under > 0 {
		errs = append(errs, fmt.Errorf("%d streams cut by the SIGKILL billed for less than their clients received, beyond the %s checkpoint bound", under, checkpointBound))
	}
	if unbilled > 0 && r.requireCutBilling {
		errs = append(errs, fmt.Errorf("%d streams cut by the SIGKILL not billed at all", unbilled))
	}
	for _, c := range r.reached {
		if !c.reached {
			errs = append(errs, fmt.Errorf("the run did not reach a hard case: %s (%s)", c.name, c.detail))
		}
	}
	return errs
}

// write prints the report as Markdown tables.
func (r *report) write(w io.Writer) {
	fmt.Fprintf(w, "\n| fault injected | lasted |\n|---|---|\n")
	for _, f := range r.faults {
		fmt.Fprintf(w, "| %s | %s |\n", f.name, f.till.Sub(f.from).Round(100*time.Millisecond))
	}
	fmt.Fprintf(w, "| simulator faults asked by requests (429, 502, 529, retried 502, mid-stream error, drops, stall) | throughout |\n")
	fmt.Fprintf(w, "\n| hard case | reached |\n|---|---|\n")
	for _, c := range r.reached {
		verdict := "yes"
		if !c.reached {
			verdict = "**no**"
		}
		fmt.Fprintf(w, "| %s | %s: %s |\n", c.name, verdict, c.detail)
	}
	fmt.Fprintf(w, "\n| requests asking no simulator fault that overlapped the fault (or the %s after it) | outcomes |\n|---|---|\n", recovery)
	for _, f := range r.faults {
		fmt.Fprintf(w, "| %s | %s |\n", f.name, counts(r.perFault[f.name]))
	}
	fmt.Fprintf(w, "\n| requests | count |\n|---|---|\n| sent | %d |\n", r.requests)
	for _, k := range sortedKeys(r.byKind) {
		fmt.Fprintf(w, "| answered %s | %d |\n", k, r.byKind[k])
	}
	fmt.Fprintf(w, "| not answered whole, as asked of the simulator | %d |\n", r.asked)
	fmt.Fprintf(w, "| refused by their key's credit cap (402), as driven | %d |\n", r.capRefused)
	fmt.Fprintf(w, "| not answered whole otherwise, during a fault window | %d |\n", r.inWindow)
	fmt.Fprintf(w, "| **wrongly refused** (none of these) | **%d** |\n", len(r.wrong))

	fmt.Fprintf(w, "\n| books | count |\n|---|---|\n")
	fmt.Fprintf(w, "| **200 answers without usage record or ledger entry** | **%d** |\n", len(r.lost))
	fmt.Fprintf(w, "| of them lost to the SIGKILL, within its %s bound | %d |\n", flushBound, len(r.lostToKill))
	fmt.Fprintf(w, "| answers billed more than once | %d |\n", len(r.twice))
	fmt.Fprintf(w, "| accounts whose balance is not the sum of their ledger, or below zero | %d |\n", len(r.badBalances))
	fmt.Fprintf(w, "| credit holds not returned after the replicas stopped | %d |\n", r.holds)
	fmt.Fprintf(w, "| usage records | %d |\n", r.records)
	fmt.Fprintf(w, "| **usage records whose cost is not the price arithmetic of their tokens** | **%d** |\n", len(r.mispriced))
	fmt.Fprintf(w, "| usage records without a price | %d |\n", len(r.unpriced))
	fmt.Fprintf(w, "| whole answers whose record was compared with the usage shown to the client | %d |\n", r.shownChecked)
	fmt.Fprintf(w, "| **of them billed for fewer tokens than shown** (under-billing) | **%d** |\n", len(r.billedLess))
	fmt.Fprintf(w, "| of them billed for more tokens than shown | %d |\n", len(r.billedMore))
	fmt.Fprintf(w, "| whole answers with part of their cost waived | %d |\n", len(r.waivedWhole))
	fmt.Fprintf(w, "| other records with a waived part (answers not delivered whole) | %d |\n", r.waivedOther)
	fmt.Fprintf(w, "| usage records of requests no client saw an answer for | %d |\n", r.unseen)

	fmt.Fprintf(w, "\n| capped key | cap | spent (most in a period) | budget's spend = records' | answered whole | refused 402 | first 402 |\n|---|---|---|---|---|---|---|\n")
	for _, c := range r.caps {
		first := "never"
		if !c.firstRefusal.IsZero() {
			first = c.firstRefusal.Format("15:04:05.000")
			if c.refusedDuringRedisDown {
				first += " (Redis down)"
			}
		}
		fmt.Fprintf(w, "| %s | %d | %d | %t | %d | %d | %s |\n", c.key.name, c.books.capMicros, c.books.periodSpendMicros,
			c.books.budgetSpentMicros == c.books.usageMicros, c.answered, c.refused, first)
	}
	over := 0
	for _, c := range r.caps {
		if c.books.periodSpendMicros > c.books.capMicros {
			over++
		}
	}
	fmt.Fprintf(w, "\n| caps | count |\n|---|---|\n")
	fmt.Fprintf(w, "| **keys whose spend in a period exceeds their cap** | **%d** |\n", over)
	fmt.Fprintf(w, "| key reservations not returned after the replicas stopped | %d |\n", r.keyReservations)

	fmt.Fprintf(w, "\n| restart during the database outage | count |\n|---|---|\n")
	fmt.Fprintf(w, "| requests sent to the restarted replica while the database was down | %d |\n", r.restartSent)
	fmt.Fprintf(w, "| their outcomes | %s |\n", counts(r.restart))
	fmt.Fprintf(w, "| **no answer within %s (hung)** | **%d** |\n", r.answerWithin, len(r.restartHung))
	fmt.Fprintf(w, "| **billed though their client never saw an answer** | **%d** |\n", len(r.billedAfterLeaving))

	under, unbilled := r.cutUnder()
	fmt.Fprintf(w, "\n| streams and the SIGKILL | count |\n|---|---|\n")
	fmt.Fprintf(w, "| long streams sent | %d |\n", r.longSent)
	fmt.Fprintf(w, "| of them answered whole | %d |\n", r.longWhole)
	fmt.Fprintf(w, "| streams cut by the SIGKILL | %d |\n", len(r.cut))
	fmt.Fprintf(w, "| of them billed for at least what their client received %s before the kill | %d |\n", checkpointBound, len(r.cut)-under-unbilled)
	fmt.Fprintf(w, "| **of them billed for less** | **%d** |\n", under)
	unbilledLabel := "unbilled cut streams (reported; not yet a failure)"
	if r.requireCutBilling {
		unbilledLabel = "**unbilled cut streams**"
	}
	fmt.Fprintf(w, "| %s | %d |\n", unbilledLabel, unbilled)
	if len(r.cut) > 0 {
		fmt.Fprintf(w, "\n| cut stream | replica | route | words received | by %s before the kill | billed output tokens |\n|---|---|---|---|---|---|\n", checkpointBound)
		for _, c := range r.cut {
			billed := "unbilled"
			if c.billed {
				billed = fmt.Sprintf("%d", c.billedOutput)
			}
			fmt.Fprintf(w, "| %s (%s) | %d | %s | %d | %d | %s |\n", c.o.id, c.o.flow, c.o.replica, c.o.route, c.o.words, c.required, billed)
		}
	}

	examples := func(label string, items []string) {
		for i, s := range items {
			if i == 5 {
				fmt.Fprintf(w, "\n… and %d more %s", len(items)-5, label)
				break
			}
			fmt.Fprintf(w, "\n%s: %s", label, s)
		}
	}
	for i, o := range r.wrong {
		if i == 10 {
			fmt.Fprintf(w, "\n… and %d more wrongly refused", len(r.wrong)-10)
			break
		}
		fmt.Fprintf(w, "\nwrongly refused: replica %d %s stream=%t at %s: %s %s", o.replica, o.route, o.stream, o.start.Format("15:04:05.000"), o.kind(), o.err)
	}
	for i, o := range r.restartHung {
		if i == 5 {
			fmt.Fprintf(w, "\n… and %d more hung", len(r.restartHung)-5)
			break
		}
		took := "no answer"
		if !o.head.IsZero() {
			took = fmt.Sprintf("head after %s", o.head.Sub(o.start).Round(time.Millisecond))
		}
		fmt.Fprintf(w, "\nhung on the restarted replica: %s %s at %s: %s, %s %s", o.flow, o.route, o.start.Format("15:04:05.000"), took, o.kind(), o.err)
	}
	examples("mispriced", r.mispriced)
	examples("billed less than shown", r.billedLess)
	examples("billed more than shown", r.billedMore)
	examples("waived on a whole answer", r.waivedWhole)
	examples("billed after the client left", r.billedAfterLeaving)
	fmt.Fprintln(w)
}

// counts prints a count per outcome, in order.
func counts(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
