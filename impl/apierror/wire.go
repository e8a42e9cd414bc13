package apierror

import "strings"

// The wire names of the kinds in each format's error vocabulary. Both edges use them: the HTTP
// envelopes before the first byte and the in-band stream errors after it, so an error reads the
// same either way.

// OpenAITypeCode is the `type` and `code` of the chat-completions error envelope ("" code: null).
func (k Kind) OpenAITypeCode() (typ, code string) {
	switch k {
	case KindInvalidRequest:
		return "invalid_request_error", ""
	case KindUnauthenticated:
		return "authentication_error", "invalid_api_key"
	case KindInsufficientCredit:
		return "insufficient_quota", "insufficient_quota"
	case KindForbidden:
		return "permission_error", "forbidden"
	case KindNotFound:
		return "invalid_request_error", "not_found"
	case KindModelNotFound:
		return "invalid_request_error", "model_not_found"
	case KindRateLimited:
		return "rate_limit_error", "rate_limit_exceeded"
	case KindNotImplemented:
		return "not_implemented", "not_implemented"
	case KindUpstream:
		return "upstream_error", "upstream_error"
	case KindOverloaded:
		return "overloaded_error", "overloaded"
	case KindGatewayTimeout:
		// OpenAI has no 504 body of its own: the type is the Messages API's word for it
		// (timeout_error), as overloaded_error is for 529.
		return "timeout_error", "upstream_timeout"
	case KindMethodNotAllowed:
		return "invalid_request_error", "method_not_allowed"
	case KindRequestTooLarge:
		return "invalid_request_error", "request_too_large"
	case KindConflict:
		return "conflict", "conflict"
	case KindUnavailable:
		// Not server_error, which is tollgate's own fault (500): a dependency is down, and the
		// request can be retried as it is.
		return "service_unavailable_error", "dependency_unavailable"
	default:
		return "server_error", ""
	}
}

// OpenAITypeCode is the `type` and `code` of e in the chat-completions error envelope: its
// kind's, with e.Code in place of the kind's code when set ("" code: null).
func (e *Error) OpenAITypeCode() (typ, code string) {
	typ, code = e.Kind.OpenAITypeCode()
	if e.Code != "" {
		code = e.Code
	}
	return typ, code
}

// AnthropicType is the `error.type` of the Messages error envelope.
func (k Kind) AnthropicType() string {
	switch k {
	case KindInvalidRequest, KindMethodNotAllowed:
		return "invalid_request_error"
	case KindUnauthenticated:
		return "authentication_error"
	case KindInsufficientCredit:
		return "billing_error"
	case KindForbidden:
		return "permission_error"
	case KindNotFound, KindModelNotFound:
		return "not_found_error"
	case KindConflict:
		return "invalid_request_error"
	case KindRateLimited:
		return "rate_limit_error"
	case KindOverloaded:
		return "overloaded_error"
	case KindGatewayTimeout:
		return "timeout_error"
	case KindRequestTooLarge:
		return "request_too_large"
	default:
		// KindUnavailable too: the Messages API has no 503 type of its own (overloaded_error is
		// its 529) and answers api_error for its other server-side failures; clients decide to
		// retry on the status.
		return "api_error"
	}
}

// KindOfType classifies an error type (or code) of any of the formats' vocabularies, and
// tollgate's own, as one kind; unknown types are upstream failures.
func KindOfType(t string) Kind {
	switch strings.ToLower(t) {
	case "invalid_request_error", "invalid_request", "invalid_prompt", "invalid_value",
		"context_length_exceeded", "request_too_large", "badrequesterror", "400", "413":
		return KindInvalidRequest
	case "authentication_error", "invalid_api_key":
		return KindUnauthenticated
	case "billing_error", "insufficient_quota":
		return KindInsufficientCredit
	case "permission_error":
		return KindForbidden
	case "not_found_error", "notfounderror":
		return KindNotFound
	case "model_not_found":
		return KindModelNotFound
	case "rate_limit_error", "rate_limit_exceeded", "too_many_requests", "tokens", "requests", "429":
		return KindRateLimited
	case "overloaded_error", "overloaded", "server_is_overloaded", "slow_down", "503", "529",
		// An upstream (another tollgate, say) whose own dependency is down cannot take the
		// request now: for this gateway it is overloaded.
		"service_unavailable_error", "dependency_unavailable":
		return KindOverloaded
	case "server_error", "api_error", "internal_error", "internalservererror", "500":
		return KindInternal
	case "timeout_error", "upstream_timeout", "504":
		return KindGatewayTimeout
	default:
		return KindUpstream
	}
}
