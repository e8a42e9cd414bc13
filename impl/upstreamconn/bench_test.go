package upstreamconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/sim"
	"github.com/tollgate/tollgate/impl/sse"
)

// The benchmarks talk to the upstream simulator running in a child process (this test binary
// started again with simChildEnv set), so that the CPU time and allocations they report are the
// client's alone and not the simulator's.
const simChildEnv = "UPSTREAMCONN_SIMULATOR_CHILD"

// pacedEnv, when set to a duration, enables TestPacedLatency and sets how long each of its runs
// lasts, e.g. UPSTREAMCONN_PACED=5s.
const pacedEnv = "UPSTREAMCONN_PACED"

func TestMain(m *testing.M) {
	if os.Getenv(simChildEnv) == "1" {
		serveSimulator()
		return
	}
	os.Exit(m.Run())
}

// serveSimulator serves the simulator on a loopback port, prints the address on stdout and
// stops when stdin is closed (when the parent ends).
func serveSimulator() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: sim.New(sim.Options{}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
}

// startSimulator starts the simulator child process and returns its base URL.
func startSimulator(tb testing.TB) string {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), simChildEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("simulator child: %v", err)
	}
	return "http://" + strings.TrimSpace(addr)
}

// upstreamCall is the gateway's typical upstream request: a small JSON chat completion,
// answered either as one JSON body with Content-Length or as a chunked SSE stream.
type upstreamCall struct {
	name   string
	body   []byte
	stream bool
}

