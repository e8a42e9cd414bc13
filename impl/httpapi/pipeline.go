package httpapi

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/h1server"
	"github.com/tollgate/tollgate/impl/mcpauth"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// headerRequestID carries the request id; set through the canonical key (X-Request-Id) on
// the hot path, which skips net/http's canonicalisation.
const headerRequestID = "x-request-id"

// Canonical forms of the headers every request sets.
const (
	canonicalRequestID          = "X-Request-Id"
	canonicalAnthropicRequestID = "Request-Id"
	canonicalLimitRequests      = "X-Ratelimit-Limit-Requests"
	canonicalRemainingRequests  = "X-Ratelimit-Remaining-Requests"
	canonicalResetRequests      = "X-Ratelimit-Reset-Requests"
	// The same three on the Anthropic routes, in Anthropic's names.
	canonicalAnthropicLimitRequests     = "Anthropic-Ratelimit-Requests-Limit"
	canonicalAnthropicRemainingRequests = "Anthropic-Ratelimit-Requests-Remaining"
	canonicalAnthropicResetRequests     = "Anthropic-Ratelimit-Requests-Reset"
)

// newRequestID returns "req_" and 24 random hex digits.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// recorder remembers the status written through it. It implements Flush and Unwrap so that
// streaming handlers reach the real writer.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	// upstreamWait is the time the request waited for upstreams (tollgate_added_seconds).
	upstreamWait time.Duration
	// gone is set when the client went away before the answer began (status 499, nothing
	// written): the edge closes the connection without an answer (noteClientGone).
	gone bool
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush sends buffered data to the client.
func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Hijack is passed through for protocols that take over the connection.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

// metricsRoute is the route label of r's metrics ("POST /v1/chat/completions") and the route
// of its trace span ("/v1/chat/completions"). The catch-all pattern "/" serves the Responses
// API's WebSocket handshake, labelled "GET /v1/responses" as its route is, and otherwise only
// refuses (404, 405): those are "unmatched", with no route on the span (trial h10 D7: they were
// all "/", handshakes and stray paths together).
func metricsRoute(r *http.Request) (label, spanRoute string) {
	switch {
	case r.Pattern == "/" && r.URL.Path == responsesPath && isWebSocketUpgrade(r):
		return "GET " + responsesPath, responsesPath
	case r.Pattern == "" || r.Pattern == "/":
		return "unmatched", ""
	}
	return r.Pattern, strings.TrimPrefix(r.Pattern, r.Method+" ")
}

