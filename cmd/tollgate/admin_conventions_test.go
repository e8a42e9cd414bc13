package main

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// adminRunIO runs one admin command line as adminRun does, non-interactive, with stdin in
// (nil: empty), and returns what it wrote to stdout and to stderr apart.
func adminRunIO(t *testing.T, line string, in string) (stdout, stderr string, err error) {
	t.Helper()
	var out, notes bytes.Buffer
	err = runAdminWith(context.Background(), strings.Fields(line), adminIO{out: &out, notes: &notes, in: strings.NewReader(in)})
	return out.String(), notes.String(), err
}

// documentedCommands are the commands adminUsage lists: its lines "  noun verb ...".
func documentedCommands() []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z][a-z-]* [a-z-]+)\b`).FindAllStringSubmatch(adminUsage, -1) {
		names = append(names, m[1])
	}
	return names
}

// TestAdminCommandConventions (operator trial h1, item 1): every admin command follows the
// same conventions, so that a script and `| less` can rely on them: -h prints the command's
// lines of the usage and its flags on stdout and exits 0 (`admin key create -h` wrote the flag
// package's "Usage of key create:" to stderr: `| less` showed nothing); a flag it does not
// have is a usage error (exit status 2) on stderr with nothing on stdout; the usage lists
// every command that runs, and runs every command it lists. Then a sample of mistakes in the
// command line (a missing argument, an unknown model, plan or state: `model grant ACCOUNT
// nosuch` exited 1 where `key create -models nosuch` exited 2) exits 2, and failures of what
// the database holds (an account or a key that is not there) exit 1.
func TestAdminCommandConventions(t *testing.T) {
	documented := documentedCommands()
	for name := range adminCommands {
		if !slices.Contains(documented, name) {
			t.Errorf("admin %s runs but the usage does not list it", name)
		}
	}
	for _, name := range documented {
		if adminCommands[name] == nil {
			t.Errorf("the usage lists admin %s, which does not run", name)
		}
	}

	t.Run("help", func(t *testing.T) {
		t.Setenv("DATABASE_URL", "")
		t.Setenv("TOLLGATE_DATA_DIR", t.TempDir())
		for name := range adminCommands {
			stdout, stderr, err := adminRunIO(t, name+" -h", "")
			if exitStatus(err) != 0 || !strings.HasPrefix(stdout, "tollgate admin "+name+" ") || stderr != "" {
				t.Errorf("admin %s -h: %v (exit status %d)\nstdout:\n%s\nstderr:\n%s", name, err, exitStatus(err), stdout, stderr)
			}
		}
		// The commands that destroy or revoke what cannot be had back ask first (-yes: not).
		for _, name := range []string{"key revoke", "key revoke-all", "dataset delete", "member remove", "slot unassign"} {
			if stdout, _, _ := adminRunIO(t, name+" -h", ""); !strings.Contains(stdout, "-yes") {
				t.Errorf("admin %s -h has no -yes:\n%s", name, stdout)
			}
		}
		stdout, _, _ := adminRunIO(t, "key create -h", "")
		for _, want := range []string{"mint a key", "Flags of key create:", "-quiet", "-credit-cap"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("admin key create -h lacks %q:\n%s", want, stdout)
			}
		}
	})

	t.Setenv("DATABASE_URL", migratedDatabase(t))
	t.Setenv("LOG_LEVEL", "error")
	for name := range adminCommands {
		for _, mistake := range []string{" -no-such-flag", " a b c d e f"} {
			stdout, stderr, err := adminRunIO(t, name+mistake, "")
			named := mistake != " -no-such-flag" || strings.Contains(err.Error(), "-no-such-flag")
			if exitStatus(err) != 2 || stdout != "" || stderr != "" || !named || !hintedOnce(errorReport(err), "tollgate admin "+name+" -h") {
				t.Errorf("admin %s%s: %v (exit status %d), stdout %q, stderr %q\nreport:\n%s"+
					"want a usage error naming the mistake on one line and -h on the next, and nothing else", name, mistake, err, exitStatus(err), stdout, stderr, errorReport(err))
			}
		}
	}
	mustAdmin(t, "account create acme -plan demo")
	mustAdmin(t, "model revoke acme service-sonnet")
	for line, want := range map[string]int{
		"":                                                  2,
		"frobnicate now":                                    2,
		"key create":                                        2,
		"key create acme extra":                             2,
		"key create acme -models nosuch":                    2,
		"key create acme -cap-period weekly":                2,
		"model grant acme nosuch":                           2,
		"model revoke acme nosuch":                          2,
		"account create beta -plan nosuch":                  2,
		"account create " + uuid.NewString():                2,
		"ticket list acme -state bogus":                     2,
		"key revoke not-an-id":                              2,
		"credit grant acme lots":                            2,
		"usage export acme -from 2025-13-01 -to 2026-01-01": 2,
		"member add acme not-an-address":                    2,
		"slot assign acme bad/name":                         2,
		"key list nosuch":                                   1,
		"model revoke acme service-sonnet":                  1,
		"key revoke " + uuid.NewString():                    1,
		"account create acme":                               1,
		"member remove acme nobody@example.com":             1,
	} {
		stdout, stderr, err := adminRunIO(t, line, "")
		if exitStatus(err) != want {
			t.Errorf("admin %s: %v (exit status %d), want exit status %d", line, err, exitStatus(err), want)
		}
		if want == 2 && stdout != "" {
			t.Errorf("admin %s wrote its usage error's help on stdout, not stderr:\n%s", line, stdout)
		}
		if want == 2 && line != "" && (strings.Contains(stderr, "account create NAME") || !hintedOnce(errorReport(err), "-h")) {
			t.Errorf("admin %s: want its mistake on one line and a hint naming -h on the next, without the usage\nstderr:\n%s\nreport:\n%s", line, stderr, errorReport(err))
		}
	}
}

