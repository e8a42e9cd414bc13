package main

import (
	"context"
	"encoding/csv"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/pricecatalog"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usagearchive"
	"github.com/tollgate/tollgate/impl/usageview"
)

// TestAdminUsageExport: `admin usage export` writes the account's statement for a period, by
// name or by id, to a file or to standard output: the opening balance, the period's ledger
// entries (the plan's starting credit, an operator's grant, usage billed at Sonnet 4.5's
// published price with cache reads and writes, and a request billed in part because the
// credit ran out), and a closing balance that is the opening plus the lines and the account's
// balance; another account's usage is not on it, nor are entries after the period. Mistakes in
// the command line are usage errors that name the flag, and an unknown account names it.
func TestAdminUsageExport(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	ctx := context.Background()
	// The statement starts on the UTC day the test starts, before the plan's starting credit is
	// granted: a day read after it would miss that grant when the test runs across midnight.
	from := time.Now().UTC().Format(time.DateOnly)
	mustAdmin(t, "account create acme -plan demo")
	mustAdmin(t, "account create rival -plan demo")
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	acme, err := st.GetAccountByName(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	rival, err := st.GetAccountByName(ctx, "rival")
	if err != nil {
		t.Fatal(err)
	}
	mustAdmin(t, "credit grant acme 500000 -note invoice-7 -idempotency-key inv-7")

	// Sonnet 4.5 (Anthropic's pricing page, through the built-in catalog): a turn with 50,000
	// tokens read from the cache and 10,000 written for an hour costs $0.0885.
	sonnet, err := pricecatalog.Builtin().Price("claude-sonnet-4-5", "2025-10-01")
	if err != nil {
		t.Fatal(err)
	}
	turn := price.Tokens{Uncached: 2_000, CacheWrite1h: 10_000, CacheRead: 50_000, Output: 500, Reasoning: 120}
	record := func(acct store.Account, id string) store.UsageRecord {
		p := sonnet
		c := price.Cost(turn, p)
		return store.UsageRecord{AccountID: acct.ID, RequestID: id, Model: "service-sonnet", Route: "/v1/messages",
			Provider: "anthropic", UpstreamModel: "claude-sonnet-4-5", Status: "ok", StartedAt: time.Now(), FinishedAt: time.Now(),
			InputTokens: turn.Input(), OutputTokens: turn.Output, CacheReadTokens: turn.CacheRead, CacheWrite1hTokens: turn.CacheWrite1h,
			ReasoningTokens: turn.Reasoning, Price: &p, Costs: c, CacheSavingsMicros: price.CacheSavings(turn, p, c), CostMicros: c.Total()}
	}
	if _, err := st.WriteUsage(ctx, "admin-test", []store.UsageRecord{record(acme, "req-1"), record(rival, "req-rival")}); err != nil {
		t.Fatal(err)
	}
	// Spend all but 1,000 of acme's credit, then a request of 88,500 of which 1,000 is billed.
	bal, err := st.GetAccount(ctx, acme.ID)
	if err != nil {
		t.Fatal(err)
	}
	big := store.UsageRecord{AccountID: acme.ID, RequestID: "req-big", Model: "service-sonnet", Route: "/v1/messages",
		Provider: "anthropic", UpstreamModel: "claude-sonnet-4-5", Status: "ok", StartedAt: time.Now(), FinishedAt: time.Now(),
		CostMicros: bal.BalanceMicros - 1_000}
	if _, err := st.WriteUsage(ctx, "admin-test", []store.UsageRecord{big, record(acme, "req-2")}); err != nil {
		t.Fatal(err)
	}
	var end time.Time
	if err := st.Pool().QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&end); err != nil {
		t.Fatal(err)
	}
	mustAdmin(t, "credit grant acme 7000 -note after-the-period")
	final, err := st.GetAccount(ctx, acme.ID)
	if err != nil {
		t.Fatal(err)
	}

	to := end.UTC().Format(time.RFC3339Nano)
	file := filepath.Join(t.TempDir(), "acme.csv")
	out := mustAdmin(t, "usage export acme -from "+from+" -to "+to+" -out "+file)
	if !strings.Contains(out, "statement of account acme from "+from) || !strings.Contains(out, "5 lines") ||
		!strings.Contains(out, "closing balance 0 micros ($0.000000)") || !strings.Contains(out, "written to "+file) {
		t.Errorf("usage export -out printed: %s", out)
	}
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(text))).ReadAll()
	if err != nil || len(rows) != 8 || !slices.Equal(rows[0], usageview.StatementHeader) {
		t.Fatalf("the statement: %v\n%s", err, text)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	cell := func(i int, name string) string { return rows[i+1][col[name]] }
	num := func(i int, name string) int64 {
		n, err := strconv.ParseInt(cell(i, name), 10, 64)
		if err != nil {
			t.Fatalf("line %d %s: %v", i, name, err)
		}
		return n
	}
	var types, refs []string
	sum := int64(0)
	for i := 1; i <= 5; i++ {
		types, refs = append(types, cell(i, "line_type")), append(refs, cell(i, "reference"))
		sum += num(i, "amount_micros")
	}
	if !slices.Equal(types, []string{"grant", "grant", "usage", "usage", "usage"}) ||
		!slices.Equal(refs, []string{"starting-credit", "inv-7", "usage:req-1", "usage:req-big", "usage:req-2"}) {
		t.Errorf("lines %v %v", types, refs)
	}
	if cell(0, "line_type") != usageview.LineOpening || num(0, "balance_micros") != 0 || cell(6, "line_type") != usageview.LineClosing ||
		num(6, "balance_micros") != sum || num(5, "balance_micros") != 0 || final.BalanceMicros != 7_000 {
		t.Errorf("opening %s, closing %s, sum %d, last balance %s, balance now %d", cell(0, "balance_micros"),
			cell(6, "balance_micros"), sum, cell(5, "balance_micros"), final.BalanceMicros)
	}
	if cell(3, "cache_read_tokens") != "50000" || cell(3, "cache_write_1h_cost_micros") != "60000" ||
		cell(3, "amount_usd") != "-0.088500" || cell(3, "price_catalog") != "claude-sonnet-4-5" {
		t.Errorf("the cached turn: %q", rows[4])
	}
	if cell(5, "cost_micros") != "88500" || cell(5, "amount_micros") != "-1000" || cell(5, "not_billed_micros") != "87500" ||
		!strings.Contains(cell(5, "note"), "not billed") {
		t.Errorf("the request billed in part: %q", rows[6])
	}
	if strings.Contains(string(text), "req-rival") || strings.Contains(string(text), "after-the-period") {
		t.Errorf("the statement holds another account's usage or an entry after the period:\n%s", text)
	}

	// By id, to standard output: the same statement.
	stdout := mustAdmin(t, "usage export "+acme.ID.String()+" -from "+from+" -to "+to)
	if stdout != string(text) {
		t.Errorf("standard output differs from the file:\n%s\n%s", stdout, text)
	}
	// The rival's statement: its own usage only.
	if rivalOut := mustAdmin(t, "usage export rival -from "+from+" -to "+to); !strings.Contains(rivalOut, "usage:req-rival") ||
		strings.Contains(rivalOut, "req-1") || strings.Contains(rivalOut, "inv-7") {
		t.Errorf("rival's statement:\n%s", rivalOut)
	}

	for line, want := range map[string]string{
		"usage export acme -from " + from:                   "or -from and -to",
		"usage export acme -from yesterday -to " + from:     `-from "yesterday"`,
		"usage export acme -from " + from + " -to " + from:  "is not after -from",
		"usage export -from " + from + " -to " + to:         "takes 1 argument(s)",
		"usage export nobody -from " + from + " -to " + to:  `account "nobody"`,
		"usage export acme -from 2025-01-01 -to 2025-13-01": `-to "2025-13-01"`,
	} {
		if _, err := adminRun(t, line); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("admin %s: %v, want an error with %q", line, err, want)
		}
	}
	if _, err := adminRun(t, "usage export acme -from "+from+" -to "+from); err == nil {
		t.Error("an empty period was accepted")
	} else if _, ok := errors.AsType[usageError](err); !ok {
		t.Errorf("an empty period is not a usage error: %T", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(file)); len(entries) != 1 {
		t.Errorf("the export left files behind: %v", entries)
	}
	if help, _ := adminRun(t, "-h"); !strings.Contains(help, "usage export ACCOUNT (-month YYYY-MM | -from DATE -to DATE) [-out FILE [-force]]") {
		t.Errorf("admin -h lacks usage export:\n%s", help)
	}
}

