package main

import (
	"context"
	"errors"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

// TestHelpExitsZero (operator trial h1): -h on a command prints its flags and ends the process
// with status 0, as `tollgate -h`, `admin -h`, `sim -h` and `connect -h` did; `serve -h`,
// `prices -h` and `admin key create -h` ended with "tollgate: flag: help requested" and status
// 2, and `migrate -h` was refused as an argument. A flag that is not defined, or an argument
// migrate does not take, is still a usage error (status 2).
func TestHelpExitsZero(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.ConnString(t))
	t.Setenv("LOG_LEVEL", "error")
	ctx := context.Background()
	for _, name := range []string{"serve", "migrate", "connect", "sim", "prices"} {
		if err := commands[name](ctx, []string{"-h"}); exitStatus(err) != 0 {
			t.Errorf("%s -h: %v (exit status %d)", name, err, exitStatus(err))
		}
	}
	for _, line := range []string{"key create -h", "usage export -h", "dataset put -h", "audit list -h"} {
		if _, err := adminRun(t, line); exitStatus(err) != 0 {
			t.Errorf("admin %s: %v (exit status %d)", line, err, exitStatus(err))
		}
	}
	for name, args := range map[string][]string{"serve": {"-bogus"}, "migrate": {"now"}, "prices": {"-bogus"}} {
		if err := commands[name](ctx, args); exitStatus(err) != 2 {
			t.Errorf("%s %v: %v (exit status %d), want a usage error", name, args, err, exitStatus(err))
		}
	}
	if exitStatus(errors.New("the database is down")) != 1 {
		t.Error("a failure is not exit status 1")
	}
}
