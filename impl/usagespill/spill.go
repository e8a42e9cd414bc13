package usagespill

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
)

// DefaultMaxBytes bounds a spill file when Options.MaxBytes is zero: 256 MiB, some 550,000
// usage records (a record takes 400 to 500 bytes).
const DefaultMaxBytes = 256 << 20

// header is the first line of every spill file.
const header = "tollgate usage spill 1\n"

// frameHead is the length and checksum before each payload; maxPayload bounds a payload.
const (
	frameHead  = 8
	maxPayload = 1 << 20
)

// resyncBudget bounds the bytes Open checksums while it looks for the next whole frame after
// damaged ones, over the whole file: 64 of the longest frames. A real damaged region is at most
// one frame long and rarely makes it checksum anything (a length that fits is rare in a JSON
// payload's text), but a crafted file can put a plausible frame head at every few offsets, and
// checksumming up to 1 MiB at each of a 256 MiB file's offsets would take hours. Past the
// budget, the rest of the file is set aside as a torn tail (Report.ResyncGaveUp).
const resyncBudget = 64 * maxPayload

// resyncReadBudget bounds the bytes Open reads while it looks for whole frames after damaged
// ones, over the whole file: 256 MiB, some 65,000 damaged regions (4 KiB each) or 64 slides of
// the large window, where real damage makes a few regions of a frame each. Past it, as past
// resyncBudget, the rest is set aside as a torn tail: a file crafted of the smallest frames,
// each followed by a byte of junk, has some 20 million regions.
const resyncReadBudget = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	// ErrFull is returned by Append for the records that would take the file beyond its
	// bound.
	ErrFull = errors.New("usagespill: the spill file is full")
	// ErrInUse is returned by Open for a file that another live process holds.
	ErrInUse = errors.New("usagespill: the spill file is held by another process")
	// ErrNotSpill is returned by Open for a file that does not start with a spill file's
	// header: it is left alone.
	ErrNotSpill = errors.New("usagespill: not a usage spill file")
	// ErrClosed is returned by the methods of a closed Spill.
	ErrClosed = errors.New("usagespill: the spill file is closed")
)

// Entry is one usage record in the spill, with the credit holder (the process, see
// impl/billing) that settled it: its cost is drawn from that holder's credit hold when the
// hold still exists.
type Entry struct {
	Holder string
	Record store.UsageRecord
}

// Cursor is a position in a spill: Offset is in bytes from the start of the file, Index counts
// the records before it. Start is the first record; Read returns the cursor after each record
// it reads. Reset makes every earlier cursor meaningless.
type Cursor struct {
	Offset int64
	Index  int64
}

// Options configure Open.
type Options struct {
	// MaxBytes bounds the file, header included (default DefaultMaxBytes).
	MaxBytes int64
	// Now stamps the name of the file a torn tail is saved to (default time.Now).
	Now func() time.Time
}

// Report is what Open found in the file.
type Report struct {
	// Path is the spill file.
	Path string
	// Records is how many whole records it holds, left by an earlier process.
	Records int64
	// Created reports that the file did not exist (or was empty) and was created.
	Created bool
	// TornBytes counts the bytes after the last whole record, from TornOffset on, that were
	// dropped from the file (a torn last write); 0 when there were none. They were copied to
	// TornSaved, unless that failed (SaveErr).
	TornBytes  int64
	TornOffset int64
	TornSaved  string
	SaveErr    error
	// DamagedBytes counts the bytes of damaged frames followed by whole ones (storage damage,
	// not a torn write: a flipped bit, a bad sector) in DamagedRegions places; they were copied
	// to DamagedSaved (unless that failed: DamagedSaveErr) and removed from the file, whose whole
	// records after them are kept. Each region held at least one record, which is lost.
	DamagedBytes   int64
	DamagedRegions int
	DamagedSaved   string
	DamagedSaveErr error
	// ResyncHashed counts the bytes checksummed while looking for whole frames after damaged
	// ones; ResyncGaveUp reports that it reached its bound (resyncBudget) before it found one,
	// and that the rest of the file, whole frames too perhaps, went to TornSaved with the tail.
	ResyncHashed int64
	ResyncGaveUp bool
	// ResyncRead counts the bytes read while looking for whole frames after damaged ones.
	ResyncRead int64
	// Taken are the reports of the other files of the directory whose records OpenDir moved
	// into this one (files no live process held, left by processes that are gone), each with
	// the records it held; Left are those it could not take, with the reason.
	Taken []Report
	Left  []LeftFile
}

