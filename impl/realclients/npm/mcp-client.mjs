// A client on the official MCP TypeScript SDK, run by the impl/realclients tests:
//
//   TOLLGATE_API_KEY=<key> node mcp-client.mjs <gateway>/api/mcp
//
// It connects over Streamable HTTP with the key as a bearer token, lists the tools, calls
// list_storage_datasets, loads the dataset "sales" and queries it, and prints one JSON object
// with what it got. Any error (including an SDK schema check) exits 1 with the message.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = process.argv[2];
const key = process.env.TOLLGATE_API_KEY;
if (!url || !key) {
  console.error("usage: TOLLGATE_API_KEY=<key> node mcp-client.mjs <gateway>/api/mcp");
  process.exit(2);
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "tollgate-realclients", version: "1.0.0" });

try {
  await client.connect(transport);
  const tools = await client.listTools();
  const list = await client.callTool({ name: "list_storage_datasets", arguments: {} });
  const load = await client.callTool({ name: "load_storage_dataset", arguments: { name: "sales" } });
  const query = await client.callTool({
    name: "query_data",
    arguments: { dataset: "sales", sql: "SELECT sum(amount) AS total FROM sales" },
  });
  const out = {
    server: client.getServerVersion(),
    protocolVersion: transport.protocolVersion,
    tools: tools.tools.map((t) => t.name),
    list,
    load,
    query,
  };
  await client.close();
  console.log(JSON.stringify(out));
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exit(1);
}
