package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/apikey"
	"github.com/tollgate/tollgate/impl/store"
)

// admin runs one admin command line against the test database and returns its output.
func adminRun(t *testing.T, line string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := runAdmin(context.Background(), strings.Fields(line), &out)
	return out.String(), err
}

func mustAdmin(t *testing.T, line string) string {
	t.Helper()
	out, err := adminRun(t, line)
	if err != nil {
		t.Fatalf("admin %s: %v\n%s", line, err, out)
	}
	return out
}

// openAccount opens the store at url for the rest of the test and reads the account named
// name, which an admin command made.
func openAccount(t *testing.T, url, name string) (*store.Store, store.Account) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	acct, err := st.GetAccountByName(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return st, acct
}

func TestAdminCLI(t *testing.T) {
	t.Setenv("DATABASE_URL", migratedDatabase(t))
	t.Setenv("LOG_LEVEL", "error")

	out := mustAdmin(t, "account create acme -plan demo")
	if !strings.Contains(out, "account acme created") || !strings.Contains(out, "balance 10000000 micros") {
		t.Fatalf("account create: %s", out)
	}
	if _, err := adminRun(t, "account create acme"); err == nil || !strings.Contains(err.Error(), `account "acme" already exists`) {
		t.Fatalf("a second account with the same name: %v", err)
	}
	if _, err := adminRun(t, "account create ACME"); err == nil ||
		!strings.Contains(err.Error(), `account "ACME" cannot be created: account "acme" already exists, and account names that differ only in letter case are the same name`) {
		t.Fatalf("an account whose name differs from acme's only in case: %v", err)
	}
	if out := mustAdmin(t, "account list"); !strings.Contains(out, "acme") || !strings.Contains(out, "$10.000000") {
		t.Fatalf("account list: %s", out)
	}

	key := strings.TrimSpace(mustAdmin(t, "key create acme -name ci -rpm 7 -quiet"))
	if _, err := apikey.Parse(key); err != nil {
		t.Fatalf("key create printed %q: %v", key, err)
	}
	list := mustAdmin(t, "key list acme")
	if !strings.Contains(list, key[:apikey.DisplayLen]) || strings.Contains(list, key) || !strings.Contains(list, " 7 ") {
		t.Fatalf("key list must show the prefix and cap, never the key:\n%s", list)
	}
	id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(list)
	if out := mustAdmin(t, "key set-rpm "+id+" 120"); !strings.Contains(out, "cap 120") {
		t.Fatalf("set-rpm: %s", out)
	}

	if out := mustAdmin(t, "credit grant acme 2_500_000 -note invoice-42 -idempotency-key inv-42"); !strings.Contains(out, "balance 12500000") {
		t.Fatalf("credit grant: %s", out)
	}
	// The same idempotency key grants nothing more.
	if out := mustAdmin(t, "credit grant acme 2500000 -idempotency-key inv-42"); !strings.Contains(out, "nothing granted") {
		t.Fatalf("repeated grant: %s", out)
	}
	if out := mustAdmin(t, "credit show acme"); !strings.Contains(out, "balance 12500000") {
		t.Fatalf("the repeated grant changed the balance: %s", out)
	}
	if _, err := adminRun(t, "credit grant acme -5"); err == nil || !strings.Contains(err.Error(), "positive integer") {
		t.Fatalf("a negative grant: %v", err)
	}
	if out := mustAdmin(t, "credit show acme"); !strings.Contains(out, "invoice-42") || !strings.Contains(out, "starting-credit") {
		t.Fatalf("credit show: %s", out)
	}

	mustAdmin(t, "model revoke acme service-sonnet")
	if out := mustAdmin(t, "model list acme"); strings.Contains(out, "service-sonnet") || !strings.Contains(out, "service-flint") {
		t.Fatalf("model list after revoke: %s", out)
	}
	mustAdmin(t, "model grant acme service-sonnet")
	if out := mustAdmin(t, "model list acme"); !strings.Contains(out, "service-sonnet") {
		t.Fatalf("model list after grant: %s", out)
	}
	if _, err := adminRun(t, "model grant acme no-such-model"); err == nil {
		t.Fatal("granting an unconfigured model must fail")
	}

	if out := mustAdmin(t, "key revoke "+id+" -yes"); !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: %s", out)
	}
	if _, err := adminRun(t, "key revoke "+id+" -yes"); err == nil {
		t.Fatal("revoking twice must fail")
	}
	if _, err := adminRun(t, "frobnicate now"); err == nil {
		t.Fatal("an unknown command must fail")
	}
}

