package hostile

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"
)

// The bounds a run is checked against (docs/operations.md, "Memory" and "Hostile load").
const (
	// peakMarginMB is what the peak resident memory may exceed the Go memory limit by: the
	// memory Go does not count against it (the binary and its mapped files, thread stacks,
	// what the C parts allocate) and the soft limit's overshoot while a collection runs.
	peakMarginMB = 128
	// afterFraction is the most of the memory limit the resident memory may hold once the
	// burst is over and the run has waited Options.After: the memory is given back.
	afterFraction = 4
	// normalP99Bound bounds normal traffic's 99th percentile in every phase. The burst
	// saturates a small machine's cores (the gateway, the simulator and the run's clients
	// share them), and Go has no priorities: a small request waits its turn behind the bad
	// requests' per-byte work, which this bound allows for.
	normalP99Bound = time.Second
)

// Report is what a run measured.
type Report struct {
	Options Options
	// MemoryLimitMB, MemoryLimitFrom and BodyBudgetMB are what the gateway logged at start-up.
	MemoryLimitMB   int
	MemoryLimitFrom string
	BodyBudgetMB    int
	// BurstStart and BurstEnd bound the bad requests.
	BurstStart, BurstEnd time.Time
	// The gateway's resident memory in bytes: before the burst, at its end, Options.After
	// later, and its peak over the whole run (VmHWM).
	RSSBefore, RSSBurstEnd, RSSAfter, PeakRSS int64
	// CPUGateway, CPUSimulator and CPUTool are the CPU time the gateway, the simulator and
	// the run itself (its clients) used during the burst.
	CPUGateway, CPUSimulator, CPUTool time.Duration
	// GatewayExited says the gateway died during the run; GatewayExitErr what its shutdown
	// said (nil: a clean exit after SIGTERM).
	GatewayExited  bool
	GatewayExitErr error

	Normal   []normalOutcome
	Bad      []badOutcome
	Timeline []rssSample
}

// phase is a stretch of the run for normal traffic's statistics.
type phase struct {
	name     string
	from, to time.Time
}

func (r *Report) phases() []phase {
	return []phase{
		{fmt.Sprintf("before the burst (%s)", r.Options.Before), time.Time{}, r.BurstStart},
		{fmt.Sprintf("during the burst (%s)", r.BurstEnd.Sub(r.BurstStart).Round(time.Second)), r.BurstStart, r.BurstEnd},
		{fmt.Sprintf("after the burst (%s)", r.Options.After), r.BurstEnd, time.Now().Add(time.Hour)},
	}
}

// normalStats are normal traffic's counts and latencies in a phase.
type normalStats struct {
	requests, failed int
	failures         map[string]int
	p50, p99, max    time.Duration
}

func (r *Report) normalIn(p phase) normalStats {
	s := normalStats{failures: map[string]int{}}
	var lat []time.Duration
	for _, n := range r.Normal {
		if n.start.Before(p.from) || !n.start.Before(p.to) {
			continue
		}
		s.requests++
		if !n.ok() {
			s.failed++
			s.failures[fmt.Sprintf("%d %.80s", n.status, n.err)]++
			continue
		}
		lat = append(lat, n.latency)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		s.p50, s.p99, s.max = quantile(lat, 0.50), quantile(lat, 0.99), lat[len(lat)-1]
	}
	return s
}

// quantile is the q-quantile of sorted latencies (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// peakBound is the bound on the peak resident memory, in bytes (0: none, without a limit).
func (r *Report) peakBound() int64 {
	if r.MemoryLimitMB <= 0 {
		return 0
	}
	return int64(r.MemoryLimitMB+peakMarginMB) << 20
}

// afterBound is the bound on the resident memory a while after the burst, in bytes.
func (r *Report) afterBound() int64 {
	if r.MemoryLimitMB <= 0 {
		return 0
	}
	return int64(r.MemoryLimitMB/afterFraction) << 20
}

// failures are the bounds that do not hold.
func (r *Report) failures() []error {
	var errs []error
	if r.GatewayExited {
		errs = append(errs, fmt.Errorf("the gateway process died during the run"))
	}
	if r.GatewayExitErr != nil {
		errs = append(errs, r.GatewayExitErr)
	}
	for _, p := range r.phases() {
		s := r.normalIn(p)
		if s.failed > 0 {
			errs = append(errs, fmt.Errorf("%d normal requests %s failed", s.failed, p.name))
		}
		if s.p99 > normalP99Bound {
			errs = append(errs, fmt.Errorf("normal traffic's p99 %s is %s, over the bound of %s", p.name, ms(s.p99), normalP99Bound))
		}
	}
	for _, b := range r.Bad {
		if b.status >= 500 && b.status != 503 {
			errs = append(errs, fmt.Errorf("a bad request (%s) got %d", b.kind, b.status))
			break
		}
	}
	if len(r.Bad) < r.Options.Bad {
		errs = append(errs, fmt.Errorf("only %d of %d bad requests were sent", len(r.Bad), r.Options.Bad))
	}
	if b := r.peakBound(); b > 0 && r.PeakRSS > b {
		errs = append(errs, fmt.Errorf("the peak resident memory, %d MiB, is over the bound of %d MiB", r.PeakRSS>>20, b>>20))
	}
	if b := r.afterBound(); b > 0 && r.RSSAfter > b {
		errs = append(errs, fmt.Errorf("%s after the burst the resident memory, %d MiB, is over the bound of %d MiB", r.Options.After, r.RSSAfter>>20, b>>20))
	}
	return errs
}

