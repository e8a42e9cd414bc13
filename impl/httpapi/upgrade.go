package httpapi

import (
	"encoding/json"
	"net/http"

	"golang.org/x/net/http/httpguts"
)

// The Responses API has a WebSocket mode (GET /v1/responses with Upgrade: websocket, then
// response.create messages on the socket), which the gateway does not serve: its metering,
// rate limits and streaming relay are built around one HTTP request per response.
//
// Codex CLI (the built-in openai provider, and any provider with supports_websockets) opens
// that socket before its first request and falls back to POST /v1/responses for the rest of
// the session at once only when the handshake is refused with 426 Upgrade Required. Any other
// refusal (the 405 the path gives a plain GET, a 401, a 404) counts as a failed stream and is
// retried with backoff: seven handshakes and about six seconds before the first POST.
//
// So an upgrade request on /v1/responses, and only that, is answered 426 in the OpenAI error
// envelope. It is answered before authentication: the answer is the same for every caller, so
// it says nothing about the key, and a 401 here would only cost the caller the retries; a bad
// key is refused by the POST that follows. The Upgrade header RFC 9110 asks of a 426 is left
// out: the protocol to use is the one the request came with (HTTP/1.1, POST), and an Upgrade
// header would read as an invitation to try another upgrade.

// responsesPath is the one path whose upgrade requests are refused this way.
const responsesPath = "/v1/responses"

// websocketUnsupportedMessage tells the caller what to do instead.
const websocketUnsupportedMessage = "The Responses WebSocket mode is not supported by this gateway: " +
	"send each request as POST /v1/responses (with \"stream\": true for server-sent events)."

// isWebSocketUpgrade reports whether r asks to switch the connection to WebSocket (RFC 6455
// section 4.1: a GET with Upgrade: websocket and Connection: Upgrade).
func isWebSocketUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet &&
		httpguts.HeaderValuesContainsToken(r.Header["Upgrade"], "websocket") &&
		httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade")
}

// refuseResponsesUpgrade answers a WebSocket upgrade request on /v1/responses with 426 and
// reports whether it did; every other request is left to the caller.
func refuseResponsesUpgrade(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != responsesPath || !isWebSocketUpgrade(r) {
		return false
	}
	code := "websocket_not_supported"
	h := w.Header()
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUpgradeRequired)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(openAIErrorBody{Error: openAIErrorDetail{
		Message: websocketUnsupportedMessage, Type: "invalid_request_error", Code: &code}})
	return true
}