// TestAdminHelp: -h lists the commands, not just the global flag, and is not an error.
// TestAdminHelp checks admin -h's shape: one list of the commands, each line of it a command's
// first line or a continuation indented under it, the descriptions in one column, and the notes
// after it. The dataset commands' note on their storage sat in the list, between dataset delete
// and slot assign (operator notes, session 12), and usage import-spill's description was a
// column left of the others.
func TestAdminHelp(t *testing.T) {
	out, err := adminRun(t, "-h")
	if err != nil || !strings.Contains(out, "key create ACCOUNT") || !strings.Contains(out, "credit grant ACCOUNT MICROS") {
		t.Errorf("admin -h: %v\n%s", err, out)
	}
	lines := strings.Split(out, "\n")
	first, last := -1, -1
	for i, line := range lines {
		if usageCommandLine.MatchString(line) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		t.Fatalf("admin -h lists no command:\n%s", out)
	}
	const column = 44 // where a command's description starts
	for _, line := range lines[first : last+1] {
		switch {
		case usageCommandLine.MatchString(line):
			// The description on the command's line, when there is one, starts at the column.
			if gap := strings.Index(line[2:], "   "); gap >= 0 {
				if desc := 2 + gap + len(line[2+gap:]) - len(strings.TrimLeft(line[2+gap:], " ")); desc != column {
					t.Errorf("admin -h: the description of %q starts at column %d, not %d", strings.Fields(line)[:2], desc, column)
				}
			}
		case strings.HasPrefix(line, "     ") && strings.TrimSpace(line) != "":
		default:
			t.Errorf("admin -h: the command list is broken by %q (each of its lines is a command or indented under one; notes go after it)", line)
		}
	}
	if !strings.Contains(strings.Join(lines[last+1:], "\n"), "Dataset storage is") {
		t.Errorf("admin -h: the note on the dataset storage is not after the command list:\n%s", out)
	}
}

// TestDevWithABusyPortCreatesNothing: when the API address is taken, dev fails before it
// creates the demo account, whose key would otherwise be shown on no run at all.
func TestDevWithABusyPortCreatesNothing(t *testing.T) {
	t.Setenv("DATABASE_URL", migratedDatabase(t))
	t.Setenv("LOG_LEVEL", "error")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	err = runServe(context.Background(), []string{"-listen", busy.Addr().String(), "-metrics-listen", "off"}, true)
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("dev on a busy port: %v", err)
	}
	// The schema is in place (admin migrates), so an empty list means nothing was created.
	out, err := adminRun(t, "account list")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "demo") {
		t.Errorf("the demo account was created although dev could not listen:\n%s", out)
	}
}

