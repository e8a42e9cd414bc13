package usagespill

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
)

// entry is a usage record with every field set.
func entry(i int) Entry {
	at := time.Date(2025, 11, 25, 12, 0, i, 123456789, time.UTC)
	return Entry{Holder: "host/1/abcd", Record: store.UsageRecord{
		AccountID: uuid.New(), RequestID: fmt.Sprintf("req_%04d", i), APIKeyID: uuid.New(),
		Model: "service-sonnet", Route: "/v1/messages", Provider: "sim-anthropic", UpstreamModel: "sim-sonnet",
		InputTokens: int64(100 + i), OutputTokens: int64(20 + i), CostMicros: int64(1_000 + i),
		HostedCalls: map[string]int64{"web_search": 2}, HostedMicros: 500, Status: "completed",
		StartedAt: at, FinishedAt: at.Add(time.Second), OnCredit: i%2 == 1,
	}}
}

func entries(from, n int) []Entry {
	var out []Entry
	for i := range n {
		out = append(out, entry(from+i))
	}
	return out
}

func open(t *testing.T, path string, o Options) *Spill {
	t.Helper()
	s, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// readAll reads every record of s, a few at a time.
func readAll(t *testing.T, s *Spill) []Entry {
	t.Helper()
	var all []Entry
	at := s.Start()
	for {
		got, after, err := s.Read(at, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(after) {
			t.Fatalf("%d entries, %d cursors", len(got), len(after))
		}
		if len(got) == 0 {
			if at != s.End() {
				t.Fatalf("read stopped at %+v, the end is %+v", at, s.End())
			}
			return all
		}
		all = append(all, got...)
		at = after[len(after)-1]
		if at.Index != int64(len(all)) {
			t.Fatalf("cursor index %d after %d records", at.Index, len(all))
		}
	}
}

// TestAppendReadReopen: records come back whole and in order, from the same Spill and after a
// reopen, and the file starts with its header line.
func TestAppendReadReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.spill")
	s := open(t, path, Options{})
	if r := s.Report(); !r.Created || r.Records != 0 || r.TornBytes != 0 {
		t.Fatalf("fresh file: %+v", r)
	}
	want := entries(0, 7)
	for _, group := range [][]Entry{want[:1], want[1:5], want[5:]} {
		if n, err := s.Append(group); err != nil || n != len(group) {
			t.Fatalf("append %d: %d, %v", len(group), n, err)
		}
	}
	if got := readAll(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("read back:\n%+v\nwant\n%+v", got, want)
	}
	if s.Records() != 7 {
		t.Fatalf("records %d", s.Records())
	}
	size := s.Size()
	s.Close()
	if _, _, err := s.Read(s.Start(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "tollgate usage spill 1\n") || int64(len(data)) != size {
		t.Fatalf("file of %d bytes (size %d) starts %q", len(data), size, data[:min(len(data), 30)])
	}
	t.Logf("7 records take %d bytes: %d a record", size-int64(len(header)), (size-int64(len(header)))/7)

	s = open(t, path, Options{})
	if r := s.Report(); r.Created || r.Records != 7 || r.TornBytes != 0 {
		t.Fatalf("reopened: %+v", r)
	}
	if got := readAll(t, s); !reflect.DeepEqual(got, want) {
		t.Fatal("records differ after reopening")
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if s.Records() != 0 || s.Size() != int64(len(header)) || len(readAll(t, s)) != 0 {
		t.Fatalf("after reset: %d records, %d bytes", s.Records(), s.Size())
	}
	s.Close()
	if s = open(t, path, Options{}); s.Report().Records != 0 || s.Size() != int64(len(header)) {
		t.Fatalf("reopened after reset: %+v", s.Report())
	}
}

// TestTornTail: a crash in the middle of a write leaves part of a frame at the end; Open keeps
// the whole records before it, saves the torn bytes beside the file, cuts the file after the
// last whole record, and appends go on from there. Every way of cutting the last frame short
// is tried.
func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "u.spill")
	s := open(t, path, Options{})
	if _, err := s.Append(entries(0, 3)); err != nil {
		t.Fatal(err)
	}
	whole := s.Size()
	if _, err := s.Append(entries(3, 1)); err != nil {
		t.Fatal(err)
	}
	full := s.Size()
	s.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for cut := whole + 1; cut < full; cut += max(1, (full-whole)/17) {
		if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		now := time.Unix(0, cut)
		s, err := Open(path, Options{Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		r := s.Report()
		if r.Records != 3 || r.TornOffset != whole || r.TornBytes != cut-whole || r.SaveErr != nil {
			t.Fatalf("cut at %d: %+v", cut, r)
		}
		saved, err := os.ReadFile(r.TornSaved)
		if err != nil || !bytes.Equal(saved, data[whole:cut]) {
			t.Fatalf("cut at %d: saved %q (%v)", cut, saved, err)
		}
		if s.Size() != whole {
			t.Fatalf("cut at %d: size %d, want %d", cut, s.Size(), whole)
		}
		if _, err := s.Append(entries(10, 1)); err != nil {
			t.Fatal(err)
		}
		got := readAll(t, s)
		if len(got) != 4 || got[3].Record.RequestID != "req_0010" || got[2].Record.RequestID != "req_0002" {
			t.Fatalf("cut at %d: records after the append: %d", cut, len(got))
		}
		s.Close()
	}
}

// TestDamagedRecord: a record damaged in the middle of the file (a flipped bit in its payload,
// its checksum or its length: storage damage, not a torn write) is set aside, saved beside the
// file, and every whole record after it is kept, in order; the file is rewritten without it and
// opens cleanly afterwards. Trial h17: the damaged record and the nine whole ones after it were
// dropped as a "torn tail", ten answered requests never billed.
func TestDamagedRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.spill")
	s := open(t, path, Options{})
	if _, err := s.Append(entries(0, 1)); err != nil {
		t.Fatal(err)
	}
	second := s.Size()
	if _, err := s.Append(entries(1, 1)); err != nil {
		t.Fatal(err)
	}
	third := s.Size()
	if _, err := s.Append(entries(2, 9)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := append(entries(0, 1), entries(2, 9)...)
	for name, damage := range map[string]func([]byte) []byte{
		"payload byte": func(b []byte) []byte { b[second+frameHead+5] ^= 0x20; return b },
		"checksum":     func(b []byte) []byte { b[second+5]++; return b },
		"length":       func(b []byte) []byte { b[second+3] = 0x7f; return b },
		"length, then a torn tail": func(b []byte) []byte {
			b[second+1] ^= 0x01
			return append(b, 0x10, 0, 0, 0, 1, 2) // a frame head cut short
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := damage(bytes.Clone(data))
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := s.Report()
			if r.Records != 10 || r.DamagedRegions != 1 || r.DamagedBytes != third-second || r.DamagedSaved == "" {
				t.Errorf("report %+v, want 10 records kept and the damaged frame (%d bytes) set aside", r, third-second)
			}
			if saved, err := os.ReadFile(r.DamagedSaved); err != nil || !bytes.Equal(saved, b[second:third]) {
				t.Errorf("the saved damaged bytes (%v) are not the damaged frame", err)
			}
			torn := int64(len(b)) - int64(len(data))
			if r.TornBytes != torn {
				t.Errorf("torn bytes %d, want %d", r.TornBytes, torn)
			}
			got := readAll(t, s)
			if len(got) != len(want) {
				t.Fatalf("%d records read, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i].Record.RequestID != want[i].Record.RequestID {
					t.Errorf("record %d: %s, want %s", i, got[i].Record.RequestID, want[i].Record.RequestID)
				}
			}
			s.Close()
			// Rewritten: it opens cleanly, with the same records.
			s2, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r := s2.Report(); r.Records != 10 || r.DamagedRegions != 0 || r.TornBytes != 0 {
				t.Errorf("reopened: %+v", r)
			}
			s2.Close()
			os.Remove(r.DamagedSaved)
			if r.TornSaved != "" {
				os.Remove(r.TornSaved)
			}
		})
	}
}

// TestFull: Append takes what fits in MaxBytes and refuses the rest with ErrFull; Reset makes
// room again.
func TestFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.spill")
	probe := open(t, filepath.Join(t.TempDir(), "probe"), Options{})
	if _, err := probe.Append(entries(0, 1)); err != nil {
		t.Fatal(err)
	}
	one := probe.Size() - int64(len(header))
	s := open(t, path, Options{MaxBytes: int64(len(header)) + 3*one + one/2})
	n, err := s.Append(entries(0, 5))
	if n != 3 || !errors.Is(err, ErrFull) {
		t.Fatalf("append 5 into room for 3: %d, %v", n, err)
	}
	if n, err := s.Append(entries(5, 1)); n != 0 || !errors.Is(err, ErrFull) {
		t.Fatalf("append into a full file: %d, %v", n, err)
	}
	if s.Records() != 3 {
		t.Fatalf("records %d", s.Records())
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Append(entries(5, 2)); n != 2 || err != nil {
		t.Fatalf("append after reset: %d, %v", n, err)
	}
}

// TestOneProcessPerFile: a file held open cannot be opened again (the lock is per open file,
// so this holds within one process too); a file that is not a spill file is left alone; a
// torn header is started afresh.
func TestOneProcessPerFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "u.spill")
	s := open(t, path, Options{})
	if _, err := Open(path, Options{}); !errors.Is(err, ErrInUse) {
		t.Fatalf("second open: %v", err)
	}
	s.Close()
	open(t, path, Options{}).Close()

	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("something else entirely\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(other, Options{}); !errors.Is(err, ErrNotSpill) {
		t.Fatalf("open a foreign file: %v", err)
	}
	if b, _ := os.ReadFile(other); string(b) != "something else entirely\n" {
		t.Fatalf("the foreign file changed: %q", b)
	}

	torn := filepath.Join(dir, "torn")
	if err := os.WriteFile(torn, []byte(header[:7]), 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, torn, Options{})
	if !s.Report().Created || s.Size() != int64(len(header)) {
		t.Fatalf("torn header: %+v", s.Report())
	}
}

