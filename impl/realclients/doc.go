// Package realclients owns the tests that drive real, unmodified clients against a gateway on
// the upstream simulator: Claude Code (one turn, and once with the gateway's MCP endpoint
// configured), the Codex CLI (custom Responses provider, and once with the MCP endpoint), the
// MCP TypeScript SDK client and the MCP Inspector CLI. The clients are npm packages pinned in
// npm/package.json and npm/package-lock.json; `.ci/run` installs them with `npm ci`, and
// nothing is downloaded while the tests run.
//
// Every client runs isolated: an explicit environment (the equivalent of env -i), a throwaway
// HOME, standard input from /dev/null, a timeout, its update checks and telemetry switched
// off, and its proxy variables pointing at a recording proxy. That recorder is both the
// client's reverse proxy to the gateway, writing every request and response (streamed bodies
// included) to a transcript that a failing test prints, and its only way out: any other
// destination, asked for as a forward proxy or with CONNECT, is refused and fails the test.
//
// The package has no code outside its tests; under CI=true a missing node or npm package fails
// the tests instead of skipping them.
package realclients
