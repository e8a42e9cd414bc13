// Package bench measures what the gateway adds on top of an upstream: it drives the upstream
// simulator directly and through the gateway, alternating, in one run, with authentication, the
// per-key rate limit and metering on, and reports the added latency, the added time to first
// byte of streams, the sustained throughput as a ratio of direct, and the gateway's memory with
// many streams open. The numbers are ratios and differences measured in the same run, so a
// noisy shared machine skews both sides alike.
package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Config says what to drive.
type Config struct {
	// DirectURL is the simulator's base (no /v1); GatewayURL the gateway's; RelayURL, when
	// set, a bare relay's (see Relay) to the same simulator, and FloorURL a byte relay's (see
	// ByteRelay), measured as references.
	DirectURL, GatewayURL, RelayURL, FloorURL string
	// Key authenticates at the gateway.
	Key string
	// DirectModel is the simulator's model id; GatewayModel the gateway model routed to it;
	// SlowModel a gateway model routed to a slowly streaming simulator.
	DirectModel, GatewayModel, SlowModel string
	// GatewayPID is the gateway process, whose memory is sampled.
	GatewayPID int
	// TracedGatewayURL, when set, is a second gateway's, the same but tracing its requests,
	// measured in the same rounds as the first (its own phase in each round's rotation), so that
	// what tracing costs a request is read under the same load of the machine; TracedGatewayPID
	// is its process.
	TracedGatewayURL string
	TracedGatewayPID int
	// Rate is the request rate of the latency phases (default 1000/s); Phase their length
	// (default 3 s); Rounds how many direct/gateway alternations (default 4).
	Rate   int
	Phase  time.Duration
	Rounds int
	// Streams is how many concurrent streams are held open (default 1000).
	Streams int
	// Log receives progress lines.
	Log io.Writer
	// ProfileURL, when set, is the gateway's pprof CPU profile endpoint; the profile taken while
	// the gateway runs flat out is written to ProfileOut.
	ProfileURL, ProfileOut string
}

