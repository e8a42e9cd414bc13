package usageview_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usageview"
)

// TestExportCSV exports more than two of the export's internal pages: a header, every row of
// the account once, newest first, none of another account's; cells with commas, quotes and
// line breaks survive a CSV reader; and text cells a spreadsheet would evaluate (= + - @, tab)
// come back prefixed with a single quote. A filter narrows the export as it narrows the log.
func TestExportCSV(t *testing.T) {
	base := time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)
	f := newFixture(t, base)
	a, b := f.account("a"), f.account("b")
	key := f.key(a, "=evil")
	evil := store.UsageRecord{AccountID: a, RequestID: `=HYPERLINK("http://x.example","y")`, APIKeyID: key,
		Model: "+cmd", Route: "-2+3", Provider: "@SUM(A1)", UpstreamModel: "a,b \"quoted\"\nline two",
		InputTokens: 12, OutputTokens: 34, CostMicros: 1_234_567, Status: "\tfailed",
		HostedCalls: map[string]int64{"web_search": 2, "code_execution": 1}, HostedMicros: 20_000,
		StartedAt: base.Add(time.Hour), FinishedAt: base.Add(time.Hour + 1500*time.Millisecond), FittedOutputTokens: 1100,
		TraceID: [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}}
	var plain []store.UsageRecord
	for i := range 2100 {
		plain = append(plain, store.UsageRecord{AccountID: a, Model: "m", Route: "/v1/chat/completions", Provider: "sim",
			UpstreamModel: "e", CostMicros: 5, Status: "completed", StartedAt: base.Add(-time.Duration(i) * time.Second)})
	}
	f.write(append(plain, evil)...)
	f.write(store.UsageRecord{AccountID: b, RequestID: "b-only", Model: "m", Route: "/v1/messages", Provider: "sim",
		UpstreamModel: "e", CostMicros: 5, Status: "completed", StartedAt: base})

	var out bytes.Buffer
	n, err := f.svc.ExportCSV(f.ctx, a, usageview.Filter{}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"a,b ""quoted""`+"\nline two\"") {
		t.Errorf("the upstream model is not quoted as RFC 4180 says:\n%.600s", out.String())
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if n != 2101 || len(rows) != 2102 || !slices.Equal(rows[0], usageview.CSVHeader) {
		t.Fatalf("wrote %d rows, read %d lines, header %v", n, len(rows), rows[0])
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	first := rows[1]
	want := map[string]string{
		"started_at": "2025-04-01T01:00:00Z", "request_id": `'=HYPERLINK("http://x.example","y")`, "route": "'-2+3",
		"model": "'+cmd", "provider": "'@SUM(A1)", "expert": "a,b \"quoted\"\nline two", "key_id": key.String(),
		"key_name": "'=evil (tgk_=evi…)", "input_tokens": "12", "output_tokens": "34", "cost_micros": "1234567",
		"cost_usd": "1.234567", "hosted_tool_calls": "code_execution=1 web_search=2", "hosted_tool_micros": "20000",
		"status": "'\tfailed", "latency_ms": "1500.000", "on_credit": "false",
		"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "fitted_output_tokens": "1100",
	}
	for h, v := range want {
		if first[col[h]] != v {
			t.Errorf("%s: got %q, want %q", h, first[col[h]], v)
		}
	}
	seen := map[string]bool{}
	for i, r := range rows[2:] {
		if seen[r[col["request_id"]]] || r[col["request_id"]] == "b-only" {
			t.Fatalf("row %d: %s again, or another account's", i, r[col["request_id"]])
		}
		seen[r[col["request_id"]]] = true
		if r[col["key_id"]] != "" || r[col["cost_usd"]] != "0.000005" || r[col["trace_id"]] != "" ||
			r[col["fitted_output_tokens"]] != "" {
			t.Fatalf("row %d: %v", i, r)
		}
	}

	out.Reset()
	n, err = f.svc.ExportCSV(f.ctx, a, usageview.Filter{KeyID: key}, &out)
	if err != nil || n != 1 {
		t.Fatalf("export by key: %d rows, %v", n, err)
	}
}

// TestExportCSVStopsOnAWriteError: a download that goes away stops the export with the error,
// and an export whose first page cannot be read writes nothing.
func TestExportCSVStopsOnAWriteError(t *testing.T) {
	f := newFixture(t, time.Now())
	a := f.account("a")
	var recs []store.UsageRecord
	for i := range 1500 {
		recs = append(recs, store.UsageRecord{AccountID: a, Model: "m", Route: "/r", Provider: "p", UpstreamModel: "e",
			Status: "completed", StartedAt: f.now.Add(-time.Duration(i) * time.Second)})
	}
	f.write(recs...)
	// A failure before the first page (here the request's context is gone) writes nothing,
	// not even the header, so the page can still answer with an error.
	cancelled, cancel := context.WithCancel(f.ctx)
	cancel()
	var nothing bytes.Buffer
	if n, err := f.svc.ExportCSV(cancelled, a, usageview.Filter{}, &nothing); err == nil || n != 0 || nothing.Len() != 0 {
		t.Fatalf("export on a cancelled context: %d rows, %d bytes, %v", n, nothing.Len(), err)
	}
	gone := errors.New("client went away")
	n, err := f.svc.ExportCSV(f.ctx, a, usageview.Filter{}, &failAfter{left: 10_000, err: gone})
	if !errors.Is(err, gone) || n >= 1500 {
		t.Fatalf("wrote %d rows, err %v", n, err)
	}
}

type failAfter struct {
	left int
	err  error
}

func (w *failAfter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		return 0, w.err
	}
	w.left -= len(p)
	return len(p), nil
}

func TestSafeCell(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "plain": "plain", "=1+1": "'=1+1", "+1": "'+1", "-1": "'-1", "@x": "'@x", "\tx": "'\tx", "\rx": "'\rx",
		"a=b": "a=b", "'=x": "'=x",
	} {
		if got := usageview.SafeCell(in); got != want {
			t.Errorf("SafeCell(%q) = %q, want %q", in, got, want)
		}
	}
	if got := usageview.USD(1_000_005); got != "1.000005" {
		t.Errorf("USD: %s", got)
	}
}
