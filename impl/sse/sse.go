// Package sse is tollgate's one server-sent events reader and writer: the writer frames and
// flushes events to a client, the reader parses an upstream's stream. Both follow the WHATWG
// event-stream rules as the official SDK parsers apply them: LF or CRLF line ends, comments for
// heartbeats, several data lines joined by "\n", an empty line dispatching the event, and one
// byte order mark at the very start of a stream ignored.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Event is one server-sent event. Name is the `event:` field ("" for none); Data is the payload
// (several data lines joined by "\n"); ID, when not empty, is the `id:` field, which a client
// sends back as Last-Event-ID to resume (it must not contain a line break).
type Event struct {
	Name string
	Data []byte
	ID   string
}

// Writer frames events onto an HTTP response. Write adds an event to what the response has
// buffered and Flush sends everything written so far: a caller that has several events at hand
// writes them all and flushes once, and must flush before it waits for more.
type Writer struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
	// unflushed is set by Write and cleared by Flush.
	unflushed bool
}

// NewWriter returns a Writer on w. Call WriteHeader before the first event.
func NewWriter(w http.ResponseWriter) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w)}
}

// WriteHeader commits the 200 status with the event-stream headers (no buffering by proxies,
// no caching, no compression). The headers leave with the first Flush.
func (s *Writer) WriteHeader() {
	h := s.w.Header()
	h["Content-Type"] = []string{"text/event-stream; charset=utf-8"}
	h["Cache-Control"] = []string{"no-cache"}
	h["X-Accel-Buffering"] = []string{"no"}
	delete(h, "Content-Length")
	s.w.WriteHeader(http.StatusOK)
}

// Write frames one event onto the response without flushing it. Data must not contain a bare
// "\r"; lines of multi-line data become several data: fields.
func (s *Writer) Write(ev Event) error {
	s.buf = AppendEvent(s.buf[:0], ev)
	s.unflushed = true
	_, err := s.w.Write(s.buf)
	return err
}

// Flush sends the events written since the last Flush; with none, it does nothing.
func (s *Writer) Flush() error {
	if !s.unflushed {
		return nil
	}
	s.unflushed = false
	return s.rc.Flush()
}

// Comment sends a comment line, the heartbeat every SSE parser ignores, and flushes it with
// any events written before it.
func (s *Writer) Comment(text string) error {
	s.buf = append(append(append(s.buf[:0], ": "...), text...), "\n\n"...)
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	s.unflushed = false
	return s.rc.Flush()
}

// WaitAtMost bounds the writes and flushes that follow, until the next call: each may wait for
// a client that takes no byte for at most d from now (the connection's write deadline), after
// which it fails. A stream calls it before each batch of writes, so that a client that stopped
// reading is let go; 0 removes the bound (as a stream ends, so that the connection's next
// answer is not cut by it).
func (s *Writer) WaitAtMost(d time.Duration) {
	var deadline time.Time
	if d > 0 {
		deadline = time.Now().Add(d)
	}
	_ = s.rc.SetWriteDeadline(deadline)
}

// Retry writes a `retry:` field alone, without flushing it: it sets how long an EventSource
// client waits before it reconnects when the stream ends (whole milliseconds, at least 1), and
// dispatches no event, so every parser that ignores unknown fields passes over it. It is not
// for OpenAI-format streams, whose Python SDK dispatches at every blank line after a field.
func (s *Writer) Retry(d time.Duration) error {
	s.buf = append(strconv.AppendInt(append(s.buf[:0], "retry: "...), max(d.Milliseconds(), 1), 10), "\n\n"...)
	s.unflushed = true
	_, err := s.w.Write(s.buf)
	return err
}

// AppendEvent appends the framing of ev to dst.
func AppendEvent(dst []byte, ev Event) []byte {
	if ev.ID != "" {
		dst = append(append(append(dst, "id: "...), ev.ID...), '\n')
	}
	if ev.Name != "" {
		dst = append(append(append(dst, "event: "...), ev.Name...), '\n')
	}
	data := ev.Data
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		dst = append(append(append(dst, "data: "...), data[:i]...), '\n')
		data = data[i+1:]
	}
	dst = append(append(append(dst, "data: "...), data...), '\n')
	return append(dst, '\n')
}

// ErrLineTooLong reports an event-stream line over the reader's limit.
var ErrLineTooLong = errors.New("sse: line too long")

// ErrEventTooLarge reports an event whose data lines together exceed the reader's limit.
var ErrEventTooLarge = errors.New("sse: event too large")

// Reader parses events from a stream.
type Reader struct {
	r       *bufio.Reader
	maxLine int
	name    []byte
	data    []byte
	id      string
	hasData bool
	// begun says that the stream's first line was read: only that line may begin with the
	// byte order mark the standard has the reader ignore (readLine).
	begun bool
}

// readerBufferSize is the Reader's buffer: events longer than it are gathered across reads,
// so it bounds the memory an open stream holds, not the size of an event.
const readerBufferSize = 4 << 10

// maxEventBytes bounds one line, and the data of one event over all its lines: a peer that
// sends data lines without ever ending the event (no blank line) would otherwise grow the
// event for as long as it keeps sending.
const maxEventBytes = 32 << 20

// NewReader returns a Reader; a line longer than 32 MiB is an error (ErrLineTooLong, as in the
// SDKs), and so is an event whose data lines together exceed 32 MiB (ErrEventTooLarge).
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, readerBufferSize), maxLine: maxEventBytes}
}

// Next returns the next event. Comments are skipped. At the end of the stream it returns
// io.EOF; an event without its closing blank line at EOF is discarded, as the spec says, and
// reported as io.ErrUnexpectedEOF.
func (s *Reader) Next() (Event, error) {
	s.name, s.data, s.hasData, s.id = s.name[:0], s.data[:0], false, ""
	pending := false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && pending {
				return Event{}, io.ErrUnexpectedEOF
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if !pending {
				continue
			}
			if !s.hasData && len(s.name) == 0 {
				pending = false
				continue
			}
			return Event{Name: string(s.name), Data: s.data, ID: s.id}, nil
		}
		if line[0] == ':' {
			continue
		}
		pending = true
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			s.name = append(s.name[:0], value...)
		case "id":
			s.id = string(value)
		case "data":
			if len(s.data)+1+len(value) > s.maxLine {
				return Event{}, ErrEventTooLarge
			}
			if s.hasData {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			s.hasData = true
		}
	}
}

// byteOrderMark is U+FEFF in UTF-8: one at the very start of a stream is not part of its first
// line (HTML Living Standard, server-sent events: "One leading U+FEFF BYTE ORDER MARK
// character must be ignored if any are present").
const byteOrderMark = "\xEF\xBB\xBF"

// readLine returns one line without its LF or CRLF (the stream's first without a leading byte
// order mark).
func (s *Reader) readLine() ([]byte, error) {
	var long []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, chunk...)
			if len(long) > s.maxLine {
				return nil, ErrLineTooLong
			}
			continue
		}
		if err != nil {
			if len(chunk) > 0 || len(long) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if long != nil {
			chunk = append(long, chunk...)
		}
		line := chunk[:len(chunk)-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if !s.begun {
			// Without this, a stream that opens with a byte order mark (some servers write
			// one) had its first field's name read as "\uFEFFdata" or "\uFEFFevent", an
			// unknown field: its first event was lost, or lost its name.
			s.begun = true
			line = bytes.TrimPrefix(line, []byte(byteOrderMark))
		}
		return line, nil
	}
}