// LeftFile is a spill file of the directory that holds records no live process will write,
// and that OpenDir could not take into the file it opened.
type LeftFile struct {
	Path    string
	Records int64
	Err     error
}

// Spill is an open spill file. Its methods are safe for concurrent use.
type Spill struct {
	path   string
	max    int64
	report Report

	mu     sync.Mutex
	f      *os.File
	closed bool
	// size is the end of the last whole record; records the number of records before it.
	size    atomic.Int64
	records atomic.Int64
	// quarantined holds the records the quarantine file holds (their payloads), read at the
	// first Quarantine; quarantineTorn says its last line lacks its newline.
	quarantined    map[string]struct{}
	quarantineTorn bool
}

// Open opens (creating it when missing) the spill file at path and takes its lock: it fails
// with ErrInUse when another live process holds it, and with ErrNotSpill when the file is
// something else. A torn tail is dropped and reported (see the package documentation). The
// file is made readable and writable by its owner only (0600), whatever it was before.
func Open(path string, o Options) (*Spill, error) {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("usagespill: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrInUse, path)
		}
		return nil, fmt.Errorf("usagespill: lock %s: %w", path, err)
	}
	// A file left by an older version or copied by an operator may be readable by others:
	// usage records are the tenants' business, so only the owner reads the file.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("usagespill: chmod %s: %w", path, err)
	}
	s := &Spill{path: path, max: o.MaxBytes, f: f, report: Report{Path: path}}
	if err := s.load(o.Now); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// load checks the header (writing it into an empty file), finds the whole records and drops a
// torn tail.
func (s *Spill) load(now func() time.Time) error {
	info, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("usagespill: %w", err)
	}
	n := info.Size()
	if n < int64(len(header)) {
		got := make([]byte, n)
		if _, err := s.f.ReadAt(got, 0); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("usagespill: %w", err)
		}
		if !strings.HasPrefix(header, string(got)) {
			return fmt.Errorf("%w: %s", ErrNotSpill, s.path)
		}
		// Empty, or the header's own write was torn: start the file afresh.
		if err := s.truncate(0); err != nil {
			return err
		}
		if _, err := s.f.WriteAt([]byte(header), 0); err != nil {
			return fmt.Errorf("usagespill: %w", err)
		}
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("usagespill: %w", err)
		}
		if err := syncDir(filepath.Dir(s.path)); err != nil {
			return err
		}
		s.report.Created = true
		s.size.Store(int64(len(header)))
		return nil
	}
	got := make([]byte, len(header))
	if _, err := s.f.ReadAt(got, 0); err != nil {
		return fmt.Errorf("usagespill: %w", err)
	}
	if string(got) != header {
		return fmt.Errorf("%w: %s", ErrNotSpill, s.path)
	}
	budget := newResyncWork()
	end, records, err := scan(budget.reader, s.f, int64(len(header)), n, nil)
	if err != nil {
		return err
	}
	// A bad frame followed by whole ones is damage, not a torn write: the whole frames after
	// it are kept (a crash tears only the last write).
	good := []span{{int64(len(header)), end}}
	var damaged []span
	for end < n {
		next, found, err := resync(s.f, end, n, budget)
		s.report.ResyncHashed, s.report.ResyncGaveUp, s.report.ResyncRead = budget.hashed, budget.gaveUp, budget.read
		if err != nil {
			return err
		}
		if !found {
			break
		}
		damaged = append(damaged, span{end, next})
		e, r, err := scan(budget.reader, s.f, next, n, nil)
		if err != nil {
			return err
		}
		good = append(good, span{next, e})
		records += r
		end = e
	}
	if end < n {
		s.report.TornOffset, s.report.TornBytes = end, n-end
		s.report.TornSaved, s.report.SaveErr = s.saveTorn(end, n, now())
	}
	if len(damaged) > 0 {
		for _, d := range damaged {
			s.report.DamagedBytes += d.end - d.start
		}
		s.report.DamagedRegions = len(damaged)
		s.report.DamagedSaved, s.report.DamagedSaveErr = s.saveSpans(damaged, ".damaged-", now())
		if end, err = s.compact(good); err != nil {
			return err
		}
	}
	s.size.Store(end)
	s.records.Store(records)
	s.report.Records = records
	if end < n {
		if err := s.truncate(end); err != nil {
			return err
		}
	}
	return nil
}

// span is a region of the file, from start to end.
type span struct{ start, end int64 }

