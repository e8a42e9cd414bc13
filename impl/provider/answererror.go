package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/impl/apierror"
)

// An upstream may answer 2xx with an error in place of its answer: OpenRouter and other
// OpenAI-compatible servers and proxies send {"error":{...}} with a 200 (OpenRouter's code is
// the HTTP status the error stands for), vLLM {"object":"error",...}, an Anthropic-compatible
// server Anthropic's {"type":"error","error":{...}}, and a Responses upstream a response object
// with status "failed" and its error. Whether the request was streamed or not, such an error is
// read for its kind (its code, then its type) and treated as the HTTP status that kind stands for
// (errorStatus): the request's fault (invalid_request_error, context_length_exceeded, a 400) is
// a refusal of the request, whose words the client gets in a 400 as for a 400 status; the
// upstream's (a rate limit, an overload, a server error, a timeout, a kind not known) is a failed
// try, counted against the expert's health as that status would be (an account's own key's rate
// limit or refusal is the account's, as for a 429 or a 401) and, since a 2xx carries no advice on
// retrying and the same upstream would most likely answer the same, not asked again of the same
// upstream: the next expert is called, and when none is left the client gets a 502 in the
// gateway's words (inAnswerError).

// AnswerError is the failure, as a failed call's (ErrorInAnswer reports it; Retryable,
// AccountKeyRefused and ErrorType read it), of body, a complete 2xx answer to a call made with
// cred (nil: the operator's key), when body is an error in place of the answer; nil otherwise.
// The upstream's words are cleared of the key the call was sent with, as a failed status's are.
func (u *Upstream) AnswerError(status int, body []byte, cred *Credential) error {
	f := u.answerFailure(status, body, cred, false)
	if f == nil {
		return nil
	}
	return u.describe(f)
}

// answerFailure is the failed try of an answer with status whose body (raw, read already) is an
// error in place of the answer, or nil when it is not one; streamed says that a stream was
// asked for.
func (u *Upstream) answerFailure(status int, raw []byte, cred *Credential, streamed bool) *failure {
	standsFor, ok := errorStatus(raw)
	if !ok {
		return nil
	}
	return &failure{status: status, standsFor: standsFor, streamed: streamed,
		detail: u.wordsIn(raw, cred), provider: u.Name, accountKey: cred != nil}
}

// ErrorInAnswer reports whether err, a failed call's or AnswerError's, is an upstream's error
// answered with a 2xx status in place of the answer.
func ErrorInAnswer(err error) bool {
	var f *upstreamFailure
	return errors.As(err, &f) && f.standsFor != 0
}

// JudgedStatus is the HTTP status by which err, a failed call's, is judged: the status the
// upstream answered, or, for an error it answered with a 2xx status in place of the answer
// (ErrorInAnswer), the status that error stands for; 0 when it answered none.
func JudgedStatus(err error) int {
	var f *upstreamFailure
	switch {
	case !errors.As(err, &f):
		return 0
	case f.standsFor != 0:
		return f.standsFor
	}
	return f.status
}

