package billing

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usagespill"
)

// TestSpilledRecordsAreChecked: the spill file's checksums find damage, not forgery, and the
// records an earlier process left in it were replayed as written: a negative cost (written as
// nothing), a priced record whose cost is not what its own counts cost at its own price
// (billed as written, unpriced), counts whose cost overflows, and a record of an account that
// does not exist (dropped with a count, no request id). Each is now held to the rules of a
// record the meter writes: one that fails is not applied, is kept in the quarantine file
// beside the spill (0600), counted with the records set aside and logged once with its
// request id; the records around it are written, each once.
func TestSpilledRecordsAreChecked(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	const granted = 1_000_000
	acct := newAccount(t, st, granted)
	path := filepath.Join(t.TempDir(), "usage.spill")
	sp, err := usagespill.Open(path, usagespill.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := &price.Price{Rates: price.Rates{Input: 3_000_000, Output: 15_000_000}}
	record := func(id string, cost int64) store.UsageRecord {
		return store.UsageRecord{AccountID: acct, RequestID: id, Model: "service-flint", Route: "/v1/chat/completions",
			CostMicros: cost, Status: "completed", StartedAt: time.Now(), FinishedAt: time.Now()}
	}
	priced := func(id string, in, out int64) store.UsageRecord {
		r := record(id, 0)
		r.InputTokens, r.OutputTokens, r.Price = in, out, p
		r.Costs = price.Cost(r.Tokens(), *p)
		r.CostMicros = r.Costs.Total()
		return r
	}
	inflated := priced("inflated", 1000, 200)
	inflated.CostMicros += 5_000
	absurd := priced("absurd", math.MaxInt64/2, 200)
	unknown := record("unknown-account", 10)
	unknown.AccountID = uuid.New()
	costs := map[string]int64{"ok-unpriced": 10, "ok-priced": 6_000, "ok-after": 20}
	faulty := map[string]string{
		"negative-cost":   "a negative amount",
		"inflated":        "a cost not its parts",
		"absurd":          "token counts whose cost overflows",
		"unknown-account": "an unknown account",
	}
	var entries []usagespill.Entry
	for _, r := range []store.UsageRecord{
		record("ok-unpriced", 10), priced("ok-priced", 1000, 200), record("negative-cost", -500),
		inflated, absurd, unknown, record("ok-after", 20),
	} {
		entries = append(entries, usagespill.Entry{Holder: "a-process-that-is-gone", Record: r})
	}
	if _, err := sp.Append(entries); err != nil {
		t.Fatal(err)
	}
	sp.Close()

	sp = openSpill(t, path, usagespill.Options{})
	var logs logSink
	m := New(st, Options{Logger: logs.logger(), Spill: sp})
	if err := m.flushAll(ctx); err != nil {
		t.Fatal(err)
	}
	if s := m.WriterStats(); s.SetAside != int64(len(faulty)) || s.Backlog != 0 {
		t.Errorf("writer %+v: want %d set aside and an empty backlog", s, len(faulty))
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkBilledOnce(t, st, acct, granted, costs)

	for id := range faulty {
		if n := logs.count("request_id=" + id + " "); n != 1 {
			t.Errorf("request %s logged %d times, want once:\n%s", id, n, strings.Join(logs.all(), "\n"))
		}
	}
	q := path + ".quarantine"
	info, err := os.Stat(q)
	if err != nil {
		t.Fatalf("no quarantine file: %v", err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("quarantine file mode %#o, want 0600", info.Mode().Perm())
	}
	f, err := os.Open(q)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kept := make(map[string]string)
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var line struct {
			Reason string `json:"reason"`
			Record struct {
				RequestID string `json:"request_id"`
			} `json:"record"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("quarantine line %q: %v", sc.Text(), err)
		}
		kept[line.Record.RequestID] = line.Reason
	}
	if len(kept) != len(faulty) {
		t.Errorf("quarantined %v, want %v", kept, faulty)
	}
	for id, reason := range faulty {
		if !strings.HasPrefix(kept[id], reason) {
			t.Errorf("request %s quarantined for %q, want %q", id, kept[id], reason)
		}
	}
}

// TestReplayKilledBeforeResetQuarantinesOnce: a process replaying the records an earlier one
// left is killed after its replay has written some and kept others aside, before it empties
// the spill file (Reset): the file is then as it was, and the next process replays it from the
// first record. The records written are skipped by the ledger, but every record kept aside was
// quarantined again: a second line in the quarantine file (which an operator billing the
// quarantined records by hand would bill twice), counted again with the records set aside and
// logged again as an error. Restoring the file's bytes after a whole replay stands for the
// kill at any point between the first record kept aside and the Reset, since the replay does
// not change the file before it.
func TestReplayKilledBeforeResetQuarantinesOnce(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	const granted = 1_000_000
	acct := newAccount(t, st, granted)
	path := filepath.Join(t.TempDir(), "usage.spill")
	sp, err := usagespill.Open(path, usagespill.Options{})
	if err != nil {
		t.Fatal(err)
	}
	record := func(id string, cost int64) store.UsageRecord {
		return store.UsageRecord{AccountID: acct, RequestID: id, Model: "service-flint", Route: "/v1/chat/completions",
			CostMicros: cost, Status: "completed", StartedAt: time.Now(), FinishedAt: time.Now()}
	}
	unknown := record("unknown-account", 10)
	unknown.AccountID = uuid.New()
	costs := map[string]int64{"ok-1": 10, "ok-2": 20}
	var entries []usagespill.Entry
	for _, r := range []store.UsageRecord{record("ok-1", 10), record("negative-cost", -500), record("ok-2", 20), unknown} {
		entries = append(entries, usagespill.Entry{Holder: "a-process-that-is-gone", Record: r})
	}
	if _, err := sp.Append(entries); err != nil {
		t.Fatal(err)
	}
	sp.Close()
	left, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	for run, setAside := range []int64{2, 0} {
		if run > 0 {
			// Killed before the Reset: the spill file holds what it held.
			if err := os.WriteFile(path, left, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		sp := openSpill(t, path, usagespill.Options{})
		var logs logSink
		m := New(st, Options{Logger: logs.logger(), Spill: sp})
		if err := m.flushAll(ctx); err != nil {
			t.Fatal(err)
		}
		if s := m.WriterStats(); s.SetAside != setAside || s.Backlog != 0 {
			t.Errorf("run %d: writer %+v: want %d set aside and an empty backlog", run, s, setAside)
		}
		if run > 0 {
			if n := logs.count("ERROR"); n != 0 {
				t.Errorf("run %d: %d errors logged for records kept aside before:\n%s", run, n, strings.Join(logs.all(), "\n"))
			}
		}
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
		sp.Close()
	}
	checkBilledOnce(t, st, acct, granted, costs)

	data, err := os.ReadFile(path + ".quarantine")
	if err != nil {
		t.Fatal(err)
	}
	lines := make(map[string]int)
	for _, text := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var line struct {
			Record struct {
				RequestID string `json:"request_id"`
			} `json:"record"`
		}
		if err := json.Unmarshal([]byte(text), &line); err != nil {
			t.Fatalf("quarantine line %q: %v", text, err)
		}
		lines[line.Record.RequestID]++
	}
	if len(lines) != 2 || lines["negative-cost"] != 1 || lines["unknown-account"] != 1 {
		t.Errorf("quarantine file lines by request: %v, want negative-cost and unknown-account once each", lines)
	}
}
