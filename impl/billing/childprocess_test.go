package billing

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killChildWhenReady runs the test named test of this test binary as a child process (a
// gateway process of its own, configured by env), waits until it prints the line ready, and
// kills it with SIGKILL: what the child left in the database and its spill file is then what
// a killed process leaves. what says what the child had done by ready, for the failure's
// message when it ends before.
func killChildWhenReady(t *testing.T, test string, env []string, ready, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var said []string
	reached := false
	for sc := bufio.NewScanner(out); sc.Scan(); {
		said = append(said, sc.Text())
		if sc.Text() == ready {
			reached = true
			break
		}
	}
	if !reached {
		cmd.Wait()
		t.Fatalf("the child process ended before %s:\n%s", what, strings.Join(said, "\n"))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child process ended with %v, not killed", err)
	}
}
