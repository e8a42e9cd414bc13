//go:build dev

package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestDevCommandMistakesAreOneLineAndAHint (operator notes, session 13): the development
// commands' mistakes are told as every other command's are (TestUsageErrorsAreOneLineAndAHint):
// the mistake's line and the hint of the command's -h, exit status 2. An argument dev, bench,
// chaos or hostile does not take was ignored (the run started), relay's was told without a
// hint, and bench told a -tracing or -sampling it does not take only after it had started its
// database, simulators and relays; each is now refused at once, before anything starts.
func TestDevCommandMistakesAreOneLineAndAHint(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	t.Setenv("TOLLGATE_DATA_DIR", t.TempDir())
	for _, line := range []string{"dev now", "dev -shutdown-grace -1s", "bench now", "bench -tracing jaeger",
		"bench -tracing sink -sampling 0", "bench -traced-alongside sink -tracing sink", "relay now", "chaos now",
		"hostile now", "hostile -bad"} {
		args := strings.Fields(line)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		err := runCommand(ctx, args[0], args[1:])
		cancel()
		if exitStatus(err) != 2 || !hintedOnce(errorReport(err), "tollgate "+args[0]+" -h") || time.Since(start) > 2*time.Second {
			t.Errorf("tollgate %s: %v (exit status %d, %v)\nreport:\n%s", line, err, exitStatus(err), time.Since(start), errorReport(err))
		}
	}
}
