package httpapi

import (
	"net/http"

	"golang.org/x/net/http/httpguts"
)

// The Responses API has a WebSocket mode: GET /v1/responses with Upgrade: websocket, then
// response.create messages on the socket. The gateway serves it (responsesws.go) with the same
// authentication, rate limit, admission and metering per response as POST /v1/responses.
//
// Codex CLI (the built-in openai provider, and any provider with supports_websockets) opens
// that socket before its first request and uses it for every turn, sending only the new input
// with previous_response_id. It falls back to POST /v1/responses for the rest of the session at
// once only when the handshake is refused with 426 Upgrade Required; any other refusal (a 401,
// a 429, a 404) counts as a failed stream and is retried with backoff: seven handshakes and
// about six seconds before the first POST. So a bad key costs Codex those retries before it
// reports the 401 the POST then answers; a good key never meets a refusal here. The handshake's
// 401 and 429 come in the OpenAI error envelope, as the POST's do.

// responsesPath is the one path whose upgrade requests are served as the WebSocket mode.
const responsesPath = "/v1/responses"

// isWebSocketUpgrade reports whether r asks to switch the connection to WebSocket (RFC 6455
// section 4.1: a GET with Upgrade: websocket and Connection: Upgrade).
func isWebSocketUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet &&
		httpguts.HeaderValuesContainsToken(r.Header["Upgrade"], "websocket") &&
		httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade")
}

// serveResponsesUpgrade serves a WebSocket upgrade request on /v1/responses (authenticated and
// rate limited as the POST is) and reports whether it did; every other request is left to the
// caller.
func (s *Server) serveResponsesUpgrade(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != responsesPath || !isWebSocketUpgrade(r) {
		return false
	}
	s.authenticate(s.limitRate(http.HandlerFunc(s.serveResponsesSocket))).ServeHTTP(w, r)
	return true
}
