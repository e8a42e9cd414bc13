// Package realclients owns the tests that drive real, unmodified clients against a gateway on
// the upstream simulator: Claude Code (one turn, and once with the gateway's MCP endpoint
// configured and a tool called through it), the Codex CLI (a custom Responses provider, once
// with the MCP endpoint as well, and its built-in provider pointed at the gateway), the MCP
// TypeScript SDK client (npm/mcp-client.mjs), the MCP Inspector CLI, and the official OpenAI
// and Anthropic TypeScript SDKs (npm/openai-sdk.mjs: chat completions and Responses, streamed
// and not, structured output, tool round trips, models; npm/anthropic-sdk.mjs: Messages
// streamed and not, a clamped max_tokens, a tool round trip, count_tokens, models; both with
// the key as a bearer token only), Vercel's AI SDK (npm/ai-sdk.mjs: generateText and
// streamText with the OpenAI provider on Responses and on .chat(), the OpenAI-compatible
// provider and the Anthropic provider with its authToken, a tool round trip and Output.object)
// and LangChain.js (npm/langchain.mjs: ChatOpenAI's invoke, stream, bindTools round trip and
// withStructuredOutput, on Responses too, and ChatAnthropic's invoke and stream through a
// createClient that sends the key as a bearer token); each call's usage as these two report it
// is checked against the gateway's usage record of the request. TestCompaction drives each coding client's own compaction
// of its context (Claude Code's /compact, Codex's automatic compaction on its custom provider
// and, remotely over the Responses WebSocket, on its built-in one, opencode's) and checks that
// the client goes on and that every call is billed as its answer reported. The clients, and the Node.js 22 the Node-based ones run on,
// are npm packages pinned in npm/package.json and npm/package-lock.json; `make test` installs
// them with `npm ci` (no install scripts: the tests run the platform binaries npm unpacks), and
// nothing is downloaded while the tests run.
//
// Every client runs isolated: an explicit environment (the equivalent of env -i), a throwaway
// HOME, standard input from /dev/null, a timeout, its update checks, telemetry and other
// background traffic switched off, and its proxy variables pointing at a recording proxy. That
// recorder is both the client's reverse proxy to the gateway, writing every request and
// response (streamed bodies included) to a transcript that a failing test prints, and its only
// way out: any other destination, asked for as a forward proxy or with CONNECT, is refused and
// fails the test. TOLLGATE_REALCLIENTS_OUT=<dir> keeps the transcripts of a run. The frames of
// an upgraded connection (Codex's Responses WebSocket) are kept with their times too, so that
// TestCodexSocketAgainstHTTP can measure what Codex sends per turn on the socket and over HTTP
// (docs/speed.md).
//
// The package has no code outside its tests. Under CI=true a missing client fails the tests
// instead of skipping them.
package realclients