// resyncWork is what is left of the checksumming Open may do to resynchronise (in bytes), and
// what it did, with the buffers of the pass over the file, which its scans (reader) and its
// resyncs (window) reuse: allocated afresh for every damaged region, they made a file of many
// small regions cost some 4 GiB of allocation before the read bound stopped the search.
type resyncWork struct {
	left, hashed, read int64
	gaveUp             bool
	reader             *bufio.Reader
	window             []byte
}

// newResyncWork is the work of one pass over a file, with the whole budget.
func newResyncWork() *resyncWork {
	return &resyncWork{left: resyncBudget, reader: bufio.NewReaderSize(nil, 1<<16)}
}

// resync finds the first offset after from and before n at which a whole frame starts whose
// payload decodes: where the file goes on after a damaged frame. found is false when no
// whole frame follows (the rest is a torn tail), or when the frames tried would take the
// checksumming beyond what is left of work, or the reading beyond resyncReadBudget (then
// work.gaveUp is set). A frame's checksum
// covers its length, so a false start is a 1 in 2^32 chance at each offset, and a decoding
// payload rules it out; a payload, a JSON object, starts with '{' and ends with '}', which is
// looked at before anything is checksummed.
//
// It reads a small window first (a damaged frame is usually followed by a whole one at once),
// and the large one, which holds the longest frame with room to slide, only once a candidate
// frame needs it: reading the large window at every call made a file of many small damaged
// regions, each followed by a whole frame, cost 4 MiB of reading per region (3.5 minutes for
// a crafted 32 MiB file).
func resync(f *os.File, from, n int64, work *resyncWork) (next int64, found bool, err error) {
	const (
		small  = 4 << 10
		window = 4 << 20 // a frame's longest (1 MiB and its head) fits with room to slide
	)
	buf := work.window[:0]
	defer func() { work.window = buf }()
	base := int64(-1)
	read := func(pos int64, size int64) error {
		size = min(size, n-pos)
		if work.read+size > resyncReadBudget {
			work.gaveUp = true
			return errResyncGaveUp
		}
		if int64(cap(buf)) < size {
			buf = make([]byte, 0, size)
		}
		buf = buf[:size]
		work.read += size
		if _, err := f.ReadAt(buf, pos); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("usagespill: read %s: %w", f.Name(), err)
		}
		base = pos
		return nil
	}
	for pos := from + 1; pos+frameHead <= n; pos++ {
		if base < 0 || pos+frameHead > base+int64(len(buf)) || (len(buf) == window && pos-base > window-maxPayload-frameHead && base+int64(len(buf)) < n) {
			size := int64(small)
			if len(buf) == window {
				size = window
			}
			if err := read(pos, size); err != nil {
				return 0, false, ignoreGaveUp(err)
			}
		}
		at := buf[pos-base:]
		l := int64(binary.LittleEndian.Uint32(at[:4]))
		if l > maxPayload || pos+frameHead+l > n {
			continue
		}
		if l < 2 || (len(at) > frameHead && at[frameHead] != '{') {
			continue
		}
		if frameHead+l > int64(len(at)) {
			// The candidate reaches past the window: the large one holds it.
			if err := read(pos, window); err != nil {
				return 0, false, ignoreGaveUp(err)
			}
			at = buf
		}
		payload := at[frameHead : frameHead+l]
		if payload[0] != '{' || payload[l-1] != '}' {
			continue
		}
		if frameHead+l > work.left {
			work.gaveUp = true
			return 0, false, nil
		}
		work.left -= frameHead + l
		work.hashed += frameHead + l
		if crc32.Update(crc32.Checksum(at[:4], castagnoli), castagnoli, payload) != binary.LittleEndian.Uint32(at[4:frameHead]) {
			continue
		}
		if _, err := decode(payload); err == nil {
			return pos, true, nil
		}
	}
	return 0, false, nil
}

// errResyncGaveUp is how resync's reading says it reached resyncReadBudget.
var errResyncGaveUp = errors.New("usagespill: the search for whole frames reached its bound")

// ignoreGaveUp is err, but nil for errResyncGaveUp, which resync reports as not found (the
// work says it gave up).
func ignoreGaveUp(err error) error {
	if errors.Is(err, errResyncGaveUp) {
		return nil
	}
	return err
}

