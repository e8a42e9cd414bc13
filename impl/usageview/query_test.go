package usageview_test

import (
	"bytes"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/sealedid"
	"github.com/tollgate/tollgate/impl/usageview"
)

// TestParseLogQuery: a full query is read (days in the page's time zone, the last day
// included), written back by Values to the same URL, and every bad parameter is named in one
// error.
func TestParseLogQuery(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	key := uuid.New()
	cursor := usageview.Cursor{StartedAt: time.Date(2025, 3, 1, 10, 0, 0, 123456000, time.UTC), ID: 42}
	v := url.Values{"from": {"2025-03-01"}, "to": {"2025-03-02"}, "model": {" service-flint "}, "key": {key.String()},
		"route": {"/v1/messages"}, "status": {"failed"}, "limit": {"20"}, "after": {cursor.Seal(testSeal)}, "group": {"key"}}
	q, err := usageview.ParseLogQuery(v, paris, testSeal)
	if err != nil {
		t.Fatal(err)
	}
	want := usageview.Filter{From: time.Date(2025, 3, 1, 0, 0, 0, 0, paris), To: time.Date(2025, 3, 3, 0, 0, 0, 0, paris),
		Model: "service-flint", KeyID: key, Route: "/v1/messages", Status: "failed"}
	if !q.Filter.From.Equal(want.From) || !q.Filter.To.Equal(want.To) || q.Filter.Model != want.Model || q.Filter.KeyID != key ||
		q.Filter.Route != want.Route || q.Filter.Status != want.Status || q.Limit != 20 || q.After != cursor {
		t.Fatalf("parsed %+v", q)
	}
	back := q.Values(paris)
	if back.Encode() != "from=2025-03-01&key="+key.String()+"&limit=20&model=service-flint&route=%2Fv1%2Fmessages&status=failed&to=2025-03-02" {
		t.Errorf("values %s", back.Encode())
	}
	next := q.NextValues(paris, usageview.Page{Next: cursor})
	if again, err := usageview.ParseLogQuery(next, paris, testSeal); err != nil || again.After != cursor || again.Filter != q.Filter {
		t.Errorf("next page %s read back as %+v, %v", next.Encode(), again, err)
	}
	exact, err := usageview.ParseLogQuery(url.Values{"from": {"2025-03-01T10:30:00+01:00"}, "to": {"2025-03-01T12:00:00Z"}}, nil, testSeal)
	if err != nil || !exact.Filter.From.Equal(time.Date(2025, 3, 1, 9, 30, 0, 0, time.UTC)) || exact.Limit != usageview.DefaultPageSize {
		t.Errorf("RFC 3339 bounds: %+v, %v", exact, err)
	}
	if empty, err := usageview.ParseLogQuery(url.Values{}, nil, testSeal); err != nil || empty.Filter != (usageview.Filter{}) || !empty.After.IsZero() {
		t.Errorf("empty query: %+v, %v", empty, err)
	}

	bad := url.Values{"from": {"yesterday"}, "to": {"2020-01-01"}, "key": {"abc"}, "limit": {"9999"}, "after": {"x-1"},
		"model": {"a\x00b"}, "status": {strings.Repeat("s", 300)}}
	_, err = usageview.ParseLogQuery(bad, nil, testSeal)
	var qe *usageview.QueryError
	if !errors.As(err, &qe) {
		t.Fatalf("error %v", err)
	}
	var params []string
	for _, p := range qe.Problems {
		params = append(params, p.Param)
	}
	if !slices.Equal(params, []string{"from", "model", "status", "key", "after", "limit"}) {
		t.Errorf("problems with %v: %v", params, err)
	}
	if !strings.Contains(err.Error(), `from: "yesterday" is neither a day (YYYY-MM-DD) nor a time`) ||
		!strings.Contains(err.Error(), `limit: "9999" is not a whole number from 1 to 500`) {
		t.Errorf("message: %v", err)
	}
	_, err = usageview.ParseLogQuery(url.Values{"from": {"2025-03-02"}, "to": {"2025-03-01"}}, nil, testSeal)
	if err == nil || err.Error() != "to: must be after from" {
		t.Errorf("reversed bounds: %v", err)
	}
}

// testSeal seals the cursors of these tests.
var testSeal = func() *sealedid.Seal {
	s, err := sealedid.New(bytes.Repeat([]byte{3}, sealedid.KeySize))
	if err != nil {
		panic(err)
	}
	return s
}()

// TestCursorsAreSealed: a next-page cursor shows neither the row's id (usage_records' sequence,
// shared by every account) nor its time; it opens under the key that sealed it and no other, and
// what is not a cursor (the plain form of earlier builds, a forged token that opens to a time
// or id out of range) is refused.
func TestCursorsAreSealed(t *testing.T) {
	c := usageview.Cursor{StartedAt: time.Date(2026, 12, 3, 10, 0, 0, 123456000, time.UTC), ID: 987654}
	tok := c.Seal(testSeal)
	if strings.Contains(tok, "987654") || strings.Contains(tok, strconv.FormatInt(c.StartedAt.UnixMicro(), 10)) {
		t.Errorf("cursor %q shows its id or time", tok)
	}
	if back, err := usageview.OpenCursor(testSeal, tok); err != nil || back != c {
		t.Errorf("OpenCursor = %+v, %v; want %+v", back, err, c)
	}
	other, _ := sealedid.New(bytes.Repeat([]byte{4}, sealedid.KeySize))
	if back, err := usageview.OpenCursor(other, tok); err == nil && back == c {
		t.Error("the cursor opened under another key")
	}
	if (usageview.Cursor{}).Seal(testSeal) != "" {
		t.Error("the first page has a cursor")
	}
	for _, s := range []string{"-1", "1-0", "1764777600000000-41", "a-b", tok[:21], tok + "A", testSeal.Pair(-5, 10), testSeal.Pair(1, 0), testSeal.Pair(1<<62, 10)} {
		if _, err := usageview.OpenCursor(testSeal, s); err == nil {
			t.Errorf("%q opened", s)
		}
	}
	if _, err := usageview.ParseLogQuery(url.Values{"after": {"1764777600000000-41"}}, nil, testSeal); err == nil {
		t.Error("the plain cursor of earlier builds was taken")
	}
}

func TestParseDailyQuery(t *testing.T) {
	now := time.Date(2025, 5, 20, 23, 30, 0, 0, time.UTC)
	q, err := usageview.ParseDailyQuery(url.Values{}, now, nil)
	if err != nil || q.GroupBy != usageview.GroupByModel || !q.From.Equal(time.Date(2025, 4, 21, 0, 0, 0, 0, time.UTC)) ||
		!q.To.Equal(time.Date(2025, 5, 21, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("default: %+v, %v", q, err)
	}
	q, err = usageview.ParseDailyQuery(url.Values{"group": {"key"}, "days": {"7"}}, now, nil)
	if err != nil || q.GroupBy != usageview.GroupByKey || q.To.Sub(q.From) != 7*24*time.Hour {
		t.Fatalf("7 days by key: %+v, %v", q, err)
	}
	_, err = usageview.ParseDailyQuery(url.Values{"group": {"route"}, "days": {"0"}}, now, nil)
	if err == nil || err.Error() != `group: "route" is neither model nor key; days: "0" is not a whole number from 1 to 366` {
		t.Fatalf("bad: %v", err)
	}
}
