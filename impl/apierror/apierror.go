// Package apierror is tollgate's one error vocabulary. Code under impl/ returns *Error values
// of a Kind; each edge (the HTTP envelopes, MCP) maps them to its wire shape once. Messages in
// an *Error are written for the client; internal error text never goes into them.
package apierror

import (
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// Kind classifies an error; it decides the HTTP status and the envelope's type and code.
type Kind int

// The kinds of error a client can see.
const (
	KindInternal           Kind = iota // 500: a fault of ours; the client sees the request id
	KindInvalidRequest                 // 400
	KindUnauthenticated                // 401
	KindInsufficientCredit             // 402
	KindForbidden                      // 403
	KindNotFound                       // 404
	KindModelNotFound                  // 404, code model_not_found
	KindRateLimited                    // 429
	KindNotImplemented                 // 501
	KindUpstream                       // 502
	KindOverloaded                     // 529
	KindMethodNotAllowed               // 405
	KindRequestTooLarge                // 413
	KindUnavailable                    // 503: a dependency of the gateway (its database) is unreachable
	KindConflict                       // 409: the request conflicts with the state of what it names
	KindGatewayTimeout                 // 504: the upstream took the request and did not answer in time
)

// Status is the HTTP status of a kind.
func (k Kind) Status() int {
	switch k {
	case KindInvalidRequest:
		return http.StatusBadRequest
	case KindUnauthenticated:
		return http.StatusUnauthorized
	case KindInsufficientCredit:
		return http.StatusPaymentRequired
	case KindForbidden:
		return http.StatusForbidden
	case KindNotFound, KindModelNotFound:
		return http.StatusNotFound
	case KindRateLimited:
		return http.StatusTooManyRequests
	case KindNotImplemented:
		return http.StatusNotImplemented
	case KindUpstream:
		return http.StatusBadGateway
	case KindOverloaded:
		return 529
	case KindMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case KindRequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case KindUnavailable:
		return http.StatusServiceUnavailable
	case KindConflict:
		return http.StatusConflict
	case KindGatewayTimeout:
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}

// Error is an error a client may see.
type Error struct {
	Kind Kind
	// Message is the client-facing text.
	Message string
	// Param names the offending request field, if any (e.g. "messages[0].role").
	Param string
	// Code, when set, is the chat-completions envelope's `code` in place of the kind's (for
	// example "context_length_exceeded", passed on from an upstream that refused the request).
	// The Messages envelope has no code and ignores it.
	Code string
	// RetryAfter, when positive, is sent as Retry-After, at most MaxClientRetryAfter; a longer
	// wait also makes the edge send x-should-retry: false.
	RetryAfter time.Duration
	// NoRetry says that retrying the request soon cannot succeed (an upstream's exhausted quota
	// that said x-should-retry: false): the edge sends x-should-retry: false, which the
	// official SDKs obey whatever the status.
	NoRetry bool
}

// MaxClientRetryAfter is the longest Retry-After a client is sent. Some official SDKs
// (anthropic-go, anthropic-ts from 0.79, openai-go up to v3.52) sleep for whatever Retry-After
// says, with no bound; others wait at most 60 s and back off on their own beyond it. A longer
// wait is therefore sent as this one with x-should-retry: false, so that every SDK fails at
// once instead of sleeping (wire-protocols.md §4.2).
const MaxClientRetryAfter = 60 * time.Second

// Error implements error.
func (e *Error) Error() string { return e.Message }

// As returns the *Error inside err, or an internal error when there is none.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Kind: KindInternal, Message: "internal error"}
}

// Invalid is a 400 naming the offending field (param may be empty).
func Invalid(param, format string, args ...any) *Error {
	return &Error{Kind: KindInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}

// Unauthenticated is a 401.
func Unauthenticated(message string) *Error {
	return &Error{Kind: KindUnauthenticated, Message: message}
}

// WorstCaseNote ends a 402's message: the amount a request needs is its worst case, not its
// likely cost, and its output bound is what the caller can lower. Coding agents ask for large
// bounds (Claude Code 32,000 tokens a turn), so a small balance or key cap refuses turns that
// would cost a fraction of a cent; the note says why, and what to do (trial h10 D3).
const WorstCaseNote = "The amount is the request's worst case, held until it is answered: its input and its whole output bound (max_tokens, max_output_tokens) at the model's dearest rates; a lower output bound needs less."

// InsufficientCredit is a 402 saying what the request needs and what is available to it: the
// account's balance less the credit held for its other requests in flight (on any replica),
// which is not the balance GET /v1/credits shows while other requests run.
func InsufficientCredit(neededMicros, availableMicros int64) *Error {
	return &Error{Kind: KindInsufficientCredit, Message: fmt.Sprintf(
		"insufficient credit: this request needs up to %d micro-units (%s) and %d (%s) is available to it: the account's balance less what its other requests in flight hold. %s",
		neededMicros, USD(neededMicros), availableMicros, USD(availableMicros), WorstCaseNote)}
}

// Forbidden is a 403.
func Forbidden(format string, args ...any) *Error {
	return &Error{Kind: KindForbidden, Message: fmt.Sprintf(format, args...)}
}

// Conflict is a 409: the request conflicts with the state of what it names (an agent session
// that has ended, an idempotency key used for another request); the message names the state.
func Conflict(format string, args ...any) *Error {
	return &Error{Kind: KindConflict, Message: fmt.Sprintf(format, args...)}
}

// ModelNotFound is the 404 for a model id that is unknown, not available to the account, or
// sent to the wrong route family. After OpenAI's own sentence it says where the caller finds the
// ids it may use: a newcomer's client sends its own default (gpt-4o, a claude-… id), and the
// gateway's models have names of the operator's choosing (newcomer trial h1).
func ModelNotFound(id string) *Error {
	return &Error{Kind: KindModelNotFound, Param: "model", Message: fmt.Sprintf(
		"The model `%s` does not exist or you do not have access to it. GET /v1/models lists the models this key may use.", id)}
}

// ModelOnOtherRoute is the model-not-found error for a model the caller may use, sent to a route
// of another family: still a 404 model_not_found, as the API contract says, with the route that
// serves it named.
func ModelOnOtherRoute(id, route string) *Error {
	return &Error{Kind: KindModelNotFound, Param: "model", Message: fmt.Sprintf(
		"The model `%s` is not served on this route: send it to POST %s.", id, route)}
}

// RateLimited is a 429 whose message states the retry interval in whole seconds.
func RateLimited(limit int, retryAfter time.Duration) *Error {
	secs := Seconds(retryAfter)
	return &Error{Kind: KindRateLimited, RetryAfter: retryAfter, Message: fmt.Sprintf(
		"rate limit exceeded: this key allows %d requests per minute; retry in %d seconds", limit, secs)}
}

// NotImplemented is a 501 for a route whose implementation is pending.
func NotImplemented(what string) *Error {
	return &Error{Kind: KindNotImplemented, Message: fmt.Sprintf(
		"not implemented: %s is pending in this version of tollgate (see the README)", what)}
}

// DependencyRetryAfter is the Retry-After of a dependency failure: long enough not to hammer a
// database that is coming back, short enough that a client's retry lands soon after it is.
const DependencyRetryAfter = 2 * time.Second

// Unavailable is the 503 for a request that needs a dependency of the gateway (what names it:
// "the database") which cannot be reached now. cause is the dependency's own error: its text
// goes to the logs only (Error gives it), while errors.As and As find the client's error, which
// says only that the request can be retried.
func Unavailable(what string, cause error) error {
	client := &Error{Kind: KindUnavailable, RetryAfter: DependencyRetryAfter, Message: fmt.Sprintf(
		"the gateway cannot reach %s right now; retry in %d seconds", what, Seconds(DependencyRetryAfter))}
	if cause == nil {
		return client
	}
	return &dependencyFailure{client: client, cause: cause}
}

// IsUnavailable reports whether err is (or wraps) a dependency failure made by Unavailable.
func IsUnavailable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindUnavailable
}

// dependencyFailure is a dependency's error carried for the logs behind the client's 503.
type dependencyFailure struct {
	client *Error
	cause  error
}

func (d *dependencyFailure) Error() string { return d.client.Message + " (" + d.cause.Error() + ")" }

// Unwrap exposes the client's error (for errors.As and As) and the cause (for errors.Is).
func (d *dependencyFailure) Unwrap() []error { return []error{d.client, d.cause} }

// Seconds rounds d up to whole seconds, at least 1.
func Seconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// USD formats micro-units as dollars, e.g. "$1.250000".
func USD(micros int64) string {
	sign := ""
	if micros < 0 {
		sign, micros = "-", -micros
	}
	return fmt.Sprintf("%s$%d.%06d", sign, micros/1_000_000, micros%1_000_000)
}

// WithUpstreamWords is the client's error e carrying, for the logs only, what an upstream said
// (which may name the operator's account, the hidden upstream model or other tenants' usage):
// its Error text gives both, and errors.As finds e, which is all a client ever sees.
func WithUpstreamWords(e *Error, said string) error {
	return &upstreamWords{client: e, said: said}
}

type upstreamWords struct {
	client *Error
	said   string
}

func (w *upstreamWords) Error() string {
	return w.client.Message + " (the upstream said: " + w.said + ")"
}

func (w *upstreamWords) Unwrap() error { return w.client }

// MaxQuotedLen bounds, in bytes, what a message quotes from elsewhere (an upstream's refusal).
const MaxQuotedLen = 1000

// Excerpt is s cut to at most n bytes, at a character boundary, marked with an ellipsis when
// cut: text from elsewhere put into a client's message.
func Excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
