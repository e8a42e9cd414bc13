package main

import (
	"bytes"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

func TestGodebugValue(t *testing.T) {
	for _, c := range []struct {
		godebug, value string
		named          bool
	}{
		{"", "", false},
		{"madvdontneed=1", "", false},
		{"schedtrace=0", "0", true},
		{"madvdontneed=1,schedtrace=5", "5", true},
		{"schedtrace=5,schedtrace=0", "0", true}, // the runtime reads the last one
		{"scheddetail=1", "", false},
		{"xschedtrace=1", "", false},
	} {
		if v, named := godebugValue(c.godebug, "schedtrace"); v != c.value || named != c.named {
			t.Errorf("godebugValue(%q) = %q, %v; want %q, %v", c.godebug, v, named, c.value, c.named)
		}
	}
}

func TestWithMonitorAwake(t *testing.T) {
	got := withMonitorAwake([]string{"A=1", "GODEBUG=madvdontneed=1", "B=2"})
	want := []string{"A=1", "B=2", "GODEBUG=madvdontneed=1," + monitorAwakeSetting}
	if !slices.Equal(got, want) {
		t.Errorf("with GODEBUG: %q, want %q", got, want)
	}
	got = withMonitorAwake([]string{"GODEBUG=a=1", "A=1", "GODEBUG=b=2"})
	want = []string{"A=1", "GODEBUG=a=1," + monitorAwakeSetting}
	if !slices.Equal(got, want) {
		t.Errorf("with two GODEBUG entries: %q, want %q", got, want)
	}
	got = withMonitorAwake([]string{"A=1"})
	want = []string{"A=1", "GODEBUG=" + monitorAwakeSetting}
	if !slices.Equal(got, want) {
		t.Errorf("without GODEBUG: %q, want %q", got, want)
	}
}

// TestServeKeepsTheRuntimeMonitorAwake runs `tollgate serve` and reads, from /proc, the
// environment the serving process runs with: the monitor setting added to what GODEBUG held
// (the process id the test started, so the re-exec kept it), or GODEBUG left as it was when it
// names schedtrace.
func TestServeKeepsTheRuntimeMonitorAwake(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the re-exec is done on Linux")
	}
	db := pgtest.ConnString(t)
	base := slices.DeleteFunc(serveEnv(t, db), func(kv string) bool { return strings.HasPrefix(kv, "GODEBUG=") })
	for _, c := range []struct {
		godebug, want, state string
	}{
		{"", monitorAwakeSetting, "awake"},
		{"madvdontneed=1", "madvdontneed=1," + monitorAwakeSetting, "awake"},
		{"schedtrace=0", "schedtrace=0", "left to GODEBUG schedtrace=0"},
	} {
		t.Run("GODEBUG="+c.godebug, func(t *testing.T) {
			env := slices.Clone(base)
			if c.godebug != "" {
				env = append(env, "GODEBUG="+c.godebug)
			}
			p := startServe(t, env)
			p.waitReadyz(t, http.StatusOK, 30*time.Second)
			environ, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/environ")
			if err != nil {
				t.Fatal(err)
			}
			var godebug []string
			for kv := range bytes.SplitSeq(environ, []byte{0}) {
				if v, ok := bytes.CutPrefix(kv, []byte("GODEBUG=")); ok {
					godebug = append(godebug, string(v))
				}
			}
			if !slices.Equal(godebug, []string{c.want}) {
				t.Errorf("the serving process runs with GODEBUG %q, want %q", godebug, c.want)
			}
			if logs := p.logs(); !strings.Contains(logs, `"msg":"runtime monitor","state":"`+c.state+`"`) {
				t.Errorf("the log does not say the monitor's state %q:\n%s", c.state, logs)
			}
		})
	}
}
