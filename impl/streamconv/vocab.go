package streamconv

import (
	"strings"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// The stop-reason mappings are the converters' (convert.StopReasonFor, StopReasonFrom,
// ResponsesStopReason, ResponsesIncompleteReason), so that a streamed and a complete answer end
// the same way. This file holds what only streams need: the stop reason a client is told, and
// the mapping of in-band error types between the formats' vocabularies.

// effectiveStop is the stop reason a client is told: the upstream's, or a natural end when it
// gave none; and a call for tools when the model called tools but the upstream said it simply
// ended (some chat backends do), so that clients run their tool loop.
func effectiveStop(s llm.StopReason, calledTools bool) llm.StopReason {
	if s == "" {
		s = llm.StopEnd
	}
	if s == llm.StopEnd && calledTools {
		s = llm.StopToolCalls
	}
	return s
}

// errorKind classifies an error type of any of the formats' vocabularies (and tollgate's own)
// into tollgate's one vocabulary. Unknown types are upstream failures.
func errorKind(t string) apierror.Kind {
	switch strings.ToLower(t) {
	case "invalid_request_error", "invalid_request", "invalid_prompt", "invalid_value",
		"context_length_exceeded", "request_too_large", "badrequesterror", "400", "413":
		return apierror.KindInvalidRequest
	case "authentication_error", "invalid_api_key":
		return apierror.KindUnauthenticated
	case "billing_error", "insufficient_quota":
		return apierror.KindInsufficientCredit
	case "permission_error":
		return apierror.KindForbidden
	case "not_found_error", "notfounderror":
		return apierror.KindNotFound
	case "model_not_found":
		return apierror.KindModelNotFound
	case "rate_limit_error", "rate_limit_exceeded", "too_many_requests", "tokens", "requests", "429":
		return apierror.KindRateLimited
	case "overloaded_error", "overloaded", "server_is_overloaded", "slow_down", "503", "529":
		return apierror.KindOverloaded
	case "server_error", "api_error", "internal_error", "internalservererror", "500":
		return apierror.KindInternal
	default:
		return apierror.KindUpstream
	}
}

// openAIErrorTypeCode is the type and code of a chat in-band error envelope of a kind. It
// agrees with the edge's envelope (httpapi openAITypeCode) so that an error reads the same
// before and after the first byte.
func openAIErrorTypeCode(k apierror.Kind) (typ, code string) {
	switch k {
	case apierror.KindInvalidRequest:
		return "invalid_request_error", ""
	case apierror.KindUnauthenticated:
		return "authentication_error", "invalid_api_key"
	case apierror.KindInsufficientCredit:
		return "insufficient_quota", "insufficient_quota"
	case apierror.KindForbidden:
		return "permission_error", "forbidden"
	case apierror.KindNotFound:
		return "invalid_request_error", "not_found"
	case apierror.KindModelNotFound:
		return "invalid_request_error", "model_not_found"
	case apierror.KindRateLimited:
		return "rate_limit_error", "rate_limit_exceeded"
	case apierror.KindNotImplemented:
		return "not_implemented", "not_implemented"
	case apierror.KindUpstream:
		return "upstream_error", "upstream_error"
	case apierror.KindOverloaded:
		return "overloaded_error", "overloaded"
	default:
		return "server_error", ""
	}
}

// responsesErrorCode is the code of a Responses error event and of response.failed's error;
// the SDKs type it as a string, so it is never null.
func responsesErrorCode(k apierror.Kind) string {
	typ, code := openAIErrorTypeCode(k)
	if code == "" {
		return typ
	}
	return code
}

// anthropicErrorTypes are the Messages error types; one of them is passed to a Messages client
// as it is.
var anthropicErrorTypes = map[string]bool{
	"invalid_request_error": true, "authentication_error": true, "billing_error": true,
	"permission_error": true, "not_found_error": true, "request_too_large": true,
	"rate_limit_error": true, "api_error": true, "timeout_error": true, "overloaded_error": true,
}

// anthropicErrorType maps an error type of any vocabulary to a Messages error type, agreeing
// with the edge's envelope (httpapi anthropicType).
func anthropicErrorType(t string) string {
	if anthropicErrorTypes[t] {
		return t
	}
	switch errorKind(t) {
	case apierror.KindInvalidRequest:
		return "invalid_request_error"
	case apierror.KindUnauthenticated:
		return "authentication_error"
	case apierror.KindInsufficientCredit:
		return "billing_error"
	case apierror.KindForbidden:
		return "permission_error"
	case apierror.KindNotFound, apierror.KindModelNotFound:
		return "not_found_error"
	case apierror.KindRateLimited:
		return "rate_limit_error"
	case apierror.KindOverloaded:
		return "overloaded_error"
	default:
		return "api_error"
	}
}
