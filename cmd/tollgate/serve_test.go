package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/pgtest"
)

// TestServeEndToEnd builds the binary, serves on a test database, answers with a key minted by
// the admin CLI, and shuts down cleanly on SIGTERM.
func TestServeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	db := pgtest.ConnString(t)
	bin := filepath.Join(t.TempDir(), "tollgate")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	// No provider keys: the built-in simulator configuration.
	env := append(os.Environ(), "DATABASE_URL="+db, "LOG_FORMAT=json", "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=")
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

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "-listen", addr)
	cmd.Env = append(env, "TOLLGATE_CONFIG=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs <- sc.Text()
		}
		close(logs)
	}()
	defer cmd.Process.Kill()
	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest("GET", base+"/v1/credits", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || !strings.Contains(string(body), `"balance_micros":1000000`) || res.Header.Get("x-request-id") == "" {
				t.Fatalf("credits: %d %s", res.StatusCode, body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A stream in flight when SIGTERM arrives finishes before the process exits.
	streamDone := make(chan string, 1)
	started := make(chan struct{})
	go func() {
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(
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
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := <-streamDone; !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Errorf("the in-flight stream was cut by the shutdown:\n%s", got)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var all strings.Builder
	select {
	case err := <-done:
		for l := range logs {
			fmt.Fprintln(&all, l)
		}
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, all.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGTERM")
	}
	out := all.String()
	for _, want := range []string{`"msg":"tollgate listening"`, `"msg":"request"`, `"request_id":"req_`, `"msg":"shutting down: finishing in-flight requests"`} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %s:\n%s", want, out)
		}
	}
}
