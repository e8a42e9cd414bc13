package replicas_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/jaegertest"
)

// Issue 20's process-level checks: the Grafana dashboard in docs/grafana queries only metrics
// the gateway exposes, and (with the Jaeger harness) an MCP tool call and an agent session
// continued on another process after a SIGKILL read back from a real trace backend as the
// span trees they should be.

// dashboardPath is the Grafana dashboard shipped for the gateway's Prometheus metrics.
const dashboardPath = "../../docs/grafana/tollgate.json"

// launchWith starts one gateway process like launch, with extra arguments (replacing
// launch's) and environment.
func (c *cluster) launchWith(name string, env []string, args ...string) *gatewayProcess {
	c.t.Helper()
	dir := c.t.TempDir()
	p := &gatewayProcess{t: c.t, name: name, log: newProcessLog(), exited: make(chan struct{})}
	p.cmd = exec.Command(c.bin, append([]string{"serve", "-listen", "127.0.0.1:0"}, args...)...)
	p.cmd.Dir, p.cmd.Env = dir, append(append(c.env(name, dir), c.procEnv...), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	setParentDeathSignal(p.cmd)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			close(p.exited)
			return
		}
		started <- nil
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	c.t.Cleanup(p.stop)
	p.waitListening()
	if p.url == "" {
		c.t.Fatalf("%s did not start: %v\n%s", name, p.startErr, p.log.tail(40))
	}
	return p
}

// logged is the addr of the process's first log line with the message msg ("" when none).
func (p *gatewayProcess) logged(msg string) string {
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	for _, line := range p.log.lines {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg {
			return rec.Addr
		}
	}
	return ""
}