// TestOpenDir: processes sharing a directory each get their own file; a starting process takes
// a file with records over an empty one, so records left by a process that is gone are picked
// up.
func TestOpenDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spill")
	a, err := OpenDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(a.Path()) != "usage-0.spill" || filepath.Base(b.Path()) != "usage-1.spill" {
		t.Fatalf("files %s and %s", a.Path(), b.Path())
	}
	if _, err := b.Append(entries(0, 2)); err != nil {
		t.Fatal(err)
	}
	b.Close() // b's process is gone, leaving two records
	a.Close() // a's is gone too, leaving none

	c, err := OpenDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Path() != b.Path() || c.Report().Records != 2 {
		t.Fatalf("took %s with %d records, want %s with 2", c.Path(), c.Report().Records, b.Path())
	}
	d, err := OpenDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Path() != a.Path() {
		t.Fatalf("took %s, want the free %s", d.Path(), a.Path())
	}
	e, err := OpenDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if filepath.Base(e.Path()) != "usage-2.spill" {
		t.Fatalf("took %s, want a new usage-2.spill", e.Path())
	}
}

// TestEveryFieldKept (operator trial h1): a usage record comes back from the spill file with
// every field the writer reads, whatever its kind: its trace id (the request log's and
// `admin usage list`'s link to the trace) and SettleKey and Checkpointed, which make the write
// settle a capped key's reservation and delete the stream's checkpoint. Before, the spill kept
// none of the three: the records a gateway served during a database outage were written with
// no trace id (seen by stopping PostgreSQL under a traced `tollgate serve`), and the key
// settlement of trial h12 D2 was lost through the real spill file (impl/billing's
// TestKilledDuringOutageSpillSettlesKeys proves it kept through a killed process's spill).
// Every field of store.UsageRecord but RecordedAt (read back only) is set, so that a field
// added later fails here until the spill keeps it. A record without the optional ones (the
// second, and every record of an older spill file, whose payloads lack their members) reads
// back without them.
func TestEveryFieldKept(t *testing.T) {
	at := time.Date(2026, 12, 6, 14, 30, 2, 123456789, time.UTC)
	want := Entry{Holder: "host/1/abcd", Record: store.UsageRecord{
		AccountID: uuid.New(), RequestID: "req_every_field", APIKeyID: uuid.New(),
		Model: "service-sonnet", Route: "/v1/messages", Provider: "sim-anthropic", UpstreamModel: "sim-sonnet",
		InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 300, CacheWrite5mTokens: 40, CacheWrite1hTokens: 50,
		ReasoningTokens: 60, ServiceTier: "priority", CostMicros: 4321,
		Price: &price.Price{Rates: price.Rates{Input: 3_000_000, CacheRead: 300_000, CacheWrite5m: 3_750_000,
			CacheWrite1h: 6_000_000, Output: 15_000_000}, Catalog: "claude-sonnet-4-5", Effective: "2026-01-01"},
		Costs:        price.Breakdown{Input: 1000, CacheRead: 90, CacheWrite5m: 150, CacheWrite1h: 300, Output: 2781, LongContext: true},
		WaivedMicros: 7, CacheSavingsMicros: 810,
		HostedCalls: map[string]int64{"web_search": 2}, HostedMicros: 20_000,
		Status: "ok", StartedAt: at, FinishedAt: at.Add(time.Second), OnCredit: true,
		AgentSessionID: uuid.New(),
		TraceID:        [16]byte{0x58, 0xab, 0xbf, 0xa4, 0xfb, 0xe9, 0x47, 0xaf, 0x76, 0x9c, 0xe3, 0xa7, 0x02, 0xde, 0xfa, 0x5a},
		Checkpointed:   true, SettleKey: true, FittedOutputTokens: 18_400,
	}}
	rv := reflect.ValueOf(want.Record)
	for i := range rv.NumField() {
		if name := rv.Type().Field(i).Name; name != "RecordedAt" && rv.Field(i).IsZero() {
			t.Fatalf("the test's record leaves %s unset: set it, and keep it in the spill file", name)
		}
	}

	s := open(t, filepath.Join(t.TempDir(), "u.spill"), Options{})
	if _, err := s.Append([]Entry{want, entry(1)}); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, s)
	if len(got) != 2 {
		t.Fatalf("%d records read back", len(got))
	}
	if !reflect.DeepEqual(got[0], want) {
		gv := reflect.ValueOf(got[0].Record)
		for i := range rv.NumField() {
			if !reflect.DeepEqual(gv.Field(i).Interface(), rv.Field(i).Interface()) {
				t.Errorf("%s: read back %v, want %v", rv.Type().Field(i).Name, gv.Field(i).Interface(), rv.Field(i).Interface())
			}
		}
		t.FailNow()
	}
	if r := got[1].Record; r.TraceID != ([16]byte{}) || r.SettleKey || r.Checkpointed {
		t.Errorf("an untraced record without a checkpoint or key came back with %+v", r)
	}
}