// edge is the outermost layer of every request: request id, logging, metrics, recovery.
func (s *Server) edge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := newRequestID()
		h := w.Header()
		h[canonicalRequestID] = []string{id}
		if familyOf(r.URL.Path) == familyAnthropic {
			h[canonicalAnthropicRequestID] = []string{id}
		}
		rec := &recorder{ResponseWriter: w}
		// With tracing on, the request's SERVER span (tracing.go), continuing the caller's
		// traceparent; its trace goes back in the traceresponse header.
		ctx := r.Context()
		var span trace.Span
		if telemetry.Enabled() {
			ctx, span = telemetry.StartServer(r)
			h[headerTraceResponse] = []string{traceResponse(span.SpanContext())}
		}
		// One copy of the request carries the id and a slot that authentication fills in.
		ctx, _ = auth.WithSlot(ctx)
		r = r.WithContext(context.WithValue(ctx, requestIDKey{}, id))
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.logger(r.Context()).Error("panic serving request", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeError(rec, r, errors.New("panic"))
				}
			}
			route, spanRoute := metricsRoute(r)
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			elapsed := time.Since(start)
			if s.metrics != nil {
				var traceID trace.TraceID
				if span != nil {
					traceID = telemetry.SampledTrace(span)
				}
				s.metrics.ObserveRequest(route, status, elapsed, traceID)
				if status != http.StatusSwitchingProtocols {
					// A socket's life (the Responses WebSocket mode: a Codex session, idle time
					// and every turn's upstream wait in it) is not the gateway's added time
					// (trial h8 D20).
					s.metrics.ObserveAdded(route, elapsed-rec.upstreamWait, traceID)
				}
			}
			if span != nil {
				end := telemetry.ServerEnd{Method: r.Method, Path: r.URL.Path, Route: spanRoute, Status: status, RequestID: id}
				if p, ok := auth.FromContext(r.Context()); ok && span.IsRecording() {
					end.Account, end.Key = p.AccountText(), p.KeyText()
				}
				telemetry.EndServer(span, end)
			}
			if s.log.Enabled(r.Context(), slog.LevelInfo) {
				s.logRequest(r, id, status, start, elapsed, rec.bytes)
			}
			if rec.gone {
				// The client went away before its answer began: recorded above, the connection
				// now ends without a byte written (noteClientGone).
				panic(http.ErrAbortHandler)
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

// logRequest writes the access log line of r.
func (s *Server) logRequest(r *http.Request, id string, status int, start time.Time, elapsed time.Duration, bytes int64) {
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("request_id", id), slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", status), slog.Int64("duration_us", elapsed.Microseconds()), slog.Int64("bytes", bytes))
	if p, ok := auth.FromContext(r.Context()); ok {
		attrs = append(attrs, slog.String("account", p.AccountText()), slog.String("key", p.KeyText()))
	}
	// The record goes to the handler directly: slog.Logger would walk the stack for the
	// caller's position, which the access log does not show, on every request. The
	// duration is whole microseconds: slog's JSON handler writes a float through
	// encoding/json's reflection, which cost more than the rest of the line.
	rec := slog.NewRecord(start.Add(elapsed), slog.LevelInfo, "request", 0)
	rec.AddAttrs(attrs...)
	_ = s.log.Handler().Handle(r.Context(), rec)
}

// maxRefusedHeadField bounds the path and the reason a refused head's log line gives: the
// path is the client's, as long as its head allowed.
const maxRefusedHeadField = 256

// maxRefusedMethod bounds the method a refused head's log line gives: the client's word, which
// a method of the API's never comes near.
const maxRefusedMethod = 32

// RefusedHeads returns what the API server tells of each request head it refuses before any
// route (h1server.Server.RefusedHead: 400 a head it cannot read, a bare CR in a header value
// or both Content-Length and Transfer-Encoding; 431; 501; 505; and the HTTP/2 connection
// preface of a client speaking HTTP/2 with prior knowledge, told as kind
// h1server.RefusedHTTP2, status 505). Such a request never reaches the edge, whose metrics
// and access log would not see it: each is counted in tollgate_http_refused_heads_total by
// status (the HTTP/2 preface, by its kind, under "h2c"; m, unless nil) and written as one line
// of the access log (log, at info as the access log's lines are, message "request head
// refused") with its status, its method and the path of its target (no query; at most 32 and
// 256 bytes; both empty when the request line could not be read), the reason its answer gives
// and the connection's peer address (remote_addr). No header value is logged: a bare CR's
// reason names the header alone. The address is the peer's even behind server.trusted_proxies
// (then the proxy's, whose own log names the client): X-Forwarded-For is a header of the very
// head refused, which the server did not read, or could not, and is not believed.
func RefusedHeads(m *metrics.Metrics, log *slog.Logger) func(h1server.Refusal) {
	return func(refusal h1server.Refusal) {
		status, reason, target := refusal.Status, refusal.Reason, refusal.Target
		switch {
		case m == nil:
		case refusal.Kind == h1server.RefusedHTTP2:
			m.ObserveRefusedHTTP2()
		default:
			m.ObserveRefusedHead(status)
		}
		ctx := context.Background()
		if !log.Enabled(ctx, slog.LevelInfo) {
			return
		}
		path := targetPath(target)
		if path == "" {
			path, _, _ = strings.Cut(target, "?")
		}
		log.LogAttrs(ctx, slog.LevelInfo, "request head refused", slog.Int("status", status),
			slog.String("method", truncateField(refusal.Method, maxRefusedMethod)),
			slog.String("path", truncateField(path, maxRefusedHeadField)),
			slog.String("reason", truncateField(reason, maxRefusedHeadField)),
			slog.String("remote_addr", refusal.RemoteAddr))
	}
}

// truncateField is s cut to limit bytes, with "…" when cut, and valid UTF-8.
func truncateField(s string, limit int) string {
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// logger returns a logger carrying the request's id (built only when something is logged).
func (s *Server) logger(ctx context.Context) *slog.Logger {
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		return s.log.With("request_id", id)
	}
	return s.log
}

// errManyCredentials is the authentication error of a request with more than one
// Authorization header.
var errManyCredentials = errors.New("more than one Authorization header")

// authenticate resolves the bearer key; the principal travels in the request context.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		values := r.Header["Authorization"]
		header := ""
		if len(values) > 0 {
			header = values[0]
		}
		var span trace.Span
		if telemetry.Enabled() && telemetry.Recording(r.Context()) {
			_, span = telemetry.StartInternal(r.Context(), "authenticate")
		}
		var (
			p   auth.Principal
			err error
		)
		if len(values) > 1 {
			// A single credential (RFC 9110 section 11.6.2), which readers pick differently when
			// there are several (the first here, the last elsewhere): ambiguous, refused (trial
			// h16 D6: the first was served and billed).
			err = errManyCredentials
		} else {
			p, err = s.auth.Authenticate(r.Context(), header)
		}
		if span != nil {
			span.SetAttributes(telemetry.AttrAuthOutcome.String(authOutcome(err)))
			if err != nil {
				telemetry.Fail(span, "401", "authentication failed")
			}
			span.End()
		}
		if err != nil {
			var e *apierror.Error
			switch {
			case errors.Is(err, errManyCredentials):
				e = apierror.Unauthenticated("more than one Authorization header: send the key in one")
			case errors.Is(err, auth.ErrMissing) && r.Header.Get("x-api-key") != "":
				e = apierror.Unauthenticated("x-api-key is not accepted: send the key as 'Authorization: Bearer <key>'")
			case errors.Is(err, auth.ErrMissing) && s.oauth != nil && familyOf(r.URL.Path) == familyJSONRPC:
				// The 401's WWW-Authenticate names the OAuth sign-in here (authenticateMCP).
				e = apierror.Unauthenticated("missing API key: send it as 'Authorization: Bearer <key>', or sign in with OAuth")
			case errors.Is(err, auth.ErrMissing):
				e = apierror.Unauthenticated("missing API key: send it as 'Authorization: Bearer <key>'")
			case errors.Is(err, auth.ErrScheme):
				e = apierror.Unauthenticated(schemeRefusal(header))
			case errors.Is(err, auth.ErrMistyped):
				e = apierror.Unauthenticated("invalid API key: it has the form of a tollgate key, but its checksum does not match: a character was changed or mistyped (copy the whole key)")
			case errors.Is(err, auth.ErrMalformed) && strings.HasPrefix(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), mcpauth.AccessTokenPrefix):
				// A connected app's token, sent to the API routes (trial h6: it was called a
				// malformed key).
				e = apierror.Unauthenticated("an OAuth access token ('" + mcpauth.AccessTokenPrefix + "…') is valid only on /api/mcp; the API routes take an API key ('tgk_…')")
			case errors.Is(err, auth.ErrMalformed):
				e = apierror.Unauthenticated(malformedRefusal(header))
			case errors.Is(err, auth.ErrUnknown):
				e = apierror.Unauthenticated("invalid API key: the key is unknown or has been revoked")
			case errors.Is(err, auth.ErrDisabled):
				e = apierror.Unauthenticated("the key is disabled")
			case errors.As(err, new(*auth.ExpiredError)):
				e = apierror.Unauthenticated(err.Error())
			case apierror.IsUnavailable(err):
				s.logger(r.Context()).Warn("authenticating: the database is unavailable", "err", err)
				writeError(w, r, err)
				return
			default:
				s.logger(r.Context()).Error("authenticating", "err", err)
				writeError(w, r, err)
				return
			}
			writeError(w, r, e)
			return
		}
		if slot := auth.SlotFrom(r.Context()); slot != nil {
			slot.Set(p)
		} else {
			r = r.WithContext(auth.WithPrincipal(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}

// limitRate enforces the key's requests-per-minute cap over a rolling 60-second window.
func (s *Server) limitRate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.FromContext(r.Context())
		if !ok || p.RPMLimit <= 0 || s.limiter == nil {
			next.ServeHTTP(w, r)
			return
		}
		d, err := s.limiter.Allow(r.Context(), p.KeyText(), p.RPMLimit)
		if err != nil {
			// Availability over strictness: a failing limiter lets the request through, loudly.
			s.logger(r.Context()).Error("rate limiter failed; letting the request through", "err", err)
			if s.metrics != nil {
				s.metrics.RateLimiterErrors.Inc()
			}
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		if familyOf(r.URL.Path) == familyAnthropic {
			// Anthropic's own family (wire-protocols.md §3.1): the reset is a time, RFC 3339.
			h[canonicalAnthropicLimitRequests] = []string{strconv.Itoa(d.Limit)}
			h[canonicalAnthropicRemainingRequests] = []string{strconv.Itoa(d.Remaining)}
			h[canonicalAnthropicResetRequests] = []string{time.Now().Add(time.Duration(apierror.Seconds(d.ResetAfter)) * time.Second).UTC().Format(time.RFC3339)}
		} else {
			h[canonicalLimitRequests] = []string{strconv.Itoa(d.Limit)}
			h[canonicalRemainingRequests] = []string{strconv.Itoa(d.Remaining)}
			h[canonicalResetRequests] = []string{strconv.Itoa(apierror.Seconds(d.ResetAfter)) + "s"}
		}
		if !d.Allowed {
			if s.metrics != nil {
				s.metrics.RateLimited.Inc()
			}
			writeError(w, r, apierror.RateLimited(d.Limit, d.RetryAfter))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requestIDKey carries the request id in the request context.
type requestIDKey struct{}
