//go:build dev

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/bench"
	"github.com/tollgate/tollgate/impl/pgcluster"
)

// checkBenchTracing checks bench's -tracing, -traced-alongside and -sampling before anything is
// started: a mistake in them is told at once, not after the database, the simulators and the
// relays have started.
func checkBenchTracing(tracing, alongside string, sampling float64) error {
	if alongside != "" && tracing != "off" {
		return usageError("-traced-alongside compares a traced gateway with an untraced one: leave -tracing off")
	}
	modes := []string{tracing}
	if alongside != "" {
		modes = append(modes, alongside)
	}
	traced := false
	for _, mode := range modes {
		if mode != "off" && mode != "sink" && !strings.HasPrefix(mode, "http://") && !strings.HasPrefix(mode, "https://") {
			return usageError("-tracing and -traced-alongside take sink or an OTLP/HTTP endpoint URL (and -tracing off)")
		}
		traced = traced || mode != "off"
	}
	if traced && sampling <= 0 {
		return usageError("-sampling takes a ratio above 0 and at most 1")
	}
	return nil
}

// runBench starts two simulators (fast, and slowly streaming), a throwaway PostgreSQL cluster
// (unless DATABASE_URL is set), a gateway and the two reference relays (bare and byte) in
// processes of their own, then drives them with impl/devkit/bench and prints and writes the report.
func runBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	out := fs.String("out", "bench-results.json", "where to write the JSON report")
	rate := fs.Int("rate", 1000, "request rate of the latency phases (per second)")
	phase := fs.Duration("phase", 3*time.Second, "length of each measured phase")
	rounds := fs.Int("rounds", 4, "direct/gateway alternations (the order alternates: direct first, then gateway first)")
	streams := fs.Int("streams", 1000, "concurrent streams held open")
	profile := fs.String("cpuprofile", "", "write the gateway's CPU profile, taken while it runs flat out, to this file")
	tracing := fs.String("tracing", "off", "the gateway's tracing: off; sink (exported over OTLP/HTTP to a local sink that discards the spans); or an OTLP/HTTP endpoint URL (a local collector or Jaeger)")
	alongside := fs.String("traced-alongside", "", "run a second gateway alongside the first, tracing its requests (sink, or an OTLP/HTTP endpoint URL, at -sampling), measured in the same rounds: what tracing costs a request under the same load of the machine (the first gateway untraced: -tracing off)")
	sampling := fs.Float64("sampling", 1, "with -tracing, the share of requests traced (1: every one, always_on; below 1: parentbased_traceidratio with that ratio)")
	if err := parseFlags(fs, args, os.Stdout); err != nil {
		return err
	}
	if err := takesNoArguments(fs); err != nil {
		return err
	}
	if err := checkBenchTracing(*tracing, *alongside, *sampling); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "tollgate-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", a...) }

	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" {
		if err := os.Chmod(work, 0o711); err != nil {
			return err
		}
		c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(work, "pg"), Ephemeral: true,
			Settings: map[string]string{"max_connections": "300"}})
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		defer c.Stop(context.Background())
		if err := c.CreateDatabase(ctx, "tollgate"); err != nil {
			return err
		}
		dbURL = c.ConnString("tollgate")
	}
	fast, slow, gw, metricsAddr, relay, floor := freeAddr(), freeAddr(), freeAddr(), freeAddr(), freeAddr(), freeAddr()
	cfgPath := filepath.Join(work, "bench.yaml")
	if err := os.WriteFile(cfgPath, []byte(benchConfig(fast, slow, gw, metricsAddr)), 0o644); err != nil {
		return err
	}
	env := append(os.Environ(), "DATABASE_URL="+dbURL, "TOLLGATE_CONFIG="+cfgPath, "REDIS_URL=")
	start := func(name string, args ...string) (*exec.Cmd, error) {
		cmd := exec.Command(self, args...)
		cmd.Env = env
		logFile, err := os.Create(filepath.Join(work, name+".log"))
		if err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		return cmd, cmd.Start()
	}
	stopAll := []*exec.Cmd{}
	var stopSinks []func()
	defer func() {
		for _, c := range stopAll {
			_ = c.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = c.Process.Kill()
			}
		}
	}()
	for _, s := range []struct{ name, addr, tps, words string }{{"sim-fast", fast, "0", "16"}, {"sim-slow", slow, "20", "100"}} {
		c, err := start(s.name, "sim", "-listen", s.addr, "-tps", s.tps, "-words", s.words)
		if err != nil {
			return err
		}
		stopAll = append(stopAll, c)
	}
	relayCmd, err := start("relay", "relay", "-listen", relay, "-upstream", "http://"+fast)
	if err != nil {
		return err
	}
	stopAll = append(stopAll, relayCmd)
	floorCmd, err := start("byte-relay", "relay", "-bytes", "-listen", floor, "-upstream", "http://"+fast)
	if err != nil {
		return err
	}
	stopAll = append(stopAll, floorCmd)
	// Account, credit and a key with a (high) cap, so the rate limiter and metering both run.
	run := func(args ...string) (string, error) {
		cmd := exec.Command(self, args...)
		cmd.Env = append(env, "LOG_LEVEL=error")
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		err := cmd.Run()
		return strings.TrimSpace(b.String()), err
	}
	if out, err := run("migrate"); err != nil {
		return fmt.Errorf("migrate: %v: %s", err, out)
	}
	if out, err := run("admin", "account", "create", "bench"); err != nil && !strings.Contains(out, "exists") {
		return fmt.Errorf("create account: %v: %s", err, out)
	}
	if out, err := run("admin", "credit", "grant", "bench", "1000000000000"); err != nil {
		return fmt.Errorf("grant credit: %v: %s", err, out)
	}
	key, err := run("admin", "key", "create", "bench", "-rpm", "100000000", "-quiet")
	if err != nil {
		return fmt.Errorf("create key: %v: %s", err, key)
	}
	// Tracing, when asked for, applies to the gateway alone (the environment of the processes
	// started after this point), or to the second gateway alongside it.
	tracingEnv := func(mode string) ([]string, error) {
		var out []string
		switch mode {
		case "off":
			return nil, nil
		case "sink":
			sink, err := bench.StartOTLPSink()
			if err != nil {
				return nil, err
			}
			stopSinks = append(stopSinks, func() { sink.Close(); logf("trace sink took %s", sink) })
			out = append(out, "OTEL_EXPORTER_OTLP_ENDPOINT="+sink.URL)
		default: // an endpoint URL (checkBenchTracing)
			out = append(out, "OTEL_EXPORTER_OTLP_ENDPOINT="+mode)
		}
		out = append(out, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
		if *sampling >= 1 {
			out = append(out, "OTEL_TRACES_SAMPLER=always_on")
		} else {
			out = append(out, "OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG="+strconv.FormatFloat(*sampling, 'f', -1, 64))
		}
		return out, nil
	}
	defer func() {
		for _, stop := range stopSinks {
			stop()
		}
	}()
	traceEnv, err := tracingEnv(*tracing)
	if err != nil {
		return err
	}
	untracedEnv := env
	env = append(env, traceEnv...)
	gwCmd, err := start("gateway", "serve", "-listen", gw, "-pprof")
	if err != nil {
		return err
	}
	stopAll = append([]*exec.Cmd{gwCmd}, stopAll...)
	if err := waitReady("http://"+gw+"/v1/models", key, 30*time.Second); err != nil {
		return fmt.Errorf("gateway did not start (log in %s): %w", filepath.Join(work, "gateway.log"), err)
	}
	for _, r := range []struct{ name, addr string }{{"relay", relay}, {"byte-relay", floor}} {
		if err := waitListening(r.addr, 10*time.Second); err != nil {
			return fmt.Errorf("%s did not start (log in %s): %w", r.name, filepath.Join(work, r.name+".log"), err)
		}
	}
	logf("gateway pid %d on %s; simulators on %s (fast) and %s (slow); relay on %s, byte relay on %s", gwCmd.Process.Pid, gw, fast, slow, relay, floor)
	var tracedURL string
	var tracedPID int
	if *alongside != "" {
		alongsideEnv, err := tracingEnv(*alongside)
		if err != nil {
			return err
		}
		env = slices.Concat(untracedEnv, alongsideEnv)
		gw2, metrics2 := freeAddr(), freeAddr()
		cmd, err := start("gateway-traced", "serve", "-listen", gw2, "-metrics-listen", metrics2)
		if err != nil {
			return err
		}
		stopAll = append([]*exec.Cmd{cmd}, stopAll...)
		if err := waitReady("http://"+gw2+"/v1/models", key, 30*time.Second); err != nil {
			return fmt.Errorf("traced gateway did not start (log in %s): %w", filepath.Join(work, "gateway-traced.log"), err)
		}
		tracedURL, tracedPID = "http://"+gw2, cmd.Process.Pid
		logf("traced gateway pid %d on %s, tracing to %s", tracedPID, gw2, *alongside)
	}

	report, err := bench.Run(ctx, bench.Config{
		DirectURL: "http://" + fast, GatewayURL: "http://" + gw, RelayURL: "http://" + relay, FloorURL: "http://" + floor, Key: key,
		DirectModel: "sim-general", GatewayModel: "service-flint-base", SlowModel: "bench-slow",
		GatewayPID: gwCmd.Process.Pid, TracedGatewayURL: tracedURL, TracedGatewayPID: tracedPID, Rate: *rate, Phase: *phase, Rounds: *rounds, Streams: *streams, Log: os.Stderr,
		ProfileURL: "http://" + metricsAddr + "/debug/pprof/profile", ProfileOut: *profile,
	})
	if err != nil {
		return err
	}
	report.Machine = machine()
	report.Tracing = *tracing
	report.TracedAlongside = *alongside
	if *tracing != "off" && *sampling < 1 {
		report.Tracing += " at " + strconv.FormatFloat(*sampling*100, 'f', -1, 64) + " % sampling"
	}
	b, _ := json.MarshalIndent(report, "", "  ")
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf(`tollgate bench (%s; CPU steal during the latency phases %.1f%%)
non-streaming at %d req/s   direct p50 %.0f µs p99 %.0f µs | gateway p50 %.0f µs p99 %.0f µs | added p50 %.0f µs p99 %.0f µs | success %.3f / %.3f
streaming first byte        direct p50 %.0f µs p99 %.0f µs | gateway p50 %.0f µs p99 %.0f µs | added p50 %.0f µs p99 %.0f µs
median of per-round added   p50 %.0f µs p99 %.0f µs | streaming first byte p50 %.0f µs p99 %.0f µs | steal per round %s
bare relay, for reference   added p50 %.0f µs p99 %.0f µs | streaming first byte added p50 %.0f µs p99 %.0f µs
byte relay, the floor       added p50 %.0f µs p99 %.0f µs | streaming first byte added p50 %.0f µs p99 %.0f µs
added p50 per round         gateway / bare relay / byte relay: %s
highest sustained rate      direct %.0f req/s | gateway %.0f req/s | ratio %.2f
%d concurrent streams       completed %d | gateway RSS %.1f MB before, %.1f MB peak (%.1f KB per stream)
gateway CPU per request     %.0f µs (non-streaming latency phases) | tracing %s
report written to %s
`, report.Machine["cpu"], report.StealPercent, report.Rate,
		report.DirectP50us, report.DirectP99us, report.GatewayP50us, report.GatewayP99us, report.AddedP50us, report.AddedP99us, report.DirectSuccess, report.GatewaySuccess,
		report.StreamDirectP50us, report.StreamDirectP99us, report.StreamGatewayP50us, report.StreamGatewayP99us, report.AddedTTFBP50us, report.AddedTTFBP99us,
		report.RoundMedianAddedP50us, report.RoundMedianAddedP99us, report.RoundMedianAddedTTFBP50us, report.RoundMedianAddedTTFBP99us, roundSteal(report.Rounds),
		report.RelayAddedP50us, report.RelayAddedP99us, report.RelayAddedTTFBP50us, report.RelayAddedTTFBP99us,
		report.FloorAddedP50us, report.FloorAddedP99us, report.FloorAddedTTFBP50us, report.FloorAddedTTFBP99us, roundAdded(report.Rounds),
		report.MaxDirectRPS, report.MaxGatewayRPS, report.MaxRPSRatio,
		report.Streams, report.StreamsCompleted, report.RSSBeforeMB, report.RSSPeakMB, report.RSSPerStreamKB,
		report.GatewayCPUPerRequestUs, report.Tracing, *out)
	if *alongside != "" {
		fmt.Printf(`traced alongside (%s)     CPU per request %.0f µs untraced, %.0f µs traced (+%.0f %%; median per-round ratio %.3f) | added p50 %.0f µs, median per round %.0f µs
per round (CPU, untraced / traced) %s
`, *alongside, report.GatewayCPUPerRequestUs, report.TracedGatewayCPUPerRequestUs,
			100*(report.TracedGatewayCPUPerRequestUs/report.GatewayCPUPerRequestUs-1), report.RoundMedianTracedCPURatio,
			report.TracedAddedP50us, report.RoundMedianTracedAddedP50us, roundCPU(report.Rounds))
	}
	return nil
}

