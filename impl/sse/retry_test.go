package sse

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestWriterRetry: Retry writes a retry field alone (whole milliseconds), leaves it for the next
// flush, and the Reader passes over it to the next event.
func TestWriterRetry(t *testing.T) {
	rec := &countingRecorder{ResponseRecorder: httptest.NewRecorder()}
	w := NewWriter(rec)
	w.WriteHeader()
	if err := w.Retry(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Event{Name: "error", Data: []byte(`{"error":{}}`)}); err != nil {
		t.Fatal(err)
	}
	if rec.flushes != 0 {
		t.Fatalf("%d flushes before Flush", rec.flushes)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	body := rec.Body.String()
	if rec.flushes != 1 || body != "retry: 2000\n\nevent: error\ndata: {\"error\":{}}\n\n" {
		t.Fatalf("%d flushes, body %q", rec.flushes, body)
	}
	ev, err := NewReader(strings.NewReader(body)).Next()
	if err != nil || ev.Name != "error" || string(ev.Data) != `{"error":{}}` {
		t.Fatalf("the reader after a retry field: %+v %v", ev, err)
	}
}