// saveSpans copies the bytes of spans, one after another, to a file beside the spill named
// with suffix and the time, and returns its name. The spans share one copy buffer: io.Copy to
// the file allocated 32 KiB for each (the file's ReadFrom falls back to a copy of its own for
// a reader that is not a file), which the writer wrapping out hides.
func (s *Spill) saveSpans(spans []span, suffix string, now time.Time) (string, error) {
	name := s.path + suffix + strconv.FormatInt(now.UnixNano(), 10)
	out, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	buf := make([]byte, 32<<10)
	for _, sp := range spans {
		if _, err = io.CopyBuffer(struct{ io.Writer }{out}, io.NewSectionReader(s.f, sp.start, sp.end-sp.start), buf); err != nil {
			break
		}
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return "", err
	}
	return name, nil
}

// compact moves the good regions after the first down over the damaged ones between them,
// in order, and returns the end of the last: the file then holds the whole records only (the
// caller truncates it there). A crash in the middle leaves records twice in the file at worst,
// which the next Open keeps and the ledger bills once (its unique key is the record's).
func (s *Spill) compact(good []span) (int64, error) {
	dst := good[0].end
	buf := make([]byte, 1<<20)
	for _, g := range good[1:] {
		for off := g.start; off < g.end; {
			c := min(int64(len(buf)), g.end-off)
			if _, err := s.f.ReadAt(buf[:c], off); err != nil {
				return 0, fmt.Errorf("usagespill: read %s: %w", s.path, err)
			}
			if _, err := s.f.WriteAt(buf[:c], dst); err != nil {
				return 0, fmt.Errorf("usagespill: write %s: %w", s.path, err)
			}
			off += c
			dst += c
		}
	}
	if err := s.f.Sync(); err != nil {
		return 0, fmt.Errorf("usagespill: sync %s: %w", s.path, err)
	}
	return dst, nil
}

// scan reads the frames from off to n and returns the end of the last whole one and how many
// there are, reading through r (reset to the region). A frame that is short, too long, fails
// its checksum or does not decode ends the readable part. keep, when not nil, is given each
// whole frame's entry and offset.
func scan(r *bufio.Reader, f *os.File, off, n int64, keep func(Entry, int64)) (end, records int64, err error) {
	r.Reset(io.NewSectionReader(f, off, n-off))
	end = off
	for {
		payload, size, err := nextFrame(r)
		if err == io.EOF || errors.Is(err, errBadFrame) {
			return end, records, nil
		}
		if err != nil {
			return 0, 0, fmt.Errorf("usagespill: read %s: %w", f.Name(), err)
		}
		e, err := decode(payload)
		if err != nil {
			return end, records, nil
		}
		if keep != nil {
			keep(e, end)
		}
		end += size
		records++
	}
}

// errBadFrame marks a frame that is torn or damaged.
var errBadFrame = errors.New("usagespill: bad frame")

// nextFrame reads one frame: its payload and its size in the file. It returns io.EOF at a clean
// end, errBadFrame for a frame cut short or damaged, and other errors as they come.
func nextFrame(r *bufio.Reader) ([]byte, int64, error) {
	var head [frameHead]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		if err == io.EOF {
			return nil, 0, io.EOF
		}
		if err == io.ErrUnexpectedEOF {
			return nil, 0, errBadFrame
		}
		return nil, 0, err
	}
	n := binary.LittleEndian.Uint32(head[:4])
	if n > maxPayload {
		return nil, 0, errBadFrame
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, 0, errBadFrame
		}
		return nil, 0, err
	}
	if crc32.Update(crc32.Checksum(head[:4], castagnoli), castagnoli, payload) != binary.LittleEndian.Uint32(head[4:]) {
		return nil, 0, errBadFrame
	}
	return payload, frameHead + int64(n), nil
}

// saveTorn copies the bytes from off to n to a file beside the spill and returns its name.
func (s *Spill) saveTorn(off, n int64, now time.Time) (string, error) {
	return s.saveSpans([]span{{off, n}}, ".torn-", now)
}