// TestOpenTightensPermissions: a spill file and directory that already exist with wider
// permissions (0644 and 0755: left by an older version, or an operator's copy) are made the
// owner's only on open, 0600 and 0700, as a new one is created. Before, Open and OpenDir left
// them as they were, and every local user could read the tenants' usage.
func TestOpenTightensPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spill")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "usage-0.spill")
	if err := os.WriteFile(path, []byte(header), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask made of it
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Path() != path {
		t.Fatalf("took %s, want %s", s.Path(), path)
	}
	for name, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		info, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s: mode %#o, want %#o", name, got, want)
		}
	}

	other := filepath.Join(t.TempDir(), "u.spill")
	if err := os.WriteFile(other, []byte(header), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(other, 0o644); err != nil {
		t.Fatal(err)
	}
	open(t, other, Options{})
	info, err := os.Stat(other)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != 0o600 {
		t.Errorf("Open left %s at %#o, want 0600", other, got)
	}
}

// TestCraftedDamageIsBounded: a file crafted so that a plausible frame head (a length that
// fits, a payload starting with '{' and ending with '}', a wrong checksum) stands at every
// 16th offset after a damaged frame made Open checksum 64 KiB at each of them, some 8 GB for
// these 2 MiB, and up to 1 MiB at each of a 256 MiB file's offsets (hours of CPU) before it
// gave up. Open now checksums at most resyncBudget bytes in all, whatever the file's size,
// then sets the rest aside as a torn tail, saved beside the file, and keeps the whole records
// before it. The work is counted (Report.ResyncHashed), not timed.
func TestCraftedDamageIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.spill")
	s := open(t, path, Options{})
	if _, err := s.Append(entries(0, 2)); err != nil {
		t.Fatal(err)
	}
	good := s.Size()
	s.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const l = 64<<10 - 8 // so that the payload's last byte is a '}' of the pattern
	var unit [16]byte
	binary.LittleEndian.PutUint32(unit[:4], l)
	copy(unit[4:8], []byte{0xff, 0xff, 0xff, 0xff}) // no other offset reads a length that fits
	copy(unit[8:], "{aaaaaa}")
	crafted := bytes.Repeat(unit[:], (2<<20)/len(unit))
	crafted[0] = 0xee // the first frame's length is too long: damage, not a frame
	crafted[1], crafted[2], crafted[3] = 0xee, 0xee, 0xee
	b := append(bytes.Clone(data), crafted...)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, Options{})
	r := s.Report()
	t.Logf("checksummed %d bytes of a %d-byte file", r.ResyncHashed, len(b))
	if r.ResyncHashed > 64<<20 || !r.ResyncGaveUp {
		t.Fatalf("checksummed %d bytes (bound 64 MiB), gave up %v", r.ResyncHashed, r.ResyncGaveUp)
	}
	if r.Records != 2 || r.TornOffset != good || r.TornBytes != int64(len(crafted)) || r.DamagedRegions != 0 {
		t.Fatalf("report %+v, want 2 records and the crafted %d bytes set aside from %d", r, len(crafted), good)
	}
	if saved, err := os.ReadFile(r.TornSaved); err != nil || !bytes.Equal(saved, crafted) {
		t.Fatalf("the saved tail (%v) is not the crafted bytes", err)
	}
	if got := readAll(t, s); len(got) != 2 {
		t.Fatalf("%d records read, want 2", len(got))
	}

	// A real damaged record costs little: the frames after it are found.
	s.Close()
	damaged := bytes.Clone(data)
	damaged[len(header)+frameHead+3] ^= 0x01
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, Options{})
	if r := s.Report(); r.Records != 1 || r.DamagedRegions != 1 || r.ResyncGaveUp || r.ResyncHashed > int64(len(data)) {
		t.Fatalf("one damaged record: %+v", r)
	}
}

