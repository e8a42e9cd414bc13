package usagespill

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SetAside is a record read back from a file that the spill set aside (see ReadSetAside).
type SetAside struct {
	Entry Entry
	// Reason is why the replay kept it aside, as the quarantine file says; empty for the
	// records of a torn or damaged file.
	Reason string
	// Where places it in the file: "line N" of a quarantine file, "offset N" of a torn or
	// damaged one.
	Where string
}

// SetAsideFile is what ReadSetAside found in a file.
type SetAsideFile struct {
	Records []SetAside
	// Unread counts what held no whole record: the lines of a quarantine file that do not
	// decode, or the bytes of a torn or damaged file outside its whole frames.
	Unread int64
	// Frames reports a torn or damaged file (Unread counts bytes), not a quarantine file
	// (Unread counts lines).
	Frames bool
	// GaveUp reports that the search for whole frames reached its bound (as Open's does), so
	// the rest of the file was not searched.
	GaveUp bool
}

// ErrNotSetAside is returned by ReadSetAside for a file whose name is not that of a file the
// spill sets aside.
var ErrNotSetAside = errors.New("usagespill: not a file the spill sets aside (<spill>.quarantine, <spill>.torn-<n> or <spill>.damaged-<n>)")

// ReadSetAside reads the records of a file the spill set aside, told by its name: a quarantine
// file (<spill>.quarantine, Quarantine's JSON lines), or the bytes Open saved from a torn tail
// or damaged regions (<spill>.torn-<n>, <spill>.damaged-<n>: frames, without the header), of
// which it keeps the whole frames, found after damage as Open finds them. It only reads the
// file.
func ReadSetAside(path string) (SetAsideFile, error) {
	base := filepath.Base(path)
	switch {
	case strings.HasSuffix(base, ".quarantine"):
		return readQuarantine(path)
	case savedName(base, ".torn-"), savedName(base, ".damaged-"):
		return readSaved(path)
	}
	return SetAsideFile{}, fmt.Errorf("%w: %s", ErrNotSetAside, path)
}

// savedName reports whether base is that of a file Open saved with suffix and a time.
func savedName(base, suffix string) bool {
	i := strings.LastIndex(base, suffix)
	if i <= 0 {
		return false
	}
	_, err := strconv.ParseInt(base[i+len(suffix):], 10, 64)
	return err == nil
}

// readQuarantine reads a quarantine file's lines; one that does not decode (a crash's torn
// last line) is counted as unread.
func readQuarantine(path string) (SetAsideFile, error) {
	var out SetAsideFile
	f, err := os.Open(path)
	if err != nil {
		return out, fmt.Errorf("usagespill: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	for n := 1; ; n++ {
		text, err := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(text))) > 0 {
			var line struct {
				Reason string          `json:"reason"`
				Record json.RawMessage `json:"record"`
			}
			e, derr := Entry{}, json.Unmarshal(text, &line)
			if derr == nil {
				e, derr = decode(line.Record)
			}
			if derr != nil {
				out.Unread++
			} else {
				out.Records = append(out.Records, SetAside{Entry: e, Reason: line.Reason, Where: "line " + strconv.Itoa(n)})
			}
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("usagespill: read %s: %w", path, err)
		}
	}
}

// readSaved reads the whole frames of a torn or damaged file: scan from its start, and after
// each bad frame resync as Open does, within the same bounds.
func readSaved(path string) (SetAsideFile, error) {
	out := SetAsideFile{Frames: true}
	f, err := os.Open(path)
	if err != nil {
		return out, fmt.Errorf("usagespill: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return out, fmt.Errorf("usagespill: %w", err)
	}
	n := info.Size()
	keep := func(e Entry, off int64) {
		out.Records = append(out.Records, SetAside{Entry: e, Where: "offset " + strconv.FormatInt(off, 10)})
	}
	budget := newResyncWork()
	end, _, err := scan(budget.reader, f, 0, n, keep)
	if err != nil {
		return out, err
	}
	for end < n {
		next, found, err := resync(f, end, n, budget)
		if err != nil {
			return out, err
		}
		if !found {
			break
		}
		out.Unread += next - end
		if end, _, err = scan(budget.reader, f, next, n, keep); err != nil {
			return out, err
		}
	}
	out.Unread += n - end
	out.GaveUp = budget.gaveUp
	return out, nil
}