// TestAdminUsageExportReadsArchivedMonths: a statement over a month that usage retention has
// archived (its usage rows moved to Parquet in the dataset store, its ledger kept) has its usage
// lines whole, tokens and prices read from the archive, as the console's statement has. Before,
// the admin command read PostgreSQL alone, and such a line had its amount and no usage. Run as
// a process with a configuration that selects no object store, the command says on stderr that
// it reads the archives from the local directory, naming it, as the dataset commands do
// (before, it said nothing, and an operator whose gateways archive to an object store was not
// told where the command looked).
func TestAdminUsageExportReadsArchivedMonths(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	archives, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOLLGATE_DATASETS_DIR", archives)
	ctx := context.Background()
	mustAdmin(t, "account create acme -plan demo")
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	acme, err := st.GetAccountByName(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	sonnet, err := pricecatalog.Builtin().Price("claude-sonnet-4-5", "2025-10-01")
	if err != nil {
		t.Fatal(err)
	}
	turn := price.Tokens{Uncached: 2_000, CacheWrite1h: 10_000, CacheRead: 50_000, Output: 500}
	c := price.Cost(turn, sonnet)
	start := time.Now().UTC()
	if _, err := st.WriteUsage(ctx, "admin-test", []store.UsageRecord{{AccountID: acme.ID, RequestID: "req-archived",
		Model: "service-sonnet", Route: "/v1/messages", Provider: "anthropic", UpstreamModel: "claude-sonnet-4-5", Status: "ok",
		StartedAt: start, FinishedAt: start, InputTokens: turn.Input(), OutputTokens: turn.Output, CacheReadTokens: turn.CacheRead,
		CacheWrite1hTokens: turn.CacheWrite1h, Price: &sonnet, Costs: c, CostMicros: c.Total()}}); err != nil {
		t.Fatal(err)
	}
	var end time.Time
	if err := st.Pool().QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&end); err != nil {
		t.Fatal(err)
	}

	// Archive this month: the archiver's clock three months on, keeping one month.
	cfg, err := loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	storage, closeStorage, err := openDatasetStorage(ctx, cfg, "", newLogger("text"))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStorage()
	views := usageview.New(st.Pool(), usageview.Options{})
	arch := usagearchive.New(usagearchive.Options{Usage: views, Storage: storage, RetentionMonths: 1, TempDir: t.TempDir(),
		Now: func() time.Time { return start.AddDate(0, 3, 0) }})
	if err := arch.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// The request's month is archived, with its one record. It need not be the first archived:
	// a migration run before the first of the month made the month before's partition too.
	archived, err := views.ArchivedMonths(ctx)
	if err != nil || !slices.ContainsFunc(archived, func(m usageview.ArchivedMonth) bool {
		return m.Month.Equal(time.Date(start.Year(), start.Month(), 1, 0, 0, 0, 0, time.UTC)) && m.Records == 1
	}) {
		t.Fatalf("archived months %+v, %v: want this month's", archived, err)
	}
	if recs, err := st.UsageRecords(ctx, acme.ID, 10); err != nil || len(recs) != 0 {
		t.Fatalf("PostgreSQL still holds %d of the month's records (%v)", len(recs), err)
	}

	out := mustAdmin(t, "usage export acme -from "+start.Format(time.DateOnly)+" -to "+end.Format(time.RFC3339Nano))
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) < 3 || !slices.Equal(rows[0], usageview.StatementHeader) {
		t.Fatalf("the statement: %v\n%s", err, out)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	found := false
	for _, r := range rows[1:] {
		if r[col["reference"]] != "usage:req-archived" {
			continue
		}
		found = true
		if r[col["cache_read_tokens"]] != "50000" || r[col["cache_write_1h_cost_micros"]] != "60000" ||
			r[col["price_catalog"]] != "claude-sonnet-4-5" || r[col["model"]] != "service-sonnet" {
			t.Errorf("the archived request's line lacks its usage: %q", r)
		}
	}
	if !found {
		t.Fatalf("no line for the archived request:\n%s", out)
	}

	env := append(os.Environ(), "TOLLGATE_CONFIG=", "TOLLGATE_DATASET_STORE=")
	stdout, stderr, code := runTollgate(t, env, "admin", "usage", "export", "acme", "-from", start.Format(time.DateOnly),
		"-to", end.Format(time.RFC3339Nano))
	if code != 0 || !strings.Contains(stdout, "usage:req-archived") ||
		!strings.Contains(stderr, "tollgate: usage archives in the local directory "+archives+": the configuration selects no object store") {
		t.Errorf("usage export as a process: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}
