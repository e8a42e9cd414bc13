package main

import (
	"os"
	"strings"
)

// monitorAwakeSetting is the GODEBUG setting that keeps the runtime's monitor out of its deep
// sleep: the scheduler trace at its longest period (the largest int32 number of milliseconds).
const monitorAwakeSetting = "schedtrace=2147483647"

// monitorAwake reports how the runtime's monitor was set up, for the start-up log: "awake"
// when this process runs with monitorAwakeSetting, else what GODEBUG said or why the re-exec
// did not happen.
var monitorAwake = "not set up"

// godebugValue returns the value the GODEBUG value godebug gives key (the last one, as the
// runtime reads it), and whether it names key at all.
func godebugValue(godebug, key string) (value string, named bool) {
	for field := range strings.SplitSeq(godebug, ",") {
		if k, v, ok := strings.Cut(field, "="); ok && k == key {
			value, named = v, true
		}
	}
	return value, named
}

// withMonitorAwake returns env with monitorAwakeSetting added to its GODEBUG (the first
// GODEBUG entry, the one os.Getenv reads; any later one is dropped).
func withMonitorAwake(env []string) []string {
	out := make([]string, 0, len(env)+1)
	godebug, seen := "", false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if !seen {
				godebug, seen = v, true
			}
			continue
		}
		out = append(out, kv)
	}
	if godebug != "" {
		godebug += ","
	}
	return append(out, "GODEBUG="+godebug+monitorAwakeSetting)
}

// keepMonitorAwake makes sure that serve and dev (and the bench's relays) run with the Go
// runtime's monitor thread (sysmon) kept out of its deep sleep.
//
// The monitor sleeps deeply while every processor is idle, and the next system call of any
// goroutine wakes it with a futex call; it then polls every 20 µs until it finds the process
// idle again. A gateway at a steady request rate goes idle between most requests, so each
// request paid for that wake-up on its first system call and for the monitor's polling after it:
// on the 2-core virtual machine of docs/speed.md, about a quarter of the gateway's CPU per
// request and a fifth of the latency it adds (Go issue 18236 describes the cost). The runtime
// keeps the monitor out of the deep sleep only while its scheduler trace is on (GODEBUG
// schedtrace); with
// the trace's period at its largest the monitor backs off to its 10 ms tick instead, about a
// hundred wake-ups a second, and the trace prints one line to standard error only once the
// machine has been up for longer than that period (about 24.8 days), then once per period.
//
// When GODEBUG does not name schedtrace, the process therefore executes itself again at once,
// before it does anything else, with monitorAwakeSetting added to GODEBUG: the same process id,
// arguments and environment (on Linux, through /proc/self/exe, which names the binary even when
// it was replaced on disk). An operator who names schedtrace in GODEBUG keeps their choice:
// GODEBUG=schedtrace=0 restores the runtime's default. It returns only when no re-exec is needed
// or it failed; monitorAwake says which.
func keepMonitorAwake() {
	godebug := os.Getenv("GODEBUG")
	if period, named := godebugValue(godebug, "schedtrace"); named {
		monitorAwake = "left to GODEBUG schedtrace=" + period
		if "schedtrace="+period == monitorAwakeSetting {
			monitorAwake = "awake"
		}
		return
	}
	if err := reexec(withMonitorAwake(os.Environ())); err != nil {
		monitorAwake = "runtime default: could not execute the binary again: " + err.Error()
	}
}
