// A client on the official OpenAI TypeScript SDK (npm openai), run by the impl/realclients tests:
//
//   TOLLGATE_API_KEY=<key> node openai-sdk.mjs <gateway>/v1
//
// With the gateway as the SDK's base URL and the key as its API key (sent as
// Authorization: Bearer), it makes a chat completion, streamed and not, on service-flint-base;
// a Responses call, streamed and not, on service-flint; structured output parsed by the SDK
// from a zod schema, on chat and on Responses; a function-tool round trip on each (a forced
// call, then the tool result sent back for a text answer); and lists the models. It prints
// one JSON object with what it got. Any error (an HTTP error the SDK raises, a zod validation
// failure) exits 1 with the message.
import OpenAI from "openai";
import { zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
// zod is not a dependency of ours: it is the one the MCP SDK depends on (a peer of openai's
// zod helpers), pinned by package-lock.json.
import { z } from "zod";

const baseURL = process.argv[2];
const apiKey = process.env.TOLLGATE_API_KEY;
if (!baseURL || !apiKey) {
  console.error("usage: TOLLGATE_API_KEY=<key> node openai-sdk.mjs <gateway>/v1");
  process.exit(2);
}

const client = new OpenAI({ baseURL, apiKey, timeout: 120_000 });
const chatModel = "service-flint-base";
const responsesModel = "service-flint";

// The structured object the model is asked for, one field of each JSON type.
const City = z.object({
  name: z.string(),
  population: z.number().int(),
  coastal: z.boolean(),
  districts: z.array(z.string()),
});

// The function tool of the round trip.
const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The current weather in a city.",
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
      additionalProperties: false,
    },
    strict: true,
  },
};