var upstreamCalls = []upstreamCall{
	{name: "json", body: []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello to the gateway benchmark in a few words, please."}],"max_tokens":64}`)},
	{name: "sse", stream: true, body: []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello to the gateway benchmark in a few words, please."}],"max_tokens":64,"stream":true}`)},
	// A long conversation: a body larger than the write buffer, copied to the connection while
	// watching for an early answer.
	{name: "json-64KiB", body: []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("Say hello to the gateway benchmark. ", 64<<10/36) + `"}],"max_tokens":64}`)},
}

// transportUnderTest builds one of the compared transports.
type transportUnderTest struct {
	name string
	new  func() http.RoundTripper
}

var transportsUnderTest = []transportUnderTest{
	{name: "nethttp", new: func() http.RoundTripper {
		// What provider.NewClient configured before this package existed.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = 4096
		t.MaxIdleConnsPerHost = 1024
		t.IdleConnTimeout = 90 * time.Second
		t.ResponseHeaderTimeout = 10 * time.Minute
		t.DisableCompression = true
		return t
	}},
	{name: "upstreamconn", new: func() http.RoundTripper {
		return &Transport{MaxIdlePerHost: 1024, IdleTimeout: 90 * time.Second, ResponseHeaderTimeout: 10 * time.Minute}
	}},
}

// do sends call the way impl/provider does and reads the answer the way impl/httpapi does.
func (call upstreamCall) do(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(call.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if call.stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set("Authorization", "Bearer sk-benchmark")
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	if !call.stream {
		raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		if err == nil && len(raw) < 500 {
			err = fmt.Errorf("short answer of %d bytes", len(raw))
		}
		return err
	}
	r := sse.NewReader(res.Body)
	events := 0
	for {
		_, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		events++
	}
	if events < 10 {
		return fmt.Errorf("only %d events", events)
	}
	return nil
}

// processCPU is the CPU time this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRoundTrip compares the transports sequentially, one request at a time. cpu-ns/op is
// the client process's CPU time per round trip (the simulator runs in another process).
func BenchmarkRoundTrip(b *testing.B) {
	base := startSimulator(b)
	for _, call := range upstreamCalls {
		for _, tut := range transportsUnderTest {
			b.Run(call.name+"/"+tut.name, func(b *testing.B) {
				client := &http.Client{Transport: tut.new()}
				defer client.CloseIdleConnections()
				ctx, cancel := context.WithCancel(context.Background()) // like a server request's context
				defer cancel()
				url := base + "/v1/chat/completions"
				for range 10 {
					if err := call.do(ctx, client, url); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				cpu := processCPU()
				for i := 0; i < b.N; i++ {
					if err := call.do(ctx, client, url); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// TestPacedLatency sends requests at a fixed 1000 per second, each on its own goroutine as the
// gateway's handlers do, and logs the latency distribution and the client CPU time per request
// of each transport. The transports take turns in one-second slices, so that other load on the
// machine falls on both alike. It only measures (there is nothing to assert) and runs only when
// UPSTREAMCONN_PACED is set to the total time per transport and answer shape, e.g.
//
//	UPSTREAMCONN_PACED=10s go test -run PacedLatency -v ./impl/upstreamconn
func TestPacedLatency(t *testing.T) {
	total, err := time.ParseDuration(os.Getenv(pacedEnv))
	if err != nil {
		t.Skipf("set %s to a duration to measure latency at a fixed rate", pacedEnv)
	}
	const (
		rate  = 1000
		slice = time.Second
	)
	base := startSimulator(t)
	url := base + "/v1/chat/completions"
	for _, call := range upstreamCalls {
		clients := make([]*http.Client, len(transportsUnderTest))
		results := make([]pacedResult, len(transportsUnderTest))
		for i, tut := range transportsUnderTest {
			clients[i] = &http.Client{Transport: tut.new()}
			for range 50 { // warm the pool and the code paths
				if err := call.do(context.Background(), clients[i], url); err != nil {
					t.Fatal(err)
				}
			}
		}
		for n := range int(total / slice) {
			for j := range clients {
				i := (j + n) % len(clients) // alternate which transport goes first
				results[i].add(pacedRun(clients[i], call, url, rate, slice))
			}
		}
		for i, tut := range transportsUnderTest {
			clients[i].CloseIdleConnections()
			t.Logf("%-4s %-12s %s", call.name, tut.name, results[i].summary(rate))
		}
	}
}

// pacedResult accumulates the latencies, errors and CPU time of paced runs.
type pacedResult struct {
	latencies []time.Duration
	errors    int
	cpu       time.Duration
}

func (r *pacedResult) add(o pacedResult) {
	r.latencies = append(r.latencies, o.latencies...)
	r.errors += o.errors
	r.cpu += o.cpu
}

func (r *pacedResult) summary(rate int) string {
	l := slices.Sorted(slices.Values(r.latencies))
	n := len(l)
	at := func(q float64) time.Duration { return l[min(n-1, int(q*float64(n)))].Round(time.Microsecond) }
	return fmt.Sprintf("%d req at %d/s: p50 %v  p90 %v  p99 %v  p99.9 %v  max %v  client CPU %v/req  errors %d",
		n, rate, at(0.50), at(0.90), at(0.99), at(0.999), l[n-1].Round(time.Microsecond), (r.cpu / time.Duration(n)).Round(100*time.Nanosecond), r.errors)
}

// pacedRun sends call at rate per second for d, starting each request on schedule whatever the
// others are doing, and returns the time each took from sending to the end of its body.
func pacedRun(client *http.Client, call upstreamCall, url string, rate int, d time.Duration) pacedResult {
	n := int(d.Seconds() * float64(rate))
	period := time.Second / time.Duration(rate)
	latencies := make([]time.Duration, n)
	failed := make([]bool, n)
	var wg sync.WaitGroup
	cpu := processCPU()
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * period)); wait > 0 {
			time.Sleep(wait)
		}
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background()) // like a server request's context
			defer cancel()
			t0 := time.Now()
			err := call.do(ctx, client, url)
			latencies[i] = time.Since(t0)
			failed[i] = err != nil
		})
	}
	wg.Wait()
	r := pacedResult{latencies: latencies, cpu: processCPU() - cpu}
	for _, f := range failed {
		if f {
			r.errors++
		}
	}
	return r
}
