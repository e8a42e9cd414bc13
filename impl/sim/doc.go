// Package sim is tollgate's deterministic upstream simulator. One http.Handler stands in for
// OpenAI (chat completions and Responses) and Anthropic (Messages) and answers in their exact
// wire formats, streamed or not, so that the gateway's provider adapters and converters can be
// tested, benchmarked and demonstrated without a network or provider keys.
//
// The routes are POST /v1/chat/completions, POST /v1/responses, POST /v1/messages and
// POST /v1/messages/count_tokens (any path ending in those suffixes is accepted, so a base URL
// may carry a prefix), plus GET /healthz.
//
// # Determinism
//
// A reply depends only on the request, apart from the prompt-cache counts of its usage, which
// depend on the requests before it (see Prompt caching). Its words are drawn from a fixed vocabulary by a hash
// of the request's model id and the text of its last user message; one output token is one
// word (every word after the first carries its leading space), so the output token count is
// the number of words emitted. The reply has Options.DefaultWords words (12 unless set),
// unless a directive asks for another length, and never more than the request's max tokens
// (max_completion_tokens or max_tokens, max_output_tokens, max_tokens); a reply cut by that
// bound ends with finish_reason "length", status "incomplete" or stop_reason "max_tokens".
// The input token count is ceil(c/4), at least 1, where c is the number of Unicode code
// points in all the text of the request's conversation: system prompt or instructions,
// message text, tool results, and the names and JSON arguments of earlier tool calls (tool
// definitions are not counted).
//
// Unless a script plays (see Scripts), when the request offers function tools, its tool
// choice is not "none", and either the tool choice forces a tool or the last user message
// contains "call <toolname>", the reply is one
// call to that tool (the longest name mentioned wins; tool choice "required" or "any" without a
// mention calls the first tool), and the finish reason is "tool_calls" or "tool_use". Its
// arguments are generated from the tool's schema (parameters, input_schema), as under
// Structured output, when that schema declares properties, required or
// additionalProperties: false, so that a tool which names its arguments or refuses others
// gets arguments it accepts; a tool that the tool choice forces by name gets them from any
// schema it declares. A tool without such a schema gets {"q":"<word>"}, streamed as three
// fragments and counted as three output tokens; generated arguments stream one output token
// per fragment. A tool call is triggered by text only while the conversation ends with that
// user message, so a tool loop ends after the tool result is sent back. Stop sequences are
// honoured when the next word equals one of them.
//
// Messages requests are refused as the API refuses them (400 invalid_request_error) when a
// message holds a text block (or string content) of whitespace alone ("messages: text content
// blocks must contain non-whitespace text"), when a stop sequence is empty or whitespace alone
// ("stop_sequences: each stop sequence must contain non-whitespace"), when temperature and
// top_p are both given ("cannot both be specified for this model", as for the Claude 4.5
// models and later, which the simulated models stand in for), and when the conversation ends
// on an assistant turn (a prefill) whose final text ends in whitespace ("messages: final
// assistant content cannot end with trailing whitespace"), and as the API refuses a tool
// history it does not take: tool_use or tool_result blocks in a request that defines no tools
// ("Requests which include `tool_use` or `tool_result` blocks must define tools."), a tool_use
// whose tool_result is not in the next message ("messages.N: `tool_use` ids were found without
// `tool_result` blocks immediately after: IDS. …"), and a tool_result whose tool_use is not in
// the message before ("messages.N.content.K: unexpected `tool_use_id` found in `tool_result`
// blocks: ID. …"), a tool_use whose id an earlier one of the request has, in its turn or
// another ("messages.N.content.M: `tool_use` ids must be unique"), and a client tool whose name
// is not ^[a-zA-Z0-9_-]{1,128}$ ("tools.N.custom.name: String should match pattern …"). Chat
// requests are refused likewise when a message other than a user message (a tool result, above
// all) holds an image_url part ("Image URLs are only allowed for messages with role 'user'",
// naming the message), when a tool result's tool_call_id is an earlier one's ("Invalid
// parameter: Duplicate value for 'tool_call_id' of 'ID' in messages[I] and messages[J]."), and,
// with the Responses route, when a function name (of a tool, or on the chat route of a call in
// the history) is not letters, digits, '_' and '-' ("string does not match pattern. Expected a
// string that matches the pattern '^[a-zA-Z0-9_-]+$'.", code invalid_value) or longer than 64
// characters ("string too long. Expected a string with maximum length 64, …", code
// string_above_max_length), in the API's words (toolnames.go).
//
// [[sim refuse=true]] makes the reply the model's refusal to answer, its words as usual,
// whatever the request asks for (no tool call, no structured output, no stop sequence): chat
// content null with the words in message.refusal and finish_reason "stop", streamed as
// delta.refusal after a role chunk {"role":"assistant","content":null,"refusal":""}; a
// Responses message whose one part is {"type":"refusal","refusal":…} in a completed response,
// streamed as response.content_part.added (a refusal part), response.refusal.delta…,
// response.refusal.done, content_part.done; a Messages answer of text with stop_reason
// "refusal". [[sim refuse=after_text]] does the same, except that the first half of the words
// (rounded down) is the answer's text and the rest its refusal: on the chat route content and
// message.refusal both set, streamed as delta.content after the usual role chunk, then
// delta.refusal (the refusal's first word keeps its leading space); on the Responses route one
// message whose content holds an output_text part (content_index 0) and a refusal part
// (content_index 1), streamed as the text part's content_part.added, output_text.delta…,
// output_text.done and content_part.done, then the refusal part's content_part.added,
// refusal.delta…, refusal.done and content_part.done; on the Messages route, which has no
// place for a refusal's words, the text alone with stop_reason "refusal", as when the
// classifiers stop an answer partway (a reply of one word is all refusal, as with
// refuse=true).
//
// On the Responses route the functions of a namespace tool ({"type":"namespace","name":ns,
// "tools":[{"type":"function","name":f,"parameters":…},…]}, as Codex CLI offers its MCP tools)
// are callable too: "call <ns>__<f>" (Codex's own spelling, mcp__server__tool) or "call <f>"
// triggers the call, and a tool choice {"type":"function","name":f} forces it, with an
// optional "namespace":ns, or with the name <ns>__<f>; without a namespace a top-level
// function of that name wins. The function_call item then carries "name":f and
// "namespace":ns, in the response and in the stream (response.output_item.added and .done,
// response.function_call_arguments.done). Custom tools inside a namespace are not called.
// Chat completions and Messages have no namespaces.
//
// A Responses input that ends with a compaction_trigger item (the remote compaction Codex CLI's
// built-in provider asks OpenAI for) is answered, as OpenAI answers it, with exactly one output
// item, {"type":"compaction","id":"cmp_…","encrypted_content":…}, and no tool call: the
// summary's words, in base64, billed as output; the stream carries the item whole
// (response.output_item.added and .done, no delta). A compaction item sent back as input counts
// as its summary's words.
//
// # Structured output
//
// A request for structured output gets JSON text that validates against its schema in place
// of the words: chat response_format {type: "json_schema"} or {type: "json_object"},
// Responses text.format of the same types, and Anthropic output_config.format or the beta
// output_format {type: "json_schema"}. The text is the message content, output_text or text
// block and streams in the usual text deltas; json_object (or json_schema without a schema)
// gets {"answer":"<words>"}. A tool call still wins when the rules above call for one. One
// output token is one object key or scalar value with the punctuation that follows it, or
// one more word of a generated sentence, so the usage counts the content events as for
// words. The max tokens bound cuts the JSON short with the same finish reasons; stop
// sequences and words= do not apply.
//
// The generator draws every choice from the hash that seeds the words, so the same request
// gets the same JSON. It honours type (a type array gives its first type other than null),
// properties (in schema order), required, additionalProperties, patternProperties,
// dependentRequired, minProperties and maxProperties; items, prefixItems (and the draft-07
// tuple items with additionalItems), minItems, maxItems, uniqueItems, contains and
// minContains; const and enum; minLength, maxLength, pattern (as Go's regexp reads it) and
// format (date, date-time, time, email, hostname, uri, uri-reference, uuid, ipv4, ipv6,
// duration, json-pointer, regex); minimum, maximum and the exclusive bounds (draft-04's
// booleans too) and multipleOf, with exact decimal arithmetic; $ref to a JSON pointer in the
// same document (#, #/$defs/…, #/definitions/…); allOf, merged; anyOf and oneOf, one branch
// taken. Objects carry all their declared properties and arrays two items down to six levels
// and up to 256 tokens, and only what is required below or beyond that, where a nullable
// value becomes null, so recursive schemas end. It does not honour not, if/then/else,
// dependentSchemas, propertyNames, unevaluatedProperties/Items, maxContains, $ref to other
// documents, $anchor or $id, or patterns with lookaround or backreferences; a oneOf value may
// also match another branch, and allOf members that each close additionalProperties over
// different properties are merged as if they were open.
//
// # Directives
//
// Tests that can only shape the request text (end-to-end tests through the gateway and the
// official SDKs) steer the simulator with directives in the last user message:
//
//	[[sim words=40]]                   reply with 40 words
//	[[sim fault=429 retry_after=2]]    answer 429 with Retry-After: 2 (and retry-after-ms)
//	[[sim fault=429]]                  answer 429 without Retry-After (any status 400-599)
//	[[sim fault=midstream after=3]]    in-band error after 3 content events
//	[[sim fault=stall ms=3000]]        send headers, then nothing for 3 s, then continue
//	[[sim fault=stall_before ms=3000]] send nothing for 3 s, then answer normally
//	[[sim fault=drop after=2]]         close the connection abruptly after 2 content events
//	[[sim fault=drop_before]]          close the connection before sending a byte
//	[[sim fault=429 times=2]]          fault the first 2 requests carrying this exact text
//	[[sim web_search=2]]               run 2 hosted web searches before the reply (see below)
//	[[sim cache_min=256]]              cache prompt prefixes from 256 tokens on (see Prompt caching)
//	[[sim refuse=true]]                answer with the model's refusal (see above)
//	[[sim refuse=after_text]]          text and then the refusal (see above)
//	[[sim deltas=false]]               on Responses, no output_text or refusal deltas: the text
//	                                   comes only in the done events, the completed item and
//	                                   the terminal response, as some compatible servers send it
//	[[sim script: call t {"a":1}]]     play an agent's model, one call a turn (see Scripts)
//
// Other keys: status= (the error type of a midstream fault: 429, 500, 503, 529),
// should_retry=true|false (an x-should-retry header on a status fault), tps= and first_ms=
// (pacing of this reply); unknown keys are ignored. Several directives in one message are
// merged. The times= counter is keyed by the exact directive text, across routes and models,
// so tests that must not share a counter add an unused key such as tag=name. Tests with
// access to the Simulator use Enqueue instead, which injects the same faults (see Fault) by
// model id, and read Requests, LastRequest and AnthropicHeaders to see what arrived.
//
// # Scripts: playing an agent's model
//
// A script directive in a user message makes the simulator play a tool-using agent's model,
// one call per model turn, so that an agent loop runs a real multi-step session:
//
//	Which region sold most? [[sim script: call list_datasets; call query_data {"dataset":"sales","sql":"select region, sum(amount) from orders group by region"}]]
//
// The grammar (blanks, newlines included, are allowed between the parts):
//
//	script = "[[sim" blank+ "script:" call (";" call)* [";"] "]]"
//	call   = "call" blank+ name [JSON object]
//	name   = one or more of A-Z a-z 0-9 _ - .
//
// The arguments are read as one JSON value (so they may hold "]]", "=" or ";") and must be an
// object; a call without them has {}. The script read is that of the last user message that
// holds one (a message holds at most one); user messages after it without a script do not
// stop it, and a later message with a script starts that one. Let k be the number of tool
// results after that message (chat role "tool" messages, Responses function_call_output
// items, Messages tool_result blocks). Then:
//
//   - While k is less than the number of calls, the reply is call k+1 (counting from 1) with
//     exactly the scripted arguments, byte for byte (Messages embeds them as the tool_use
//     input), whatever the tool's schema would generate and whatever tool_choice forces; the
//     finish reason is "tool_calls" or "tool_use". The tool is found by name as tool_choice
//     finds it: a top-level function first, then a function of a Responses namespace by its
//     name or by <namespace>__<name>. The arguments count one output token per object key or
//     scalar value, with the punctuation and blanks that follow it ({} is one token), and
//     stream one content event per token.
//   - When call k+1 names a tool the request does not offer (or the request has tool_choice
//     "none"), the reply is the text `Script step <k+1> calls <tool>, which this request does
//     not offer.` (or `..., which tool_choice "none" forbids.`), so that an agent loop ends.
//   - Once the script is exhausted, the reply is the text `Answer from <tool>: <quote>`, where
//     tool is the last scripted call's and quote the first 400 characters (code points) of
//     the last tool result's text, blanks kept (ScriptAnswer builds it, ScriptQuoteRunes is
//     400), so that a test can check that the answer carries the data.
//
// A scripted text counts one output token per word, its blanks travelling with the word, is
// cut by max tokens with the usual finish reasons, and ignores stop sequences, words= and
// structured output formats. Input tokens are counted as for any request. Other directives
// are read as always, from the last user message (on Messages a message of tool results is
// one, so a fault=429 beside the script strikes only its first turn there, and every turn on
// the OpenAI routes unless times= bounds it), and the "call <toolname>" trigger keeps working in
// messages without a script. A script that cannot be parsed is answered 400 in the route's
// envelope (invalid_request_error; code invalid_sim_script on the OpenAI routes), with a
// message that quotes the directive and says what is wrong; count_tokens ignores scripts. The
// simulator keeps no conversation state: the script must be in the request's conversation (a Responses
// request that continues with previous_response_id alone carries none). Script builds a
// directive from Go.
//
// # Hosted web search
//
// web_search=N (N >= 1, at most 100) makes the provider run web searches, so that the
// metering of hosted tools can be tested end to end. It takes effect only on the Responses and
// Messages routes, when the request offers a hosted web search tool (Responses tools[] of a
// type starting with web_search: web_search, web_search_preview, web_search_2025_08_26, ...;
// Messages tools[] of a type starting with web_search_, such as web_search_20250305) and its
// tool choice is not "none"; otherwise it is ignored, as it is on chat (whose
// web_search_options is not such a tool). The number of searches is min(N, cap), where cap is
// the Responses max_tool_calls or the max_uses of the Messages web search tool, when given.
// The reply opens with the searches, in order, before its text (or tool call):
//
//   - Responses: one output item {"id":"ws_…","type":"web_search_call","status":"completed",
//     "action":{"type":"search","query":q,"queries":[q]}} per search, then the reply's item.
//     Streamed, each search is response.output_item.added (status in_progress, action
//     {"type":"search"}), response.web_search_call.in_progress, .searching and .completed
//     (with output_index and item_id), then response.output_item.done; the reply's item
//     follows at output_index N.
//   - Messages: per search a server_tool_use block {"type":"server_tool_use","id":"srvtoolu_…",
//     "name":"web_search","input":{"query":q}} and a web_search_tool_result block whose content
//     is two web_search_result entries (https://example.com/ URLs, titles and
//     encrypted_content drawn from the hash, page_age null); the reply's block is at index 2N,
//     and usage carries "server_tool_use":{"web_search_requests":N}, in the message and in the
//     stream's message_delta. Streamed, server_tool_use opens with an empty input and receives
//     its input as input_json_delta fragments (an empty one first, as for tool_use); the result
//     block comes whole in its content_block_start; each block has its content_block_stop.
//
// A query is three vocabulary words drawn from the request's hash, so the same request gets
// the same searches. Searches cost no output tokens (the usage counts the reply's text or
// tool call as without them), are not content events (faults' after= and pacing count only
// the reply's deltas, so a midstream fault strikes after them), and are not cut by max tokens.
//
// # Prompt caching
//
// The usage reports prompt-cache reads and writes as each provider does, from a cache kept in
// the Simulator, so that cache-priced bills can be tested end to end. Positions in a prompt
// use the simulator's token estimate: the prefix that ends after c counted characters has
// ceil(c/4) tokens, where the characters are those that the input token count counts, read
// in the provider's prefix order. Tool definitions, response formats, roles and block types
// count no tokens but are part of the prefix, so that a change to them misses the cache.
// A cached prefix is known by a hash of its content, the route, the model, the account (the
// request's x-api-key on Messages, else its Authorization header) and, on the OpenAI routes,
// its prompt_cache_key; cache_control markers are not part of it, so a breakpoint that moves
// to the newest message each turn still finds the prefix that the turn before cached. The
// cache holds at most 8,192 prefixes and forgets the least recently used first; Reset
// empties it and Options.Now is the clock of its lifetimes. A request answered with an error
// status (a fault before the reply) neither reads nor writes it. The directive cache_min=N
// sets the shortest cacheable prefix to N tokens (at least 1) for its request, on every
// route, so that short test prompts can be cached; on the OpenAI routes the cached counts
// stay multiples of 128.
//
// Messages follows https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching. A
// breakpoint is a cache_control {"type":"ephemeral"} with an optional "ttl": "5m" (the
// default) or "1h", on a tool, a system block or a top-level block of a message's content (a
// string system prompt or content is one text block); a top-level cache_control puts one on
// the last block (automatic caching). Blocks are ordered tools, system, messages; as tool
// definitions count no tokens, a breakpoint on a tool caches nothing by itself. For each
// breakpoint whose prefix (up to and including its block) has at least the minimum (1,024
// tokens, or 2,048 when the model id contains "haiku"), the longest cached prefix that ends
// at its block or at one of the 20 blocks before it is looked up; the longest one found is
// read (cache_read_input_tokens). The tokens from there to the last such breakpoint are
// written (cache_creation_input_tokens): those up to the last breakpoint with ttl "1h" as
// ephemeral_1h_input_tokens, the rest as ephemeral_5m_input_tokens. input_tokens counts only
// the others, so that input_tokens + cache_creation_input_tokens + cache_read_input_tokens
// is the whole prompt's count (as count_tokens returns it). Every such breakpoint's prefix is
// then cached for its ttl from now, and the prefix read is refreshed for its own. The limit
// of four breakpoints and the rule that "1h" breakpoints come before "5m" ones are not
// enforced. The message and message_start carry (message_start with output_tokens 1, and
// the message with server_tool_use before service_tier when the turn searched)
//
//	"usage":{"input_tokens":7,"cache_creation_input_tokens":1000,"cache_read_input_tokens":1500,
//	  "cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":0},
//	  "output_tokens":12,"service_tier":"standard"}
//
// and message_delta repeats the input counts, cumulatively, as the API does:
//
//	"usage":{"input_tokens":7,"cache_creation_input_tokens":1000,"cache_read_input_tokens":1500,
//	  "output_tokens":12}
//
// The OpenAI routes follow https://platform.openai.com/docs/guides/prompt-caching: caching is
// automatic for prompts of at least 1,024 tokens, and the cached part of a prompt is its
// longest prefix seen before, a multiple of 128 tokens (1,024, 1,152, ...): after a request,
// its prefixes of every multiple of 128 tokens from the minimum on are cached, and a later
// request reads the longest unbroken run of them from the minimum on. The prefix
// order is tools, response_format (text.format), then the messages (instructions, then the
// input items). A prefix lives for 5 minutes after its last use, or 24 hours with
// prompt_cache_retention "24h". Cache writes are free and not reported. The cached tokens are
// part of the prompt tokens, as before:
//
//	chat:      "usage":{"prompt_tokens":1507,"completion_tokens":12,"total_tokens":1519,
//	             "prompt_tokens_details":{"cached_tokens":1408,"audio_tokens":0},
//	             "completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,
//	             "accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}
//	Responses: "usage":{"input_tokens":1507,"input_tokens_details":{"cached_tokens":1408},
//	             "output_tokens":12,"output_tokens_details":{"reasoning_tokens":0},
//	             "total_tokens":1519}
//
// and the answers carry "service_tier" at the top level (in every chat chunk, and in the
// Responses object): the request's "flex" or "priority" when it asked for one ("priority"
// for "fast", its other name), "default" otherwise, as OpenAI reports the tier that served a
// request.
//
// # Fidelity
//
// Bodies and events follow ../shared/reference/wire-protocols.md: chat chunks carry no event:
// line and no error key, usage comes in a final choices:[] chunk only with
// stream_options.include_usage, and the stream ends with data: [DONE]; Responses events carry
// event: lines and sequence numbers from 0 and end at the terminal event; Messages events
// carry event: lines, a ping follows the first content_block_start, and a tool_use block opens
// with an empty input_json_delta. Stream deltas of the OpenAI routes carry a deterministic
// obfuscation field unless stream_options.include_obfuscation is false. Request checks mirror
// the real APIs where a gateway could trip on them: stream_options without stream is a 400,
// Responses max_output_tokens must be at least 16, Messages requires max_tokens. Ids,
// timestamps and the prompt-cache counts vary; everything else is a function of the request.
package sim
