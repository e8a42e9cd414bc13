// A client on the official MCP TypeScript SDK that signs in with OAuth, run by the
// impl/realclients test TestMCPOAuthSignIn:
//
//   node mcp-oauth.mjs <gateway>/api/mcp
//
// It is given no key. It connects with an authProvider (the SDK's OAuthClientProvider, kept
// in memory), so the SDK meets the gateway's 401, discovers the protected-resource and
// authorization-server metadata, registers itself (RFC 7591) with a loopback redirect URI it
// listens on, and hands the authorization URL to redirectToAuthorization: the script prints it
// for the test, whose browser approves the consent page. The browser's redirect reaches the
// loopback callback; the script calls finishAuth(code), reconnects and calls
// list_storage_datasets. Then, each time the test writes a line "call" on standard input, it
// calls the tool again and prints the outcome.
//
// Output: one JSON object per line, with "event": "authorize" {url}, "callback" {code},
// "called" {result, client_id, access_token}, "refused" {error}. Errors exit 1.
import { createServer } from "node:http";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const url = process.argv[2];
if (!url) {
  console.error("usage: node mcp-oauth.mjs <gateway>/api/mcp");
  process.exit(2);
}
const emit = (event, fields) => console.log(JSON.stringify({ event, ...fields }));

// The loopback callback (RFC 8252): the browser brings the code here.
let gotCode;
const codeArrived = new Promise((resolve) => (gotCode = resolve));
const callback = createServer((req, res) => {
  const u = new URL(req.url, "http://127.0.0.1");
  if (u.pathname !== "/callback") {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { "content-type": "text/plain" }).end("Signed in: you may close this window.\n");
  gotCode({ code: u.searchParams.get("code"), error: u.searchParams.get("error") });
});
await new Promise((resolve) => callback.listen(0, "127.0.0.1", resolve));
const redirectUrl = `http://127.0.0.1:${callback.address().port}/callback`;

// The OAuthClientProvider: everything in memory, as a CLI would keep it in a file.
const saved = {};
const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return {
      client_name: "tollgate realclients (MCP SDK)",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  state: () => "realclients-state",
  clientInformation: () => saved.client,
  saveClientInformation: (c) => void (saved.client = c),
  tokens: () => saved.tokens,
  saveTokens: (t) => void (saved.tokens = t),
  // A refused refresh token (the grant was revoked) is forgotten, and the SDK asks for a new
  // sign-in (redirectToAuthorization), as a CLI would.
  invalidateCredentials: (scope) => {
    if (scope === "all" || scope === "tokens") delete saved.tokens;
    if (scope === "all") delete saved.client;
    if (scope === "all" || scope === "verifier") delete saved.verifier;
  },
  redirectToAuthorization: (u) => emit("authorize", { url: u.toString() }),
  saveCodeVerifier: (v) => void (saved.verifier = v),
  codeVerifier: () => saved.verifier,
  saveDiscoveryState: (s) => void (saved.discovery = s),
  discoveryState: () => saved.discovery,
};

const connect = async () => {
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  const client = new Client({ name: "tollgate-realclients-oauth", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
};

try {
  // The first connection meets the 401 and ends in redirectToAuthorization.
  const first = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  try {
    await new Client({ name: "tollgate-realclients-oauth", version: "1.0.0" }).connect(first);
    throw new Error("the gateway let the client in without signing in");
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  const { code, error } = await codeArrived;
  emit("callback", { code, error });
  if (!code) throw new Error(`the authorization ended without a code: ${error}`);
  await first.finishAuth(code);

  let { client } = await connect();
  const result = await client.callTool({ name: "list_storage_datasets", arguments: {} });
  emit("called", { result, client_id: saved.client?.client_id, access_token: saved.tokens?.access_token });

  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() !== "call") continue;
    try {
      const again = await client.callTool({ name: "list_storage_datasets", arguments: {} });
      emit("called", { result: again });
    } catch (err) {
      emit("refused", { error: String(err?.message ?? err), unauthorized: err instanceof UnauthorizedError });
    }
  }
  await client.close().catch(() => {});
  callback.close();
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exit(1);
}
