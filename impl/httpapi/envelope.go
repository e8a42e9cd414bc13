package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/h1server"
	"github.com/tollgate/tollgate/impl/mcp"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// family is the error envelope a route answers with.
type family int

const (
	familyOpenAI family = iota
	familyAnthropic
	familyJSONRPC
)

// familyOf picks the envelope by path.
func familyOf(path string) family {
	switch {
	case path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/"),
		path == "/v1/v1/messages" || strings.HasPrefix(path, "/v1/v1/messages/"):
		// The second form is an Anthropic SDK given a base URL ending in /v1: its 404 still
		// comes in the envelope that client reads.
		return familyAnthropic
	case path == "/api/mcp":
		return familyJSONRPC
	default:
		return familyOpenAI
	}
}

type openAIErrorBody struct {
	Error openAIErrorDetail `json:"error"`
}

type openAIErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type anthropicErrorBody struct {
	Type      string               `json:"type"`
	Error     anthropicErrorDetail `json:"error"`
	RequestID string               `json:"request_id,omitempty"`
}

type anthropicErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// StatusClientClosedRequest is the status recorded (in the access log and in
// tollgate_http_requests_total) for a request whose client went away before its answer: nginx's
// 499 "client closed request". Nothing is sent, as nginx sends nothing: the connection is
// closed without an answer (a client that only half-closed its side, and still reads, sees it
// end; a 499 status line is no HTTP status it knows).
const StatusClientClosedRequest = 499

// writeError answers err in the envelope of the request's route family. Internal errors are
// logged by the caller; the client sees only the request id. When the client has already
// gone (the request's context ended), nothing is written: the request is recorded as 499 and
// its connection closed (noteClientGone). It reports whether it wrote the answer. On the MCP
// endpoint the JSON-RPC error echoes the id of the request refused, when its body (a small one
// not read yet) holds one (mcp.RefusedID).
func writeError(w http.ResponseWriter, r *http.Request, err error) (written bool) {
	return answerError(w, r, err, true)
}

// answerError is writeError; readID false keeps the body of an MCP request unread (its error's
// id null).
func answerError(w http.ResponseWriter, r *http.Request, err error, readID bool) (written bool) {
	return answerErrorIn(w, r, familyOf(r.URL.Path), err, readID)
}

// answerErrorIn is answerError in the envelope fam, which a path no route serves takes from
// the client that most likely sent it (baseURLHint) rather than from the path.
func answerErrorIn(w http.ResponseWriter, r *http.Request, fam family, err error, readID bool) (written bool) {
	if clientClosed(r) && !errors.As(err, new(clientStillThere)) {
		noteClientGone(w)
		return false
	}
	noteRefusal(r, err)
	var rpcID json.RawMessage
	if fam == familyJSONRPC && readID {
		rpcID = mcp.RefusedID(r)
	}
	writeErrorWithID(w, fam, err, rpcID)
	return true
}

// noteClientGone records, on the edge's recorder under w, that the request's client went away
// before its answer began: the access log and metrics count it as 499, and the edge then ends
// the connection without writing (http.ErrAbortHandler), where the server would otherwise send
// an empty 200 for a handler that wrote nothing. Outside the edge (no recorder under w) it
// writes the bare 499 head, which is at least no success.
func noteClientGone(w http.ResponseWriter) {
	if !markGone(w) {
		w.WriteHeader(StatusClientClosedRequest)
	}
}

