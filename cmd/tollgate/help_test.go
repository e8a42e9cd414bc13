package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestHelpExitsZero (operator trial h1): -h on a command prints its flags and ends the process
// with status 0, as `tollgate -h`, `admin -h`, `sim -h` and `connect -h` did; `serve -h`,
// `prices -h` and `admin key create -h` ended with "tollgate: flag: help requested" and status
// 2, and `migrate -h` was refused as an argument. A flag that is not defined, or an argument
// migrate does not take, is still a usage error (status 2).
func TestHelpExitsZero(t *testing.T) {
	t.Setenv("DATABASE_URL", migratedDatabase(t))
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

// TestAdminHelpNeedsNoDatabase (operator trial h10): `tollgate admin key create -h` (and every
// other admin command's -h) failed with status 1 where no database was to be had ("DATABASE_URL
// is unset and there is no local PostgreSQL cluster"), though the help it asks for needs none:
// an operator reading the flags before setting up, or on a host without the cluster, got
// nothing. Each command's -h now prints its flags with status 0, without a database; a command
// that is not one still answers as a usage error.
func TestAdminHelpNeedsNoDatabase(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	t.Setenv("TOLLGATE_DATA_DIR", t.TempDir())
	for _, line := range []string{"account create -h", "account list -h", "key create -h", "key list -help",
		"key revoke --help", "key revoke-all -h", "key disable -h", "key enable -h", "key set-rpm -h", "key set-cap -h",
		"credit grant -h", "credit show -h", "usage list -h", "usage export -h", "usage import-spill -h",
		"model grant -h", "model revoke -h", "model list -h", "dataset put -h", "dataset list -h", "dataset delete -h",
		"slot assign -h", "slot unassign -h", "slot list -h", "ticket open -h", "ticket close -h", "ticket list -h",
		"approval list -h", "approval approve -h", "approval deny -h", "member add -h", "member list -h",
		"member remove -h", "audit list -h", "key create acme -h"} {
		if _, err := adminRun(t, line); exitStatus(err) != 0 {
			t.Errorf("admin %s without a database: %v (exit status %d)", line, err, exitStatus(err))
		}
	}
	if _, err := adminRun(t, "key frobnicate -h"); exitStatus(err) != 2 {
		t.Errorf("admin key frobnicate -h: %v (exit status %d), want a usage error", err, exitStatus(err))
	}
}

// TestServeHelpOnStdout (operator trial s10h5, item 2): `tollgate serve -h` and `migrate -h`
// printed their flags on standard error, while every admin command's -h prints on standard
// output (operations.md's convention), so `tollgate serve -h | less` showed nothing. Both now
// print on standard output, exit status 0, and nothing on standard error. And a command's -h
// printed "Usage of prices:" and its flags alone, so `prices -h` never said it takes model
// names (trial s13h9): each command's -h now begins with what `tollgate -h` says of it, its
// arguments and what it does, from the same text (topCommandLines), then its flags.
func TestServeHelpOnStdout(t *testing.T) {
	bin := testBinary(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "-h"}, []string{"Usage:\n  tollgate serve   [-config FILE]   serve the API", "\nFlags:\n  -config string"}},
		{[]string{"migrate", "-h"}, []string{"Usage:\n  tollgate migrate                  apply pending schema migrations to DATABASE_URL"}},
		{[]string{"prices", "-h"}, []string{"Usage:\n  tollgate prices  [-config FILE] [-litellm FILE] [NAME...]\n", "the price each configured model", "\nFlags:\n", "-date string"}},
		{[]string{"sim", "--help"}, []string{"Usage:\n  tollgate sim     [-listen ADDR]   the upstream simulator", "\nFlags:\n"}},
	} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = append(os.Environ(), "DATABASE_URL=")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil || stderr.Len() != 0 {
			t.Errorf("tollgate %s: %v\nstdout %q\nstderr %q", strings.Join(tc.args, " "), err, stdout.String(), stderr.String())
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("tollgate %s printed\n%s\nwithout %q", strings.Join(tc.args, " "), stdout.String(), w)
			}
		}
	}
	if lines := topCommandLines("prices"); !strings.Contains(usage, lines) || !strings.HasPrefix(lines, "  tollgate prices") {
		t.Errorf("topCommandLines(prices) = %q: not the usage's lines of prices", lines)
	}
	if lines := topCommandLines("nosuch"); lines != "" {
		t.Errorf("topCommandLines(nosuch) = %q, want none", lines)
	}
}

