package web_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/web/audit"
	"github.com/tollgate/tollgate/impl/web/members"
)

var olderLinkRe = regexp.MustCompile(`<a href="/audit\?before=([^"]*)">Older entries</a>`)

// TestAuditCursorRevealsNoOtherAccount: the Audit log's "Older entries" link names the next page
// by a sealed token, not by the audit_log row id. The ids are one sequence for every account, so
// a plain id let a tenant read off two of its own pages how many audited actions (sign-ins, keys
// created, approvals decided…) every other account made in between, as the request log's plain
// cursor and the Sessions page's row ids did before they were sealed. The sealed link still
// pages, and a plain id, or a sealed token of another kind (a session's), is no page (400).
func TestAuditCursorRevealsNoOtherAccount(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	mine := e.account(t, "mallory", bobEmail, members.RoleOwner)
	theirs := e.account(t, "victim", aliceEmail, members.RoleOwner)
	log := &audit.Log{Store: e.Store}
	record := func(acct uuid.UUID, target string) {
		t.Helper()
		if err := log.Record(ctx, audit.Entry{AccountID: acct, Actor: "operator", Action: "member.added", Target: target}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 60 {
		if i == 12 {
			for range 7 {
				record(theirs.ID, "another account's entry")
			}
		}
		record(mine.ID, fmt.Sprintf("entry-%02d", i))
	}
	b := e.browser(t)
	b.signIn(e, bobEmail, bobPass) // one more entry: the sign-in

	older := func() (token string, page string) {
		t.Helper()
		p := b.get("/audit")
		if p.Status != http.StatusOK {
			t.Fatalf("GET /audit: %d %.300s", p.Status, p.Body)
		}
		m := olderLinkRe.FindStringSubmatch(p.Body)
		if m == nil {
			t.Fatalf("the first page of 62 entries has no link to older ones: %.2000s", p.Body)
		}
		v, err := url.QueryUnescape(html.UnescapeString(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		return v, p.Body
	}
	// 61 entries: the first page's link names the 50th newest, entry-11; with one more entry of
	// this account it names entry-12, and the other account made 7 entries between the two.
	first, _ := older()
	record(mine.ID, "entry-60")
	second, page1 := older()

	a, errA := strconv.ParseInt(first, 10, 64)
	z, errZ := strconv.ParseInt(second, 10, 64)
	if errA == nil && errZ == nil {
		t.Errorf("the Older link is the plain audit row id (%d, then %d after one more entry of this account): "+
			"the difference shows the %d entries another account made in between", a, z, z-a-1)
	}
	entries, err := log.List(ctx, mine.ID, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if id := strconv.FormatInt(entries[49].ID, 10); strings.Contains(second, id) {
		t.Errorf("the Older link %q holds the row id %s", second, id)
	}

	// The sealed link pages: the newest entry on the first page, the oldest on the next.
	if !strings.Contains(page1, "entry-60") || strings.Contains(page1, "entry-00<") {
		t.Errorf("the first page is not the newest 50 entries")
	}
	p := b.get("/audit?" + url.Values{"before": {second}}.Encode())
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "entry-00<") || strings.Contains(p.Body, "entry-60<") ||
		strings.Contains(p.Body, "another account") {
		t.Errorf("the Older link's page: %d, want the oldest entries of this account only: %.3000s", p.Status, p.Body)
	}

	// A plain id, or a sealed token of another kind, names no page.
	for _, before := range []string{strconv.FormatInt(entries[49].ID, 10), sealedSessionID(t, e, entries[49].ID), "x"} {
		p := b.get("/audit?" + url.Values{"before": {before}}.Encode())
		if p.Status != http.StatusBadRequest || strings.Contains(p.Body, "entry-") {
			t.Errorf("GET /audit?before=%s: %d, want 400 and no entries: %.500s", before, p.Status, p.Body)
		}
	}
}
