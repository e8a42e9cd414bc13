package web_test

import (
	"context"
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/web/members"
)

// TestStatementRevealsNoOtherAccount: the statement (GET /usage/statement.csv) names each
// ledger entry by a sealed token, not by the credit_ledger row id. The ids are one identity
// sequence for every account, and every settled request of every account takes one, so two
// lines of a tenant's own statement told how many requests, grants and adjustments the whole
// gateway recorded between them, with their times: the gateway's request volume, which the
// request log's cursor was sealed to hide. The tokens differ per entry and stay the same from one
// download to the next; the opening balance's note names its entry the same way.
func TestStatementRevealsNoOtherAccount(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	mine := e.account(t, "mallory", bobEmail, members.RoleOwner)
	theirs := e.account(t, "victim", aliceEmail, members.RoleOwner)
	grant := func(id uuid.UUID, key string) int64 {
		t.Helper()
		entry, _, err := e.Accounts.GrantCredit(ctx, id, 1000, key, key)
		if err != nil {
			t.Fatal(err)
		}
		return entry.ID
	}
	firstID := grant(mine.ID, "grant-a")
	for i := range 5 {
		grant(theirs.ID, "their-grant-"+strconv.Itoa(i))
	}
	secondID := grant(mine.ID, "grant-b")

	b := e.browser(t)
	b.signIn(e, bobEmail, bobPass)
	statement := func(query string) [][]string {
		t.Helper()
		p := b.get("/usage/statement.csv" + query)
		if p.Status != http.StatusOK {
			t.Fatalf("GET /usage/statement.csv%s: %d %.500s", query, p.Status, p.Body)
		}
		rows, err := csv.NewReader(strings.NewReader(p.Body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	col := func(rows [][]string, name string) int {
		for i, c := range rows[0] {
			if c == name {
				return i
			}
		}
		t.Fatalf("no column %s in %v", name, rows[0])
		return -1
	}
	entryOf := func(rows [][]string, reference string) string {
		t.Helper()
		for _, r := range rows[1:] {
			if r[col(rows, "reference")] == reference {
				return r[col(rows, "entry_id")]
			}
		}
		t.Fatalf("the statement has no line %s: %v", reference, rows)
		return ""
	}
	rows := statement("")
	a, z := entryOf(rows, "grant-a"), entryOf(rows, "grant-b")
	ai, errA := strconv.ParseInt(a, 10, 64)
	zi, errZ := strconv.ParseInt(z, 10, 64)
	if errA == nil && errZ == nil {
		t.Errorf("entry_id is the ledger's row id (%d, then %d for this account's next entry): the %d entries of other accounts "+
			"in between show", ai, zi, zi-ai-1)
	}
	for _, tok := range []string{a, z} {
		if tok == "" || tok == strconv.FormatInt(firstID, 10) || tok == strconv.FormatInt(secondID, 10) {
			t.Errorf("entry_id %q is empty or the ledger's row id (%d, %d)", tok, firstID, secondID)
		}
	}
	if a == z {
		t.Errorf("two entries have the same entry_id %q", a)
	}
	if again := statement(""); entryOf(again, "grant-a") != a || entryOf(again, "grant-b") != z {
		t.Errorf("the entry ids changed from one download to the next")
	}

	// A period after the entries: its opening balance is the one after grant-b, and its note
	// names that entry by its token, not by its id.
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format("2006-01-02")
	later := statement("?from=" + tomorrow + "&to=" + tomorrow)
	note := later[1][col(later, "note")]
	if strings.Contains(note, " "+strconv.FormatInt(secondID, 10)+",") || !strings.Contains(note, z) {
		t.Errorf("the opening balance's note %q names entry %d by its id, not by %q", note, secondID, z)
	}
}
