// A client on the official Anthropic TypeScript SDK (npm @anthropic-ai/sdk), run by the
// impl/realclients tests:
//
//   TOLLGATE_API_KEY=<key> node anthropic-sdk.mjs <gateway>
//
// With the gateway as the SDK's base URL (without /v1: the SDK adds it) and the key as its
// auth token (Authorization: Bearer; apiKey null, so ANTHROPIC_API_KEY is not read), it makes
// a Messages call on service-sonnet with max_tokens 32000, streamed (messages.stream and
// finalMessage) and not; one with max_tokens 100000, above the model's limit, reading the
// gateway's x-tollgate-clamped-fields header with withResponse(); a forced tool call and its
// result sent back; counts a request's tokens; and lists the models. It prints one JSON
// object with what it got. Any error exits 1 with the message.
import Anthropic from "@anthropic-ai/sdk";

const baseURL = process.argv[2];
const authToken = process.env.TOLLGATE_API_KEY;
if (!baseURL || !authToken) {
  console.error("usage: TOLLGATE_API_KEY=<key> node anthropic-sdk.mjs <gateway>");
  process.exit(2);
}

// An explicit timeout: without one the SDK refuses a non-streamed request whose max_tokens
// could take longer than ten minutes (32000 does), as it would for api.anthropic.com.
const client = new Anthropic({ baseURL, authToken, apiKey: null, timeout: 120_000 });
const model = "service-sonnet";
const maxTokens = 32000; // a coding agent's usual bound, within service-sonnet's 64000

const text = (msg) => msg.content.filter((b) => b.type === "text").map((b) => b.text).join("");
const summary = (msg) => ({
  id: msg.id,
  model: msg.model,
  stopReason: msg.stop_reason,
  text: text(msg),
  usage: msg.usage,
});

const weatherTool = {
  name: "get_weather",
  description: "The current weather in a city.",
  input_schema: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
  },
};

try {
  const out = {};

  // A Messages call, not streamed.
  const message = await client.messages.create({
    model,
    max_tokens: maxTokens,
    system: "You are terse.",
    messages: [{ role: "user", content: "Say hi" }],
  });
  out.message = { ...summary(message), requestId: message._request_id };

  // The same, streamed: the SDK's MessageStream, its text events and its final message.
  const stream = client.messages.stream({
    model,
    max_tokens: maxTokens,
    messages: [{ role: "user", content: "Say hello in a stream" }],
  });
  let deltas = "";
  stream.on("text", (delta) => {
    deltas += delta;
  });
  const streamed = await stream.finalMessage();
  out.stream = { ...summary(streamed), deltas };

  // A bound above the model's limit: the gateway lowers it and says so in a header.
  const { data: clampedMsg, response } = await client.messages
    .create({ model, max_tokens: 100000, messages: [{ role: "user", content: "Say hi again" }] })
    .withResponse();
  out.clamped = {
    ...summary(clampedMsg),
    header: response.headers.get("x-tollgate-clamped-fields"),
    expert: response.headers.get("x-tollgate-expert"),
  };

  // A forced tool call, then its result sent back for a text answer.
  const messages = [{ role: "user", content: "What is the weather in Lisbon?" }];
  const first = await client.messages.create({
    model,
    max_tokens: maxTokens,
    messages,
    tools: [weatherTool],
    tool_choice: { type: "tool", name: "get_weather" },
  });
  const use = first.content.find((b) => b.type === "tool_use");
  if (!use) throw new Error(`the forced tool call did not come: ${JSON.stringify(first)}`);
  messages.push(
    { role: "assistant", content: first.content },
    {
      role: "user",
      content: [{ type: "tool_result", tool_use_id: use.id, content: JSON.stringify({ forecast: "sunny", celsius: 21 }) }],
    },
  );
  const second = await client.messages.create({ model, max_tokens: maxTokens, messages, tools: [weatherTool] });
  out.tool = {
    stopReason: first.stop_reason,
    call: { id: use.id, name: use.name, input: use.input },
    final: summary(second),
    finalToolUses: second.content.filter((b) => b.type === "tool_use").length,
  };

  // The input tokens of a request, counted by the gateway.
  out.countTokens = await client.messages.countTokens({
    model,
    system: "You are terse.",
    messages: [{ role: "user", content: "How many tokens is this?" }],
    tools: [weatherTool],
  });

  // The models the key may use.
  out.models = [];
  for await (const m of client.models.list()) out.models.push(m.id);

  console.log(JSON.stringify(out));
} catch (err) {
  const status = err?.status ? ` (HTTP ${err.status})` : "";
  console.error((err?.stack ?? String(err)) + status);
  process.exit(1);
}
