// Package provider calls upstream model providers: OpenAI-compatible chat completions, OpenAI
// Responses and Anthropic Messages endpoints. It sends a body already in the upstream's format,
// retries 429, every 5xx (502, 503, 529, ...) and connection failures with bounded exponential
// backoff and jitter (honouring Retry-After) before any byte has been handed back, and maps what
// cannot be retried to the apierror vocabulary. Translating formats is impl/convert's job, not
// this package's.
package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/backoff"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/upstreamconn"
)

// Upstream is one configured provider endpoint.
type Upstream struct {
	Name    string
	Kind    llm.Format
	BaseURL string
	APIKey  string
	// Transport sends the requests (nil: http.DefaultTransport). It is called directly, not
	// through an http.Client: an upstream's redirect is an answer like any other non-2xx (never
	// followed with the request and its key), and http.Client's per-request work is skipped.
	Transport http.RoundTripper
	Retry     RetryPolicy

	// prepared is what every request to the upstream shares, made on first use (prepare).
	prepareOnce sync.Once
	prepared    prepared
}

// prepared is the part of an upstream request that does not change from call to call: the
// endpoint, parsed once, and the headers of a non-streamed and a streamed request. The header
// maps are shared by every request and only read: a RoundTripper must not change a request.
type prepared struct {
	url    *url.URL
	err    error
	header [2]http.Header // [stream]; for the Messages kind, the base that anthropic-version completes
}

// prepare parses the endpoint and builds the shared headers, once.
func (u *Upstream) prepare() *prepared {
	u.prepareOnce.Do(func() {
		p := &u.prepared
		p.url, p.err = url.Parse(u.Endpoint())
		if p.err == nil && p.url.Host == "" {
			p.err = fmt.Errorf("upstream %q: the base URL %q has no host", u.Name, u.BaseURL)
		}
		for i, accept := range [2]string{"application/json", "text/event-stream"} {
			h := http.Header{"Content-Type": {"application/json"}, "Accept": {accept}}
			switch {
			case u.APIKey == "":
			case u.Kind == llm.FormatMessages:
				h["X-Api-Key"] = []string{u.APIKey}
			default:
				h["Authorization"] = []string{"Bearer " + u.APIKey}
			}
			p.header[i] = h
		}
	})
	return &u.prepared
}

// RetryPolicy bounds retries of one upstream call.
type RetryPolicy struct {
	// MaxAttempts counts the first try (default 3).
	MaxAttempts int
	// BaseDelay doubles per retry up to MaxDelay (defaults 250 ms and 4 s); jitter subtracts up
	// to a quarter.
	BaseDelay, MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; a longer one is not waited for and the
	// error goes to the caller (default 10 s).
	MaxRetryAfter time.Duration
	// Sleep waits (default: a timer that respects ctx); tests inject their own.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 3
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 250 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 4 * time.Second
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = 10 * time.Second
	}
	if p.Sleep == nil {
		p.Sleep = sleep
	}
	return p
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Endpoint is the URL a request of the upstream's kind is sent to.
func (u *Upstream) Endpoint() string {
	base := strings.TrimSuffix(u.BaseURL, "/")
	switch u.Kind {
	case llm.FormatResponses:
		return base + "/responses"
	case llm.FormatMessages:
		return strings.TrimSuffix(base, "/v1") + "/v1/messages"
	default:
		return base + "/chat/completions"
	}
}

// Call sends body and returns the upstream's 2xx response once its headers have arrived; the
// caller reads (and closes) the body. forward holds client headers that select provider features
// (anthropic-version, anthropic-beta), sent only to an upstream of the Messages kind. Attempts
// counts the tries made. A failure is an *apierror.Error; Retryable reports whether another
// upstream may be tried.
func (u *Upstream) Call(ctx context.Context, body []byte, stream bool, forward http.Header) (res *http.Response, attempts int, err error) {
	p := u.Retry.withDefaults()
	transport := u.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	for attempt := 1; ; attempt++ {
		res, err = u.once(ctx, transport, body, stream, forward)
		if err == nil {
			return res, attempt, nil
		}
		var f *failure
		if !errors.As(err, &f) || !f.retryable || attempt >= p.MaxAttempts || ctx.Err() != nil {
			return nil, attempt, u.describe(err)
		}
		delay := backoff.Exponential(p.BaseDelay, p.MaxDelay, attempt-1, rand.Float64())
		if f.retryAfter > 0 {
			if f.retryAfter > p.MaxRetryAfter {
				return nil, attempt, u.describe(err)
			}
			delay = f.retryAfter
		}
		if serr := p.Sleep(ctx, delay); serr != nil {
			return nil, attempt, u.describe(err)
		}
	}
}

// failure is one failed attempt.
type failure struct {
	status     int // 0 for a connection failure
	retryable  bool
	retryAfter time.Duration
	message    string
	cause      error
}

func (f *failure) Error() string {
	if f.status == 0 {
		return "upstream connection failed: " + f.cause.Error()
	}
	return fmt.Sprintf("upstream answered %d: %s", f.status, f.message)
}