// exposedMetrics scrapes a metrics listener and returns the metric families it lists (by
// their # TYPE lines) with their types.
func exposedMetrics(t *testing.T, addr string) map[string]string {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = f[3]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// grafanaDashboard is the part of Grafana's dashboard model the test reads.
type grafanaDashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

// The parts of a PromQL expression that are not metric names: label matchers, groupings,
// and what is left is scanned for tollgate's and the GenAI and MCP conventions' metric names.
var (
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promGrouping = regexp.MustCompile(`\b(by|without)\s*\([^)]*\)`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promMetric   = regexp.MustCompile(`\b(tollgate|gen_ai|mcp)_[a-z0-9_]+\b`)
)

// The labels a query reads: those it groups by, those its matchers select on, and those its
// legend names.
var (
	promGroupingLabels = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	promMatcherLabel   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	promLegendLabel    = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	seriesLabel        = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
)

// queriedLabels are the labels a panel's query reads of its metrics' series, but those the
// scrape adds (instance, job) and the histograms' le.
func queriedLabels(expr, legend string) []string {
	var out []string
	for _, g := range promGroupingLabels.FindAllStringSubmatch(expr, -1) {
		for l := range strings.SplitSeq(g[1], ",") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	for _, m := range promMatchers.FindAllString(expr, -1) {
		for _, l := range promMatcherLabel.FindAllStringSubmatch(m, -1) {
			out = append(out, l[1])
		}
	}
	for _, l := range promLegendLabel.FindAllStringSubmatch(legend, -1) {
		out = append(out, l[1])
	}
	return slices.DeleteFunc(out, func(l string) bool { return l == "" || l == "instance" || l == "job" || l == "le" })
}

// exposedLabels scrapes a metrics listener and returns the label names of each series name's
// samples.
func exposedLabels(t *testing.T, addr string) map[string]map[string]bool {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out := map[string]map[string]bool{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, _ := strings.Cut(strings.Fields(line)[0], "{")
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, l := range seriesLabel.FindAllStringSubmatch(labels, -1) {
			out[name][l[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// queriedMetrics are the metric names a PromQL expression reads.
func queriedMetrics(expr string) []string {
	e := promRange.ReplaceAllString(promGrouping.ReplaceAllString(promMatchers.ReplaceAllString(expr, ""), ""), "")
	return promMetric.FindAllString(e, -1)
}

// familyOf is the metric family a queried series belongs to: a histogram's _bucket, _sum and
// _count series are its family's.
func familyOf(series string, exposed map[string]string) string {
	if _, ok := exposed[series]; ok {
		return series
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok && exposed[base] == "histogram" {
			return base
		}
	}
	return ""
}

// TestGrafanaDashboardQueriesExposedMetrics: docs/grafana/tollgate.json is a Grafana dashboard
// on a Prometheus datasource variable whose every query reads metrics that `tollgate serve`
// exposes on its metrics listener — scraped from a real process after a JSON request, a
// stream, an MCP tool call, a 402 and spans dropped by an unreachable trace backend, so that
// every labelled family has a series — and that covers what operators look at: requests and
// errors by route, latency and added time, time to first token and the upstream's time to
// first chunk, tokens by type, MCP operations, credit refusals, the body budget and dropped
// spans.
func TestGrafanaDashboardQueriesExposedMetrics(t *testing.T) {
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s is not JSON: %v", dashboardPath, err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 30 || len(d.Panels) == 0 {
		t.Fatalf("%s is not a Grafana dashboard model: title %q, uid %q, schemaVersion %d, %d panels", dashboardPath, d.Title, d.UID, d.SchemaVersion, len(d.Panels))
	}
	dsVar := ""
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = "${" + v.Name + "}"
		}
	}
	if dsVar == "" {
		t.Fatal("the dashboard has no Prometheus datasource variable")
	}
	queried := map[string][]string{} // metric name → the panels that read it
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: grid position %+v off the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != dsVar {
			t.Errorf("panel %q does not query the datasource variable %s", p.Title, dsVar)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			names := queriedMetrics(q.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q, query %s: reads no tollgate metric: %s", p.Title, q.RefID, q.Expr)
			}
			for _, n := range names {
				queried[n] = append(queried[n], p.Title)
			}
		}
	}

	c := startCluster(t, 0)
	// Tracing to an address where nothing listens: every export fails, and the spans are
	// dropped and counted.
	p := c.launchWith("gw-metrics", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"},
		"-metrics-listen", "127.0.0.1:0")
	c.procs = append(c.procs, p)
	metricsAddr := p.logged("metrics listening")
	if metricsAddr == "" {
		t.Fatalf("the process did not log its metrics address:\n%s", p.log.tail(20))
	}
	_, key := c.newAccount("dash", 5_000_000, 0)
	_, broke := c.newAccount("dash-broke", 0, 0)
	for _, body := range []string{
		`{"model":"service-flint","messages":[{"role":"user","content":"Hello"}]}`,
		`{"model":"service-flint","stream":true,"messages":[{"role":"user","content":"Hello"}]}`,
	} {
		if a := c.call(0, "POST", "/v1/chat/completions", key.Plain, body); a.status != http.StatusOK {
			t.Fatalf("request: %s", a)
		}
	}
	if a := c.call(0, "POST", "/api/mcp", key.Plain,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_storage_datasets","arguments":{}}}`); a.status != http.StatusOK {
		t.Fatalf("MCP tool call: %s", a)
	}
	if a := c.call(0, "POST", "/v1/chat/completions", broke.Plain, `{"model":"service-flint","messages":[{"role":"user","content":"Hello"}]}`); a.status != http.StatusPaymentRequired {
		t.Fatalf("request without credit: %s", a)
	}

	// The spans are dropped when their batch fails to export, a few seconds on.
	deadline := time.Now().Add(30 * time.Second)
	var missing []string
	for {
		exposed := exposedMetrics(t, metricsAddr)
		missing = missing[:0]
		for n := range queried {
			if familyOf(n, exposed) == "" {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	slices.Sort(missing)
	for _, n := range missing {
		t.Errorf("the dashboard queries %s (panels %q), which the gateway does not expose", n, queried[n])
	}
	// Each label a query groups by, selects on or names in its legend is one its metrics'
	// series carry: a panel split by a label its metric lacks shows one unnamed line.
	labels := exposedLabels(t, metricsAddr)
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			for _, n := range queriedMetrics(q.Expr) {
				for _, l := range queriedLabels(q.Expr, q.LegendFormat) {
					if !labels[n][l] {
						t.Errorf("panel %q, query %s reads the label %s of %s, which its series do not carry", p.Title, q.RefID, l, n)
					}
				}
			}
		}
	}

	for _, want := range []string{"tollgate_http_requests_total", "tollgate_http_request_duration_seconds_bucket",
		"tollgate_added_seconds_bucket", "gen_ai_server_time_to_first_token_seconds_bucket", "gen_ai_client_token_usage_sum",
		"gen_ai_client_operation_duration_seconds_bucket", "tollgate_body_budget_in_use_bytes", "tollgate_trace_spans_dropped_total",
		"tollgate_credit_outage_refused_total", "gen_ai_client_operation_time_to_first_chunk_seconds_bucket",
		"mcp_server_operation_duration_seconds_count", "mcp_server_operation_duration_seconds_bucket",
		"tollgate_http_refused_heads_total"} {
		if len(queried[want]) == 0 {
			t.Errorf("no panel reads %s", want)
		}
	}
	if !strings.Contains(string(raw), `status=\"402\"`) {
		t.Error("no panel shows the 402 credit refusals")
	}
	t.Logf("%d panels read %d metrics, all exposed", len(d.Panels), len(queried))
}

// tracedEnv is the environment of a gateway process that sends its traces to j, as the
// replica named instance (service.instance.id).
func tracedEnv(j *jaegertest.Jaeger, instance string) []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + j.OTLPHTTP, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME=tollgate", "OTEL_RESOURCE_ATTRIBUTES=service.instance.id=" + instance}
}

// traceResponse splits an answer's traceresponse header into its trace and span ids.
func traceResponse(t *testing.T, a answer) (traceID, spanID string) {
	t.Helper()
	parts := strings.Split(a.header.Get("traceresponse"), "-")
	if len(parts) != 4 || len(parts[1]) != 32 || len(parts[2]) != 16 {
		t.Fatalf("no traceresponse header: %s (headers %v)", a, a.header)
	}
	return parts[1], parts[2]
}

// jaegerLinks reads what jaegertest's tree leaves out: each span's links (FOLLOWS_FROM
// references, as "<trace id>/<span id>") and the service.instance.id of the process that sent
// it, by span id.
func jaegerLinks(t *testing.T, j *jaegertest.Jaeger, traceID string) (links map[string][]string, instance map[string]string) {
	t.Helper()
	res, err := http.Get(j.QueryURL + "/api/traces/" + traceID)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Data []struct {
			Spans []struct {
				SpanID     string `json:"spanID"`
				ProcessID  string `json:"processID"`
				References []struct {
					RefType string `json:"refType"`
					TraceID string `json:"traceID"`
					SpanID  string `json:"spanID"`
				} `json:"references"`
			} `json:"spans"`
			Processes map[string]struct {
				Tags []struct {
					Key   string `json:"key"`
					Value any    `json:"value"`
				} `json:"tags"`
			} `json:"processes"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || len(body.Data) != 1 {
		t.Fatalf("reading trace %s back: %v (%d traces)", traceID, err, len(body.Data))
	}
	links, instance = map[string][]string{}, map[string]string{}
	for _, s := range body.Data[0].Spans {
		for _, r := range s.References {
			if r.RefType == "FOLLOWS_FROM" {
				links[s.SpanID] = append(links[s.SpanID], r.TraceID+"/"+r.SpanID)
			}
		}
		for _, tag := range body.Data[0].Processes[s.ProcessID].Tags {
			if tag.Key == "service.instance.id" {
				instance[s.SpanID] = fmt.Sprint(tag.Value)
			}
		}
	}
	return links, instance
}

// waitForTrace waits (up to 30 s) until jaeger holds the trace and done accepts it.
func waitForTrace(t *testing.T, j *jaegertest.Jaeger, traceID string, done func(*jaegertest.Trace) bool) *jaegertest.Trace {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last *jaegertest.Trace
	for {
		tr, found, err := j.Trace(context.Background(), traceID)
		if err != nil {
			t.Fatal(err)
		}
		if found {
			last = tr
			if done(tr) {
				return tr
			}
		}
		if time.Now().After(deadline) {
			if last == nil {
				t.Fatalf("jaeger does not have trace %s after 30 s", traceID)
			}
			t.Fatalf("trace %s is not complete after 30 s:\n%s", traceID, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// descendant is the first span under s (at any depth) that match accepts, or nil.
func descendant(s *jaegertest.Span, match func(*jaegertest.Span) bool) *jaegertest.Span {
	for _, c := range s.Children {
		if match(c) {
			return c
		}
		if d := descendant(c, match); d != nil {
			return d
		}
	}
	return nil
}

// TestMCPToolCallTraceInJaeger (issue 20, must-show 1): a tools/call on /api/mcp, read back from
// a real Jaeger, is the request's server span with one MCP server span "tools/call {tool}" under
// it (the MCP conventions' server span, which is the GenAI execute_tool span too) carrying the
// GenAI tool attributes, the MCP protocol version and transport, the caller's account and key and
// the JSON-RPC id.
func TestMCPToolCallTraceInJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and jaeger")
	}
	j := jaegertest.Start(t)
	c := startCluster(t, 0)
	c.procs = append(c.procs, c.launchWith("gw-mcp", tracedEnv(j, "gw-mcp"), "-metrics-listen", "off"))
	acct, key := c.newAccount("mcp-traced", 1_000_000, 0)

	a := c.call(0, "POST", "/api/mcp", key.Plain,
		`{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{"name":"list_storage_datasets","arguments":{}}}`)
	if a.status != http.StatusOK || !strings.Contains(a.body, `"result"`) {
		t.Fatalf("tools/call: %s", a)
	}
	traceID, serverSpan := traceResponse(t, a)
	tr := waitForTrace(t, j, traceID, func(tr *jaegertest.Trace) bool { return len(tr.Named("tools/call list_storage_datasets")) == 1 })
	exec := tr.One(t, "tools/call list_storage_datasets")
	if exec.Parent == nil || exec.ParentID != serverSpan || exec.Parent.Kind != "server" || !strings.Contains(exec.Parent.Name, "/api/mcp") {
		t.Fatalf("tools/call is not a child of the request's server span %s:\n%s", serverSpan, tr)
	}
	if exec.Kind != "server" || exec.Error {
		t.Errorf("tools/call: kind %s, error %v", exec.Kind, exec.Error)
	}
	for k, v := range map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "list_storage_datasets", "gen_ai.tool.type": "function",
		"mcp.method.name": "tools/call", "jsonrpc.request.id": "call-7", "mcp.protocol.version": "2025-03-26", "network.transport": "tcp",
		"tollgate.account.id": acct.String(), "tollgate.key.id": key.Key.ID.String()} {
		if got := exec.Attr(k); got != v {
			t.Errorf("tools/call %s = %q, want %q", k, got, v)
		}
	}
	t.Logf("the trace:\n%s", tr)
}

// tracedSlot is the session of a slot as GET /v1/agents lists it.
type tracedSlot struct {
	Slot    string `json:"slot"`
	Session *struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Turns int    `json:"turns"`
	} `json:"session"`
}

// waitReadyAfter waits (up to 30 s) until the slot's session, read through process i, is
// ready after turns model calls.
func (c *cluster) waitReadyAfter(t *testing.T, i int, key, slot string, turns int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := c.call(i, "GET", "/v1/agents", key, "")
		var list struct {
			Data []tracedSlot `json:"data"`
		}
		_ = json.Unmarshal([]byte(a.body), &list)
		for _, s := range list.Data {
			if s.Slot != slot || s.Session == nil {
				continue
			}
			if s.Session.State == "ready" && s.Session.Turns >= turns {
				if s.Session.Turns != turns {
					t.Fatalf("the session ran %d model calls, want %d", s.Session.Turns, turns)
				}
				return
			}
			if s.Session.State == "stopped" || s.Session.State == "failed" {
				t.Fatalf("the session ended: %s", a)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session is not ready after %d model calls within 30 s: %s", turns, a)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAgentSessionTraceAcrossReplicaRestart (issue 20, must-show 1): a two-turn agent session
// whose first process is SIGKILLed between the turns reads back from a real Jaeger as one trace:
// the invoke_agent root, linked to the POST /v1/agents request that spawned it; the first
// turn's steps sent by process 1 and the second turn's step by process 2 (their
// service.instance.id), each with its River job's id and attempt, each holding its model
// call's spans, the first step its execute_tool span; the second turn's step links to the
// message request that started it, and the second step to the first, which inserted its job.
func TestAgentSessionTraceAcrossReplicaRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and jaeger")
	}
	j := jaegertest.Start(t)
	c := startCluster(t, 0)
	c.procs = append(c.procs, c.launchWith("gw1", tracedEnv(j, "gw1"), "-metrics-listen", "off"))
	acct, key := c.newAccount("agents-traced", 5_000_000, 0)
	c.admin("slot", "assign", "agents-traced", "main")

	spawn := c.call(0, "POST", "/v1/agents", key.Plain,
		`{"slot":"main","prompt":"What is stored? [[sim script: call list_storage_datasets {}]]"}`)
	if spawn.status != http.StatusAccepted {
		t.Fatalf("spawn: %s", spawn)
	}
	spawnTrace, spawnSpan := traceResponse(t, spawn)
	// Turn one: a model call answering the tool call (step 1), then the answer (step 2).
	c.waitReadyAfter(t, 0, key.Plain, "main", 2)
	var traceparent string
	if err := c.pool.QueryRow(context.Background(), `SELECT trace_parent FROM agent_sessions WHERE account_id = $1`, acct).Scan(&traceparent); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		t.Fatalf("the session's trace_parent %q is not a traceparent", traceparent)
	}
	sessionTrace, rootSpan := parts[1], parts[2]
	if sessionTrace == spawnTrace {
		t.Fatal("the session's trace is the spawning request's: it must be a trace of its own, linked to it")
	}
	// Process 1's spans are exported before it dies (a killed process loses what it still
	// holds): the first turn is in jaeger, then process 1 is killed.
	waitForTrace(t, j, sessionTrace, func(tr *jaegertest.Trace) bool { return len(tr.Named("agent_step")) == 2 })
	c.procs[0].kill()
	c.waitForBackendsGone("gw1")

	c.procs = append(c.procs, c.launchWith("gw2", tracedEnv(j, "gw2"), "-metrics-listen", "off"))
	msg := c.call(1, "POST", "/v1/agents/main/messages", key.Plain, `{"text":"Thanks. Anything else?"}`)
	if msg.status != http.StatusAccepted && msg.status != http.StatusOK {
		t.Fatalf("message: %s", msg)
	}
	_, msgSpan := traceResponse(t, msg)
	c.waitReadyAfter(t, 1, key.Plain, "main", 3)

	isChat := func(s *jaegertest.Span) bool { return s.Attr("gen_ai.operation.name") == "chat" }
	tr := waitForTrace(t, j, sessionTrace, func(tr *jaegertest.Trace) bool {
		steps := tr.Named("agent_step")
		return len(steps) == 3 && descendant(steps[2], isChat) != nil
	})
	links, instance := jaegerLinks(t, j, sessionTrace)

	if len(tr.Roots) != 1 || !strings.HasPrefix(tr.Roots[0].Name, "invoke_agent ") || tr.Roots[0].SpanID != rootSpan {
		t.Fatalf("the session's trace is not rooted at its invoke_agent span %s:\n%s", rootSpan, tr)
	}
	root := tr.Roots[0]
	if root.Attr("gen_ai.operation.name") != "invoke_agent" || root.Attr("tollgate.agent.session_id") == "" ||
		root.Attr("gen_ai.conversation.id") != root.Attr("tollgate.agent.session_id") || root.Attr("gen_ai.agent.id") == root.Attr("tollgate.agent.session_id") || root.Attr("gen_ai.agent.name") != "main" ||
		root.Attr("tollgate.account.id") != acct.String() {
		t.Errorf("invoke_agent attributes: %v", root.Attrs)
	}
	if !slices.Contains(links[root.SpanID], spawnTrace+"/"+spawnSpan) {
		t.Errorf("invoke_agent links %v, want the spawning request's span %s/%s", links[root.SpanID], spawnTrace, spawnSpan)
	}
	steps := tr.Named("agent_step")
	for i, s := range steps {
		if s.Parent != root {
			t.Errorf("step %d is not a child of invoke_agent:\n%s", i+1, tr)
		}
		if s.Attr("tollgate.agent.step") != fmt.Sprint(i+1) || s.Attr("tollgate.river.job_kind") != "agent_step" ||
			s.Attr("tollgate.river.job_id") == "" || s.Attr("tollgate.river.attempt") != "1" {
			t.Errorf("step %d attributes: %v", i+1, s.Attrs)
		}
		if descendant(s, isChat) == nil {
			t.Errorf("step %d holds no model call span:\n%s", i+1, tr)
		}
		want := "gw1"
		if i == 2 {
			want = "gw2"
		}
		if instance[s.SpanID] != want {
			t.Errorf("step %d was sent by %q, want %s", i+1, instance[s.SpanID], want)
		}
	}
	if tool := descendant(steps[0], func(s *jaegertest.Span) bool { return s.Name == "execute_tool list_storage_datasets" }); tool == nil ||
		tool.Parent != steps[0] || tool.Attr("gen_ai.tool.call.id") == "" || tool.Error {
		t.Errorf("step 1 holds no execute_tool list_storage_datasets span with its call id:\n%s", tr)
	}
	if !slices.Contains(links[steps[1].SpanID], sessionTrace+"/"+steps[0].SpanID) {
		t.Errorf("step 2 links %v, want step 1, which inserted its job", links[steps[1].SpanID])
	}
	if l := links[steps[2].SpanID]; len(l) != 1 || !strings.HasSuffix(l[0], "/"+msgSpan) {
		t.Errorf("step 3 links %v, want the message request's span %s", l, msgSpan)
	}
	t.Logf("the session's trace:\n%s", tr)
}
