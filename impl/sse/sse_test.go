package sse

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
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