func (u *Upstream) once(ctx context.Context, transport http.RoundTripper, body []byte, stream bool, forward http.Header) (*http.Response, error) {
	p := u.prepare()
	if p.err != nil {
		return nil, p.err
	}
	header := p.header[0]
	if stream {
		header = p.header[1]
	}
	if u.Kind == llm.FormatMessages {
		// The Messages kind carries the client's anthropic-version and anthropic-beta.
		header = header.Clone()
		version := forward.Get("anthropic-version")
		if version == "" {
			version = "2023-06-01"
		}
		header["Anthropic-Version"] = []string{version}
		if beta := forward.Values("anthropic-beta"); len(beta) > 0 {
			header["Anthropic-Beta"] = beta
		}
	}
	// The request is built here rather than by http.NewRequestWithContext, which would parse
	// the endpoint and build the same headers again on every call.
	req := (&http.Request{
		Method:        http.MethodPost,
		URL:           p.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		Body:          io.NopCloser(bytes.NewReader(body)),
		GetBody:       func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil },
		ContentLength: int64(len(body)),
		Host:          p.url.Host,
	}).WithContext(ctx)
	res, err := transport.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &failure{retryable: true, cause: err}
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		return res, nil
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	f := &failure{status: res.StatusCode, message: upstreamMessage(raw)}
	// Rate limits and every 5xx (502, 503, 504, Anthropic's 529 overloaded) may pass.
	f.retryable = res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= 500
	if d, ok := backoff.RetryAfter(res.Header, time.Now()); ok && d > 0 {
		f.retryAfter = d
	}
	return nil, f
}

// describe maps a final failure to the error the client sees, keeping 429 / 502 / 529.
func (u *Upstream) describe(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var f *failure
	if !errors.As(err, &f) {
		return &apierror.Error{Kind: apierror.KindUpstream, Message: "upstream request failed"}
	}
	switch {
	case f.status == 0:
		return &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream could not be reached"}
	case f.status == http.StatusTooManyRequests:
		return &apierror.Error{Kind: apierror.KindRateLimited, RetryAfter: f.retryAfter, Message: "the upstream is rate limited: " + f.message}
	case f.status == 529 || f.status == http.StatusServiceUnavailable:
		return &apierror.Error{Kind: apierror.KindOverloaded, RetryAfter: f.retryAfter, Message: "the upstream is overloaded: " + f.message}
	case f.status == http.StatusBadRequest || f.status == http.StatusUnprocessableEntity || f.status == http.StatusRequestEntityTooLarge:
		return &apierror.Error{Kind: apierror.KindInvalidRequest, Message: "the upstream refused the request: " + f.message}
	case f.status == http.StatusUnauthorized || f.status == http.StatusForbidden:
		return &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream refused the gateway's credentials"}
	default:
		return &apierror.Error{Kind: apierror.KindUpstream, Message: fmt.Sprintf("the upstream failed (%d): %s", f.status, f.message)}
	}
}

// Retryable reports whether err, returned by Call, allows trying another upstream: upstream
// rate limits, overload, 5xx and connection failures.
func Retryable(err error) bool {
	var e *apierror.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Kind {
	case apierror.KindRateLimited, apierror.KindOverloaded, apierror.KindUpstream:
		return true
	}
	return false
}

// upstreamMessage extracts the message of either envelope, or a short excerpt.
func upstreamMessage(raw []byte) string {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &env) == nil && len(env.Error) > 0 {
		var d struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(env.Error, &d) == nil && d.Message != "" {
			return d.Message
		}
	}
	s := strings.TrimSpace(string(raw))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		s = "no details"
	}
	return s
}

// FromConfig builds the configured providers. A provider whose base URL is
// config.SimulatorURL is pointed at simulatorURL (the simulator's address, without /v1).
func FromConfig(cfg *config.Config, simulatorURL string, transport http.RoundTripper) map[string]*Upstream {
	out := make(map[string]*Upstream, len(cfg.Providers))
	for _, p := range cfg.Providers {
		base := p.BaseURL
		if base == config.SimulatorURL {
			base = strings.TrimSuffix(simulatorURL, "/")
			if llm.Format(p.Kind) != llm.FormatMessages {
				base += "/v1"
			}
		}
		out[p.Name] = &Upstream{Name: p.Name, Kind: llm.Format(p.Kind), BaseURL: base, APIKey: p.APIKey, Transport: transport}
	}
	return out
}

// UsesSimulator reports whether any provider is the built-in simulator.
func UsesSimulator(cfg *config.Config) bool {
	for _, p := range cfg.Providers {
		if p.BaseURL == config.SimulatorURL {
			return true
		}
	}
	return false
}

// NewTransport returns the transport of upstream calls: pooled keep-alive connections sized for
// a gateway, no overall timeout (streams are long), and bounded connect and header waits.
// Plain http:// upstreams (local servers, sidecars, the simulator) go through upstreamconn,
// which does each round trip in the caller's goroutine and so costs less per request than
// net/http; https:// upstreams go through net/http's Transport (TLS, HTTP/2).
func NewTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4096
	t.MaxIdleConnsPerHost = 1024
	t.IdleConnTimeout = 90 * time.Second
	t.ResponseHeaderTimeout = 10 * time.Minute
	t.DisableCompression = true
	plain := &upstreamconn.Transport{
		MaxIdlePerHost:        1024,
		IdleTimeout:           90 * time.Second,
		ResponseHeaderTimeout: 10 * time.Minute,
	}
	// A proxy configured in the environment (HTTP_PROXY) is used through net/http.
	return &upstreamconn.SchemeDispatch{Plain: plain, Other: t, Proxy: t.Proxy}
}
