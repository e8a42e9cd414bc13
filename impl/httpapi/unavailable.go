package httpapi

import (
	"net/http"
	"time"

	"github.com/tollgate/tollgate/impl/apierror"
)

// WriteUnavailable answers r at once with 503 Service Unavailable, Retry-After (whole seconds,
// and retry-after-ms beside it) and message, in the error envelope of r's route, exactly as the
// gateway answers a request that needs its unreachable database: the chat-completions error
// object (type service_unavailable_error, code dependency_unavailable) on /v1/chat/completions,
// /v1/responses, /v1/models, /v1/credits, /v1/agents and any other path; the Messages error
// object (api_error) on /v1/messages and /v1/messages/count_tokens; a JSON-RPC error (-32003)
// on /api/mcp. The answer carries a fresh request id, as every API answer does.
//
// It needs nothing of a Server and reads nothing of the request but its path (not its body),
// so `tollgate serve` answers with it on the API listener before the gateway is assembled.
// When r's client has already gone, nothing is written and written is false: the caller
// records 499 and ends the connection without an answer (http.ErrAbortHandler). A retryAfter
// of 0 or less is apierror.DependencyRetryAfter.
func WriteUnavailable(w http.ResponseWriter, r *http.Request, message string, retryAfter time.Duration) (written bool) {
	if clientClosed(r) {
		return false // nothing to write to: the caller records 499 and ends the connection
	}
	if retryAfter <= 0 {
		retryAfter = apierror.DependencyRetryAfter
	}
	id := newRequestID()
	h := w.Header()
	h[canonicalRequestID] = []string{id}
	if familyOf(r.URL.Path) == familyAnthropic {
		h[canonicalAnthropicRequestID] = []string{id}
	}
	// Not even an MCP request's id is read: the answer comes at once, whatever the body.
	return answerError(w, r, &apierror.Error{Kind: apierror.KindUnavailable, Message: message, RetryAfter: retryAfter}, false)
}
