package streamconv

import (
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

// errorKind classifies an error type of any vocabulary as one of tollgate's kinds.
func errorKind(t string) apierror.Kind { return apierror.KindOfType(t) }

// openAIErrorTypeCode is the type and code of a chat in-band error envelope of a kind, the same
// as the edge's envelope.
func openAIErrorTypeCode(k apierror.Kind) (typ, code string) { return k.OpenAITypeCode() }

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

// anthropicErrorType maps an error type of any vocabulary to a Messages error type: a Messages
// type as it is, any other through its kind, the same as the edge's envelope.
func anthropicErrorType(t string) string {
	if anthropicErrorTypes[t] {
		return t
	}
	return errorKind(t).AnthropicType()
}
