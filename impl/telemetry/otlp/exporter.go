package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// HTTPOptions are an HTTPExporter's settings.
type HTTPOptions struct {
	// URL is where batches are posted (an OTLP/HTTP traces endpoint, with its /v1/traces).
	URL string
	// Headers are added to every request (an API key, say); they cannot replace the
	// request's Content-Type or Content-Encoding.
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
// as dropped); a batch the backend took only in part is a *PartialSuccessError naming the
// spans it rejected.
type HTTPExporter struct {
	opts   HTTPOptions
	client *http.Client

	// stopping is cancelled by Shutdown: an export in flight ends at once, and the next is
	// refused.
	stopping context.Context
	stop     context.CancelFunc

	mu     sync.Mutex // one export at a time: the encoder and buffers are reused
	enc    Encoder
	body   []byte
	zipped *bytes.Buffer
	zw     *gzip.Writer
}

// keptBuffer is the largest body buffer kept from one batch to the next: a batch of spans
// carrying captured prompts can be far larger than the usual 150 KB, and its buffer is let go.
const keptBuffer = 4 << 20

// NewHTTPExporter returns an exporter posting to o.URL, over a transport of its own.
func NewHTTPExporter(o HTTPOptions) *HTTPExporter {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       o.TLS,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          2,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	stopping, stop := context.WithCancel(context.Background())
	return &HTTPExporter{opts: o, client: &http.Client{Transport: tr}, stopping: stopping, stop: stop}
}

// errStopped is ExportSpans's error after Shutdown.
var errStopped = errors.New("the OTLP exporter is shut down")

// PartialSuccessError is ExportSpans's error for a batch the backend took only in part
// (OTLP's partial_success): Rejected spans were refused, the rest kept.
type PartialSuccessError struct {
	Rejected int64
	Message  string
}

func (e *PartialSuccessError) Error() string {
	return fmt.Sprintf("OTLP export: the backend rejected %d spans: %s", e.Rejected, e.Message)
}

// ExportSpans posts spans as one request and waits for the backend's answer, for ctx, or for
// Shutdown.
func (x *HTTPExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	if x.stopping.Err() != nil {
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
		if x.zipped == nil {
			x.zipped = new(bytes.Buffer)
		}
		x.zipped.Reset()
		if x.zw == nil {
			x.zw = gzip.NewWriter(x.zipped)
		} else {
			x.zw.Reset(x.zipped)
		}
		if _, err := x.zw.Write(payload); err != nil {
			return err
		}
		if err := x.zw.Close(); err != nil {
			return err
		}
		payload = x.zipped.Bytes()
	}
	body := &sentBody{Reader: bytes.NewReader(payload), closed: make(chan struct{})}
	defer x.release(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.opts.URL, body)
	if err != nil {
		return err
	}
	req.ContentLength = int64(len(payload))
	for k, v := range x.opts.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if x.opts.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	if x.opts.UserAgent != "" {
		req.Header.Set("User-Agent", x.opts.UserAgent)
	}
	resp, err := x.client.Do(req)
	if err != nil {
		return err
	}
	// The body is read to its end (at most 64 KiB) so that the connection is kept for the next
	// batch.
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("OTLP export: %s: %.200q", resp.Status, answer)
	}
	if rejected, msg := partialSuccess(answer); rejected != 0 || msg != "" {
		return &PartialSuccessError{Rejected: rejected, Message: msg}
	}
	return nil
}

// sentBody is a request body that tells when the transport is done with it: it may still be
// reading it after the answer came (a backend that answers before reading the whole body, a
// cancelled export), and the buffer under it must not be written again until then.
type sentBody struct {
	*bytes.Reader
	once   sync.Once
	closed chan struct{}
}

func (b *sentBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// release keeps the buffers for the next batch when the transport is done with body, and
// leaves them to it (the next batch makes new ones) when it is not; a very large buffer is
// let go either way.
func (x *HTTPExporter) release(body *sentBody) {
	select {
	case <-body.closed:
		if cap(x.body) > keptBuffer {
			x.body = nil
		}
		if x.zipped != nil && x.zipped.Cap() > keptBuffer {
			x.zipped = nil
		}
	default:
		x.body, x.zipped = nil, nil
	}
}

// Shutdown ends an export in flight (it returns an error: its spans are dropped), refuses
// exports from now on and closes the idle connections, without waiting for the backend.
func (x *HTTPExporter) Shutdown(context.Context) error {
	x.stop()
	x.client.CloseIdleConnections()
	return nil
}

// Compile-time check: an HTTPExporter is an SDK span exporter.
var _ sdktrace.SpanExporter = (*HTTPExporter)(nil)
