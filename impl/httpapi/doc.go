// Package httpapi is tollgate's HTTP edge. It implements the strict server interface generated
// from openapi/openapi.yaml, and wraps it in the request pipeline: request id, structured
// logging and panic recovery for every request; then, per operation, bearer authentication,
// the per-key requests-per-minute cap and validation against the embedded OpenAPI document.
// It maps the apierror vocabulary to each route family's envelope in one place (envelope.go):
// the chat-completions envelope on chat, Responses, models, credits and agents; the Messages
// envelope on /v1/messages; JSON-RPC errors on /api/mcp.
//
// The inference routes hold no inference logic: they hand the body, the principal and the
// request id to the exchange (impl/exchange) and write what it answers, as JSON or as
// server-sent events (with the heartbeats of a silent stream), adding the X-Tollgate-* headers.
package httpapi