// Report is what a run measured. Durations are in microseconds.
type Report struct {
	Machine map[string]string `json:"machine"`
	Rate    int               `json:"rate_rps"`

	DirectP50us  float64 `json:"direct_p50_us"`
	DirectP99us  float64 `json:"direct_p99_us"`
	GatewayP50us float64 `json:"gateway_p50_us"`
	GatewayP99us float64 `json:"gateway_p99_us"`
	AddedP50us   float64 `json:"added_p50_us"`
	AddedP99us   float64 `json:"added_p99_us"`
	// The Relay figures are a bare relay's (Relay) over the same simulator: what one more
	// process hop adds on this machine, with none of the gateway's work.
	RelayAddedP50us     float64 `json:"relay_added_p50_us,omitempty"`
	RelayAddedP99us     float64 `json:"relay_added_p99_us,omitempty"`
	RelayAddedTTFBP50us float64 `json:"relay_added_ttfb_p50_us,omitempty"`
	RelayAddedTTFBP99us float64 `json:"relay_added_ttfb_p99_us,omitempty"`
	// The Floor figures are a byte relay's (ByteRelay): the least one more process hop adds
	// on this machine, with hand-written framing in place of any HTTP library.
	FloorAddedP50us     float64 `json:"floor_added_p50_us,omitempty"`
	FloorAddedP99us     float64 `json:"floor_added_p99_us,omitempty"`
	FloorAddedTTFBP50us float64 `json:"floor_added_ttfb_p50_us,omitempty"`
	FloorAddedTTFBP99us float64 `json:"floor_added_ttfb_p99_us,omitempty"`
	DirectSuccess       float64 `json:"direct_success_ratio"`
	GatewaySuccess      float64 `json:"gateway_success_ratio"`
	StreamDirectP50us   float64 `json:"stream_ttfb_direct_p50_us"`
	StreamDirectP99us   float64 `json:"stream_ttfb_direct_p99_us"`
	StreamGatewayP50us  float64 `json:"stream_ttfb_gateway_p50_us"`
	StreamGatewayP99us  float64 `json:"stream_ttfb_gateway_p99_us"`
	AddedTTFBP50us      float64 `json:"added_ttfb_p50_us"`
	AddedTTFBP99us      float64 `json:"added_ttfb_p99_us"`
	MaxDirectRPS        float64 `json:"max_direct_rps"`
	MaxGatewayRPS       float64 `json:"max_gateway_rps"`
	MaxRPSRatio         float64 `json:"max_rps_ratio"`
	Streams             int     `json:"concurrent_streams"`
	StreamsCompleted    int     `json:"concurrent_streams_completed"`
	RSSBeforeMB         float64 `json:"gateway_rss_before_mb"`
	RSSPeakMB           float64 `json:"gateway_rss_peak_mb"`
	RSSPerStreamKB      float64 `json:"gateway_rss_per_stream_kb"`
	// RoundMedian… are the medians over the rounds of the differences measured within each
	// round (Rounds), robust to one round that the host disturbed.
	RoundMedianAddedP50us     float64       `json:"round_median_added_p50_us"`
	RoundMedianAddedP99us     float64       `json:"round_median_added_p99_us"`
	RoundMedianAddedTTFBP50us float64       `json:"round_median_added_ttfb_p50_us"`
	RoundMedianAddedTTFBP99us float64       `json:"round_median_added_ttfb_p99_us"`
	Rounds                    []RoundReport `json:"rounds"`
	// StealPercent is the share of CPU time the hypervisor gave to other machines during the
	// latency phases (from /proc/stat; 0 where it is not reported). Above a few percent the
	// latencies say more about the host's neighbours than about the gateway.
	StealPercent float64 `json:"cpu_steal_percent"`
	// GatewayCPUPerRequestUs is the gateway process's CPU time (user and system) per
	// non-streamed request during its latency phases (0 where /proc is not readable).
	GatewayCPUPerRequestUs float64 `json:"gateway_cpu_per_request_us"`
	// Tracing is the gateway's tracing during the run ("off", "sink" or an OTLP endpoint).
	Tracing string `json:"tracing,omitempty"`

	// With a traced gateway alongside (Config.TracedGatewayURL): its CPU time per request and
	// its added p50 over the run, the median over the rounds of its added p50 and of the ratio
	// of its CPU per request to the untraced gateway's in the same round, and what it traces
	// to ("sink", an OTLP endpoint).
	TracedGatewayCPUPerRequestUs float64 `json:"traced_gateway_cpu_per_request_us,omitempty"`
	TracedAddedP50us             float64 `json:"traced_added_p50_us,omitempty"`
	RoundMedianTracedAddedP50us  float64 `json:"round_median_traced_added_p50_us,omitempty"`
	RoundMedianTracedCPURatio    float64 `json:"round_median_traced_cpu_ratio,omitempty"`
	TracedAlongside              string  `json:"traced_alongside,omitempty"`
}

// RoundReport is what one round measured: the gateway's added latencies within the round, the
// references' added p50s, and the CPU steal during its non-streaming phase.
type RoundReport struct {
	StealPercent    float64 `json:"cpu_steal_percent"`
	AddedP50us      float64 `json:"added_p50_us"`
	AddedP99us      float64 `json:"added_p99_us"`
	AddedTTFBP50us  float64 `json:"added_ttfb_p50_us"`
	AddedTTFBP99us  float64 `json:"added_ttfb_p99_us"`
	RelayAddedP50us float64 `json:"relay_added_p50_us,omitempty"`
	FloorAddedP50us float64 `json:"floor_added_p50_us,omitempty"`
	// The gateway's CPU time per request in the round's non-streaming phase (0 where /proc is
	// not readable), and, with a traced gateway alongside, its added p50 and CPU per request.
	GatewayCPUPerRequestUs       float64 `json:"gateway_cpu_per_request_us,omitempty"`
	TracedAddedP50us             float64 `json:"traced_added_p50_us,omitempty"`
	TracedGatewayCPUPerRequestUs float64 `json:"traced_gateway_cpu_per_request_us,omitempty"`
}

// median is the median of v (the mean of the middle two for an even count).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// stealPercent is the steal share between two cpuSteal readings.
func stealPercent(steal0, total0, steal1, total1 uint64) float64 {
	if total1 <= total0 {
		return 0
	}
	return 100 * float64(steal1-steal0) / float64(total1-total0)
}

