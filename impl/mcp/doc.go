// Package mcp serves the gateway's MCP endpoint (POST /api/mcp): a stateless Model Context
// Protocol server over streamable HTTP that answers one JSON-RPC 2.0 message per POST with
// application/json, and exposes the tenant tool profile.
//
// # Layers
//
// [NewHandler] returns the http.Handler. It is mounted behind the gateway's authentication and
// rate-limit middlewares, so every request it sees carries the verified caller
// ([auth.FromContext]); a request that does not still gets the JSON-RPC error -32001
// `unauthenticated: no verified caller: send an API key as 'Authorization: Bearer <key>'` with
// HTTP 401. The gateway's edge refuses such requests itself, in the same shape, with its own
// reason after the prefix ([Unauthenticated]).
//
// The HTTP side of the transport is this package's own, small JSON-RPC front: it reads the one
// message of the POST, answers what belongs to the transport (parse errors, batches, GET,
// notifications, unsupported protocol-version headers, methods outside the profile) and hands
// every other request to an MCP server of the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), which runs the protocol: initialize with version
// negotiation, ping, tools/list and tools/call. Each request gets a fresh SDK session over a
// one-message in-memory transport, so no state lives between requests and any gateway process
// behind a load balancer answers any request. No Mcp-Session-Id is issued; one sent by a client is
// ignored. The SDK's own HTTP handler (mcp.StreamableHTTPHandler) is not used because it answers
// several cases differently from what the gateway promises; see [NewHandler].
//
// # Versions
//
// The spec's version is 2024-11-05; 2025-03-26, 2025-06-18 and 2025-11-25 clients are served too.
// initialize echoes a supported requested version and answers the newest one otherwise. The
// 2026-07-28 ("modern") protocol is not spoken: server/discover is answered -32601 so that dual-era
// clients fall back to initialize, and no error code in -32020..-32022 is ever emitted.
//
// # Tools
//
// A [tool.Tool] has a name, a description, an input JSON Schema, annotations and a [tool.Handler]. Input
// schemas come from the components of the embedded OpenAPI document ([ComponentSchema]), so the
// contract has one source. Arguments are validated against the schema before the handler runs;
// following the 2025-11-25 guidance, a validation failure is a tool result with isError true (so a
// model can correct itself), while a tools/call whose params are not even shaped like one (no
// tool name, arguments that are not an object) and an unknown tool are JSON-RPC -32602 errors.
// Tool failures are always results with isError true and text "Error: ...", with HTTP 200.
//
// [DatasetTools] builds the five read-only dataset tools over a [DatasetService]; [AgentTools]
// the six agent tools over an [AgentService]: four read-only views of the caller's sessions,
// tickets and approvals, and agent_spawn and agent_prompt, which only create an approval that a
// person resolves elsewhere (no tool resolves one). [CreditTools] builds get_credits over a
// [CreditService]: what GET /v1/credits answers the caller, its balance and its own key's
// allowance, as JSON.
package mcp