// truncate cuts the file at n and makes that durable.
func (s *Spill) truncate(n int64) error {
	if err := s.f.Truncate(n); err != nil {
		return fmt.Errorf("usagespill: truncate %s: %w", s.path, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("usagespill: sync %s: %w", s.path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("usagespill: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("usagespill: sync %s: %w", dir, err)
	}
	return nil
}

// OpenDir opens a spill file in dir (created when missing, and made the owner's only: 0700)
// that no live process holds: among
// the files usage-<n>.spill there, the first that holds records, else the first free one, else
// a new one with the lowest free number. So a restarted process takes the file its predecessor
// left, and any starting process takes the records of one that is gone. It then moves into
// that file the records of every other file of dir that no live process holds (see
// takeOthers), so that the records of every process that is gone are written by the first one
// that starts, however few start; the returned file's Report lists them (Taken, Left).
func OpenDir(dir string, o Options) (*Spill, error) {
	s, err := openDirFile(dir, o)
	if err != nil {
		return nil, err
	}
	s.takeOthers(dir, o)
	return s, nil
}

// openDirFile opens the file of dir that OpenDir returns: one with records that no live
// process holds, else an empty one, else a new one.
func openDirFile(dir string, o Options) (*Spill, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("usagespill: %w", err)
	}
	// MkdirAll leaves an existing directory as it was: one made by an older version or an
	// operator may list and open the spill files to others.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("usagespill: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("usagespill: %w", err)
	}
	var taken []int
	for _, e := range entries {
		if n, ok := slotOf(e.Name()); ok && e.Type().IsRegular() {
			taken = append(taken, n)
		}
	}
	slices.Sort(taken)
	var spare *Spill
	for _, n := range taken {
		s, err := Open(filepath.Join(dir, slotName(n)), o)
		if errors.Is(err, ErrInUse) {
			continue
		}
		if err != nil {
			if spare != nil {
				spare.Close()
			}
			return nil, err
		}
		if s.Records() > 0 {
			if spare != nil {
				spare.Close()
			}
			return s, nil
		}
		if spare == nil {
			spare = s
		} else {
			s.Close()
		}
	}
	if spare != nil {
		return spare, nil
	}
	for n := 0; n < 1<<16; n++ {
		if slices.Contains(taken, n) {
			continue
		}
		s, err := Open(filepath.Join(dir, slotName(n)), o)
		if errors.Is(err, ErrInUse) {
			// Another process created it just now.
			continue
		}
		return s, err
	}
	return nil, fmt.Errorf("usagespill: no free spill file in %s", dir)
}

// takeOthers moves into s the records of every other spill file of dir that no live process
// holds: a process that is gone left them, and no process would write them before as many
// processes as there were files shared the directory again (two replicas on a host, stopped
// during a database outage, and one started again: the other's records waited for a second
// process, for ever after a scale-in). Each file's records are appended to s, durably, and only
// then is that file emptied, so a crash in between leaves a record in both files, which is
// harmless: the database bills a request id once. A file whose records do not fit in what s has
// left, or that cannot be read or emptied, is left as it is and listed in s's report.
func (s *Spill) takeOthers(dir string, o Options) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if _, ok := slotOf(e.Name()); !ok || !e.Type().IsRegular() || path == s.path {
			continue
		}
		other, err := Open(path, o)
		if err != nil {
			// Held by a live process (ErrInUse), which writes its own records; or unreadable,
			// which its own Open would report.
			if !errors.Is(err, ErrInUse) {
				s.report.Left = append(s.report.Left, LeftFile{Path: path, Err: err})
			}
			continue
		}
		if other.Records() > 0 {
			if err := s.take(other); err != nil {
				s.report.Left = append(s.report.Left, LeftFile{Path: path, Records: other.Records(), Err: err})
			} else {
				s.report.Taken = append(s.report.Taken, other.Report())
			}
		}
		other.Close()
	}
}

// takeBatch is how many records take moves with one append (one write and one fsync).
const takeBatch = 4096

// take appends every record of other to s, then empties other.
func (s *Spill) take(other *Spill) error {
	if s.Size()+other.Size()-int64(len(header)) > s.max {
		return fmt.Errorf("usagespill: the %d bytes of records of %s do not fit in %s, which has %d of its %d bytes", other.Size()-int64(len(header)), other.path, s.path, s.Size(), s.max)
	}
	for at := other.Start(); at != other.End(); {
		batch, after, err := other.Read(at, takeBatch)
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			return fmt.Errorf("usagespill: %s ends at record %d, but reading it from record %d found nothing", other.path, other.End().Index, at.Index)
		}
		if _, err := s.Append(batch); err != nil {
			return err
		}
		at = after[len(after)-1]
	}
	return other.Reset()
}

func slotName(n int) string { return "usage-" + strconv.Itoa(n) + ".spill" }

func slotOf(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "usage-")
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, ".spill")
	if !ok || digits == "" || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil && n >= 0
}

// Path is the file's name.
func (s *Spill) Path() string { return s.path }