func (c *Config) defaults() {
	if c.Rate <= 0 {
		c.Rate = 1000
	}
	if c.Phase <= 0 {
		c.Phase = 3 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 4
	}
	if c.Streams <= 0 {
		c.Streams = 1000
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

type target struct {
	url    string
	header http.Header
	body   []byte
}

func (c *Config) targets(stream bool, model string) (direct, gateway target) {
	body := func(m string) []byte {
		s := ""
		if stream {
			s = `,"stream":true`
		}
		return fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":16%s}`, m, s)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	gh := h.Clone()
	gh.Set("Authorization", "Bearer "+c.Key)
	return target{c.DirectURL + "/v1/chat/completions", h, body(c.DirectModel)},
		target{c.GatewayURL + "/v1/chat/completions", gh, body(model)}
}

// retarget is the gateway target t sent to the gateway at base instead.
func retarget(t target, base string) target {
	t.url = base + "/v1/chat/completions"
	return t
}

// through is the direct target sent through the relay at base.
func through(base string, direct target) target {
	direct.url = base + "/v1/chat/completions"
	return direct
}

// Run performs every phase and returns the report.
func Run(ctx context.Context, c Config) (Report, error) {
	c.defaults()
	r := Report{Rate: c.Rate, Streams: c.Streams}
	direct, gateway := c.targets(false, c.GatewayModel)
	stealBefore, totalBefore := cpuSteal()

	// The targets of the latency phases: the simulator directly, through the gateway and, when
	// there is one, through the bare relay. Each round measures them in turn, starting with a
	// different one each round, so that a drift of the machine's load weighs on all alike.
	type side struct {
		name string
		// base is a reference relay's base URL ("" for direct and gateway).
		base string
		t    target
		m    vegeta.Metrics
		ttfb []time.Duration
		// Each round's latencies (non-streaming) and times to first byte, in order.
		roundLat, roundTTFB [][]time.Duration
		// pid is the gateway process of a gateway side (0 for the others), whose CPU time per
		// request each round's non-streaming phase measures (roundCPU, in µs; 0 unread).
		pid      int
		roundCPU []float64
	}
	sides := []*side{{name: "direct", t: direct}, {name: "gateway", t: gateway, pid: c.GatewayPID}}
	var relay, floor, traced *side
	if c.RelayURL != "" {
		relay = &side{name: "relay", base: c.RelayURL, t: through(c.RelayURL, direct)}
		sides = append(sides, relay)
	}
	if c.FloorURL != "" {
		floor = &side{name: "byte relay", base: c.FloorURL, t: through(c.FloorURL, direct)}
		sides = append(sides, floor)
	}
	if c.TracedGatewayURL != "" {
		traced = &side{name: "gateway traced", t: retarget(gateway, c.TracedGatewayURL), pid: c.TracedGatewayPID}
		sides = append(sides, traced)
	}
	rotation := func(round int) []*side {
		out := make([]*side, 0, len(sides))
		for i := range sides {
			out = append(out, sides[(round-1+i)%len(sides)])
		}
		return out
	}
	names := func(ss []*side) string {
		var n []string
		for _, s := range ss {
			n = append(n, s.name)
		}
		return strings.Join(n, ", ")
	}

	// Warm every path (connections, caches, credit holds) for 2 s, or a phase when shorter.
	for _, s := range sides {
		attack(s.t, 200, min(2*time.Second, c.Phase), 0)
	}
	// Each gateway's CPU time over its latency phases, and the requests they sent.
	cpuTime := map[*side]time.Duration{}
	cpuRequests := map[*side]int{}
	cpuOK := c.GatewayPID > 0
	for round := 1; round <= c.Rounds; round++ {
		order := rotation(round)
		fmt.Fprintf(c.Log, "round %d/%d: %d req/s non-streaming: %s\n", round, c.Rounds, c.Rate, names(order))
		steal0, total0 := cpuSteal()
		for _, s := range order {
			var lat []time.Duration
			var cpu0 time.Duration
			var cpuErr error
			if s.pid > 0 {
				cpu0, cpuErr = processCPU(s.pid)
			}
			results := attack(s.t, c.Rate, c.Phase, 0)
			if s.pid > 0 {
				perRequest := 0.0
				if cpu1, err := processCPU(s.pid); cpuErr != nil || err != nil {
					cpuOK = false
				} else if len(results) > 0 {
					cpuTime[s] += cpu1 - cpu0
					cpuRequests[s] += len(results)
					perRequest = us(cpu1-cpu0) / float64(len(results))
				}
				s.roundCPU = append(s.roundCPU, perRequest)
			}
			for _, res := range results {
				s.m.Add(res)
				if res.Code == http.StatusOK {
					lat = append(lat, res.Latency)
				}
			}
			s.roundLat = append(s.roundLat, lat)
		}
		steal1, total1 := cpuSteal()
		r.Rounds = append(r.Rounds, RoundReport{StealPercent: stealPercent(steal0, total0, steal1, total1)})
	}
	for _, s := range sides {
		s.m.Close()
	}
	dm, gm := &sides[0].m, &sides[1].m
	r.DirectP50us, r.DirectP99us = us(dm.Latencies.P50), us(dm.Latencies.P99)
	r.GatewayP50us, r.GatewayP99us = us(gm.Latencies.P50), us(gm.Latencies.P99)
	r.AddedP50us, r.AddedP99us = r.GatewayP50us-r.DirectP50us, r.GatewayP99us-r.DirectP99us
	r.DirectSuccess, r.GatewaySuccess = dm.Success, gm.Success
	if cpuOK && cpuRequests[sides[1]] > 0 {
		r.GatewayCPUPerRequestUs = us(cpuTime[sides[1]]) / float64(cpuRequests[sides[1]])
	}
	if traced != nil {
		r.TracedAddedP50us = us(traced.m.Latencies.P50) - r.DirectP50us
		if cpuOK && cpuRequests[traced] > 0 {
			r.TracedGatewayCPUPerRequestUs = us(cpuTime[traced]) / float64(cpuRequests[traced])
		}
	}

	sd, sg := c.targets(true, c.GatewayModel)
	sides[0].t, sides[1].t = sd, sg
	for _, s := range sides[2:] {
		if s == traced {
			s.t = retarget(sg, c.TracedGatewayURL)
			continue
		}
		s.t = through(s.base, sd)
	}
	for round := 1; round <= c.Rounds; round++ {
		order := rotation(round)
		fmt.Fprintf(c.Log, "round %d/%d: streaming time to first byte: %s\n", round, c.Rounds, names(order))
		for _, s := range order {
			d := ttfb(ctx, s.t, c.Rate/4, c.Phase)
			s.ttfb = append(s.ttfb, d...)
			s.roundTTFB = append(s.roundTTFB, d)
		}
	}
	dTTFB, gTTFB := sides[0].ttfb, sides[1].ttfb
	r.StreamDirectP50us, r.StreamDirectP99us = us(pct(dTTFB, 0.50)), us(pct(dTTFB, 0.99))
	r.StreamGatewayP50us, r.StreamGatewayP99us = us(pct(gTTFB, 0.50)), us(pct(gTTFB, 0.99))
	r.AddedTTFBP50us, r.AddedTTFBP99us = r.StreamGatewayP50us-r.StreamDirectP50us, r.StreamGatewayP99us-r.StreamDirectP99us
	// The same differences within each round, whose sides ran minutes apart at most; their
	// median over the rounds is not moved by one round that the host disturbed.
	var a50, a99, t50, t99, tracedAdded, cpuRatios []float64
	for i := range r.Rounds {
		rd := &r.Rounds[i]
		d, g := sides[0], sides[1]
		rd.AddedP50us = us(pct(g.roundLat[i], 0.50)) - us(pct(d.roundLat[i], 0.50))
		rd.AddedP99us = us(pct(g.roundLat[i], 0.99)) - us(pct(d.roundLat[i], 0.99))
		rd.AddedTTFBP50us = us(pct(g.roundTTFB[i], 0.50)) - us(pct(d.roundTTFB[i], 0.50))
		rd.AddedTTFBP99us = us(pct(g.roundTTFB[i], 0.99)) - us(pct(d.roundTTFB[i], 0.99))
		if relay != nil {
			rd.RelayAddedP50us = us(pct(relay.roundLat[i], 0.50)) - us(pct(d.roundLat[i], 0.50))
		}
		if floor != nil {
			rd.FloorAddedP50us = us(pct(floor.roundLat[i], 0.50)) - us(pct(d.roundLat[i], 0.50))
		}
		if i < len(g.roundCPU) {
			rd.GatewayCPUPerRequestUs = g.roundCPU[i]
		}
		if traced != nil {
			rd.TracedAddedP50us = us(pct(traced.roundLat[i], 0.50)) - us(pct(d.roundLat[i], 0.50))
			tracedAdded = append(tracedAdded, rd.TracedAddedP50us)
			if i < len(traced.roundCPU) {
				rd.TracedGatewayCPUPerRequestUs = traced.roundCPU[i]
				if rd.GatewayCPUPerRequestUs > 0 && rd.TracedGatewayCPUPerRequestUs > 0 {
					cpuRatios = append(cpuRatios, rd.TracedGatewayCPUPerRequestUs/rd.GatewayCPUPerRequestUs)
				}
			}
		}
		a50, a99 = append(a50, rd.AddedP50us), append(a99, rd.AddedP99us)
		t50, t99 = append(t50, rd.AddedTTFBP50us), append(t99, rd.AddedTTFBP99us)
	}
	r.RoundMedianAddedP50us, r.RoundMedianAddedP99us = median(a50), median(a99)
	r.RoundMedianAddedTTFBP50us, r.RoundMedianAddedTTFBP99us = median(t50), median(t99)
	r.RoundMedianTracedAddedP50us, r.RoundMedianTracedCPURatio = median(tracedAdded), median(cpuRatios)
	// What a reference relay adds over direct: the medians and p99s of whole answers and of
	// streams' first bytes.
	added := func(s *side) (p50, p99, ttfb50, ttfb99 float64) {
		return us(s.m.Latencies.P50) - r.DirectP50us, us(s.m.Latencies.P99) - r.DirectP99us,
			us(pct(s.ttfb, 0.50)) - r.StreamDirectP50us, us(pct(s.ttfb, 0.99)) - r.StreamDirectP99us
	}
	if relay != nil {
		r.RelayAddedP50us, r.RelayAddedP99us, r.RelayAddedTTFBP50us, r.RelayAddedTTFBP99us = added(relay)
	}
	if floor != nil {
		r.FloorAddedP50us, r.FloorAddedP99us, r.FloorAddedTTFBP50us, r.FloorAddedTTFBP99us = added(floor)
	}
	stealAfter, totalAfter := cpuSteal()
	r.StealPercent = stealPercent(stealBefore, totalBefore, stealAfter, totalAfter)

	fmt.Fprintln(c.Log, "highest sustained rate: direct then gateway, 64 workers flat out")
	r.MaxDirectRPS = maxRate(direct, c.Phase)
	profiled := make(chan error, 1)
	if c.ProfileURL != "" && c.ProfileOut != "" {
		go func() { profiled <- fetchProfile(ctx, c.ProfileURL, c.ProfileOut, c.Phase) }()
	} else {
		profiled <- nil
	}
	r.MaxGatewayRPS = maxRate(gateway, c.Phase)
	if err := <-profiled; err != nil {
		fmt.Fprintf(c.Log, "CPU profile not written: %v\n", err)
	}
	if r.MaxDirectRPS > 0 {
		r.MaxRPSRatio = r.MaxGatewayRPS / r.MaxDirectRPS
	}

	fmt.Fprintf(c.Log, "%d concurrent streams through the gateway\n", c.Streams)
	before, _ := rss(c.GatewayPID)
	r.RSSBeforeMB = float64(before) / 1024
	completed, peak := holdStreams(ctx, c, c.Streams)
	r.StreamsCompleted = completed
	r.RSSPeakMB = float64(peak) / 1024
	if c.Streams > 0 {
		r.RSSPerStreamKB = float64(peak-before) / float64(c.Streams)
	}
	return r, nil
}

// fetchProfile takes a CPU profile of du from a pprof endpoint and writes it to path.
func fetchProfile(ctx context.Context, url, path string, du time.Duration) error {
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s?seconds=%d", url, max(1, int(du.Seconds()))), nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, res.Status)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// attack runs vegeta at rate for du (rate 0: flat out with workers).
func attack(t target, rate int, du time.Duration, workers uint64) []*vegeta.Result {
	tr := vegeta.NewStaticTargeter(vegeta.Target{Method: "POST", URL: t.url, Header: t.header, Body: t.body})
	opts := []func(*vegeta.Attacker){vegeta.KeepAlive(true), vegeta.Timeout(30 * time.Second), vegeta.MaxConnections(10000)}
	var pacer vegeta.Pacer = vegeta.Rate{Freq: rate, Per: time.Second}
	if rate == 0 {
		pacer = vegeta.Rate{Freq: 0}
		opts = append(opts, vegeta.Workers(workers), vegeta.MaxWorkers(workers))
	}
	a := vegeta.NewAttacker(opts...)
	var out []*vegeta.Result
	for res := range a.Attack(tr, pacer, du, "bench") {
		out = append(out, res)
	}
	return out
}

// maxRate is the throughput of successful requests with 64 workers sending as fast as they can.
func maxRate(t target, du time.Duration) float64 {
	var m vegeta.Metrics
	for _, res := range attack(t, 0, du, 64) {
		m.Add(res)
	}
	m.Close()
	return m.Throughput
}

// ttfb opens streams at rate for du and returns each one's time to the first body byte.
func ttfb(ctx context.Context, t target, rate int, du time.Duration) []time.Duration {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
	var (
		mu  sync.Mutex
		out []time.Duration
		wg  sync.WaitGroup
	)
	tick := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
	defer tick.Stop()
	end := time.Now().Add(du)
	for time.Now().Before(end) && ctx.Err() == nil {
		<-tick.C
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", t.url, strings.NewReader(string(t.body)))
			req.Header = t.header.Clone()
			start := time.Now()
			res, err := client.Do(req)
			if err != nil {
				return
			}
			defer res.Body.Close()
			var one [1]byte
			if n, _ := res.Body.Read(one[:]); n == 1 && res.StatusCode == 200 {
				d := time.Since(start)
				mu.Lock()
				out = append(out, d)
				mu.Unlock()
			}
			_, _ = io.Copy(io.Discard, res.Body)
		})
	}
	wg.Wait()
	return out
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// holdStreams opens n streams of the slow model at once and reads them to the end while
// sampling the gateway's resident memory; it returns how many completed and the peak in KiB.
func holdStreams(ctx context.Context, c Config, n int) (int, int64) {
	_, t := c.targets(true, c.SlowModel)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}}
	var completed atomic.Int64
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			if kb, err := rss(c.GatewayPID); err == nil && kb > peak.Load() {
				peak.Store(kb)
			}
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", t.url, strings.NewReader(string(t.body)))
			req.Header = t.header.Clone()
			res, err := client.Do(req)
			if err != nil {
				return
			}
			defer res.Body.Close()
			sc := bufio.NewScanner(res.Body)
			for sc.Scan() {
				if sc.Text() == "data: [DONE]" {
					completed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	if hwm, err := statusField(c.GatewayPID, "VmHWM:"); err == nil && hwm > peak.Load() {
		peak.Store(hwm)
	}
	return int(completed.Load()), peak.Load()
}

// cpuSteal reads the machine's steal time and total CPU time, in clock ticks, from /proc/stat
// (zeros where it cannot be read).
func cpuSteal() (steal, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0
	}
	// user nice system idle iowait irq softirq steal [guest guest_nice, already in user and nice]
	for i, f := range fields[1:9] {
		v, _ := strconv.ParseUint(f, 10, 64)
		total += v
		if i == 7 {
			steal = v
		}
	}
	return steal, total
}

// rss is the process's resident set in KiB.
func rss(pid int) (int64, error) { return statusField(pid, "VmRSS:") }

func statusField(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s not in /proc/%d/status", field, pid)
}
