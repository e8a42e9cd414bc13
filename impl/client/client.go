package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/gen/api"
)

// DefaultModelCacheTTL is how long [Client.Models] serves a fetched model list
// before fetching it again.
const DefaultModelCacheTTL = 60 * time.Second

// maxSuccessBody bounds how much of a successful JSON answer is read by the
// convenience methods.
const maxSuccessBody = 16 << 20

// Client is a tollgate API client: the generated client plus retries,
// authentication, a cached model list and typed errors.
type Client struct {
	// API is the generated client for every operation; its requests carry the
	// API key and go through the retry transport. Turn its non-2xx answers
	// into an [*APIError] with [ErrorFromResponse].
	API *api.ClientWithResponses

	now func() time.Time
	ttl time.Duration

	mu      sync.Mutex
	models  []api.Model
	fetched time.Time
	valid   bool
	gen     uint64
	flight  *modelFetch
}

// Option configures a [Client] built by [New].
type Option func(*config) error

// config collects the options of New.
type config struct {
	httpClient *http.Client
	policy     RetryPolicy
	ttl        time.Duration
	now        func() time.Time
	editors    []api.RequestEditorFn
}

// WithHTTPClient bases the client on a copy of hc; hc's Transport (or
// http.DefaultTransport when it has none) is wrapped in a [RetryTransport],
// and hc itself is not modified.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *config) error {
		if hc == nil {
			return errors.New("tollgate: WithHTTPClient: nil client")
		}
		c.httpClient = hc
		return nil
	}
}

// WithRetryPolicy replaces the retry policy, which defaults to
// [DefaultRetryPolicy].
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *config) error {
		c.policy = p
		return nil
	}
}

// WithMaxRetries sets how many times a request is retried after its first
// attempt; 0 disables retries.
func WithMaxRetries(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("tollgate: WithMaxRetries: negative count %d", n)
		}
		c.policy.MaxRetries = n
		return nil
	}
}

// WithModelCacheTTL sets how long the model list is served from the cache;
// it defaults to [DefaultModelCacheTTL], and 0 disables caching (concurrent
// callers still share one request).
func WithModelCacheTTL(ttl time.Duration) Option {
	return func(c *config) error {
		if ttl < 0 {
			return fmt.Errorf("tollgate: WithModelCacheTTL: negative TTL %s", ttl)
		}
		c.ttl = ttl
		return nil
	}
}

// WithClock sets the clock used for the model cache TTL and, unless the retry
// policy has its own, for HTTP-date Retry-After values. It is meant for tests.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("tollgate: WithClock: nil clock")
		}
		c.now = now
		return nil
	}
}

// WithRequestEditor adds a function that edits every request after the
// Authorization header is set, for example to add a header.
func WithRequestEditor(fn api.RequestEditorFn) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("tollgate: WithRequestEditor: nil editor")
		}
		c.editors = append(c.editors, fn)
		return nil
	}
}

// New returns a client for the gateway at baseURL, the scheme and host (and
// any path prefix) without /v1, such as "https://tollgate.example.com",
// authenticating every request with Authorization: Bearer apiKey.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("tollgate: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tollgate: base URL %q: want http(s)://host", baseURL)
	}
	if p := strings.TrimSuffix(u.Path, "/"); p == "/v1" || strings.HasSuffix(p, "/v1") {
		return nil, fmt.Errorf("tollgate: base URL %q: leave out /v1, the operation paths include it", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("tollgate: base URL %q: no query or fragment allowed", baseURL)
	}
	apiKey = strings.TrimSpace(apiKey)
	if apiKey == "" {
		return nil, errors.New("tollgate: empty API key")
	}

	cfg := config{policy: DefaultRetryPolicy(), ttl: DefaultModelCacheTTL, now: time.Now}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.policy.Now == nil {
		cfg.policy.Now = cfg.now
	}

	hc := &http.Client{}
	if cfg.httpClient != nil {
		copied := *cfg.httpClient
		hc = &copied
	}
	hc.Transport = NewRetryTransport(hc.Transport, cfg.policy)

	bearer := "Bearer " + apiKey
	apiOpts := []api.ClientOption{
		api.WithHTTPClient(hc),
		api.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", bearer)
			return nil
		}),
	}
	for _, fn := range cfg.editors {
		apiOpts = append(apiOpts, api.WithRequestEditorFn(fn))
	}
	gen, err := api.NewClientWithResponses(strings.TrimSuffix(u.String(), "/"), apiOpts...)
	if err != nil {
		return nil, fmt.Errorf("tollgate: %w", err)
	}
	return &Client{API: gen, now: cfg.now, ttl: cfg.ttl}, nil
}

// Credits returns the account's available credit balance and, for a key with limits, the
// key's own (Key: its credit cap's remainder, expiry and models).
func (c *Client) Credits(ctx context.Context) (*api.CreditBalance, error) {
	resp, err := c.API.GetCredits(ctx)
	if err != nil {
		return nil, err
	}
	var out api.CreditBalance
	if err := decode(resp, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// decode closes resp and either decodes its 2xx JSON body into v or returns
// the [*APIError] of a non-2xx answer.
func decode(resp *http.Response, v any) error {
	defer func() { _ = resp.Body.Close() }()
	if err := ErrorFromResponse(resp, nil); err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSuccessBody))
	if err != nil {
		return fmt.Errorf("tollgate: reading %s answer: %w", answerPath(resp), err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("tollgate: decoding %s answer: %w", answerPath(resp), err)
	}
	return nil
}

// answerPath names the request path of resp for error messages.
func answerPath(resp *http.Response) string {
	if resp.Request == nil || resp.Request.URL == nil {
		return "the"
	}
	return resp.Request.URL.Path
}