// MaxBytes is the file's bound.
func (s *Spill) MaxBytes() int64 { return s.max }

// Report is what Open found in the file.
func (s *Spill) Report() Report { return s.report }

// Size is the file's size in bytes, header included.
func (s *Spill) Size() int64 { return s.size.Load() }

// Records is how many records the file holds.
func (s *Spill) Records() int64 { return s.records.Load() }

// Start is the cursor of the first record.
func (s *Spill) Start() Cursor { return Cursor{Offset: int64(len(header))} }

// End is the cursor after the last record.
func (s *Spill) End() Cursor { return Cursor{Offset: s.size.Load(), Index: s.records.Load()} }

// Append adds entries at the end of the file, in order, with one write and one fsync, and
// returns how many it added. When the rest would take the file beyond its bound, it adds the
// entries that fit and returns ErrFull. On any other error it adds none: the file is cut back
// to where it was.
func (s *Spill) Append(entries []Entry) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	at := s.size.Load()
	var buf bytes.Buffer
	n := 0
	var full error
	for _, e := range entries {
		payload, err := encode(e)
		if err != nil {
			return 0, err
		}
		if at+int64(buf.Len())+frameHead+int64(len(payload)) > s.max {
			full = ErrFull
			break
		}
		var head [frameHead]byte
		binary.LittleEndian.PutUint32(head[:4], uint32(len(payload)))
		binary.LittleEndian.PutUint32(head[4:], crc32.Update(crc32.Checksum(head[:4], castagnoli), castagnoli, payload))
		buf.Write(head[:])
		buf.Write(payload)
		n++
	}
	if n == 0 {
		return 0, full
	}
	_, err := s.f.WriteAt(buf.Bytes(), at)
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		// Cut back whatever part of the group reached the file; if even that fails, the torn
		// group is dropped by the next Open.
		_ = s.f.Truncate(at)
		return 0, fmt.Errorf("usagespill: append to %s: %w", s.path, err)
	}
	s.size.Store(at + int64(buf.Len()))
	s.records.Add(int64(n))
	return n, full
}

// Read returns up to limit entries from the cursor from on, with the cursor after each, up to
// the end of the file when it is called.
func (s *Spill) Read(from Cursor, limit int) ([]Entry, []Cursor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, ErrClosed
	}
	end := s.size.Load()
	if from.Offset < int64(len(header)) || from.Offset > end {
		return nil, nil, fmt.Errorf("usagespill: cursor %d outside the file (%d bytes)", from.Offset, end)
	}
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, from.Offset, end-from.Offset), 1<<16)
	var entries []Entry
	var after []Cursor
	at := from
	for len(entries) < limit && at.Offset < end {
		payload, size, err := nextFrame(r)
		if err != nil {
			if err == io.EOF || errors.Is(err, errBadFrame) {
				err = fmt.Errorf("usagespill: %s: damaged record at offset %d", s.path, at.Offset)
			}
			return nil, nil, err
		}
		e, err := decode(payload)
		if err != nil {
			return nil, nil, fmt.Errorf("usagespill: %s: record at offset %d: %w", s.path, at.Offset, err)
		}
		at = Cursor{Offset: at.Offset + size, Index: at.Index + 1}
		entries = append(entries, e)
		after = append(after, at)
	}
	return entries, after, nil
}

// Reset empties the file: it is cut back to its header, durably. Call it only once the
// database has every record in it.
func (s *Spill) Reset() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.truncate(int64(len(header))); err != nil {
		return err
	}
	s.size.Store(int64(len(header)))
	s.records.Store(0)
	return nil
}

