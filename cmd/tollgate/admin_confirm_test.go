package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

// adminAsk runs one admin command line as at a terminal (interactive) or not, with answer on
// stdin, and returns its stdout, its stderr and its error.
func adminAsk(t *testing.T, line string, interactive bool, answer string) (stdout, stderr string, err error) {
	t.Helper()
	var out, notes bytes.Buffer
	err = runAdminWith(context.Background(), strings.Fields(line), adminIO{out: &out, notes: &notes, in: strings.NewReader(answer), interactive: interactive})
	return out.String(), notes.String(), err
}

// TestAdminConfirmations (operator trial h1, item 2): the commands that destroy or revoke more
// than one thing (key revoke-all, dataset delete, member remove, slot unassign) acted at once,
// so a mistyped account lost all its keys. Each now asks: at a terminal it says on stderr what
// it will do (how many keys and agent sessions, the dataset's size, the member's keys, the
// slot's session) and goes ahead only on y or yes (no, or no answer, is exit status 1 and
// nothing changes); when stdin is not a terminal it refuses in one line, exit status 2,
// naming -yes, and changes nothing; -yes does it without asking.
func TestAdminConfirmations(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.ConnString(t))
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	mustAdmin(t, "key create acme -name ci -quiet")
	mustAdmin(t, "key create acme -name batch -quiet")
	mustAdmin(t, "member add acme alice@example.com")
	mustAdmin(t, "slot assign acme main")
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "sales.csv")
	if err := os.WriteFile(file, []byte("region,units\nnorth,3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustAdmin(t, "dataset put acme "+file+" -dir "+dir)

	for _, c := range []struct {
		line, says, done, check, gone string
	}{
		{"key revoke-all acme", "revoke 2 keys of account acme and end 0 agent sessions", "2 key(s) of account acme revoked",
			"key list acme", "active"},
		{"dataset delete acme sales -dir " + dir, "delete dataset sales of account acme (csv, 21 bytes) and forget its load",
			"dataset sales of account acme deleted", "dataset list acme -dir " + dir, "sales"},
		{"member remove acme alice@example.com", "remove alice@example.com from account acme, ending their OAuth grants and the agent sessions they started on the console, and revoke the 0 keys they made there",
			"no longer a member", "member list acme", "alice@example.com"},
		{"slot unassign acme main", "take agent slot 'main' away from account acme", "no longer has agent slot 'main'",
			"slot list acme", "main"},
	} {
		still := func(when string) {
			t.Helper()
			if out := mustAdmin(t, c.check); !strings.Contains(out, c.gone) {
				t.Errorf("admin %s %s changed what it acts on:\n%s", c.line, when, out)
			}
		}
		stdout, stderr, err := adminAsk(t, c.line, false, "y\n")
		if exitStatus(err) != 2 || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "add -yes") ||
			strings.Contains(err.Error(), "\n") || stdout != "" || strings.Contains(stderr, "Continue?") {
			t.Errorf("admin %s without a terminal: %v (exit status %d)\nstdout %q stderr %q", c.line, err, exitStatus(err), stdout, stderr)
		}
		still("without a terminal")
		for _, answer := range []string{"n\n", "\n", "", "maybe\n"} {
			stdout, stderr, err = adminAsk(t, c.line, true, answer)
			if exitStatus(err) != 1 || err != errNotConfirmed || stdout != "" || !strings.HasSuffix(stderr, "This will "+c.says+".\nContinue? [y/N] ") {
				t.Errorf("admin %s answered %q: %v (exit status %d)\nstdout %q\nstderr %q", c.line, answer, err, exitStatus(err), stdout, stderr)
			}
		}
		still("answered no")
		stdout, stderr, err = adminAsk(t, c.line, true, "Y\n")
		if err != nil || !strings.Contains(stdout, c.done) || !strings.Contains(stderr, c.says) {
			t.Errorf("admin %s answered y: %v\nstdout %q\nstderr %q", c.line, err, stdout, stderr)
		}
		if out := mustAdmin(t, c.check); strings.Contains(out, c.gone) {
			t.Errorf("admin %s answered y did not do it:\n%s", c.line, out)
		}
	}

	// -yes: without asking, at a terminal or not. (stderr has only the dataset commands' note of
	// their store.)
	mustAdmin(t, "key create acme -name again -quiet")
	if stdout, stderr, err := adminAsk(t, "key revoke-all acme -yes", false, ""); err != nil || !strings.Contains(stdout, "1 key(s) of account acme revoked") || stderr != "" {
		t.Errorf("key revoke-all -yes: %v\nstdout %q\nstderr %q", err, stdout, stderr)
	}
	mustAdmin(t, "slot assign acme main")
	if stdout, stderr, err := adminAsk(t, "slot unassign acme main -yes", true, ""); err != nil || !strings.Contains(stdout, "no longer has agent slot") || stderr != "" {
		t.Errorf("slot unassign -yes at a terminal: %v\nstdout %q\nstderr %q", err, stdout, stderr)
	}
}
