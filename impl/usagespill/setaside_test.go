package usagespill

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestReadSetAsideDamaged: the bytes of a damaged file (a whole frame, a damaged one, three
// whole ones and a frame head cut short) yield their four whole records, in order and with
// every field, and the damaged bytes are counted as unread; the file is not changed. A file
// whose name is not that of a file the spill sets aside is refused.
func TestReadSetAsideDamaged(t *testing.T) {
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "u.spill"), Options{})
	want := entries(0, 5)
	var ends []int64
	for _, e := range want {
		if _, err := s.Append([]Entry{e}); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, s.Size())
	}
	s.Close()
	data, err := os.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	frames := data[len(header):]
	first, second := ends[0]-int64(len(header)), ends[1]-int64(len(header))
	frames[second-3] ^= 0x20 // the second frame's payload
	tail := []byte{0x10, 0, 0, 0, 1, 2}
	frames = append(frames, tail...)
	path := filepath.Join(dir, "u.spill.damaged-1764000000000000000")
	if err := os.WriteFile(path, frames, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSetAside(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != 4 {
		t.Fatalf("%d records, want 4: %+v", len(got.Records), got)
	}
	for i, w := range append(want[:1:1], want[2:]...) {
		if !reflect.DeepEqual(got.Records[i].Entry, w) {
			t.Errorf("record %d: %+v, want %+v", i, got.Records[i].Entry, w)
		}
	}
	if got.Records[0].Where != "offset 0" {
		t.Errorf("first record at %q, want offset 0", got.Records[0].Where)
	}
	if wantUnread := second - first + int64(len(tail)); !got.Frames || got.Unread != wantUnread || got.GaveUp {
		t.Errorf("frames %v, unread %d, gave up %v; want %d bytes unread", got.Frames, got.Unread, got.GaveUp, wantUnread)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, frames) {
		t.Error("the file was changed")
	}
	if _, err := ReadSetAside(filepath.Join(dir, "u.spill")); !errors.Is(err, ErrNotSetAside) {
		t.Errorf("the spill itself: %v, want ErrNotSetAside", err)
	}
}

// TestReadSetAsideQuarantine: a quarantine file yields its records with their reasons, and a
// last line a crash cut short is counted as unread.
func TestReadSetAsideQuarantine(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "u.spill"), Options{})
	want := entries(0, 2)
	var name string
	for i, reason := range []string{"an unknown account", "a negative amount"} {
		n, _, err := s.Quarantine(want[i], reason)
		if err != nil {
			t.Fatal(err)
		}
		name = n
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"reason":"a negative amount","record":{"holder":"h","acc`)
	f.Close()
	got, err := ReadSetAside(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != 2 || got.Unread != 1 || got.Frames {
		t.Fatalf("%+v, want two records and one line unread", got)
	}
	for i, r := range got.Records {
		if !reflect.DeepEqual(r.Entry, want[i]) || r.Where != []string{"line 1", "line 2"}[i] {
			t.Errorf("record %d: %+v, want %+v", i, r, want[i])
		}
	}
	if got.Records[0].Reason != "an unknown account" || got.Records[1].Reason != "a negative amount" {
		t.Errorf("reasons %q, %q", got.Records[0].Reason, got.Records[1].Reason)
	}
}
