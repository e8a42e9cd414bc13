// A client on Vercel's AI SDK (npm ai, with @ai-sdk/openai, @ai-sdk/openai-compatible and
// @ai-sdk/anthropic), run by the impl/realclients tests:
//
//   TOLLGATE_API_KEY=<key> node ai-sdk.mjs <gateway>/v1
//
// The providers are set up as README's client settings say: the OpenAI provider and the
// OpenAI-compatible one with the gateway's /v1 as their base URL and the key as their API key
// (sent as Authorization: Bearer), the Anthropic provider with the same base URL (its default
// ends in /v1 too) and the key as its authToken (Authorization: Bearer; its apiKey would be
// sent as x-api-key, which the gateway refuses). With each it makes the calls its docs show:
// generateText and streamText on the OpenAI provider's default Responses API (service-flint)
// and on its .chat() (service-flint-base), on the OpenAI-compatible provider (chat, with
// includeUsage) and on the Anthropic provider (Messages, service-sonnet); a tool round trip on
// each of the Responses, chat and Messages models (the call forced on the first step, the
// tool's result sent back for a text answer on the second); structured output
// (Output.object from a zod schema) on Responses, chat and Messages. It prints one JSON object
// with what it got: for each call its text, finish reason and each step's usage and the
// gateway's request id (x-request-id) the step was answered with. Any error exits 1 with the
// message.
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, isStepCount, Output, streamText, tool } from "ai";
import { z } from "zod";

const baseURL = process.argv[2];
const apiKey = process.env.TOLLGATE_API_KEY;
if (!baseURL || !apiKey) {
  console.error("usage: TOLLGATE_API_KEY=<key> node ai-sdk.mjs <gateway>/v1");
  process.exit(2);
}

const openai = createOpenAI({ baseURL, apiKey });
const compatible = createOpenAICompatible({ name: "tollgate", baseURL, apiKey, includeUsage: true });
const anthropic = createAnthropic({ baseURL, authToken: apiKey });

// The models, one for each wire format.
const models = {
  responses: openai("service-flint"),
  chat: openai.chat("service-flint-base"),
  compatible: compatible.chatModel("service-flint-base"),
  messages: anthropic("service-sonnet"),
};

// Every call gets a modest output bound, as README advises.
const maxOutputTokens = 400;

// The structured object the model is asked for, one field of each JSON type (as in
// openai-sdk.mjs).
const City = z.object({
  name: z.string(),
  population: z.number().int(),
  coastal: z.boolean(),
  districts: z.array(z.string()),
});

// The tool of the round trip; its result is fixed.
const weather = tool({
  description: "The current weather in a city.",
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => ({ city, forecast: "sunny", celsius: 21 }),
});

// steps is what each step of a result reported: its usage and the gateway's request id.
function steps(result) {
  return result.steps.map((s) => ({ requestId: s.response?.headers?.["x-request-id"] ?? "", usage: s.usage }));
}

// generated is what the test reads of a generateText result.
function generated(result) {
  return { text: result.text, finishReason: result.finishReason, usage: result.usage, steps: steps(result) };
}

// streamed drains a streamText result, counting its text deltas, and reads it like generated.
async function streamed(result) {
  let deltas = "";
  let parts = 0;
  for await (const delta of result.textStream) {
    deltas += delta;
    parts++;
  }
  return {
    text: await result.text,
    finishReason: await result.finishReason,
    usage: await result.usage,
    steps: steps({ steps: await result.steps }),
    deltas,
    parts,
  };
}

// roundTrip calls the tool on the first step (forced) and answers in text on the second.
async function roundTrip(model) {
  const result = await generateText({
    model,
    maxOutputTokens,
    tools: { get_weather: weather },
    prepareStep: ({ stepNumber }) => (stepNumber === 0 ? { toolChoice: { type: "tool", toolName: "get_weather" } } : { toolChoice: "none" }),
    stopWhen: isStepCount(2),
    prompt: "What is the weather in Lisbon?",
  });
  const calls = result.steps[0]?.toolCalls ?? [];
  const results = result.steps[0]?.toolResults ?? [];
  return {
    ...generated(result),
    call: calls.map((c) => ({ toolCallId: c.toolCallId, toolName: c.toolName, input: c.input }))[0] ?? null,
    toolResults: results.length,
    finalToolCalls: result.steps.at(-1)?.toolCalls?.length ?? 0,
  };
}

// structured asks for a City with Output.object.
async function structured(model) {
  const result = await generateText({
    model,
    maxOutputTokens,
    output: Output.object({ schema: City, name: "city" }),
    prompt: "Describe a coastal city as JSON.",
  });
  return { ...generated(result), object: result.output };
}

try {
  const out = {};
  for (const [name, model] of Object.entries(models)) {
    out[name] = {
      generate: generated(await generateText({ model, maxOutputTokens, system: "You are terse.", prompt: "Say hi" })),
      stream: await streamed(streamText({ model, maxOutputTokens, prompt: "Say hello in a stream" })),
    };
  }
  for (const name of ["responses", "chat", "messages"]) {
    out[name].tools = await roundTrip(models[name]);
    out[name].structured = await structured(models[name]);
  }
  console.log(JSON.stringify(out));
} catch (err) {
  console.error(err?.stack ?? String(err));
  if (err?.responseBody) console.error(err.responseBody);
  process.exit(1);
}