// write prints the report as Markdown.
func (r *Report) write(w io.Writer) {
	o := r.Options
	settings := fmt.Sprintf("memory limit %d MiB, from %s; body budget %d MiB", r.MemoryLimitMB, r.MemoryLimitFrom, r.BodyBudgetMB)
	if r.MemoryLimitMB <= 0 {
		settings = "no memory limit or body budget logged: a build without them"
	}
	fmt.Fprintf(w, "Hostile load: %d bad requests (%d at a time) at service-flint beside %d normal requests a second, against one `tollgate serve` (%s).\n\n",
		len(r.Bad), o.Workers, o.Rate, settings)

	fmt.Fprintf(w, "| normal traffic (bound: none fails, p99 ≤ %s) | requests | failed | p50 | p99 | max |\n|---|---:|---:|---:|---:|---:|\n", normalP99Bound)
	for _, p := range r.phases() {
		s := r.normalIn(p)
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s |\n", p.name, s.requests, s.failed, ms(s.p50), ms(s.p99), ms(s.max))
		for _, f := range slices.Sorted(maps.Keys(s.failures)) {
			fmt.Fprintf(w, "|   %s | %d | | | | |\n", f, s.failures[f])
		}
	}

	burst := r.BurstEnd.Sub(r.BurstStart)
	fmt.Fprintf(w, "\nCPU during the burst (%s, %d cores): the gateway %.0f s, the simulator %.0f s, the run's clients %.0f s.\n",
		burst.Round(time.Second), runtime.NumCPU(), r.CPUGateway.Seconds(), r.CPUSimulator.Seconds(), r.CPUTool.Seconds())
	fmt.Fprintf(w, "\n| bad requests | sent | answers | median time |\n|---|---:|---|---:|\n")
	byKind := map[string][]badOutcome{}
	for _, b := range r.Bad {
		byKind[b.kind] = append(byKind[b.kind], b)
	}
	for _, k := range badKinds {
		bs := byKind[k.name]
		if len(bs) == 0 {
			continue
		}
		counts := map[string]int{}
		var lat []time.Duration
		for _, b := range bs {
			counts[b.label()]++
			lat = append(lat, b.latency)
		}
		slices.Sort(lat)
		labels := slices.Collect(maps.Keys(counts))
		sort.Slice(labels, func(i, j int) bool {
			return counts[labels[i]] > counts[labels[j]] || counts[labels[i]] == counts[labels[j]] && labels[i] < labels[j]
		})
		parts := make([]string, len(labels))
		for i, l := range labels {
			parts[i] = fmt.Sprintf("%s: %d", l, counts[l])
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s |\n", k.name, len(bs), strings.Join(parts, ", "), ms(quantile(lat, 0.5)))
	}

	fmt.Fprintf(w, "\n| gateway resident memory (RSS) | MiB | bound |\n|---|---:|---|\n")
	fmt.Fprintf(w, "| before the burst | %d | |\n", r.RSSBefore>>20)
	fmt.Fprintf(w, "| peak over the run (VmHWM) | %d | %s |\n", r.PeakRSS>>20, bound(r.peakBound(), fmt.Sprintf("memory limit + %d MiB", peakMarginMB)))
	fmt.Fprintf(w, "| at the end of the burst | %d | |\n", r.RSSBurstEnd>>20)
	fmt.Fprintf(w, "| %s after the burst | %d | %s |\n", o.After, r.RSSAfter>>20, bound(r.afterBound(), fmt.Sprintf("1/%d of the memory limit", afterFraction)))
	if len(r.Timeline) > 0 {
		fmt.Fprintf(w, "\nRSS every 5 s from the start of the burst (MiB): %s\n", r.timelineText())
	}
	if errs := r.failures(); len(errs) > 0 {
		fmt.Fprintf(w, "\nBounds not held:\n")
		for _, e := range errs {
			fmt.Fprintf(w, "- %v\n", e)
		}
	} else {
		fmt.Fprintf(w, "\nEvery bound holds: no normal request failed and their p99 stayed within its bound, no bad request got a 5xx other than 503, the gateway lived, and its memory stayed within the bounds.\n")
	}
}

// timelineText is the resident memory every 5 s from the burst's start to the end.
func (r *Report) timelineText() string {
	var parts []string
	next := r.BurstStart
	for _, s := range r.Timeline {
		if s.at.Before(next) {
			continue
		}
		parts = append(parts, fmt.Sprint(s.rss>>20))
		next = next.Add(5 * time.Second)
	}
	return strings.Join(parts, " ")
}

func bound(b int64, what string) string {
	if b == 0 {
		return "none (no memory limit)"
	}
	return fmt.Sprintf("≤ %d (%s)", b>>20, what)
}

func ms(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}
