package main

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

// TestServeEndToEnd builds the binary, serves on a test database, answers with a key minted by
// the admin CLI, and shuts down cleanly on SIGTERM.
func TestServeEndToEnd(t *testing.T) {
	bin := testBinary(t)
	db := pgtest.ConnString(t)
	env := serveEnv(t, db)
	run := func(args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tollgate %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("migrate"); !strings.Contains(out, "schema is up to date") {
		t.Fatalf("migrate: %s", out)
	}
	run("admin", "account", "create", "acme")
	run("admin", "credit", "grant", "acme", "1000000")
	key := strings.TrimSpace(run("admin", "key", "create", "acme", "-quiet"))

	p := startServe(t, env)
	p.waitReadyz(t, http.StatusOK, 30*time.Second)
	if res, err := http.Get(p.metrics + "/healthz"); err != nil || res.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	// Go's profiles are served only when -pprof asks for them (TestProfilesOnlyWhenAsked).
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=2", "/debug/pprof/trace?seconds=1", "/debug/pprof/profile?seconds=1"} {
		if res, err := http.Get(p.metrics + path); err != nil || res.StatusCode != http.StatusNotFound {
			t.Errorf("%s without -pprof: %v %v", path, res, err)
		} else {
			res.Body.Close()
		}
	}
	req, _ := http.NewRequest("GET", p.base+"/v1/credits", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), `"balance_micros":1000000`) || res.Header.Get("x-request-id") == "" {
		t.Fatalf("credits: %d %s", res.StatusCode, body)
	}
	// A stream in flight when SIGTERM arrives finishes before the process exits.
	streamDone := make(chan string, 1)
	started := make(chan struct{})
	go func() {
		req, _ := http.NewRequest("POST", p.base+"/v1/chat/completions", strings.NewReader(
			`{"model":"service-flint-base","stream":true,"messages":[{"role":"user","content":"hi [[sim fault=stall ms=1500 after=1]]"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			close(started)
			streamDone <- "error: " + err.Error()
			return
		}
		defer res.Body.Close()
		first := make([]byte, 1)
		_, _ = res.Body.Read(first)
		close(started)
		rest, _ := io.ReadAll(res.Body)
		streamDone <- string(first) + string(rest)
	}()
	<-started
	p.signal(t, syscall.SIGTERM)
	if got := <-streamDone; !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Errorf("the in-flight stream was cut by the shutdown:\n%s", got)
	}
	if err := p.wait(t, 30*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs())
	}
	out := p.logs()
	for _, want := range []string{`"msg":"tollgate listening"`, `"msg":"request"`, `"request_id":"req_`,
		`"msg":"shutting down: finishing in-flight requests"`, `"msg":"shutdown: usage written, credit holds returned"`} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %s:\n%s", want, out)
		}
	}
}

// TestProfilesOnlyWhenAsked: with -pprof the metrics listener serves Go's profiles (the bench
// takes its CPU profile there); without it (TestServeEndToEnd) it does not, since the listener
// is one a load balancer reaches.
func TestProfilesOnlyWhenAsked(t *testing.T) {
	p := startServe(t, serveEnv(t, pgtest.ConnString(t)), "-pprof")
	p.waitReadyz(t, http.StatusOK, 30*time.Second)
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1"} {
		res, err := http.Get(p.metrics + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
			t.Errorf("%s with -pprof: %d %.300s", path, res.StatusCode, body)
		}
	}
}

// TestSimulatorListen: -simulator-listen moves the built-in upstream simulator to the address
// given, where it answers (newcomer trial finding 5: it took a free port that could not be
// moved, so make run could not keep to a range of ports).
func TestSimulatorListen(t *testing.T) {
	addr := freeAddr()
	p := startServe(t, serveEnv(t, pgtest.ConnString(t)), "-simulator-listen", addr)
	p.waitReadyz(t, http.StatusOK, 30*time.Second)
	res, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"sim-general","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatalf("the simulator at %s: %v", addr, err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "chat.completion") {
		t.Errorf("the simulator at %s answered %d %.300s", addr, res.StatusCode, body)
	}
}
