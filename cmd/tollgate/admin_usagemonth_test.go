package main

import (
	"context"
	"encoding/csv"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/usageview"
)

// TestAdminUsageExportMonth: `usage export ACCOUNT -month 2025-11` is the statement of that
// calendar month in UTC, the same as -from 2025-11-01 -to 2025-12-01 and as the console's
// statement of from=2025-11-01 to=2025-11-30: an entry at the month's first instant is on it,
// one a microsecond before it or at the next month's first instant is not. A month not over
// yet is said on stderr; a month that is not one, or -month with -from or -to, is a usage error
// naming the flag.
func TestAdminUsageExportMonth(t *testing.T) {
	db := migratedDatabase(t)
	t.Setenv("DATABASE_URL", db)
	t.Setenv("LOG_LEVEL", "error")
	ctx := context.Background()
	mustAdmin(t, "account create acme -plan default")
	st, acme := openAccount(t, db, "acme")
	balance := int64(0)
	for _, e := range []struct {
		at     string
		amount int64
	}{
		{"2025-10-31T23:59:59.999999Z", 1_000},
		{"2025-11-01T00:00:00Z", 20_000},
		{"2025-11-30T23:59:59.999999Z", 300_000},
		{"2025-12-01T00:00:00Z", 4_000_000},
	} {
		balance += e.amount
		at, err := time.Parse(time.RFC3339Nano, e.at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Pool().Exec(ctx, `INSERT INTO credit_ledger (account_id, amount_micros, balance_after_micros, reason,
			idempotency_key, note, created_at) VALUES ($1, $2, $3, 'grant', $4, $4, $5)`,
			acme.ID, e.amount, balance, e.at, at); err != nil {
			t.Fatal(err)
		}
	}

	month, notes, err := adminRunIO(t, "usage export acme -month 2025-11", "")
	if err != nil || notes != "" {
		t.Fatalf("usage export -month 2025-11: %v\n%s", err, notes)
	}
	rows, err := csv.NewReader(strings.NewReader(month)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, r := range rows[1:] {
		if r[0] == "grant" {
			refs = append(refs, r[3])
		}
	}
	if !slices.Equal(refs, []string{"2025-11-01T00:00:00Z", "2025-11-30T23:59:59.999999Z"}) {
		t.Errorf("the month's statement has the entries %v, want November's two:\n%s", refs, month)
	}
	if !strings.Contains(month, ",1000,") || !strings.Contains(month, ",321000,") {
		t.Errorf("the month's statement does not open at 1000 and close at 321000:\n%s", month)
	}
	if days := mustAdmin(t, "usage export acme -from 2025-11-01 -to 2025-12-01"); days != month {
		t.Errorf("-month 2025-11 differs from -from 2025-11-01 -to 2025-12-01:\n%s\n%s", month, days)
	}
	p, err := usageview.MonthPeriod("2025-11")
	if err != nil {
		t.Fatal(err)
	}
	console, err := usageview.ParseStatementQuery(url.Values{"from": {"2025-11-01"}, "to": {"2025-11-30"}}, time.Now(), time.UTC)
	if err != nil || console != p {
		t.Errorf("the console's statement of November is %v (%v), the admin's %v", console, err, p)
	}

	this := time.Now().UTC().Format(usageview.MonthLayout)
	if _, notes, err := adminRunIO(t, "usage export acme -month "+this, ""); err != nil || !strings.Contains(notes, "the period is not over") {
		t.Errorf("usage export -month %s (this month): %v, stderr %q", this, err, notes)
	}
	for line, want := range map[string]string{
		"usage export acme -month 2025-13":                  `-month "2025-13" is not a calendar month`,
		"usage export acme -month 11/2025":                  `-month "11/2025" is not a calendar month`,
		"usage export acme -month 2025-11-01":               `-month "2025-11-01" is not a calendar month`,
		"usage export acme -month 2025-11 -from 2025-11-01": "without -from and -to",
		"usage export acme -month 2025-11 -to 2025-12-01":   "without -from and -to",
		"usage export acme":                                 "needs -month",
	} {
		if _, err := adminRun(t, line); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("admin %s: %v, want an error with %q", line, err, want)
		} else if _, ok := errors.AsType[usageError](err); !ok {
			t.Errorf("admin %s: %T, want a usage error", line, err)
		}
	}
}