// errorStatus reads raw, a 2xx answer's body, as an error in place of the answer and returns the
// HTTP status the error's kind stands for: a numeric code of 400 to 599 (OpenRouter's, vLLM's),
// else the kind its code or its type names (kindStatus), else 500 (an error of a kind not known
// is the upstream's failure). ok is false when raw is not such an error: not a JSON object, or
// one whose "error" member is absent, null or neither an object nor a string (and not vLLM's
// {"object":"error"}).
func errorStatus(raw []byte) (status int, ok bool) {
	var env struct {
		Object json.RawMessage `json:"object"`
		Type   json.RawMessage `json:"type"`
		Code   json.RawMessage `json:"code"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &env) != nil {
		return 0, false
	}
	typ, code := env.Type, env.Code
	switch {
	case len(env.Error) > 0 && env.Error[0] == '{':
		var inner struct {
			Type json.RawMessage `json:"type"`
			Code json.RawMessage `json:"code"`
		}
		if json.Unmarshal(env.Error, &inner) != nil {
			return 0, false
		}
		typ, code = inner.Type, inner.Code
	case len(env.Error) > 0 && env.Error[0] == '"':
		typ, code = nil, nil
	case jsonString(env.Object) == "error":
		// vLLM: the error's members at the top level.
	default:
		return 0, false
	}
	if n := statusCode(code); n != 0 {
		return n, true
	}
	for _, kind := range [2]string{jsonString(code), jsonString(typ)} {
		if s := kindStatus(strings.ToLower(kind)); s != 0 {
			return s, true
		}
	}
	return http.StatusInternalServerError, true
}

// statusCode is an error code that is an HTTP error status (400 to 599), as a number or a string
// of digits; 0 otherwise.
func statusCode(raw json.RawMessage) int {
	s := string(raw)
	if t := jsonString(raw); t != "" {
		s = t
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 400 || n > 599 {
		return 0
	}
	return n
}

// kindStatus is the HTTP status an error's code or type (in lower case) stands for, as the
// providers document them (Anthropic's error types, OpenAI's types and codes, the exception
// names of OpenAI-compatible servers); 0 for a kind not known.
func kindStatus(kind string) int {
	switch kind {
	case "":
		return 0
	case "invalid_api_key", "authentication_error", "authenticationerror", "unauthorized":
		return http.StatusUnauthorized
	case "permission_error", "permission_denied", "permissiondeniederror", "forbidden":
		return http.StatusForbidden
	case "not_found_error", "not_found", "notfounderror", "model_not_found":
		return http.StatusNotFound
	case "billing_error", "payment_required":
		return http.StatusPaymentRequired
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error", "rate_limit_exceeded", "ratelimiterror", "insufficient_quota", "too_many_requests":
		return http.StatusTooManyRequests
	case "overloaded_error", "overloaded", "service_unavailable", "serviceunavailableerror":
		return 529
	case "timeout_error", "timeout", "apitimeouterror":
		return http.StatusGatewayTimeout
	case "api_error", "server_error", "internal_error", "internal_server_error", "internalservererror", "apierror":
		return http.StatusInternalServerError
	case "invalid_request_error", "invalid_request", "bad_request", "badrequesterror", "context_length_exceeded",
		"invalid_prompt", "unsupported_parameter", "unsupported_value", "unprocessableentityerror":
		return http.StatusBadRequest
	}
	if strings.HasPrefix(kind, "invalid_") {
		// OpenAI's invalid_image, invalid_value, invalid_base64_image and the like.
		return http.StatusBadRequest
	}
	return 0
}

// refusesRequest reports whether status, answered or stood for, is the upstream's refusal of
// the client's own request, whose words the client is given.
func refusesRequest(status int) bool {
	return status == http.StatusBadRequest || status == http.StatusUnprocessableEntity || status == http.StatusRequestEntityTooLarge
}

// inAnswerError is the client's error for an error an upstream answered in place of its answer
// (f.standsFor): a refusal of the request as a 400 status's, the refusal of an account's own key
// as a 401's, and otherwise a 502 in the gateway's words naming the error's kind (the
// upstream's own words go to the log only, as a status's do).
func inAnswerError(f *failure) *apierror.Error {
	s := f.standsFor
	switch {
	case refusesRequest(s):
		return &apierror.Error{Kind: apierror.KindInvalidRequest, Param: f.detail.param, Code: f.detail.code,
			Message: "the upstream refused the request: " + apierror.Excerpt(f.detail.message, apierror.MaxQuotedLen)}
	case (s == http.StatusUnauthorized || s == http.StatusForbidden) && f.accountKey:
		return &apierror.Error{Kind: apierror.KindUpstream, Code: AccountKeyRefusedCode,
			Message: fmt.Sprintf("the provider %s refused this account's own upstream credential (an error answered with HTTP %d): the operator must set a valid one (tollgate admin provider-key set)", f.provider, f.status)}
	}
	what := "a server error"
	switch {
	case s == http.StatusTooManyRequests:
		what = "a rate limit"
	case s == 529 || s == http.StatusServiceUnavailable:
		what = "an overload"
	case s == http.StatusGatewayTimeout || s == http.StatusRequestTimeout:
		what = "a timeout"
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		what = "a refusal of the gateway's credentials"
	case s == http.StatusNotFound:
		what = "an unknown model"
	case s == http.StatusPaymentRequired:
		what = "a billing error"
	}
	if f.streamed {
		return &apierror.Error{Kind: apierror.KindUpstream, Message: fmt.Sprintf("the upstream answered the streamed request with an error (%s), not an event stream", what)}
	}
	return &apierror.Error{Kind: apierror.KindUpstream, Message: fmt.Sprintf("the upstream answered with an error (%s) in place of the answer", what)}
}
