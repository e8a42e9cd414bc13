package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// someSpans returns n ended spans.
func someSpans(n int) []sdktrace.ReadOnlySpan {
	rec := tracetest.NewSpanRecorder()
	tr := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t")
	for range n {
		_, s := tr.Start(context.Background(), "span")
		s.End()
	}
	return rec.Ended()
}

// TestExporterPostsGzippedProtobuf: with Gzip set, a batch is posted gzipped, as protobuf,
// with the exporter's user agent and the configured headers, and decodes to its spans.
func TestExporterPostsGzippedProtobuf(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			t.Errorf("not gzip: %v", err)
			return
		}
		body, _ = io.ReadAll(zr)
	}))
	defer srv.Close()
	x := NewHTTPExporter(HTTPOptions{URL: srv.URL + "/v1/traces", Gzip: true, UserAgent: "tollgate/test", Headers: map[string]string{"x-api-key": "k"}})
	for range 2 { // the second batch reuses the encoder and the gzip writer
		if err := x.ExportSpans(context.Background(), someSpans(3)); err != nil {
			t.Fatal(err)
		}
		if got.Method != http.MethodPost || got.URL.Path != "/v1/traces" || got.Header.Get("Content-Type") != "application/x-protobuf" ||
			got.Header.Get("Content-Encoding") != "gzip" || got.Header.Get("User-Agent") != "tollgate/test" || got.Header.Get("X-Api-Key") != "k" {
			t.Fatalf("request: %s %s %v", got.Method, got.URL, got.Header)
		}
		if n := spanCount(decode(t, body)); n != 3 {
			t.Fatalf("%d spans, want 3", n)
		}
	}
}

// TestExporterReportsWhatTheBackendRefused: a batch the backend answers with an error status,
// or does not answer before the context ends, is an error (the queue counts it as dropped);
// Shutdown ends an export in flight without waiting for the backend, and after it every batch
// is refused.
func TestExporterReportsWhatTheBackendRefused(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "over quota", http.StatusTooManyRequests)
	}))
	defer refusing.Close()
	err := NewHTTPExporter(HTTPOptions{URL: refusing.URL}).ExportSpans(context.Background(), someSpans(1))
	if err == nil || !strings.Contains(err.Error(), "429") || !strings.Contains(err.Error(), "over quota") {
		t.Errorf("refused: %v", err)
	}

	// A backend that takes the batch and never answers (it lets go when the client does: with
	// the body read, the server sees the connection close).
	never := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	})
	stuck := httptest.NewServer(never)
	defer stuck.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := NewHTTPExporter(HTTPOptions{URL: stuck.URL}).ExportSpans(ctx, someSpans(1)); err == nil {
		t.Error("an export the backend never answered succeeded")
	}

	reached := make(chan struct{}, 1)
	inFlight := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- struct{}{}
		never(w, r)
	}))
	defer inFlight.Close()
	stuckExporter := NewHTTPExporter(HTTPOptions{URL: inFlight.URL})
	ended := make(chan error)
	go func() { ended <- stuckExporter.ExportSpans(context.Background(), someSpans(1)) }()
	<-reached // the post is in flight
	_ = stuckExporter.Shutdown(context.Background())
	if err := <-ended; err == nil || errors.Is(err, errStopped) {
		t.Errorf("an export in flight at Shutdown: %v, want it cancelled", err)
	}

	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ok.Close()
	x := NewHTTPExporter(HTTPOptions{URL: ok.URL})
	if err := x.ExportSpans(context.Background(), someSpans(1)); err != nil {
		t.Fatal(err)
	}
	_ = x.Shutdown(context.Background())
	if err := x.ExportSpans(context.Background(), someSpans(1)); err == nil {
		t.Error("an export after Shutdown succeeded")
	}
	if err := x.ExportSpans(context.Background(), nil); err != nil {
		t.Errorf("nothing to export: %v", err)
	}
}

// TestEncoderReusesItsBuffer: a second batch encoded into the first one's buffer is the
// same bytes as encoded afresh (nothing of the first is left behind).
func TestEncoderReusesItsBuffer(t *testing.T) {
	var enc Encoder
	big, small := someSpans(50), someSpans(2)
	buf := enc.Append(nil, big)
	buf = enc.Append(buf[:0], small)
	var fresh Encoder
	if want := fresh.Append(nil, small); !bytes.Equal(buf, want) {
		t.Fatalf("reused: %d bytes, afresh: %d bytes", len(buf), len(want))
	}
}

// TestExporterBackendAnsweringEarly: a backend that answers before reading the body (413
// for a batch too large) leaves the transport still sending it when the answer comes; the
// next batch is not written into the buffer being sent (the race detector watches), and each
// batch is an error.
func TestExporterBackendAnsweringEarly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	}))
	defer srv.Close()
	// Two batches of 8 MiB, alternated: each is written over the buffer the last was sent from.
	batches := make([][]sdktrace.ReadOnlySpan, 2)
	for i := range batches {
		rec := tracetest.NewSpanRecorder()
		tr := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t")
		for range 8 {
			_, s := tr.Start(context.Background(), strings.Repeat(string(rune('a'+i)), 1<<20))
			s.End()
		}
		batches[i] = rec.Ended()
	}
	x := NewHTTPExporter(HTTPOptions{URL: srv.URL})
	for i := range 20 {
		if err := x.ExportSpans(context.Background(), batches[i%2]); err == nil || !strings.Contains(err.Error(), "413") {
			t.Fatalf("batch %d: %v, want the 413", i, err)
		}
	}
}

// TestPartialSuccess: the rejected spans and message of an OTLP answer's partial_success are
// read; an answer without one, or not protobuf, reads as none.
func TestPartialSuccess(t *testing.T) {
	answer, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 5, ErrorMessage: "quota"}})
	if n, msg := partialSuccess(answer); n != 5 || msg != "quota" {
		t.Errorf("partial success: %d %q", n, msg)
	}
	empty, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	for _, a := range [][]byte{empty, nil, []byte(`{"partialSuccess":{}}`), {0xff, 0xff}} {
		if n, msg := partialSuccess(a); n != 0 || msg != "" {
			t.Errorf("%q: %d %q, want none", a, n, msg)
		}
	}
}