// markGone marks the edge's recorder under w (see noteClientGone), reporting whether there is
// one.
func markGone(w http.ResponseWriter) bool {
	for w != nil {
		if rec, ok := w.(*recorder); ok {
			if rec.status == 0 {
				rec.status = StatusClientClosedRequest
				rec.gone = true
			}
			return true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
	return false
}

// noteRefusal says on the request's server span, when it is recorded, why the request was
// refused: the error's type and code (the OpenAI envelope's words, e.g. invalid_request_error
// and context_length_exceeded, insufficient_quota, rate_limit_exceeded) and the field it names.
// HTTP's conventions leave a 4xx server span's status unset, and the trace said nothing of
// the reason that the access log did not (trial h8 D18).
func noteRefusal(r *http.Request, err error) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	e := apierror.As(err)
	typ, code := e.OpenAITypeCode()
	attrs := []attribute.KeyValue{telemetry.AttrErrorType.String(typ)}
	if code != "" {
		attrs = append(attrs, telemetry.AttrErrorCode.String(code))
	}
	if e.Param != "" {
		attrs = append(attrs, telemetry.AttrErrorParam.String(e.Param))
	}
	span.SetAttributes(attrs...)
}

// clientClosed reports whether r's client has gone: the server ends the request's context
// when the client closes the connection (or a read from it fails), so any error answered after
// that is the client's doing, not a fault of the gateway.
func clientClosed(r *http.Request) bool { return r.Context().Err() != nil }

// publicMessage is e's message as a client may read it: an internal error says only which
// request id to quote.
func publicMessage(e *apierror.Error, requestID string) string {
	if e.Kind == apierror.KindInternal {
		return "internal error; quote request id " + requestID + " when reporting it"
	}
	return e.Message
}

// openAIErrorOf is e as the OpenAI error object (the chat-completions envelope's "error"), for
// the request requestID: the one place that builds it for answers, stream error events and
// WebSocket error events alike.
func openAIErrorOf(e *apierror.Error, requestID string) openAIErrorDetail {
	typ, code := e.OpenAITypeCode()
	d := openAIErrorDetail{Message: publicMessage(e, requestID), Type: typ}
	if e.Param != "" {
		d.Param = &e.Param
	}
	if code != "" {
		d.Code = &code
	}
	return d
}

// writeErrorFamily answers err in the given envelope. Retry-After (and retry-after-ms beside
// it) says at most apierror.MaxClientRetryAfter; x-should-retry: false goes with 401, 402, an
// error that cannot be helped by retrying soon (NoRetry) and a longer wait. Every error answer
// says X-Content-Type-Options: nosniff: its message may echo what the request sent (the 404 of
// an unknown path names the path), and a browser sent to a crafted address must not read the
// JSON as a page or a script.
func writeErrorFamily(w http.ResponseWriter, fam family, err error) {
	writeErrorWithID(w, fam, err, nil)
}

// writeErrorWithID is writeErrorFamily, rpcID being the id a JSON-RPC error echoes (nil: null).
func writeErrorWithID(w http.ResponseWriter, fam family, err error, rpcID json.RawMessage) {
	e := apierror.As(err)
	status := e.Kind.Status()
	h := w.Header()
	reqID := h.Get(headerRequestID)
	message := publicMessage(e, reqID)
	retryAfter := e.RetryAfter
	if retryAfter > apierror.MaxClientRetryAfter {
		// An upstream asked for a long wait (Retry-After: 3600 with an hourly quota): SDKs
		// that honour Retry-After without a bound would sleep that long, so they are told not
		// to retry at all, and the header says no more than the bound.
		retryAfter = apierror.MaxClientRetryAfter
	}
	if status == http.StatusUnauthorized || status == http.StatusPaymentRequired || e.NoRetry || e.RetryAfter > apierror.MaxClientRetryAfter {
		h.Set("x-should-retry", "false")
	}
	if status == http.StatusUnauthorized {
		// A caller without a valid key keeps no connection open (trial h5: 20,000 keep-alive
		// connections without a key held every file descriptor).
		h.Set("Connection", "close")
	}
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(apierror.Seconds(retryAfter)))
		h.Set("retry-after-ms", strconv.FormatInt(retryAfter.Milliseconds(), 10))
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	var body any
	switch fam {
	case familyAnthropic:
		body = anthropicErrorBody{Type: "error", Error: anthropicErrorDetail{Type: e.Kind.AnthropicType(), Message: message}, RequestID: reqID}
	case familyJSONRPC:
		code := int64(mcp.CodeInternal)
		switch e.Kind {
		case apierror.KindUnauthenticated:
			// The refusal's own reason after the specified prefix, as the API routes say it.
			code, message = mcp.CodeUnauthenticated, mcp.Unauthenticated(message)
			h.Set("WWW-Authenticate", `Bearer realm="tollgate"`)
		case apierror.KindRateLimited:
			code = mcp.CodeRateLimited
		case apierror.KindUnavailable:
			code = mcp.CodeUnavailable
		}
		mcp.WriteError(w, status, rpcID, code, message)
		return
	default:
		body = openAIErrorBody{Error: openAIErrorOf(e, reqID)}
	}
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(body)
}

