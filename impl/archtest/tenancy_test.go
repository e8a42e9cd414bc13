package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// accountColumn finds a table's account_id column in a CREATE TABLE of the migrations, and
// tenantTable the table created (or given the column by ALTER TABLE).
var (
	createTable   = regexp.MustCompile(`(?is)CREATE TABLE (?:IF NOT EXISTS )?(\w+)\s*\((.*?)\n\);`)
	accountColumn = regexp.MustCompile(`(?m)^\s*account_id\s`)
	addAccountCol = regexp.MustCompile(`(?i)ALTER TABLE (\w+) ADD COLUMN (?:IF NOT EXISTS )?account_id\b`)
)

// accountCondition is an account_id compared with one of the query's parameters ($1, @name,
// sqlc.arg, sqlc.narg; = ANY of an array parameter too), either way round: the condition that
// keeps a query to the caller's account. A join of account_id with another table's is not one.
var accountCondition = regexp.MustCompile(`(?i)\baccount_id\s*=\s*(ANY\s*\(\s*)?(\$\d+|@\w+|sqlc\.n?arg\()` +
	`|(\$\d+|@\w+|sqlc\.n?arg\([^)]*\))\S*\s*=\s*(\w+\.)?account_id\b`)

// accountless are the queries that read or write a tenant table with no condition on the
// account, each with the reason none is needed: nothing that serves a tenant looks a row up
// through them by an id the tenant gave. A query that serves a tenant takes the account
// (WHERE id = $1 AND account_id = $2), so that a missing check in Go cannot reach another
// account's row. This list only grows with a reason a reviewer accepts.
var accountless = map[string]string{
	// The operator's commands: `tollgate admin` acts on any account.
	"GetAgentApproval": "the operator's commands (admin approval approve/deny, Service.approval with a nil account)",
	"GetAgentTicket":   "the operator's commands (admin ticket close, Service.CloseTicket with a nil account)",
	"GetAPIKey":        "the operator's commands (admin key ...: KEY_ID names the account)",

	// The agents' River workers, reading what their own job names, and the rows of a session
	// locked in the same transaction (sessionTx), read by its account or by such a worker.
	"GetAgentSession":           "the step worker reads the session its own job names",
	"GetAgentSessionForUpdate":  "the workers lock the session their own job names (lockSession); a tenant's path locks GetAccountAgentSessionForUpdate",
	"GetAgentApprovalForUpdate": "the action worker locks the approval its own job names",
	"SetAgentApprovalAction":    "the action worker moves the approval it holds locked",
	"UpdateAgentSession":        "writes back the session row the caller holds locked in the same transaction",
	"AllAgentEvents":            "the step worker reads its own session's log",
	"CountQueuedAgentMessages":  "the messages of the session row the caller holds locked",
	"ListQueuedAgentMessages":   "the messages of the session row the caller holds locked",
	"TakeAgentMessages":         "the step marks the messages it read of its locked session",
	"SetAgentCommandStatus":     "a command of the session row the caller holds locked",
	"FinishAgentStopCommands":   "the stop commands of the session row the caller holds locked",
	"LastAgentEventSeq":         "Service.Wait: its callers read the session by account first (Events, Tail); it answers only whether to read again",

	// Sweeps and maintenance of every account.
	"LapsedAgentSessions":           "the agents' sweep of lapsed sessions, over every account",
	"ExpireAgentApprovals":          "the approvals' expiry sweep, over every account",
	"TouchAPIKeys":                  "the batched last-use write of keys that authenticated",
	"SeedKeyBudgetSpend":            "a key's spend, after SetAPIKeyLimits changed that key by account in the same transaction",
	"DeleteStaleOAuthCodes":         "the sweep of stale authorization codes",
	"DeleteUnusedOAuthClients":      "the sweep of unused OAuth clients",
	"RenewCreditHolds":              "a gateway process renews its own credit holds (by holder)",
	"LockAccountsWithHoldsOf":       "a gateway process releases its own credit holds (by holder)",
	"LockAccountsWithExpiredHolds":  "the sweep of expired credit holds",
	"CountLiveCreditHolders":        "the count of live gateway processes",
	"WriteUsageBatch":               "the usage writer's batch, each record under its own account",
	"SaveStreamCheckpoints":         "a gateway process saves its own streams' checkpoints, each under its own account",
	"ListLostStreamCheckpoints":     "the recovery of the checkpoints of processes that are gone",
	"DeleteStreamCheckpoints":       "the recovery deletes the checkpoints it settled",
	"DeleteHolderStreamCheckpoints": "a gateway process deletes its own streams' checkpoints",
	"LostStreamUsage":               "the recovery reads the usage records it wrote for lost streams",
	"SettleKeyReservationsAtBill":   "the usage writer's batch: each record's request id looked up in usage_records under the record's own account (an array)",
	"UsageMonthTotals":              "the usage archiver, over a whole month of every account",
	"UsageMonthRows":                "the usage archiver, over a whole month of every account",

	// Credentials: the secret (a key's or a token's hash, a code) names the row, and its
	// holder is whoever presents it.
	"GetActiveAPIKeyByHash":        "authentication by the key's hash",
	"RedeemOAuthCode":              "the token endpoint redeems the code it was given (by its hash)",
	"GetOAuthCode":                 "the token endpoint reads the code it was given (by its hash)",
	"SetOAuthCodeGrant":            "the token endpoint records the grant of the code it redeemed",
	"OAuthAccessTokenGrant":        "authentication by the access token's hash",
	"OAuthGrantActive":             "the grant of a token presented, or of a session or approval row read by its account or by its own job",
	"TouchOAuthGrant":              "the last use of the grant whose token authenticated",
	"RevokeOAuthGrantOfAnyAccount": "the token endpoint's revocation (RFC 7009) and a replayed code's or token's revocation: the token names the grant",

	// A user's own rows, across the accounts they belong to.
	"ListUserMemberships": "the signed-in user's own memberships (the account switcher)",
}

