package sse

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReaderFraming(t *testing.T) {
	in := ": heartbeat\n\nevent: message_start\ndata: {\"a\":1}\n\n" +
		"data: line1\r\ndata: line2\r\n\r\n" +
		"data: [DONE]\n\n" +
		"event: only-name\n\n" +
		"data: tail-without-blank-line\n"
	r := NewReader(strings.NewReader(in))
	want := []Event{
		{Name: "message_start", Data: []byte(`{"a":1}`)},
		{Data: []byte("line1\nline2")},
		{Data: []byte("[DONE]")},
		{Name: "only-name"},
	}
	for i, w := range want {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got.Name != w.Name || string(got.Data) != string(w.Data) {
			t.Fatalf("event %d: got %q %q, want %q %q", i, got.Name, got.Data, w.Name, w.Data)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("an event cut off at EOF: err %v, want io.ErrUnexpectedEOF", err)
	}
	r = NewReader(strings.NewReader("data: x\n\n"))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("clean end: %v", err)
	}
}

// countingRecorder counts the flushes that reach it.
type countingRecorder struct {
	*httptest.ResponseRecorder
	flushes int
}

func (c *countingRecorder) Flush() { c.flushes++; c.ResponseRecorder.Flush() }

// TestWriterFlushesWhenAsked: events written together leave in one flush, and a flush with
// nothing new written sends nothing.
func TestWriterFlushesWhenAsked(t *testing.T) {
	rec := &countingRecorder{ResponseRecorder: httptest.NewRecorder()}
	w := NewWriter(rec)
	w.WriteHeader()
	for _, d := range []string{"one", "two"} {
		if err := w.Write(Event{Data: []byte(d)}); err != nil {
			t.Fatal(err)
		}
	}
	if rec.flushes != 0 {
		t.Fatalf("%d flushes before Flush", rec.flushes)
	}
	for range 2 {
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if rec.flushes != 1 || rec.Body.String() != "data: one\n\ndata: two\n\n" {
		t.Fatalf("%d flushes, body %q", rec.flushes, rec.Body.String())
	}
}

// TestReaderEventLongerThanBuffer: an event far longer than the reader's buffer arrives whole.
func TestReaderEventLongerThanBuffer(t *testing.T) {
	data := strings.Repeat("x", 40*readerBufferSize+7)
	r := NewReader(strings.NewReader("event: big\ndata: " + data + "\r\n\ndata: next\n\n"))
	ev, err := r.Next()
	if err != nil || ev.Name != "big" || string(ev.Data) != data {
		t.Fatalf("long event: %q, %d bytes, %v", ev.Name, len(ev.Data), err)
	}
	if ev, err = r.Next(); err != nil || string(ev.Data) != "next" {
		t.Fatalf("event after the long one: %q %v", ev.Data, err)
	}
}

// endlessDataLines is a peer that sends data lines of 1 KiB and never the blank line that would
// end the event, up to limit bytes; read counts what was taken from it.
type endlessDataLines struct {
	line        []byte
	read, limit int
	at          int
}

func (e *endlessDataLines) Read(p []byte) (int, error) {
	if e.read >= e.limit {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && e.read < e.limit {
		c := copy(p[n:], e.line[e.at:])
		n, e.read, e.at = n+c, e.read+c, (e.at+c)%len(e.line)
	}
	return n, nil
}

// TestReaderBoundsAnEventOfManyLines: an event's data lines are gathered only up to the
// reader's bound, as one line's are. Before, a peer that sent data lines without ever ending the
// event grew it for as long as it kept sending: the reader took all 160 MiB of this one and
// ended with io.ErrUnexpectedEOF (a hostile upstream kept the connection for the 10 minutes of
// silence a stream is allowed, the gateway's memory growing with every line).
func TestReaderBoundsAnEventOfManyLines(t *testing.T) {
	src := &endlessDataLines{line: []byte("data: " + strings.Repeat("x", 1017) + "\n"), limit: 160 << 20}
	r := NewReader(src)
	_, err := r.Next()
	if !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("err %v, want ErrEventTooLarge", err)
	}
	if src.read > maxEventBytes+maxEventBytes/100+(64<<10) {
		t.Errorf("read %d bytes of the endless event, want at most the bound (%d of data) in lines and a buffer", src.read, maxEventBytes)
	}
	// An event just under the bound, over many lines, still arrives whole.
	line := strings.Repeat("y", 1023)
	var in strings.Builder
	lines := (maxEventBytes - 4096) / (len(line) + 1)
	for range lines {
		in.WriteString("data: " + line + "\n")
	}
	in.WriteString("\ndata: next\n\n")
	r = NewReader(strings.NewReader(in.String()))
	ev, err := r.Next()
	if err != nil || len(ev.Data) != lines*(len(line)+1)-1 {
		t.Fatalf("an event under the bound: %d bytes, %v", len(ev.Data), err)
	}
	if ev, err = r.Next(); err != nil || string(ev.Data) != "next" {
		t.Fatalf("event after it: %q %v", ev.Data, err)
	}
}

func TestWriterRoundTrip(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	w.WriteHeader()
	if err := w.Comment("keep-alive"); err != nil {
		t.Fatal(err)
	}
	events := []Event{{Name: "response.created", Data: []byte(`{"type":"response.created"}`)}, {Data: []byte("a\nb")}, {Data: []byte("[DONE]")}}
	for _, ev := range events {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") || rec.Header().Get("X-Accel-Buffering") != "no" {
		t.Fatalf("headers %v", rec.Header())
	}
	if !rec.Flushed {
		t.Fatal("not flushed")
	}
	want := ": keep-alive\n\nevent: response.created\ndata: {\"type\":\"response.created\"}\n\ndata: a\ndata: b\n\ndata: [DONE]\n\n"
	if rec.Body.String() != want {
		t.Fatalf("wire:\n%q\nwant\n%q", rec.Body.String(), want)
	}
	r := NewReader(strings.NewReader(rec.Body.String()))
	for i, w := range events {
		got, err := r.Next()
		if err != nil || got.Name != w.Name || string(got.Data) != string(w.Data) {
			t.Fatalf("event %d: %q %q %v", i, got.Name, got.Data, err)
		}
	}
}

func BenchmarkReader(b *testing.B) {
	chunk := "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" word\"}}]}\n\n"
	in := strings.Repeat(chunk, 100)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		r := NewReader(strings.NewReader(in))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

// TestEventIDRoundTrip: an event's id is written as the id: field before the others and read
// back, and an event without one reads back without one.
func TestEventIDRoundTrip(t *testing.T) {
	raw := AppendEvent(nil, Event{ID: "42", Name: "state", Data: []byte(`{"to":"ready"}`)})
	if string(raw) != "id: 42\nevent: state\ndata: {\"to\":\"ready\"}\n\n" {
		t.Fatalf("framed %q", raw)
	}
	raw = AppendEvent(raw, Event{Data: []byte("x")})
	r := NewReader(strings.NewReader(string(raw)))
	ev, err := r.Next()
	if err != nil || ev.ID != "42" || ev.Name != "state" || string(ev.Data) != `{"to":"ready"}` {
		t.Fatalf("first: %+v %v", ev, err)
	}
	ev, err = r.Next()
	if err != nil || ev.ID != "" || string(ev.Data) != "x" {
		t.Fatalf("second: %+v %v", ev, err)
	}
}

// TestReaderIgnoresALeadingByteOrderMark: one U+FEFF at the very start of a stream is ignored,
// as the HTML Living Standard's event-stream interpretation says, whatever the first line is
// (a named event, a data line, a comment, a blank line) and however the bytes arrive; a second
// one, or one later in the stream, is part of the line it begins (a field of another name, which
// is ignored). Before, the first field's name was read with the mark in front of it: the first
// event was lost ("\uFEFFdata") or lost its name ("\uFEFFevent").
func TestReaderIgnoresALeadingByteOrderMark(t *testing.T) {
	const bom = "\uFEFF"
	cases := []struct {
		name, in string
		want     []Event
	}{
		{"named event", bom + "event: message_start\ndata: {\"a\":1}\n\ndata: x\n\n",
			[]Event{{Name: "message_start", Data: []byte(`{"a":1}`)}, {Data: []byte("x")}}},
		{"data line", bom + "data: {\"a\":1}\n\n", []Event{{Data: []byte(`{"a":1}`)}}},
		{"CRLF", bom + "data: a\r\n\r\n", []Event{{Data: []byte("a")}}},
		{"comment first", bom + ": hello\n\ndata: a\n\n", []Event{{Data: []byte("a")}}},
		{"blank line first", bom + "\ndata: a\n\n", []Event{{Data: []byte("a")}}},
		{"only one is ignored", bom + bom + "data: lost\n\ndata: a\n\n", []Event{{Data: []byte("a")}}},
		{"not after the start", "data: a\n\n" + bom + "data: lost\n\ndata: b\n\n", []Event{{Data: []byte("a")}, {Data: []byte("b")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Whole, and a byte at a time (the mark split between reads).
			for _, src := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				r := NewReader(src)
				for i, w := range tc.want {
					got, err := r.Next()
					if err != nil || got.Name != w.Name || string(got.Data) != string(w.Data) {
						t.Fatalf("event %d: %q %q %v; want %q %q", i, got.Name, got.Data, err, w.Name, w.Data)
					}
				}
				if ev, err := r.Next(); err != io.EOF {
					t.Fatalf("after the events: %q %q %v; want io.EOF", ev.Name, ev.Data, err)
				}
			}
		})
	}
}
