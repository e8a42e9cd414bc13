// Package provider calls upstream model providers: OpenAI-compatible chat completions, OpenAI
// Responses and Anthropic Messages endpoints. It sends a body already in the upstream's format,
// retries 429, every 5xx (502, 503, 529, ...) and connection failures with bounded exponential
// backoff and jitter (honouring Retry-After, and x-should-retry: false) before any byte has been
// handed back, never re-sends a request whose answer's head did not come in time (the upstream
// has it), and maps what cannot be retried to the apierror vocabulary. Translating formats is impl/convert's job, not
// this package's.
//
// An upstream's error text reaches the client only when the upstream refused the client's own
// request (400, 413, 422), since it says what to fix; every other failure is told in the
// gateway's own words, because the upstream's may name the operator's account, the backend model
// or every tenant's combined usage. The upstream's words stay in the error's Error text, for the
// gateway's logs.
package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/backoff"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/telemetry"
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
	// OpeningWait bounds how long a streamed answer of the Messages kind is held back for its
	// opening events, so that an error event before any content is a failed try (checkOpening),
	// and how long a streamed answer without a Content-Type is held back for its first byte
	// (checkStreamHead): 0 is DefaultOpeningWait, a negative value does not look.
	OpeningWait time.Duration
	// AccountKeysRequired says that an account is sent to the upstream only with a key of its
	// own (a Credential; config.Provider.AccountKeys): the caller does not call it for an
	// account without one.
	AccountKeysRequired bool

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
		p.header = u.headers(u.APIKey)
	})
	return &u.prepared
}

// headers are the headers of a non-streamed and a streamed request sent with key ("": none):
// x-api-key for the Messages kind, Authorization: Bearer for the others.
func (u *Upstream) headers(key string) [2]http.Header {
	var out [2]http.Header
	for i, accept := range [2]string{"application/json", "text/event-stream"} {
		h := http.Header{"Content-Type": {"application/json"}, "Accept": {accept}}
		switch {
		case key == "":
		case u.Kind == llm.FormatMessages:
			h["X-Api-Key"] = []string{key}
		default:
			h["Authorization"] = []string{"Bearer " + key}
		}
		out[i] = h
	}
	return out
}

// Credential is an account's own key for an upstream (impl/upstreamkeys), sent in place of the
// operator's (Upstream.APIKey) on the account's calls. Its headers are made once, when it is
// made (Upstream.Credential), so that a call with it costs what a call with the operator's key
// costs; they are shared by every such call and only read.
type Credential struct {
	header [2]http.Header
	// key is kept out of what a refusal quotes (once).
	key string
}