// tenantTables are the tables of the migrations that have an account_id column.
func tenantTables(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../queries/migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v %v", files, err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range createTable.FindAllStringSubmatch(string(b), -1) {
			if accountColumn.MatchString(m[2]) {
				out = append(out, m[1])
			}
		}
		for _, m := range addAccountCol.FindAllStringSubmatch(string(b), -1) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestTenantQueriesNameTheAccount: every named query (queries/*.sql) that reads, updates or
// deletes rows of a table with an account_id column compares that column with a parameter,
// unless accountless names it with its reason; and accountless names no query that does, or
// that is gone. It reads the SQL as text (comments dropped): a query whose account condition
// is a join with another table's account_id is not counted as one.
func TestTenantQueriesNameTheAccount(t *testing.T) {
	tables := tenantTables(t)
	if len(tables) < 10 || !slices.Contains(tables, "agent_sessions") || !slices.Contains(tables, "api_keys") {
		t.Fatalf("the tables with an account_id column read from the migrations: %v", tables)
	}
	touches := regexp.MustCompile(`(?i)\b(FROM|JOIN|UPDATE)\s+(` + strings.Join(tables, "|") + `)\b`)
	files, err := filepath.Glob("../../queries/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("queries: %v %v", files, err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(b), "-- name: ")[1:] {
			name := strings.Fields(block)[0]
			var sql []string
			for _, line := range strings.Split(block, "\n")[1:] {
				if !strings.HasPrefix(strings.TrimSpace(line), "--") {
					sql = append(sql, line)
				}
			}
			text := strings.Join(sql, "\n")
			if !touches.MatchString(text) {
				continue
			}
			scoped := accountCondition.MatchString(text)
			why, listed := accountless[name]
			seen[name] = true
			switch {
			case !scoped && !listed:
				t.Errorf("%s (%s) reads or writes a tenant table with no account condition: add `AND account_id = $n` "+
					"(a tenant's path), or name it in accountless with why no account applies", name, filepath.Base(f))
			case scoped && listed:
				t.Errorf("%s has an account condition: take it off accountless (%q)", name, why)
			}
		}
	}
	for name := range accountless {
		if !seen[name] {
			t.Errorf("accountless names %s, which is no query on a tenant table any more: take it off", name)
		}
	}
}
