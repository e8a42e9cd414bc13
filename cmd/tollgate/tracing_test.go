package main

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/jaegertest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

// TestServeTracesAndFlushesOnSIGTERM: `tollgate serve` configured by the standard OTEL_*
// variables alone sends its traces to a real Jaeger; with the export interval far longer
// than the test, the request's spans reach Jaeger only because SIGTERM flushes them.
func TestServeTracesAndFlushesOnSIGTERM(t *testing.T) {
	bin := testBinary(t)
	j := jaegertest.Start(t)
	env := append(serveEnv(t, pgtest.ConnString(t)), "OTEL_EXPORTER_OTLP_ENDPOINT="+j.OTLPHTTP,
		"OTEL_BSP_SCHEDULE_DELAY=600000", "OTEL_SERVICE_NAME=tollgate-process", "OTEL_RESOURCE_ATTRIBUTES=deployment.environment=test")
	run := func(args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tollgate %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("migrate")
	run("admin", "account", "create", "acme")
	run("admin", "credit", "grant", "acme", "1000000")
	key := strings.TrimSpace(run("admin", "key", "create", "acme", "-quiet"))

	p := startServe(t, env)
	p.waitReadyz(t, http.StatusOK, 30*time.Second)
	req, _ := http.NewRequest(http.MethodPost, p.base+"/v1/chat/completions",
		strings.NewReader(`{"model":"service-flint-base","max_tokens":16,"messages":[{"role":"user","content":"trace me"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	parts := strings.Split(res.Header.Get("traceresponse"), "-")
	if res.StatusCode != 200 || len(parts) != 4 {
		t.Fatalf("status %d, traceresponse %q: %s", res.StatusCode, res.Header.Get("traceresponse"), body)
	}
	// Each reason's dropped-spans series exists from the start, at 0 (trial h8 D11).
	if res, err := http.Get(p.metrics + "/metrics"); err != nil {
		t.Error(err)
	} else {
		text, _ := io.ReadAll(res.Body)
		res.Body.Close()
		for _, reason := range []string{"queue_full", "export_failed", "rejected", "shutdown"} {
			if !strings.Contains(string(text), `tollgate_trace_spans_dropped_total{reason="`+reason+`"} 0`) {
				t.Errorf("no tollgate_trace_spans_dropped_total series for %s at 0", reason)
			}
		}
	}
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t, 60*time.Second); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.logs())
	}
	if !strings.Contains(p.logs(), `"msg":"tracing on"`) {
		t.Errorf("no 'tracing on' line in the log:\n%s", p.logs())
	}
	tr := j.WaitTrace(t, parts[1], 5)
	server := tr.One(t, "POST /v1/chat/completions")
	if server.Service != "tollgate-process" || len(tr.Named("chat sim-general")) != 1 {
		t.Errorf("the process's trace (service %q):\n%s", server.Service, tr)
	}
	// service.version is the build's VCS revision, as go version -m reads it (trial h8 D15).
	out, _ := exec.Command("go", "version", "-m", bin).Output()
	if _, rev, ok := strings.Cut(string(out), "vcs.revision="); ok && len(rev) >= 12 {
		if v, _ := server.Resource["service.version"].(string); !strings.HasPrefix(v, rev[:12]) {
			t.Errorf("service.version %q, want the build's revision %s", v, rev[:12])
		}
	}
	if server.Resource["deployment.environment"] != "test" {
		t.Errorf("resource %v, want deployment.environment=test from OTEL_RESOURCE_ATTRIBUTES", server.Resource)
	}
}