try {
  const out = {};

  // (a) A chat completion, not streamed.
  const chat = await client.chat.completions.create({
    model: chatModel,
    messages: [
      { role: "system", content: "You are terse." },
      { role: "user", content: "Say hi" },
    ],
  });
  out.chat = {
    id: chat.id,
    model: chat.model,
    requestId: chat._request_id,
    text: chat.choices[0]?.message?.content,
    finishReason: chat.choices[0]?.finish_reason,
    usage: chat.usage,
  };

  // (b) The same, streamed, with the usage chunk asked for.
  const chunks = await client.chat.completions.create({
    model: chatModel,
    messages: [{ role: "user", content: "Say hello in a stream" }],
    stream: true,
    stream_options: { include_usage: true },
  });
  const chatStream = { id: "", text: "", chunks: 0, finishReason: null, usage: null };
  for await (const chunk of chunks) {
    chatStream.chunks++;
    chatStream.id ||= chunk.id;
    for (const choice of chunk.choices) {
      chatStream.text += choice.delta?.content ?? "";
      chatStream.finishReason = choice.finish_reason ?? chatStream.finishReason;
    }
    if (chunk.usage) chatStream.usage = chunk.usage;
  }
  out.chatStream = chatStream;

  // (c) A Responses call, not streamed.
  const response = await client.responses.create({
    model: responsesModel,
    instructions: "You are terse.",
    input: "Say hi",
  });
  out.response = {
    id: response.id,
    model: response.model,
    requestId: response._request_id,
    status: response.status,
    text: response.output_text,
    usage: response.usage,
  };

  // (d) The same, streamed through the SDK's Responses stream helper.
  const stream = client.responses.stream({ model: responsesModel, input: "Say hello in a stream" });
  const responseStream = { deltas: "", events: 0, eventTypes: [] };
  for await (const event of stream) {
    responseStream.events++;
    if (!responseStream.eventTypes.includes(event.type)) responseStream.eventTypes.push(event.type);
    if (event.type === "response.output_text.delta") responseStream.deltas += event.delta;
  }
  const final = await stream.finalResponse();
  Object.assign(responseStream, { id: final.id, status: final.status, text: final.output_text, usage: final.usage });
  out.responseStream = responseStream;

  // (e) Structured output: the SDK sends the zod schema as a strict json_schema
  // response_format and parses (and validates) the answer.
  const structured = await client.chat.completions.parse({
    model: chatModel,
    messages: [{ role: "user", content: "Describe a city." }],
    response_format: zodResponseFormat(City, "city"),
  });
  const sm = structured.choices[0]?.message;
  out.structured = {
    id: structured.id,
    finishReason: structured.choices[0]?.finish_reason,
    refusal: sm?.refusal ?? null,
    content: sm?.content,
    parsed: sm?.parsed,
    usage: structured.usage,
  };

  // (f) A function-tool round trip: the call forced by tool_choice, then its result sent back.
  const messages = [{ role: "user", content: "What is the weather in Lisbon?" }];
  const first = await client.chat.completions.create({
    model: chatModel,
    messages,
    tools: [weatherTool],
    tool_choice: { type: "function", function: { name: "get_weather" } },
  });
  const asked = first.choices[0]?.message;
  const call = asked?.tool_calls?.[0];
  if (!call) throw new Error(`the forced tool call did not come: ${JSON.stringify(first)}`);
  const args = JSON.parse(call.function.arguments);
  messages.push(asked, {
    role: "tool",
    tool_call_id: call.id,
    content: JSON.stringify({ city: args.city, forecast: "sunny", celsius: 21 }),
  });
  const second = await client.chat.completions.create({ model: chatModel, messages, tools: [weatherTool] });
  out.tools = {
    finishReason: first.choices[0]?.finish_reason,
    call: { id: call.id, type: call.type, name: call.function.name, arguments: args },
    finalFinishReason: second.choices[0]?.finish_reason,
    finalText: second.choices[0]?.message?.content,
    finalToolCalls: second.choices[0]?.message?.tool_calls?.length ?? 0,
    usage: [first.usage, second.usage],
  };

  // (e') The same on Responses: text.format from the zod schema, read back as output_parsed.
  const parsedResponse = await client.responses.parse({
    model: responsesModel,
    input: "Describe a city.",
    text: { format: zodTextFormat(City, "city") },
  });
  out.structuredResponse = {
    id: parsedResponse.id,
    status: parsedResponse.status,
    text: parsedResponse.output_text,
    parsed: parsedResponse.output_parsed,
    usage: parsedResponse.usage,
  };

  // (f') A function-tool round trip on Responses: the forced function_call item, then the
  // conversation sent back whole (the gateway answers store: false) with its output.
  const { name, description, parameters, strict } = weatherTool.function;
  const rTool = { type: "function", name, description, parameters, strict };
  const r1 = await client.responses.create({
    model: responsesModel,
    input: "What is the weather in Lisbon?",
    tools: [rTool],
    tool_choice: { type: "function", name: "get_weather" },
  });
  const fc = r1.output.find((o) => o.type === "function_call");
  if (!fc) throw new Error(`the forced Responses tool call did not come: ${JSON.stringify(r1)}`);
  const r2 = await client.responses.create({
    model: responsesModel,
    input: [
      { role: "user", content: "What is the weather in Lisbon?" },
      fc,
      { type: "function_call_output", call_id: fc.call_id, output: JSON.stringify({ forecast: "sunny" }) },
    ],
    tools: [rTool],
  });
  out.responseTools = {
    call: { callId: fc.call_id, name: fc.name, arguments: JSON.parse(fc.arguments) },
    finalStatus: r2.status,
    finalText: r2.output_text,
    finalCalls: r2.output.filter((o) => o.type === "function_call").length,
  };

  // (g) The models the key may use.
  out.models = [];
  for await (const model of client.models.list()) out.models.push(model.id);

  console.log(JSON.stringify(out));
} catch (err) {
  const status = err?.status ? ` (HTTP ${err.status})` : "";
  console.error((err?.stack ?? String(err)) + status);
  process.exit(1);
}
