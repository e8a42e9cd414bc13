package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// HTTPOptions are an HTTPExporter's settings.
type HTTPOptions struct {
	// URL is where batches are posted (an OTLP/HTTP traces endpoint, with its /v1/traces).
	URL string
	// Headers are added to every request (an API key, say).
	Headers map[string]string
	// Gzip compresses each batch (Content-Encoding: gzip).
	Gzip bool
	// TLS is the client's TLS configuration for an https URL (nil: the system's roots).
	TLS *tls.Config
	// UserAgent names the exporter to the backend.
	UserAgent string
}

// HTTPExporter posts batches of ended spans to an OTLP/HTTP endpoint as protobuf, encoded by
// an Encoder. It implements the SDK's SpanExporter: a batch the backend refuses, or that does
// not reach it before the context ends, is an error and is not retried (the caller counts it
// as dropped).
type HTTPExporter struct {
	opts   HTTPOptions
	client *http.Client

	// stopped is set by Shutdown, which also cancels stopping: an export in flight ends at
	// once, and the next is refused.
	stopped  atomic.Bool
	stopping context.Context
	stop     context.CancelFunc

	mu     sync.Mutex // one export at a time: the encoder and buffers are reused
	enc    Encoder
	body   []byte
	zipped bytes.Buffer
	zw     *gzip.Writer
}

// NewHTTPExporter returns an exporter posting to o.URL.
func NewHTTPExporter(o HTTPOptions) *HTTPExporter {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = o.TLS
	tr.MaxIdleConnsPerHost = 2
	stopping, stop := context.WithCancel(context.Background())
	return &HTTPExporter{opts: o, client: &http.Client{Transport: tr}, stopping: stopping, stop: stop}
}

// errStopped is ExportSpans's error after Shutdown.
var errStopped = errors.New("the OTLP exporter is shut down")

// ExportSpans posts spans as one request and waits for the backend's answer, for ctx, or for
// Shutdown.
func (x *HTTPExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	if x.stopped.Load() {
		return errStopped
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(x.stopping, cancel)()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.body = x.enc.Append(x.body[:0], spans)
	payload := x.body
	if x.opts.Gzip {
		x.zipped.Reset()
		if x.zw == nil {
			x.zw = gzip.NewWriter(&x.zipped)
		} else {
			x.zw.Reset(&x.zipped)
		}
		if _, err := x.zw.Write(payload); err != nil {
			return err
		}
		if err := x.zw.Close(); err != nil {
			return err
		}
		payload = x.zipped.Bytes()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.opts.URL, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if x.opts.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	if x.opts.UserAgent != "" {
		req.Header.Set("User-Agent", x.opts.UserAgent)
	}
	for k, v := range x.opts.Headers {
		req.Header.Set(k, v)
	}
	resp, err := x.client.Do(req)
	if err != nil {
		return err
	}
	// The body is read to its end (at most 64 KiB) so that the connection is kept for the next
	// batch; a partial success's message is not looked at.
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("OTLP export: %s: %.200s", resp.Status, msg)
	}
	return nil
}

// Shutdown ends an export in flight (it returns an error: its spans are dropped), refuses
// exports from now on and closes the idle connections, without waiting for the backend.
func (x *HTTPExporter) Shutdown(context.Context) error {
	x.stopped.Store(true)
	x.stop()
	x.client.CloseIdleConnections()
	return nil
}

// Compile-time check: an HTTPExporter is an SDK span exporter.
var _ sdktrace.SpanExporter = (*HTTPExporter)(nil)
