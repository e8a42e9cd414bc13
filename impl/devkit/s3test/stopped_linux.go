//go:build linux

package s3test

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// waitGroupStopped waits, at most a few seconds, until every thread of every process in
// process group pgid is stopped. SIGSTOP is delivered after kill returns: without the wait, a
// request sent at once can still be answered by a thread that has not stopped yet (seen once in
// make test as a frozen store that answered a listing).
func waitGroupStopped(pgid int) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if groupStopped(pgid) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// groupStopped reports whether every thread of the processes of group pgid is in the stopped
// state (true too when the group has no process left).
func groupStopped(pgid int) bool {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	group := strconv.Itoa(pgid)
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		// Fields after the command name: state, ppid, pgrp, ...
		if f := statFields("/proc/" + p.Name() + "/stat"); len(f) < 3 || f[2] != group {
			continue
		}
		threads, err := os.ReadDir("/proc/" + p.Name() + "/task")
		if err != nil {
			continue // gone meanwhile
		}
		for _, th := range threads {
			f := statFields("/proc/" + p.Name() + "/task/" + th.Name() + "/stat")
			if len(f) > 0 && f[0] != "T" && f[0] != "t" {
				return false
			}
		}
	}
	return true
}

// statFields returns the fields of a /proc stat file after the command name, which may hold
// spaces and parentheses (so they are read after its last closing parenthesis); nil when the
// file is gone.
func statFields(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}
