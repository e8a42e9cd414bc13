package streamconv

import (
	"strings"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// TODO(lead): impl/convert/stopreason.go holds the converters' stop-reason mappings per format;
// it did not exist when this package was written. Merge the unexported mappings below into it
// (they are meant to agree: the wire values listed in wire-protocols.md §1.4, §2.2 and §3.3).

// chatStop maps a chat finish_reason to a stop reason. Unknown values (OpenRouter's "error",
// engine-specific ones) count as a natural end.
func chatStop(s string) llm.StopReason {
	switch s {
	case "length":
		return llm.StopLength
	case "tool_calls", "function_call":
		return llm.StopToolCalls
	case "content_filter":
		return llm.StopContentFilter
	default:
		return llm.StopEnd
	}
}

// chatFinishReason maps a stop reason to a chat finish_reason; a strict client accepts only
// stop, length, tool_calls, content_filter (and the deprecated function_call).
func chatFinishReason(s llm.StopReason) string {
	switch s {
	case llm.StopLength:
		return "length"
	case llm.StopToolCalls:
		return "tool_calls"
	case llm.StopContentFilter:
		return "content_filter"
	default:
		return "stop"
	}
}

// messagesStop maps an Anthropic stop_reason to a stop reason.
func messagesStop(s string) llm.StopReason {
	switch s {
	case "max_tokens", "model_context_window_exceeded":
		return llm.StopLength
	case "tool_use":
		return llm.StopToolCalls
	case "stop_sequence":
		return llm.StopSequence
	case "refusal":
		return llm.StopContentFilter
	default: // end_turn, pause_turn, and whatever comes next
		return llm.StopEnd
	}
}

// messagesStopReason maps a stop reason to an Anthropic stop_reason.
func messagesStopReason(s llm.StopReason) string {
	switch s {
	case llm.StopLength:
		return "max_tokens"
	case llm.StopToolCalls:
		return "tool_use"
	case llm.StopSequence:
		return "stop_sequence"
	case llm.StopContentFilter:
		return "refusal"
	default:
		return "end_turn"
	}
}

// responsesIncompleteStop maps a Responses incomplete_details.reason to a stop reason.
func responsesIncompleteStop(reason string) llm.StopReason {
	if reason == "content_filter" {
		return llm.StopContentFilter
	}
	return llm.StopLength
}

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