// hintedOnce reports whether report (errorReport) is two lines: the mistake after "tollgate: ",
// then "run '<help>' for ..." with help containing want.
func hintedOnce(report, want string) bool {
	lines := strings.Split(strings.TrimSuffix(report, "\n"), "\n")
	return len(lines) == 2 && strings.HasPrefix(lines[0], "tollgate: ") &&
		strings.HasPrefix(lines[1], "run 'tollgate ") && strings.Contains(lines[1], want+"' for ")
}

// TestAdminNamesTheMistakeInTheCommand (newcomer trial s12h5): `admin frobnicate` and `admin
// key` both said "admin needs a command", of a command line that had one: the first word was
// taken for no command at all, so a mistyped noun and a noun without its verb got the same
// words, neither naming what was wrong. Each now says what it is: an unknown command names the
// nouns there are; a noun without a verb, or with one it lacks, names that noun's verbs; `admin`
// alone still needs a command, and `admin help` prints the usage on stdout as -h does. Each
// mistake is a usage error (exit status 2); none needs a database. Each but `admin` alone
// printed the whole usage before it, burying its one line (operator notes, session 12): it is
// now the mistake's line and a hint naming `tollgate admin -h`, and `admin` alone lists the
// commands on stderr, as `tollgate` alone does.
func TestAdminNamesTheMistakeInTheCommand(t *testing.T) {
	stdout, stderr, err := adminRunIO(t, "", "")
	if err == nil || err.Error() != "admin needs a command" || exitStatus(err) != 2 || stdout != "" || !strings.Contains(stderr, "account create NAME") {
		t.Errorf("admin alone: %v (exit status %d), want the usage on stderr and %q (exit status 2)\nstdout:\n%s", err, exitStatus(err), "admin needs a command", stdout)
	}
	for _, tc := range []struct{ line, want string }{
		{"frobnicate", `unknown admin command "frobnicate": the commands begin with account, approval, audit, credit, dataset, key, member, model, provider-key, slot, ticket or usage`},
		{"keys list", `unknown admin command "keys list": the commands begin with account, approval, audit, credit, dataset, key, member, model, provider-key, slot, ticket or usage`},
		{"key", "admin key needs a command: key create, key list, key revoke, key revoke-all, key disable, key enable, key set-rpm or key set-cap"},
		{"key foo", `unknown admin command "key foo": admin key has key create, key list, key revoke, key revoke-all, key disable, key enable, key set-rpm or key set-cap`},
		{"audit", "admin audit needs a command: audit list"},
	} {
		stdout, stderr, err := adminRunIO(t, tc.line, "")
		if err == nil || err.Error() != tc.want || exitStatus(err) != 2 || stdout != "" || stderr != "" ||
			errorReport(err) != "tollgate: "+tc.want+"\nrun 'tollgate admin -h' for the commands\n" {
			t.Errorf("admin %s: %v (exit status %d), want %q (exit status 2) and the hint of admin -h, nothing else\nstdout:\n%s\nstderr:\n%s\nreport:\n%s",
				tc.line, err, exitStatus(err), tc.want, stdout, stderr, errorReport(err))
		}
	}
	for _, line := range []string{"-bogus key list", "-config"} {
		stdout, stderr, err := adminRunIO(t, line, "")
		if exitStatus(err) != 2 || stdout != "" || stderr != "" || !hintedOnce(errorReport(err), "tollgate admin -h") {
			t.Errorf("admin %s: %v (exit status %d), want a usage error and the hint of admin -h, nothing else\nstdout:\n%s\nstderr:\n%s\nreport:\n%s",
				line, err, exitStatus(err), stdout, stderr, errorReport(err))
		}
	}
	stdout, stderr, err = adminRunIO(t, "help", "")
	if err != nil || !strings.HasPrefix(stdout, "tollgate admin: the operator's CLI") || stderr != "" {
		t.Errorf("admin help: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
}

// unreachableDatabase is a DATABASE_URL at which nothing listens (a port taken and given back):
// a connection to it is refused at once.
func unreachableDatabase(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "postgres://tollgate@" + addr + "/tollgate?sslmode=disable&connect_timeout=5"
}

// TestAdminMistakesNeedNoDatabase (operator notes, session 13): an admin command checked only
// its -h before it looked for the database, so that a mistake in its command line (`admin usage
// list -bogus`, `admin key create` without its account) was answered, where the database could
// not be reached, by the connection's failure or "there is no local PostgreSQL cluster" (exit
// status 1), not by the mistake. Every command now checks its flags, its arguments and each of
// their values that needs no database before it opens one: each mistake below is the usage
// error's line and the hint of the command's -h (exit status 2), nothing on stdout or stderr,
// with DATABASE_URL unreachable and with no database at all.
func TestAdminMistakesNeedNoDatabase(t *testing.T) {
	t.Setenv("LOG_LEVEL", "error")
	lines := []string{"key create", "key create acme -cap-period weekly", "key create acme -expires soon",
		"key create acme -rpm -2", "account create beta -plan nosuch", "account create " + uuid.NewString(),
		"key revoke not-an-id", "key disable not-an-id", "key set-rpm " + uuid.NewString() + " -5",
		"key set-cap " + uuid.NewString() + " lots", "key set-cap " + uuid.NewString() + " 5 -cap-period weekly",
		"credit grant acme lots", "credit show acme -n 0", "usage list acme -n 0", "audit list acme -n 0",
		"usage export acme -from 2025-13-01 -to 2026-01-01", "usage export acme", "model grant acme nosuch",
		"member add acme not-an-address", "member add acme a@example.com -role boss", "ticket close not-an-id",
		"approval approve not-an-id", "approval deny not-an-id", "dataset put acme notes.txt",
		"dataset put acme rows.csv -name bad/name"}
	for name := range adminCommands {
		lines = append(lines, name+" -no-such-flag", name+" a b c d e f")
	}
	for _, database := range []struct{ what, url string }{{"unreachable", unreachableDatabase(t)}, {"none", ""}} {
		t.Run(database.what, func(t *testing.T) {
			t.Setenv("DATABASE_URL", database.url)
			t.Setenv("TOLLGATE_DATA_DIR", t.TempDir())
			for _, line := range lines {
				stdout, stderr, err := adminRunIO(t, line, "")
				command := strings.Join(strings.Fields(line)[:2], " ")
				if exitStatus(err) != 2 || stdout != "" || stderr != "" || !hintedOnce(errorReport(err), "tollgate admin "+command+" -h") {
					t.Errorf("admin %s (database %s): %v (exit status %d), stdout %q, stderr %q\nreport:\n%s"+
						"want its mistake on one line and the hint of its -h on the next, and nothing else", line, database.what, err, exitStatus(err), stdout, stderr, errorReport(err))
				}
			}
		})
	}
}