// TestAdminUsageList: usage list shows what each request used, its input tokens by kind (cache
// reads and writes apart), and cost, hosted tool calls and requests served on credit during an
// outage included.
func TestAdminUsageList(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	ctx := context.Background()
	st, acct := openAccount(t, url, "acme")
	now := time.Now()
	_, err := st.WriteUsage(ctx, "test", []store.UsageRecord{
		{AccountID: acct.ID, RequestID: "req_search", Model: "service-sonnet", Route: "/v1/messages", Provider: "sim-anthropic", UpstreamModel: "sim-sonnet",
			InputTokens: 1910, CacheReadTokens: 900, CacheWrite1hTokens: 1000, OutputTokens: 20, CostMicros: 20_330, HostedCalls: map[string]int64{"web_search": 2}, HostedMicros: 20_000, Status: "ok", StartedAt: now, FinishedAt: now,
			TraceID: [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}},
		{AccountID: acct.ID, RequestID: "req_outage", Model: "service-flint", Route: "/v1/chat/completions", Provider: "sim-openai-chat", UpstreamModel: "sim-general",
			InputTokens: 5, OutputTokens: 7, CostMicros: 70, Status: "ok", OnCredit: true, StartedAt: now, FinishedAt: now},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := mustAdmin(t, "usage list acme")
	if !regexp.MustCompile(`req_search .* 1910 +900 +0 +1000 +20 `).MatchString(out) {
		t.Errorf("usage list lacks req_search's tokens by kind (in 1910, cache read 900, write 5m 0, write 1h 1000, out 20):\n%s", out)
	}
	// The trace id leads from a billed request to its trace (trial h8 D13); "-" when not traced.
	if !regexp.MustCompile(`req_search .* 4bf92f3577b34da6a3ce929d0e0e4736\n`).MatchString(out) || !regexp.MustCompile(`req_outage .* -\n`).MatchString(out) {
		t.Errorf("usage list lacks the trace ids:\n%s", out)
	}
	for _, want := range []string{"req_search", "sim-anthropic/sim-sonnet", "web_search=2 (20000 micros)", "20330", "req_outage", "ok (on credit)"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage list lacks %q:\n%s", want, out)
		}
	}
	// A count below 1 is a usage error, not the database's words.
	for _, line := range []string{"usage list acme -n -1", "credit show acme -n 0"} {
		if out, err := adminRun(t, line); err == nil || !strings.Contains(err.Error(), "-n must be at least 1") || strings.Contains(out+err.Error(), "SQLSTATE") {
			t.Errorf("admin %s: %v\n%s", line, err, out)
		}
	}
}

// TestAdminWithoutALocalClusterMakesNone: with DATABASE_URL unset, an admin command run where
// make run made no cluster (another directory than the checkout) is refused with a message that
// says where it looked and what to do, and makes nothing there: before, it made and migrated an
// empty cluster in ./.data and then said the demo account did not exist (trial h10 D6).
func TestAdminWithoutALocalClusterMakesNone(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("DATABASE_URL", "")
	t.Setenv("TOLLGATE_DATA_DIR", "")
	t.Setenv("LOG_LEVEL", "error")
	out, err := adminRun(t, "usage list demo")
	if err == nil || !strings.Contains(err.Error(), "no local PostgreSQL cluster at "+filepath.Join(dir, ".data", "postgres")) ||
		!strings.Contains(err.Error(), "DATABASE_URL") {
		t.Fatalf("admin usage list without a cluster: %v\n%s", err, out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused command left %d entries in its directory (%s…)", len(entries), entries[0].Name())
	}
}

// TestAdminNounHelp (operator notes, session 13): `tollgate admin usage -h` (a noun and -h) was
// answered as an unknown command, "usage -h", exit status 2. It now prints that noun's commands
// on stdout, exit status 0, without a database: the very lines `tollgate admin -h` lists for
// them, and no other command's; a noun no command begins with is still an unknown command.
func TestAdminNounHelp(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	t.Setenv("TOLLGATE_DATA_DIR", t.TempDir())
	all, err := adminRun(t, "-h")
	if err != nil {
		t.Fatal(err)
	}
	nouns := map[string]bool{}
	for name := range adminCommands {
		nouns[strings.Fields(name)[0]] = true
	}
	for noun := range nouns {
		for _, help := range []string{"-h", "--help"} {
			stdout, stderr, err := adminRunIO(t, noun+" "+help, "")
			if err != nil || stderr != "" {
				t.Errorf("admin %s %s: %v (exit status %d), stderr:\n%s", noun, help, err, exitStatus(err), stderr)
				continue
			}
			var list strings.Builder
			var listed []string
			for line := range strings.Lines(stdout) {
				if m := usageCommandLine.FindStringSubmatch(line); m != nil {
					listed = append(listed, m[1]+" "+m[2])
				}
				if len(listed) > 0 && (strings.HasPrefix(line, "  ")) {
					list.WriteString(line)
				}
			}
			var want []string
			for _, name := range documentedCommands() {
				if strings.HasPrefix(name, noun+" ") {
					want = append(want, name)
				}
			}
			if !slices.Equal(listed, want) || !strings.Contains(all, list.String()) {
				t.Errorf("admin %s %s lists %v, want %v, in the lines of admin -h:\n%s", noun, help, listed, want, stdout)
			}
		}
	}
	stdout, stderr, err := adminRunIO(t, "keys -h", "")
	if exitStatus(err) != 2 || stdout != "" || stderr != "" || !hintedOnce(errorReport(err), "tollgate admin -h") ||
		!strings.HasPrefix(err.Error(), `unknown admin command "keys": `) {
		t.Errorf("admin keys -h: %v (exit status %d), want an unknown command and the hint of admin -h\nstdout:\n%s\nstderr:\n%s", err, exitStatus(err), stdout, stderr)
	}
}
