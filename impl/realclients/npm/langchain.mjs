// A client on LangChain.js (npm @langchain/openai, @langchain/anthropic and @langchain/core),
// run by the impl/realclients tests:
//
//   TOLLGATE_API_KEY=<key> node langchain.mjs <gateway>
//
// The chat models are set up as README's client settings say: ChatOpenAI with the gateway's
// /v1 as configuration.baseURL and the key as its apiKey (sent as Authorization: Bearer);
// ChatAnthropic with the gateway (without /v1) as anthropicApiUrl and, since it always hands
// the Anthropic SDK its apiKey (sent as x-api-key, which the gateway refuses), a createClient
// that builds that client with the key as its authToken (Authorization: Bearer) and no API
// key. With ChatOpenAI on chat completions (service-flint-base) it invokes, streams, makes a
// bindTools round trip (the call forced, then the tool's ToolMessage sent back for a text
// answer) and asks withStructuredOutput for a zod schema; with ChatOpenAI on the Responses API
// (useResponsesApi, service-flint) and with ChatAnthropic (service-sonnet) it invokes and
// streams. It prints one JSON object with what it got: for each call its text and the
// usage_metadata LangChain reports, in the order the calls were made. Any error exits 1 with
// the message.
import Anthropic from "@anthropic-ai/sdk";
import { ChatAnthropic } from "@langchain/anthropic";
import { HumanMessage, SystemMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";

const gateway = process.argv[2];
const apiKey = process.env.TOLLGATE_API_KEY;
if (!gateway || !apiKey) {
  console.error("usage: TOLLGATE_API_KEY=<key> node langchain.mjs <gateway>");
  process.exit(2);
}

// Every call gets a modest output bound, as README advises.
const maxTokens = 400;

const chat = new ChatOpenAI({ model: "service-flint-base", apiKey, maxTokens, configuration: { baseURL: gateway + "/v1" } });
const responses = new ChatOpenAI({
  model: "service-flint",
  apiKey,
  maxTokens,
  useResponsesApi: true,
  configuration: { baseURL: gateway + "/v1" },
});
const claude = new ChatAnthropic({
  model: "service-sonnet",
  maxTokens,
  anthropicApiUrl: gateway,
  createClient: (options) => new Anthropic({ ...options, apiKey: null, authToken: apiKey }),
});

// The structured object the model is asked for, one field of each JSON type (as in
// openai-sdk.mjs).
const City = z.object({
  name: z.string(),
  population: z.number().int(),
  coastal: z.boolean(),
  districts: z.array(z.string()),
});

// The tool of the round trip; its result is fixed.
const getWeather = tool(async ({ city }) => JSON.stringify({ city, forecast: "sunny", celsius: 21 }), {
  name: "get_weather",
  description: "The current weather in a city.",
  schema: z.object({ city: z.string() }),
});

// calls is every model call in order, with the usage LangChain reported for it.
const calls = [];

// called notes a message's usage as one call's and returns what the test reads of it.
function called(what, message) {
  calls.push({ what, usage: message.usage_metadata ?? null });
  return { text: message.text, toolCalls: message.tool_calls?.length ?? 0 };
}

// invoked is one invoke.
async function invoked(model, what) {
  return called(what, await model.invoke([new SystemMessage("You are terse."), new HumanMessage("Say hi")]));
}

// streamed drains a stream, concatenating its chunks as LangChain's docs show.
async function streamed(model, what) {
  let full;
  let chunks = 0;
  for await (const chunk of await model.stream("Say hello in a stream")) {
    full = full === undefined ? chunk : full.concat(chunk);
    chunks++;
  }
  return { ...called(what, full), chunks };
}

// roundTrip forces a get_weather call, runs the tool on it and sends its ToolMessage back.
async function roundTrip(model) {
  const messages = [new HumanMessage("What is the weather in Lisbon?")];
  const ai = await model.bindTools([getWeather], { tool_choice: "get_weather" }).invoke(messages);
  called("tool call", ai);
  const call = ai.tool_calls?.[0];
  if (!call) throw new Error("no tool call: " + JSON.stringify(ai));
  const result = await getWeather.invoke(call);
  const final = await model.bindTools([getWeather]).invoke([...messages, ai, result]);
  return { call: { id: call.id, name: call.name, args: call.args }, final: called("tool answer", final) };
}

// structured asks withStructuredOutput for a City, with the raw message for its usage.
async function structured(model) {
  const { raw, parsed } = await model.withStructuredOutput(City, { name: "city", includeRaw: true }).invoke("Describe a coastal city as JSON.");
  called("structured", raw);
  return parsed;
}

try {
  const out = {
    chat: { invoke: await invoked(chat, "chat invoke"), stream: await streamed(chat, "chat stream") },
  };
  out.chat.tools = await roundTrip(chat);
  out.chat.structured = await structured(chat);
  out.responses = { invoke: await invoked(responses, "responses invoke"), stream: await streamed(responses, "responses stream") };
  out.anthropic = { invoke: await invoked(claude, "anthropic invoke"), stream: await streamed(claude, "anthropic stream") };
  out.calls = calls;
  console.log(JSON.stringify(out));
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exit(1);
}