// Quarantine keeps e aside, with the reason it is not applied, in a file beside the spill
// (<name>.quarantine, the owner's only: 0600): one JSON object a line, {"reason", "record"},
// the record as the spill stores it. It returns the file's name once the line is durable. The
// spill itself is not changed: Reset empties it once the rest is written.
//
// A record the file holds already is not written again, and added is false: a process that
// quarantined it and died before Reset left it in the spill, and the next one's replay reads
// it again (without this, every restart in the middle of a replay added a copy, and an
// operator who bills the quarantined records by hand would bill it twice). A line an earlier
// process's crash left without its newline is ended before the next one is written.
func (s *Spill) Quarantine(e Entry, reason string) (name string, added bool, err error) {
	payload, err := encode(e)
	if err != nil {
		return "", false, err
	}
	line, err := json.Marshal(struct {
		Reason string          `json:"reason"`
		Record json.RawMessage `json:"record"`
	}{reason, payload})
	if err != nil {
		return "", false, fmt.Errorf("usagespill: quarantine the record of request %q: %w", e.Record.RequestID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name = s.path + ".quarantine"
	if s.quarantined == nil {
		if err := s.loadQuarantine(name); err != nil {
			return "", false, fmt.Errorf("usagespill: quarantine the record of request %q: %w", e.Record.RequestID, err)
		}
	}
	if _, ok := s.quarantined[string(payload)]; ok {
		return name, false, nil
	}
	if s.quarantineTorn {
		line = append([]byte{'\n'}, line...)
	}
	if err := appendLine(name, append(line, '\n')); err != nil {
		return "", false, fmt.Errorf("usagespill: quarantine the record of request %q: %w", e.Record.RequestID, err)
	}
	s.quarantineTorn = false
	s.quarantined[string(payload)] = struct{}{}
	return name, true, nil
}

// loadQuarantine reads the records the quarantine file name holds (none when it is missing)
// into s.quarantined, and notes whether its last line lacks its newline (a crash in the middle
// of a write), with s.mu held. A line that does not decode is passed over.
func (s *Spill) loadQuarantine(name string) error {
	s.quarantined = make(map[string]struct{})
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		text, err := r.ReadBytes('\n')
		if len(text) > 0 {
			s.quarantineTorn = text[len(text)-1] != '\n'
			var line struct {
				Record json.RawMessage `json:"record"`
			}
			if json.Unmarshal(text, &line) == nil && len(line.Record) > 0 {
				s.quarantined[string(line.Record)] = struct{}{}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// appendLine appends line to the file name (created when missing), made the owner's only,
// and makes it durable.
func appendLine(name string, line []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(line)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close releases the file and its lock; the records stay in it for the next Open.
func (s *Spill) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.f.Close()
}

// record is an Entry as stored: one JSON object.
type record struct {
	Holder        string           `json:"holder"`
	AccountID     uuid.UUID        `json:"account_id"`
	RequestID     string           `json:"request_id"`
	APIKeyID      uuid.UUID        `json:"api_key_id"`
	Model         string           `json:"model"`
	Route         string           `json:"route"`
	Provider      string           `json:"provider"`
	UpstreamModel string           `json:"upstream_model"`
	InputTokens   int64            `json:"input_tokens"`
	OutputTokens  int64            `json:"output_tokens"`
	CostMicros    int64            `json:"cost_micros"`
	HostedCalls   map[string]int64 `json:"hosted_calls,omitempty"`
	HostedMicros  int64            `json:"hosted_micros,omitempty"`
	Status        string           `json:"status"`
	StartedAt     time.Time        `json:"started_at"`
	FinishedAt    time.Time        `json:"finished_at"`
	OnCredit      bool             `json:"on_credit,omitempty"`
	AgentSession  *uuid.UUID       `json:"agent_session_id,omitempty"`
	// The counts per kind, the price and the cost per kind of a priced record (absent from the
	// records of a spill file written before they existed, which decode as unpriced).
	CacheReadTokens    int64        `json:"cache_read_tokens,omitempty"`
	CacheWrite5mTokens int64        `json:"cache_write_5m_tokens,omitempty"`
	CacheWrite1hTokens int64        `json:"cache_write_1h_tokens,omitempty"`
	ReasoningTokens    int64        `json:"reasoning_tokens,omitempty"`
	ServiceTier        string       `json:"service_tier,omitempty"`
	Price              *price.Price `json:"price,omitempty"`
	InputCost          int64        `json:"input_cost_micros,omitempty"`
	CacheReadCost      int64        `json:"cache_read_cost_micros,omitempty"`
	CacheWrite5mCost   int64        `json:"cache_write_5m_cost_micros,omitempty"`
	CacheWrite1hCost   int64        `json:"cache_write_1h_cost_micros,omitempty"`
	OutputCost         int64        `json:"output_cost_micros,omitempty"`
	LongContext        bool         `json:"long_context,omitempty"`
	WaivedMicros       int64        `json:"waived_micros,omitempty"`
	CacheSavingsMicros int64        `json:"cache_savings_micros,omitempty"`
	// The request's trace id (hex; absent: not traced), and what the writer does beside the
	// record: delete its stream's checkpoint and settle its key's reservation (absent from the
	// records of a spill file written before they were kept, which lost them).
	TraceID      string `json:"trace_id,omitempty"`
	Checkpointed bool   `json:"checkpointed,omitempty"`
	SettleKey    bool   `json:"settle_key,omitempty"`
	// The output bound a request without one was fitted to (absent: not fitted).
	FittedOutputTokens int64 `json:"fitted_output_tokens,omitempty"`
}

func encode(e Entry) ([]byte, error) {
	r := e.Record
	b, err := json.Marshal(record{
		Holder: e.Holder, AccountID: r.AccountID, RequestID: r.RequestID, APIKeyID: r.APIKeyID,
		Model: r.Model, Route: r.Route, Provider: r.Provider, UpstreamModel: r.UpstreamModel,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostMicros: r.CostMicros,
		HostedCalls: r.HostedCalls, HostedMicros: r.HostedMicros, Status: r.Status,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, OnCredit: r.OnCredit,
		AgentSession:    agentSession(r.AgentSessionID),
		CacheReadTokens: r.CacheReadTokens, CacheWrite5mTokens: r.CacheWrite5mTokens, CacheWrite1hTokens: r.CacheWrite1hTokens,
		ReasoningTokens: r.ReasoningTokens, ServiceTier: r.ServiceTier, Price: r.Price,
		InputCost: r.Costs.Input, CacheReadCost: r.Costs.CacheRead, CacheWrite5mCost: r.Costs.CacheWrite5m,
		CacheWrite1hCost: r.Costs.CacheWrite1h, OutputCost: r.Costs.Output, LongContext: r.Costs.LongContext,
		WaivedMicros: r.WaivedMicros, CacheSavingsMicros: r.CacheSavingsMicros,
		TraceID: traceID(r.TraceID), Checkpointed: r.Checkpointed, SettleKey: r.SettleKey,
		FittedOutputTokens: r.FittedOutputTokens,
	})
	if err != nil {
		return nil, fmt.Errorf("usagespill: encode the record of request %q: %w", r.RequestID, err)
	}
	if len(b) > maxPayload {
		return nil, fmt.Errorf("usagespill: the record of request %q takes %d bytes, more than %d", r.RequestID, len(b), maxPayload)
	}
	return b, nil
}

func decode(payload []byte) (Entry, error) {
	var r record
	if err := json.Unmarshal(payload, &r); err != nil {
		return Entry{}, err
	}
	e := Entry{Holder: r.Holder, Record: store.UsageRecord{
		AccountID: r.AccountID, RequestID: r.RequestID, APIKeyID: r.APIKeyID,
		Model: r.Model, Route: r.Route, Provider: r.Provider, UpstreamModel: r.UpstreamModel,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostMicros: r.CostMicros,
		HostedCalls: r.HostedCalls, HostedMicros: r.HostedMicros, Status: r.Status,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, OnCredit: r.OnCredit,
		CacheReadTokens: r.CacheReadTokens, CacheWrite5mTokens: r.CacheWrite5mTokens, CacheWrite1hTokens: r.CacheWrite1hTokens,
		ReasoningTokens: r.ReasoningTokens, ServiceTier: r.ServiceTier, Price: r.Price,
		Costs: price.Breakdown{Input: r.InputCost, CacheRead: r.CacheReadCost, CacheWrite5m: r.CacheWrite5mCost,
			CacheWrite1h: r.CacheWrite1hCost, Output: r.OutputCost, LongContext: r.LongContext},
		WaivedMicros: r.WaivedMicros, CacheSavingsMicros: r.CacheSavingsMicros,
		Checkpointed: r.Checkpointed, SettleKey: r.SettleKey, FittedOutputTokens: r.FittedOutputTokens,
	}}
	if r.AgentSession != nil {
		e.Record.AgentSessionID = *r.AgentSession
	}
	if r.TraceID != "" {
		if len(r.TraceID) != hex.EncodedLen(len(e.Record.TraceID)) {
			return Entry{}, fmt.Errorf("usagespill: the record of request %q has the trace id %q, not 32 hex digits", r.RequestID, r.TraceID)
		}
		if _, err := hex.Decode(e.Record.TraceID[:], []byte(r.TraceID)); err != nil {
			return Entry{}, fmt.Errorf("usagespill: the record of request %q has the trace id %q, not 32 hex digits", r.RequestID, r.TraceID)
		}
	}
	return e, nil
}

// traceID is the trace id of a record as stored ("": not traced).
func traceID(id [16]byte) string {
	if id == ([16]byte{}) {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// agentSession is the agent session of a record as stored (nil: none).
func agentSession(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}