// TestUsageErrorsAreOneLineAndAHint (operator notes, session 12): a mistake in the command line
// printed the whole usage and then its one line (`tollgate admin usage`, `tollgate admin -bogus`,
// `tollgate bogus`: forty to ninety lines, the mistake scrolled off or last after them, and
// `admin -bogus` printed the usage on standard output), as a flag serve, prices or sim does not
// have printed their flags before it (prices on standard output). Each now prints on standard
// error the mistake's line and a line naming the -h that helps, nothing on standard output,
// exit status 2. So do connect's mistakes, which printed its twenty lines of usage after their
// line (operator notes, session 13), and every other usage error of the top-level commands,
// which had no hint (a flag's value serve or sim refuses, serve without DATABASE_URL); and an
// argument serve (or bench, chaos, hostile, dev) does not take is refused, where it was ignored.
func TestUsageErrorsAreOneLineAndAHint(t *testing.T) {
	bin := testBinary(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, "tollgate: unknown command \"bogus\"\nrun 'tollgate -h' for the commands\n"},
		{[]string{"admin", "usage"}, "tollgate: admin usage needs a command: usage list, usage export or usage import-spill\n" +
			"run 'tollgate admin -h' for the commands\n"},
		{[]string{"admin", "-bogus", "key", "list"}, "tollgate: admin: flag provided but not defined: -bogus\nrun 'tollgate admin -h' for its commands and flags\n"},
		{[]string{"serve", "-bogus"}, "tollgate: flag provided but not defined: -bogus\nrun 'tollgate serve -h' for its flags\n"},
		{[]string{"prices", "-bogus"}, "tollgate: flag provided but not defined: -bogus\nrun 'tollgate prices -h' for its flags\n"},
		{[]string{"sim", "-listen"}, "tollgate: flag needs an argument: -listen\nrun 'tollgate sim -h' for its flags\n"},
		{[]string{"migrate", "now"}, "tollgate: migrate takes no arguments, got \"now\"\nrun 'tollgate migrate -h' for what it does\n"},
		{[]string{"connect", "-bogus"}, "tollgate: flag provided but not defined: -bogus\nrun 'tollgate connect -h' for its flags\n"},
		{[]string{"connect"}, "tollgate: connect takes one client: claude-code, codex, opencode, openai-sdk, anthropic-sdk, ai-sdk, langchain, mcp, curl or all\n" +
			"run 'tollgate connect -h' for its clients and flags\n"},
		{[]string{"connect", "codex", "claude"}, "tollgate: connect takes one client, got 2: codex claude\nrun 'tollgate connect -h' for its clients and flags\n"},
		{[]string{"connect", "vim"}, "tollgate: connect: unknown client \"vim\": the clients are claude-code, codex, opencode, openai-sdk, anthropic-sdk, ai-sdk, langchain, mcp, curl or all\n" +
			"run 'tollgate connect -h' for its clients and flags\n"},
		{[]string{"serve", "now"}, "tollgate: serve takes no arguments, got \"now\"\nrun 'tollgate serve -h' for its flags\n"},
		{[]string{"serve", "-shutdown-grace", "-1s"}, "tollgate: -shutdown-grace, -shutdown-delay and -database-wait take durations of 0 or more\n" +
			"run 'tollgate serve -h' for its flags\n"},
		{[]string{"serve"}, "tollgate: DATABASE_URL is not set: serve runs on the PostgreSQL it names (tollgate dev starts a local one)\n" +
			"run 'tollgate -h' for the environment it reads\n"},
		{[]string{"sim", "now"}, "tollgate: sim takes no arguments, got \"now\"\nrun 'tollgate sim -h' for its flags\n"},
		{[]string{"sim", "-tps", "-1"}, "tollgate: sim: -latency, -tps and -words must not be negative\nrun 'tollgate sim -h' for its flags\n"},
		{[]string{"prices", "-date", "bogus"}, "tollgate: prices: -date \"bogus\" is not a day (YYYY-MM-DD)\nrun 'tollgate prices -h' for its flags\n"},
	} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = append(os.Environ(), "DATABASE_URL=", "TOLLGATE_DATA_DIR="+t.TempDir())
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != 2 || stdout.Len() != 0 || stderr.String() != tc.want {
			t.Errorf("tollgate %s: %v (exit status %d)\nstdout:\n%s\nstderr:\n%s\nwant on stderr:\n%s", strings.Join(tc.args, " "), err, code, stdout.String(), stderr.String(), tc.want)
		}
	}
}

// TestAdminMistakeWithTheDatabaseUnreachable (operator notes, session 13): the process, run
// with DATABASE_URL at a port where nothing listens, answered `admin usage list -bogus` and
// `admin key create` with the connection's failure (exit status 1). It now answers at once
// with the mistake and the hint of the command's -h, exit status 2, without trying the database
// (TestAdminMistakesNeedNoDatabase checks every command).
func TestAdminMistakeWithTheDatabaseUnreachable(t *testing.T) {
	bin := testBinary(t)
	url := unreachableDatabase(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "usage", "list", "-bogus"}, "tollgate: usage list: flag provided but not defined: -bogus\n" +
			"run 'tollgate admin usage list -h' for its arguments and flags\n"},
		{[]string{"admin", "key", "create"}, "tollgate: key create takes 1 argument(s), got 0\n" +
			"run 'tollgate admin key create -h' for its arguments and flags\n"},
	} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "LOG_LEVEL=error")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		took := time.Since(start)
		if code := cmd.ProcessState.ExitCode(); code != 2 || stdout.Len() != 0 || stderr.String() != tc.want || took > 5*time.Second {
			t.Errorf("tollgate %s: %v (exit status %d, %v)\nstdout:\n%s\nstderr:\n%s\nwant on stderr:\n%s",
				strings.Join(tc.args, " "), err, code, took, stdout.String(), stderr.String(), tc.want)
		}
	}
}