// Credential is key as the account's own credential for the upstream.
func (u *Upstream) Credential(key string) *Credential {
	return &Credential{header: u.headers(key), key: key}
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

// Call sends body with the operator's key and returns the upstream's 2xx response once its
// headers have arrived; the caller reads (and closes) the body. forward holds client headers
// that select provider features (anthropic-version, anthropic-beta), sent only to an upstream
// of the Messages kind. Attempts counts the tries made. A failure holds, for errors.As, the
// *apierror.Error the client sees (its own Error text, for logs, quotes the upstream);
// Retryable reports whether another upstream may be tried.
func (u *Upstream) Call(ctx context.Context, body []byte, stream bool, forward http.Header) (res *http.Response, attempts int, err error) {
	return u.CallObserved(ctx, body, stream, forward, nil, nil)
}

// TryObserver is told of each try of a call (CallObserved): a call retries an upstream that
// failed before its first byte, and a tracer shows each try as a span of its own.
type TryObserver interface {
	// StartTry is called before try n (from 1) and returns the context the try runs in.
	StartTry(ctx context.Context, n int) context.Context
	// EndTry is called when try n ended: status is the upstream's HTTP status (0 when no
	// answer came: the connection failed, or the answer's head did not arrive in time); err is
	// nil for an answer with a 2xx status, else the try's failure as the client would see it
	// (an *apierror.Error for errors.As).
	EndTry(ctx context.Context, n int, status int, err error)
}

// CallObserved is Call with obs told of each try (a nil obs costs nothing), sent with cred, the
// account's own key, in place of the operator's when cred is not nil. A call with cred never
// falls back to the operator's key: the upstream's refusal of it (401, 403) is the call's
// failure, which says that the account's credential was refused (AccountKeyRefused).
func (u *Upstream) CallObserved(ctx context.Context, body []byte, stream bool, forward http.Header, obs TryObserver, cred *Credential) (res *http.Response, attempts int, err error) {
	p := u.Retry.withDefaults()
	transport := u.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	// sent says that some try may have reached the upstream with the request: any but a try
	// whose connection could not even be made (PromptSent).
	sent := false
	for attempt := 1; ; attempt++ {
		if obs != nil {
			tctx := obs.StartTry(ctx, attempt)
			res, err = u.once(tctx, transport, body, stream, forward, cred)
			if err != nil {
				obs.EndTry(tctx, attempt, statusOf(err), u.describe(err))
			} else {
				obs.EndTry(tctx, attempt, res.StatusCode, nil)
			}
		} else {
			res, err = u.once(ctx, transport, body, stream, forward, cred)
		}
		if err == nil {
			return res, attempt, nil
		}
		sent = sent || trySent(err)
		var f *failure
		if !errors.As(err, &f) || !f.retryable || attempt >= p.MaxAttempts || ctx.Err() != nil {
			return nil, attempt, u.describeSent(err, sent)
		}
		delay := backoff.Exponential(p.BaseDelay, p.MaxDelay, attempt-1, rand.Float64())
		if f.retryAfter > 0 {
			if f.retryAfter > p.MaxRetryAfter {
				return nil, attempt, u.describeSent(err, sent)
			}
			delay = f.retryAfter
		}
		if serr := p.Sleep(ctx, delay); serr != nil {
			return nil, attempt, u.describeSent(err, sent)
		}
	}
}

// statusOf is the upstream's HTTP status in a failed attempt's error (0 when no answer came).
func statusOf(err error) int {
	var f *failure
	if errors.As(err, &f) {
		return f.status
	}
	return 0
}

// failure is one failed attempt.
type failure struct {
	status int // 0 for a connection failure
	// retryable says that the call may try the same upstream again (CallObserved); whether
	// another upstream may be tried is Retryable's question, answered from the client's error.
	retryable  bool
	retryAfter time.Duration
	// headTimeout says that the request was sent and its answer's head did not come within
	// the transport's header timeout (status is 0): the upstream has the prompt.
	headTimeout bool
	// noRetry says that the upstream answered x-should-retry: false: retrying soon will not
	// help (an exhausted quota or credit).
	noRetry bool
	// accountKey says that the try was sent with the account's own key (a Credential), and
	// provider names the upstream, for the error of its refusal (statusError).
	accountKey bool
	provider   string
	// notStream says that a streamed request was answered 2xx with something other than an
	// event stream (checkStreamHead), and names what: the try's answer was unusable, as a
	// non-streamed answer that cannot be read is (ErrorType: upstream_malformed).
	notStream string
	// standsFor is, for an error the upstream answered with a 2xx status (status) in place of
	// the answer, the HTTP status the error's kind stands for (errorStatus), by which the try
	// is judged; streamed says that a stream was asked for.
	standsFor int
	streamed  bool
	detail    upstreamDetail
	cause     error
}

func (f *failure) Error() string {
	if f.headTimeout {
		return "upstream did not answer in time: " + f.cause.Error()
	}
	if f.status == 0 {
		return "upstream connection failed: " + f.cause.Error()
	}
	if f.notStream != "" {
		return fmt.Sprintf("upstream answered %d with %s, not an event stream: %s", f.status, f.notStream, f.detail.message)
	}
	if f.standsFor != 0 {
		return fmt.Sprintf("upstream answered %d with an error in place of the answer (taken as a %d): %s", f.status, f.standsFor, f.detail.message)
	}
	return fmt.Sprintf("upstream answered %d: %s", f.status, f.detail.message)
}

func (u *Upstream) once(ctx context.Context, transport http.RoundTripper, body []byte, stream bool, forward http.Header, cred *Credential) (*http.Response, error) {
	p := u.prepare()
	if p.err != nil {
		return nil, p.err
	}
	headers := &p.header
	if cred != nil {
		headers = &cred.header
	}
	header := headers[0]
	if stream {
		header = headers[1]
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
	if trace.SpanContextFromContext(ctx).IsValid() && !writesTraceContext(transport) {
		// Traced: the upstream continues the attempt's trace (its W3C traceparent), whatever
		// transport carries the request. impl/upstreamconn's transports write the header
		// themselves, without copying the configured ones (about 1.5 us a traced request).
		header = header.Clone()
		telemetry.Inject(ctx, header)
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
			if dialFailed(err) {
				// Cancelled while the connection was being made: no byte was sent.
				return nil, &unsent{ctx.Err()}
			}
			return nil, ctx.Err()
		}
		if isHeadTimeout(err) {
			// The request was sent and the upstream has not answered within the header
			// timeout: it may still be working on the prompt, and bills it. Sending the prompt
			// again would wait as long again, per try, and may be billed again: the call
			// ends here, and the caller may try another upstream (Retryable).
			return nil, &failure{headTimeout: true, cause: err}
		}
		return nil, &failure{retryable: true, cause: err}
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		if !stream {
			return res, nil
		}
		wait := u.OpeningWait
		if wait == 0 {
			wait = DefaultOpeningWait
		}
		// A stream's answer that is not an event stream is a failed try (checkStreamHead).
		checked, f := u.checkStreamHead(res, wait, cred)
		if f == nil && u.Kind == llm.FormatMessages && wait >= 0 {
			checked, f = checkOpening(checked, wait)
			if f != nil {
				// An error event's words go where a status's do (logs, traces): never the key.
				f.detail = f.detail.without(u.keySent(cred))
			}
		}
		if f != nil {
			return nil, f
		}
		return checked, nil
	}
	defer res.Body.Close()
	f := &failure{status: res.StatusCode, detail: u.wordsOf(res.Body, cred), provider: u.Name, accountKey: cred != nil}
	// Rate limits and every 5xx (502, 503, 504, Anthropic's 529 overloaded) may pass, unless
	// the upstream says they will not: x-should-retry: false, which OpenAI and Anthropic send
	// with an exhausted quota or credit, and which every official SDK obeys whatever the
	// status. The same upstream is then not asked again (another may be: Retryable), and the
	// client is told not to retry either (clientError). x-should-retry: true is not obeyed: it
	// would make the gateway repeat a refusal of the client's own request.
	f.noRetry = strings.EqualFold(strings.TrimSpace(res.Header.Get("x-should-retry")), "false")
	f.retryable = (res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= 500) && !f.noRetry
	if d, ok := backoff.RetryAfter(res.Header, time.Now()); ok && d > 0 {
		f.retryAfter = d
	}
	return nil, f
}

// describe maps a final failure to the error the client sees, keeping 429 / 502 / 529. Only a
// refusal of the client's request (400, 413, 422) passes the upstream's message, param and code
// on; every other status is described in the gateway's words.
func (u *Upstream) describe(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	described := apierror.WithUpstreamWords(clientError(err), err.Error())
	var f *failure
	if errors.As(err, &f) {
		return &upstreamFailure{error: described, status: f.status, notStream: f.notStream != "", standsFor: f.standsFor}
	}
	return described
}

// describeSent is describe for a call whose tries may (sent) or cannot have reached the
// upstream with the request.
func (u *Upstream) describeSent(err error, sent bool) error {
	err = u.describe(err)
	if un, ok := err.(*unsent); ok {
		err = un.error // the last try's word; the whole call's is decided below
	}
	var f *upstreamFailure
	switch {
	case errors.As(err, &f):
		f.notSent = !sent
	case !sent && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		// The caller went away before any try could connect (the review of D6: a dial that
		// hung until the client left was billed as a prompt sent).
		err = &unsent{err}
	}
	return err
}

// unsent is a context's error for a call none of whose tries could connect: it is the
// context's error (errors.Is finds it) that also says no upstream has the prompt (PromptSent).
type unsent struct{ error }

func (e *unsent) Unwrap() error { return e.error }

// trySent reports whether a failed try's request may have reached the upstream: any failure
// but one to make the connection (refused, unreachable, or cancelled while connecting).
func trySent(err error) bool {
	var u *unsent
	if errors.As(err, &u) {
		return false
	}
	var f *failure
	return !errors.As(err, &f) || f.status != 0 || !dialFailed(f.cause)
}

// dialFailed reports whether err is a failure to make the connection (refused, unreachable, a
// name that does not resolve): no byte of the request was sent.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// PromptSent reports whether a failed upstream call's request may have reached an upstream:
// false only when no try could even connect, so that no upstream has the prompt (a client that
// leaves meanwhile is not billed for it; trial of upstream failures D6). Any other error: true.
func PromptSent(err error) bool {
	var f *upstreamFailure
	if errors.As(err, &f) {
		return !f.notSent
	}
	var u *unsent
	return !errors.As(err, &u)
}

// upstreamFailure is the error the client sees for a failed upstream call with, beside it, the
// status the upstream answered (0: none), which ErrorType reports, and whether no try could
// connect (PromptSent).
type upstreamFailure struct {
	error
	status  int
	notSent bool
	// notStream: the upstream answered a streamed request with something other than an event
	// stream (checkStreamHead); standsFor: it answered an error with a 2xx status, which stands
	// for that status (errorStatus).
	notStream bool
	standsFor int
}

func (e *upstreamFailure) Unwrap() error { return e.error }

// ErrorType is error.type of a failed upstream call as the GenAI conventions ask for it (the
// error code the provider returned): the upstream's HTTP status ("500", "401", "503"), or
// "connection" when it answered none, or NotAStream when it answered 2xx with something it
// could not use: a streamed request with something other than an event stream, or any request
// with an error in place of the answer (ErrorInAnswer; JudgedStatus is the status that error
// stands for); "" when err is not a failed upstream call's. The status
// the client gets is another matter: a provider's 500 and 401 are a 502 to the client, its 503
// a 529 (trial h8 D21: traces and metrics said 502 for a refused provider key).
func ErrorType(err error) string {
	var f *upstreamFailure
	switch {
	case !errors.As(err, &f):
		return ""
	case f.notStream, f.standsFor != 0:
		return NotAStream
	case f.status == 0:
		return "connection"
	}
	return strconv.Itoa(f.status)
}

// clientError is the error the client sees for a final failure. An upstream's
// x-should-retry: false goes on to the client (NoRetry), and so does its Retry-After on a 429
// or an overload, which the edge bounds (apierror.MaxClientRetryAfter).
func clientError(err error) *apierror.Error {
	var f *failure
	if !errors.As(err, &f) {
		return &apierror.Error{Kind: apierror.KindUpstream, Message: "upstream request failed"}
	}
	e := statusError(f)
	e.NoRetry = f.noRetry
	if e.RetryAfter > apierror.MaxClientRetryAfter || (f.noRetry && e.Kind == apierror.KindRateLimited) {
		// The client is told not to retry, and its message says why.
		e.Message += waitNote(e.RetryAfter)
	}
	return e
}

// waitNote ends the message of an upstream refusal that retrying soon will not help: with the
// wait the upstream asked for when there is one.
func waitNote(wait time.Duration) string {
	switch {
	case wait <= 0:
		return "; its quota will not allow the request soon: retry later"
	case wait < 2*time.Minute:
		return fmt.Sprintf("; it asks for a wait of %d seconds: retry later", apierror.Seconds(wait))
	default:
		return fmt.Sprintf("; it asks for a wait of %d minutes: retry later", int((wait+time.Minute-1)/time.Minute))
	}
}

// statusError is the client's error for failure f, before clientError adds what the upstream
// said of retrying.
func statusError(f *failure) *apierror.Error {
	switch {
	case f.standsFor != 0:
		return inAnswerError(f)
	case f.notStream != "":
		return &apierror.Error{Kind: apierror.KindUpstream, Message: notStreamMessage(f.notStream)}
	case f.headTimeout:
		return &apierror.Error{Kind: apierror.KindGatewayTimeout,
			Message: "the upstream timed out: it accepted the request but did not start its answer in time"}
	case f.status == 0:
		return &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream could not be reached"}
	case f.status == http.StatusGatewayTimeout:
		return &apierror.Error{Kind: apierror.KindGatewayTimeout, Message: "the upstream timed out (HTTP 504)"}
	case f.status == http.StatusTooManyRequests:
		return &apierror.Error{Kind: apierror.KindRateLimited, RetryAfter: f.retryAfter, Message: "the upstream is rate limited"}
	case f.status == 529 || f.status == http.StatusServiceUnavailable:
		return &apierror.Error{Kind: apierror.KindOverloaded, RetryAfter: f.retryAfter, Message: "the upstream is overloaded"}
	case refusesRequest(f.status):
		return &apierror.Error{Kind: apierror.KindInvalidRequest, Param: f.detail.param, Code: f.detail.code,
			Message: "the upstream refused the request: " + apierror.Excerpt(f.detail.message, apierror.MaxQuotedLen)}
	case (f.status == http.StatusUnauthorized || f.status == http.StatusForbidden) && f.accountKey:
		// The account's own key: the operator's is not tried in its place (the account's
		// prompts would go to the operator's upstream account, whose cache others share).
		return &apierror.Error{Kind: apierror.KindUpstream, Code: AccountKeyRefusedCode,
			Message: fmt.Sprintf("the provider %s refused this account's own upstream credential (HTTP %d): the operator must set a valid one (tollgate admin provider-key set)", f.provider, f.status)}
	case f.status == http.StatusUnauthorized || f.status == http.StatusForbidden:
		return &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream refused the gateway's credentials"}
	case f.status == http.StatusNotFound:
		return &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream does not know the configured model"}
	default:
		return &apierror.Error{Kind: apierror.KindUpstream, Message: fmt.Sprintf("the upstream failed (HTTP %d)", f.status)}
	}
}

// AccountKeyRefusedCode is the error code of a call whose upstream refused the account's own
// key (401 or 403).
const AccountKeyRefusedCode = "upstream_credential_refused"

// AccountKeyRefused reports whether err, returned by CallObserved with an account's own
// credential, is the upstream's refusal of that credential (401 or 403).
func AccountKeyRefused(err error) bool {
	var e *apierror.Error
	return errors.As(err, &e) && e.Code == AccountKeyRefusedCode
}

// Retryable reports whether err, returned by Call, allows trying another upstream: upstream
// rate limits, overload, 5xx, connection failures and an answer's head that did not come in
// time. The last was not tried again on the same upstream (Call), which has the prompt; another
// upstream does not.
func Retryable(err error) bool {
	var e *apierror.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Kind {
	case apierror.KindRateLimited, apierror.KindOverloaded, apierror.KindUpstream, apierror.KindGatewayTimeout:
		return true
	}
	return false
}

// isHeadTimeout reports whether err, from a transport's RoundTrip, is the expiry of its
// response header timeout: the request was written and no answer's head followed in time.
// upstreamconn says so with ErrResponseHeaderTimeout; net/http's Transport (HTTP/1 and HTTP/2)
// with an unexported timeout error whose text says "timeout awaiting response headers". A dial
// or TLS handshake timeout is not one: the request was never sent.
func isHeadTimeout(err error) bool {
	if errors.Is(err, upstreamconn.ErrResponseHeaderTimeout) {
		return true
	}
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout() && strings.Contains(err.Error(), "timeout awaiting response headers")
}

// upstreamDetail is what an upstream's error body says: its message, and the param and code the
// client may be shown when the upstream refused the client's request.
type upstreamDetail struct {
	message string
	// param is the OpenAI envelope's param; "" when absent or not a plain field path.
	param string
	// code is the OpenAI envelope's code, or the Anthropic envelope's error type when it says
	// more than invalid_request_error; "" when absent or not a plain token.
	code string
}

// keyElided is what an upstream's words say in place of the key the gateway sent.
const keyElided = "[the upstream key]"

// keySent is the key a call with cred sends: the account's own, or the operator's ("": none).
func (u *Upstream) keySent(cred *Credential) string {
	if cred != nil {
		return cred.key
	}
	return u.APIKey
}

// WithoutKey is s, words of the upstream's answer to a call made with cred (nil: the
// operator's key), with the key that call sent replaced by "[the upstream key]". An upstream
// may quote back the key it was sent in an error it answers with a 2xx status, in a JSON body
// or a stream's event (CallObserved clears its error statuses' words itself): what the caller
// logs, traces or passes on of such words goes through WithoutKey first.
func (u *Upstream) WithoutKey(cred *Credential, s string) string {
	if key := u.keySent(cred); key != "" && strings.Contains(s, key) {
		return strings.ReplaceAll(s, key, keyElided)
	}
	return s
}

// wordsOf reads what an upstream's failed answer says (its body, at most 64 KiB) for the logs,
// the traces and, for a refusal of the request, the client's answer: never the key the call was
// sent with, should the upstream quote it back. The body is cleared of the key before it is
// parsed, so that the excerpt of a body in neither envelope cannot cut the key and keep its
// beginning; what the envelope's strings decode to is cleared again (a key written with JSON
// escapes).
func (u *Upstream) wordsOf(body io.Reader, cred *Credential) upstreamDetail {
	raw, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	return u.wordsIn(raw, cred)
}

// wordsIn is wordsOf of a body read already.
func (u *Upstream) wordsIn(raw []byte, cred *Credential) upstreamDetail {
	sent := u.keySent(cred)
	if sent != "" && bytes.Contains(raw, []byte(sent)) {
		raw = bytes.ReplaceAll(raw, []byte(sent), []byte(keyElided))
	}
	return parseUpstreamError(raw).without(sent)
}

// without is d with every occurrence of key ("": none) elided.
func (d upstreamDetail) without(key string) upstreamDetail {
	if key == "" {
		return d
	}
	d.message = strings.ReplaceAll(d.message, key, keyElided)
	d.param = strings.ReplaceAll(d.param, key, keyElided)
	d.code = strings.ReplaceAll(d.code, key, keyElided)
	return d
}

// parseUpstreamError reads either envelope, or keeps a short excerpt of a body that is neither.
func parseUpstreamError(raw []byte) upstreamDetail {
	var env struct {
		Type    json.RawMessage `json:"type"`
		Error   json.RawMessage `json:"error"`
		Object  json.RawMessage `json:"object"`
		Message json.RawMessage `json:"message"`
	}
	var d upstreamDetail
	parsed := json.Unmarshal(raw, &env) == nil
	switch {
	case !parsed:
	case len(env.Error) > 0 && env.Error[0] == '"':
		// {"error":"..."}: the message alone.
		d.message = jsonString(env.Error)
	case len(env.Error) == 0 && jsonString(env.Object) == "error":
		// vLLM's {"object":"error","message":...}, its members at the top level.
		d.message = jsonString(env.Message)
	case len(env.Error) > 0:
		var inner struct {
			Message json.RawMessage `json:"message"`
			Type    json.RawMessage `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    json.RawMessage `json:"code"`
		}
		if json.Unmarshal(env.Error, &inner) == nil {
			d.message = jsonString(inner.Message)
			if jsonString(env.Type) == "error" {
				// Anthropic: error.type is the only machine-readable part, and worth passing
				// on only when it is more specific than the envelope's own type.
				if t := errorCode(inner.Type); t != "invalid_request_error" {
					d.code = t
				}
			} else {
				d.param, d.code = errorParam(inner.Param), errorCode(inner.Code)
			}
		}
	}
	if d.message == "" {
		s := apierror.Excerpt(strings.TrimSpace(string(raw)), 200)
		if s == "" {
			s = "no details"
		}
		d.message = s
	}
	return d
}

// jsonString is the JSON string raw holds, or "" when it holds anything else.
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// The longest error code and param an upstream may pass on to the client.
const (
	maxErrorCodeLen  = 64
	maxErrorParamLen = 128
)

// errorCode is the upstream's error code when it is a plain token (letters, digits, '_', '-',
// '.'; at most maxErrorCodeLen), else "". A code of digits only is a status echoed by a
// compatible server (vLLM, LiteLLM), which says nothing the status does not.
func errorCode(raw json.RawMessage) string {
	code := plainToken(jsonString(raw), maxErrorCodeLen, "")
	if strings.Trim(code, "0123456789") == "" {
		return ""
	}
	return code
}

// errorParam is the upstream's param when it is a plain field path such as
// "tools[0].function.name" (letters, digits, '_', '-', '.', '[', ']'; at most
// maxErrorParamLen), else "". LiteLLM's "None" stands for no param.
func errorParam(raw json.RawMessage) string {
	param := plainToken(jsonString(raw), maxErrorParamLen, "[]")
	if param == "None" {
		return ""
	}
	return param
}

// plainToken returns s when it is 1 to maxLen ASCII letters, digits, '_', '-', '.' or bytes of
// extra, and "" otherwise, so that an upstream cannot put text of its own into a field clients
// read as a name.
func plainToken(s string, maxLen int, extra string) string {
	if s == "" || len(s) > maxLen {
		return ""
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		case strings.IndexByte(extra, c) >= 0:
		default:
			return ""
		}
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
		out[p.Name] = &Upstream{Name: p.Name, Kind: llm.Format(p.Kind), BaseURL: base, APIKey: p.APIKey, Transport: transport,
			AccountKeysRequired: p.AccountKeysRequired()}
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

// ResponseHeaderTimeout bounds, in NewTransport's transport, the wait for an upstream answer's
// head once the request was sent. A non-streamed answer's head comes only with the whole answer,
// and a reasoning model's can take minutes; the official SDKs' own timeout is 600 s, and the
// Messages API refuses non-streamed requests expected to take longer. So the wait is as long:
// a client with the SDKs' default gives up about when the gateway does. An expiry is not tried
// again on the same upstream (the prompt is there), so one expert holds a request for at most
// this long (docs/operations.md, "Upstream timeouts").
const ResponseHeaderTimeout = 10 * time.Minute

// writesTraceContext reports whether t sends each request's traceparent itself (the
// WritesTraceContext of impl/upstreamconn's transports).
func writesTraceContext(t http.RoundTripper) bool {
	w, ok := t.(interface{ WritesTraceContext() bool })
	return ok && w.WritesTraceContext()
}

// NewTransport returns the transport of upstream calls: pooled keep-alive connections sized for
// a gateway, no overall timeout (streams are long), and bounded connect and header waits.
// Plain http:// upstreams (local servers, sidecars, the simulator) go through upstreamconn,
// which does each round trip in the caller's goroutine and so costs less per request than
// net/http; https:// upstreams go through net/http's Transport (TLS, HTTP/2).
func NewTransport() http.RoundTripper { return NewTransportHeaderTimeout(0) }

// NewTransportHeaderTimeout is NewTransport with headerTimeout as its wait for an answer's head
// (0: ResponseHeaderTimeout); tests shorten it.
func NewTransportHeaderTimeout(headerTimeout time.Duration) http.RoundTripper {
	if headerTimeout <= 0 {
		headerTimeout = ResponseHeaderTimeout
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4096
	t.MaxIdleConnsPerHost = 1024
	t.IdleConnTimeout = 90 * time.Second
	t.ResponseHeaderTimeout = headerTimeout
	t.DisableCompression = true
	plain := &upstreamconn.Transport{
		MaxIdlePerHost:        1024,
		IdleTimeout:           90 * time.Second,
		ResponseHeaderTimeout: headerTimeout,
	}
	// A proxy configured in the environment (HTTP_PROXY) is used through net/http.
	return &upstreamconn.SchemeDispatch{Plain: plain, Other: t, Proxy: t.Proxy}
}