// TestQuarantineKeepsARecordOnce: a process that quarantined records and died before it
// emptied the spill file leaves them in it, and the next one's replay quarantines them again:
// each restart in the middle of a replay added a copy of each to the quarantine file. A record
// the file holds is now kept once (another record still gets its line), and a last line a
// crash left without its newline is ended before the next, so that every whole line decodes.
func TestQuarantineKeepsARecordOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usage.spill")
	s := open(t, path, Options{})
	first, second, third := entry(1), entry(2), entry(3)
	if _, added, err := s.Quarantine(first, "a negative amount"); err != nil || !added {
		t.Fatalf("first record: added %v, %v", added, err)
	}
	s.Close()

	// The next process, on the same file, meets the first record again.
	s = open(t, path, Options{})
	name, added, err := s.Quarantine(first, "a negative amount")
	if err != nil || added || name != path+".quarantine" {
		t.Errorf("the first record again: %s, added %v, %v; want it not added", name, added, err)
	}
	if _, added, err := s.Quarantine(second, "an unknown account"); err != nil || !added {
		t.Fatalf("second record: added %v, %v", added, err)
	}
	s.Close()

	// A crash tears the last line; the next process quarantines another record.
	data, err := os.ReadFile(path + ".quarantine")
	if err != nil {
		t.Fatal(err)
	}
	torn := data[:len(data)-20]
	if err := os.WriteFile(path+".quarantine", torn, 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, Options{})
	if _, added, err := s.Quarantine(third, "an unknown account"); err != nil || !added {
		t.Fatalf("third record: added %v, %v", added, err)
	}
	data, err = os.ReadFile(path + ".quarantine")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3 || lines[1] != string(torn[bytes.IndexByte(torn, '\n')+1:]) {
		t.Fatalf("quarantine file:\n%s\nwant the first record's line, the torn line, then the third's", data)
	}
	for i, want := range map[int]Entry{0: first, 2: third} {
		var line struct {
			Record json.RawMessage `json:"record"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &line); err != nil {
			t.Fatalf("line %d %q: %v", i, lines[i], err)
		}
		got, err := decode(line.Record)
		if err != nil || got.Record.RequestID != want.Record.RequestID {
			t.Errorf("line %d holds %+v (%v), want request %s", i, got.Record, err, want.Record.RequestID)
		}
	}
}

// TestManyDamagedRegionsAreCheap: a file whose every frame is followed by a few bytes of junk
// (crafted, or storage gone bad) has as many damaged regions as records. Looking for the whole
// frame after each read a 4 MiB window whatever it found, so a 32 MiB file of such regions
// took Open 3.5 minutes (67,513 regions, some 270 GB read). The search now reads a small window
// first: the whole frame that follows each region is found in it. The work is counted
// (Report.ResyncRead), not timed, and every record is kept.
func TestManyDamagedRegionsAreCheap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.spill")
	s := open(t, path, Options{})
	if _, err := s.Append(entries(0, 1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	frame := data[len(header):]
	const regions = 20_000
	unit := append(bytes.Clone(frame), "junk!!!!!"...)
	b := append([]byte(header), bytes.Repeat(unit, regions)...)
	b = append(b, frame...)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, Options{})
	r := s.Report()
	t.Logf("read %d bytes to resynchronise a %d-byte file", r.ResyncRead, len(b))
	if r.Records != regions+1 || r.DamagedRegions != regions || r.ResyncGaveUp {
		t.Fatalf("report %+v, want %d records and %d damaged regions", r, regions+1, regions)
	}
	if r.ResyncRead > 8<<10*regions {
		t.Errorf("read %d bytes to resynchronise %d regions, more than 8 KiB each", r.ResyncRead, regions)
	}
}

// TestSmallestFramesAreBounded: the smallest frame that decodes ("{}", ten bytes) followed by a
// byte of junk, over and over, makes a region of damage every eleven bytes: even at 4 KiB each,
// reading for the next whole frame is bounded only by a budget (256 MiB per Open), past which the
// rest of the file is set aside as a torn tail and Report.ResyncGaveUp says so.
func TestSmallestFramesAreBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.spill")
	payload := []byte("{}")
	var unit [frameHead + 2 + 1]byte
	binary.LittleEndian.PutUint32(unit[:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(unit[4:8], crc32.Update(crc32.Checksum(unit[:4], castagnoli), castagnoli, payload))
	copy(unit[frameHead:], payload)
	unit[len(unit)-1] = 0xee
	const units = 80_000 // more regions than 256 MiB of 4 KiB reads
	b := append([]byte(header), bytes.Repeat(unit[:], units)...)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, path, Options{})
	r := s.Report()
	t.Logf("read %d bytes, %d regions, %d records, gave up %v", r.ResyncRead, r.DamagedRegions, r.Records, r.ResyncGaveUp)
	if !r.ResyncGaveUp || r.ResyncRead > 256<<20 || r.TornBytes == 0 {
		t.Fatalf("report %+v: want the search to give up within 256 MiB read and the rest set aside", r)
	}
	if r.Records != int64(r.DamagedRegions)+1 {
		t.Errorf("%d records for %d regions: want the whole frames before the bound kept", r.Records, r.DamagedRegions)
	}
}

// TestDamagedRegionsShareOneBuffer: Open's search after damage allocated a 64 KiB read buffer
// (and a 4 KiB window) for every damaged region, so a file of the smallest frames each followed
// by a byte of junk made it allocate some 4 GiB before its read bound (256 MiB) stopped it. One
// pass over the file now reuses its buffers: the bytes Open allocates over a file of 2,000
// damaged regions stay within a few MiB and a little per region (each record is decoded and
// kept).
func TestDamagedRegionsShareOneBuffer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.spill")
	payload := []byte("{}")
	var unit [frameHead + 2 + 1]byte
	binary.LittleEndian.PutUint32(unit[:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(unit[4:8], crc32.Update(crc32.Checksum(unit[:4], castagnoli), castagnoli, payload))
	copy(unit[frameHead:], payload)
	unit[len(unit)-1] = 0xee
	const regions = 2_000
	b := append([]byte(header), bytes.Repeat(unit[:], regions)...)
	b = append(b, unit[:len(unit)-1]...)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := open(t, path, Options{})
	runtime.ReadMemStats(&after)
	r := s.Report()
	if r.DamagedRegions != regions || r.Records != regions+1 || r.ResyncGaveUp {
		t.Fatalf("report %+v, want %d damaged regions and %d records", r, regions, regions+1)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("Open allocated %d bytes for %d damaged regions", allocated, regions)
	if limit := uint64(4<<20 + 2<<10*regions); allocated > limit {
		t.Errorf("Open allocated %d bytes for %d damaged regions, more than %d", allocated, regions, limit)
	}
}

// TestOpenDirTakesTheRecordsOfEveryProcessGone: a starting process takes into its file the
// records of every other file of the directory that no live process holds. Before, it took one
// such file and left the others for as many more processes to start: two replicas of a host
// stopped during a database outage and one started again (a scale-in) left the other's records
// unbilled for good.
func TestOpenDirTakesTheRecordsOfEveryProcessGone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spill")
	var procs [3]*Spill
	for i := range procs {
		var err error
		if procs[i], err = OpenDir(dir, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	// Processes 0 and 1 are gone, leaving 3 and 2 records; process 2 lives on with 1.
	for i, n := range []int{3, 2, 1} {
		if _, err := procs[i].Append(entries(10*i, n)); err != nil {
			t.Fatal(err)
		}
	}
	procs[0].Close()
	procs[1].Close()
	defer procs[2].Close()

	s, err := OpenDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Path() != procs[0].Path() {
		t.Fatalf("took %s, want %s", s.Path(), procs[0].Path())
	}
	var got []string
	for _, e := range readAll(t, s) {
		got = append(got, e.Record.RequestID)
	}
	if want := []string{"req_0000", "req_0001", "req_0002", "req_0010", "req_0011"}; !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v (its own, then those of the other process gone)", got, want)
	}
	if r := s.Report(); r.Records != 3 || len(r.Taken) != 1 || r.Taken[0].Path != procs[1].Path() || r.Taken[0].Records != 2 || len(r.Left) != 0 {
		t.Errorf("report %+v: want its own 3 records and 2 taken from %s", r, procs[1].Path())
	}
	// The file taken from is empty, and free for the next process; the live one is untouched.
	next, err := OpenDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if next.Path() != procs[1].Path() || next.Records() != 0 {
		t.Errorf("next process took %s with %d records, want the emptied %s", next.Path(), next.Records(), procs[1].Path())
	}
	if procs[2].Records() != 1 {
		t.Errorf("the live process's file holds %d records, want its 1", procs[2].Records())
	}

	// Records that do not fit are left where they are, and said so.
	dir = filepath.Join(t.TempDir(), "small")
	a, _ := OpenDir(dir, Options{MaxBytes: 4096})
	b, _ := OpenDir(dir, Options{MaxBytes: 4096})
	if _, err := a.Append(entries(0, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(entries(5, 5)); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	c, err := OpenDir(dir, Options{MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := c.Report(); c.Records() != 5 || len(r.Taken) != 0 || len(r.Left) != 1 || r.Left[0].Records != 5 || r.Left[0].Err == nil {
		t.Errorf("%d records, report %+v: want its own 5, and the other file's 5 left and said so", c.Records(), r)
	}
}