// roundCPU lists each round's CPU time per request of the gateway and of the traced gateway.
func roundCPU(rounds []bench.RoundReport) string {
	var parts []string
	for _, r := range rounds {
		parts = append(parts, fmt.Sprintf("%.0f / %.0f µs", r.GatewayCPUPerRequestUs, r.TracedGatewayCPUPerRequestUs))
	}
	return strings.Join(parts, ", ")
}

// roundAdded lists each round's added p50 of the gateway and the two reference relays.
func roundAdded(rounds []bench.RoundReport) string {
	var parts []string
	for _, r := range rounds {
		parts = append(parts, fmt.Sprintf("%.0f / %.0f / %.0f µs", r.AddedP50us, r.RelayAddedP50us, r.FloorAddedP50us))
	}
	return strings.Join(parts, ", ")
}

// roundSteal lists each round's CPU steal.
func roundSteal(rounds []bench.RoundReport) string {
	var parts []string
	for _, r := range rounds {
		parts = append(parts, fmt.Sprintf("%.1f%%", r.StealPercent))
	}
	return strings.Join(parts, " ")
}

func benchConfig(fast, slow, gw, metrics string) string {
	return fmt.Sprintf(`server:
  listen: %q
  metrics_listen: %q
providers:
  - {name: sim-fast, kind: openai-chat, base_url: "http://%s/v1"}
  - {name: sim-slow, kind: openai-chat, base_url: "http://%s/v1"}
models:
  - id: service-flint-base
    family: chat
    owned_by: tollgate
    price: {input_micros_per_mtok: 500000, output_micros_per_mtok: 1500000}
    max_output_tokens: 4096
    backend: {provider: sim-fast, model: sim-general}
  - id: bench-slow
    family: chat
    owned_by: tollgate
    price: {input_micros_per_mtok: 500000, output_micros_per_mtok: 1500000}
    max_output_tokens: 4096
    backend: {provider: sim-slow, model: sim-general}
plans:
  - {name: default, models: [service-flint-base, bench-slow], default_rpm: 0}
`, gw, metrics, fast, slow)
}

func waitReady(url, key string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
			err = errors.New(res.Status)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// machine describes where the bench ran.
func machine() map[string]string {
	m := map[string]string{"cores": fmt.Sprint(runtime.NumCPU()), "go": runtime.Version(), "os": runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m["cpu"] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if line, _, ok := strings.Cut(string(b), "\n"); ok {
			m["memory"] = strings.Join(strings.Fields(strings.TrimPrefix(line, "MemTotal:")), " ")
		}
	}
	return m
}
