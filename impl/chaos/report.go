package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// flushBound is the most usage a SIGKILL may lose: what was settled in the killed process's
// last flush interval (200 ms), with room for the batch in flight.
const flushBound = time.Second

// report is the outcome of a run.
type report struct {
	faults   []fault
	requests int
	byKind   map[string]int
	// asked counts the requests not answered whole that asked the simulator for a fault,
	// inWindow the others that overlapped a fault window, wrong those of neither (with examples).
	inWindow, asked int
	wrong           []outcome
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
}

// check compares what the clients saw with the books.
func check(outcomes []outcome, faults []fault, b *books, victim int, killedAt time.Time) *report {
	r := &report{faults: faults, requests: len(outcomes), byKind: map[string]int{}, holds: b.holds, heldMicros: b.heldMicros,
		perFault: map[string]map[string]int{}}
	for _, o := range outcomes {
		r.byKind[o.kind()]++
		if o.status == 500 {
			r.internal++
		}
		for _, f := range faults {
			if hits(f, o) && o.fault == "" {
				if r.perFault[f.name] == nil {
					r.perFault[f.name] = map[string]int{}
				}
				r.perFault[f.name][o.kind()]++
			}
		}
		if !o.ok() {
			switch {
			case o.fault != "":
				r.asked++
			case inFaultWindow(o, faults):
				r.inWindow++
			default:
				r.wrong = append(r.wrong, o)
			}
		}
		if o.status != 200 || o.id == "" {
			continue
		}
		switch u, l := b.usage[o.id], b.ledger[o.id]; {
		case u > 1 || l > 1:
			r.twice = append(r.twice, o.id)
		case u == 0 || l == 0:
			if o.replica == victim && !killedAt.IsZero() && o.end.Before(killedAt) && killedAt.Sub(o.end) < flushBound {
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
	return r
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
	return errs
}

// write prints the report as Markdown tables.
func (r *report) write(w io.Writer) {
	fmt.Fprintf(w, "\n| fault injected | lasted |\n|---|---|\n")
	for _, f := range r.faults {
		fmt.Fprintf(w, "| %s | %s |\n", f.name, f.till.Sub(f.from).Round(100*time.Millisecond))
	}
	fmt.Fprintf(w, "| simulator faults asked by requests (429, 502, 529, retried 502, mid-stream error, drops, stall) | throughout |\n")
	fmt.Fprintf(w, "\n| requests asking no simulator fault that overlapped the fault (or the %s after it) | outcomes |\n|---|---|\n", recovery)
	for _, f := range r.faults {
		var parts []string
		for _, k := range sortedKeys(r.perFault[f.name]) {
			parts = append(parts, fmt.Sprintf("%s: %d", k, r.perFault[f.name][k]))
		}
		fmt.Fprintf(w, "| %s | %s |\n", f.name, strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "\n| requests | count |\n|---|---|\n| sent | %d |\n", r.requests)
	for _, k := range sortedKeys(r.byKind) {
		fmt.Fprintf(w, "| answered %s | %d |\n", k, r.byKind[k])
	}
	fmt.Fprintf(w, "| not answered whole, as asked of the simulator | %d |\n", r.asked)
	fmt.Fprintf(w, "| not answered whole otherwise, during a fault window | %d |\n", r.inWindow)
	fmt.Fprintf(w, "| **wrongly refused** (neither) | **%d** |\n", len(r.wrong))
	fmt.Fprintf(w, "\n| books | count |\n|---|---|\n")
	fmt.Fprintf(w, "| **200 answers without usage record or ledger entry** | **%d** |\n", len(r.lost))
	fmt.Fprintf(w, "| of them lost to the SIGKILL, within its %s bound | %d |\n", flushBound, len(r.lostToKill))
	fmt.Fprintf(w, "| answers billed more than once | %d |\n", len(r.twice))
	fmt.Fprintf(w, "| accounts whose balance is not the sum of their ledger, or below zero | %d |\n", len(r.badBalances))
	fmt.Fprintf(w, "| credit holds not returned after the replicas stopped | %d |\n", r.holds)
	for i, o := range r.wrong {
		if i == 10 {
			fmt.Fprintf(w, "\n… and %d more wrongly refused\n", len(r.wrong)-10)
			break
		}
		fmt.Fprintf(w, "\nwrongly refused: replica %d %s stream=%t at %s: %s %s", o.replica, o.route, o.stream, o.start.Format("15:04:05.000"), o.kind(), o.err)
	}
	fmt.Fprintln(w)
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