// headTooLargeMessage is the message of the 431 answered to a request whose head (request line
// and headers) exceeds the server's limit (HeadErrorBody).
const headTooLargeMessage = "the request head (request line and headers) is larger than the server accepts (1 MiB): send fewer or shorter headers"

// headTooManyFieldsMessage is the message of the 431 that refuses a head of more header fields
// than the server accepts (h1server.MaxHeaderFields).
const headTooManyFieldsMessage = "the request head has more header fields than the server accepts (1024): send fewer headers"

// HeadErrorBody is the body of an answer the API server writes itself to a request it will not
// read on (h1server.Server.ErrorBody): a head it cannot parse (400 with net/http's reason, such
// as a missing Host, or a header value holding a bare CR), both Content-Length and
// Transfer-Encoding (400), a head beyond its limit (431), a transfer coding it does not know
// (501) or another HTTP version (505). It comes in the envelope of the route that target (the
// request line's, empty when the head was not read that far) names, as the route's own errors
// do: the Messages envelope for /v1/messages, a JSON-RPC error (Invalid Request, id null) for
// /api/mcp, and the chat-completions envelope for any other target or none. A path no route
// serves takes the envelope its 404 would (baseURLHint: the Messages one for /messages or
// /anthropic/v1/messages, the client that sent it most likely an Anthropic SDK given another
// base URL), so that a client reads its refused head as it would read that 404. The server
// adds x-should-retry: false (h1server.Server.ErrorBody). Nothing of the request was read, so
// nothing is billed.
func HeadErrorBody(status int, reason, target string) (contentType string, body []byte) {
	message := headTooLargeMessage
	if status == http.StatusRequestHeaderFieldsTooLarge && reason == h1server.TooManyHeaderFields {
		message = headTooManyFieldsMessage
	}
	if status != http.StatusRequestHeaderFieldsTooLarge {
		message = "the request could not be read as HTTP/1.1"
		if reason != "" {
			message += ": " + reason
		}
	}
	var v any
	_, fam := baseURLHint(targetPath(target))
	switch fam {
	case familyAnthropic:
		v = anthropicErrorBody{Type: "error", Error: anthropicErrorDetail{Type: "invalid_request_error", Message: message}}
	case familyJSONRPC:
		return "application/json", mcp.RefusedHeadBody(message)
	default:
		code := headErrorCode(status)
		v = openAIErrorBody{Error: openAIErrorDetail{Message: message, Type: "invalid_request_error", Code: &code}}
	}
	b, _ := json.Marshal(v)
	return "application/json", append(b, '\n')
}

// headErrorCode is the chat-completions envelope's code of a refused head's status.
func headErrorCode(status int) string {
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		return "request_header_fields_too_large"
	case http.StatusNotImplemented:
		return "not_implemented"
	case http.StatusHTTPVersionNotSupported:
		return "http_version_not_supported"
	}
	return "bad_request"
}

// targetPath is the path of a request target as sent (origin or absolute form), as a route
// matches it; empty when target is not one.
func targetPath(target string) string {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return ""
	}
	return u.Path
}
