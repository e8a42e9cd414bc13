// Package convert owns the pure conversions between the three inference wire formats (OpenAI
// chat completions, OpenAI Responses, Anthropic Messages) and the format-neutral form of
// package llm: client request bodies to llm.Request (DecodeRequest) and llm.Request to upstream
// request bodies (EncodeRequest), complete upstream answers to llm.Response (DecodeResponse)
// and llm.Response to the complete answer a client expects (EncodeResponse). It also owns the
// stop-reason mappings shared with the stream converters (StopReasonFor, StopReasonFrom,
// ResponsesStopReason), the usage objects of each format (AppendChatUsage, AppendResponsesUsage,
// AppendMessagesUsage, AppendMessagesDeltaUsage), the reading of usage counts and service tiers
// (ResponseUsage, AnthropicCounts, ServiceTierOf, ServiceTierFor, OpenAIServiceTier), the reading
// of a request's model, stream flag and output bound from its view (PeekRequest), the rewrite of a
// same-format request for its upstream (ForUpstream, with PlanHostedTools and FitThinking adding
// their edits) and of an answer's model (SetModel), and the input-token estimate used to reserve
// credit (EstimateInputTokens, with DocumentTokens for the pages of inline documents). Every
// function is pure: no I/O, no state.
//
// A request is read once: the functions that look at a request take its view (impl/jsonview),
// which the gateway's validator fills in its pass over the body (ReadRequest reads one from
// bytes), and every change to a same-format body is an edit of that view, applied in one copy.
//
// # Same format
//
// When the upstream speaks the client's format, EncodeRequest re-sends every field the caller
// did not change exactly as the client sent it (unknown fields included, byte for byte); only
// the model changes, and a streaming chat request always asks for usage
// (stream_options.include_usage: true) because the gateway meters every answer; the client's
// own include_usage is in Request.IncludeUsage for the stream converter to honour. SetModel
// does the same without decoding, for the fastest path.
//
// # Other formats: the field table
//
// Translated (both ways, between all three formats):
//
//	neutral               chat completions                 Responses                          Messages
//	System                system/developer messages        instructions + system/developer    system (string or text blocks)
//	                      (joined with blank lines,        input items                         (sent as a string)
//	                      moved to the front)
//	Messages              user/assistant/tool messages     message, function_call,            user/assistant turns; tool
//	                                                       function_call_output items          results are tool_result blocks
//	                                                                                           of a user turn; adjacent
//	                                                                                           same-role turns are merged
//	text part             text / string content            input_text / output_text           text block (empty ones, and those
//	                                                                                           of whitespace alone, left out; the
//	                                                                                           trailing whitespace of the text
//	                                                                                           that ends a final assistant turn,
//	                                                                                           a prefill, trimmed and named
//	                                                                                           "<path> (trailing whitespace)")
//	image part            image_url (URL or data: URL)     input_image image_url              image source url / base64
//	document part         file{file_data data: URL,        input_file{file_data data: URL,    document source base64 (PDF)
//	(user turns; inline   filename} (a name made from the  filename} (likewise)               or text (text/plain, decoded;
//	base64 only)          media type when none is given)                                      the file name dropped, named)
//	                      file_data that is no base64 data: URL (bare base64) is a 400 naming it, as OpenAI's;
//	                      a data: URL's media type, and a Messages source's, is read in lower case,
//	                      without its parameters (NormalizeMediaTypes does so on a relayed Messages request)
//	ToolCalls             tool_calls[].function            function_call{call_id,arguments}   tool_use{id,input object}
//	                      {name,arguments string}                                              (ids made ^[a-zA-Z0-9_-]+$)
//	tool result           role tool + tool_call_id         function_call_output               tool_result{tool_use_id,content}
//	                      (text alone: the images of a tool result go in a user message after the tool
//	                      messages of the turn, named "<path> (moved to a user message)")
//	MaxTokens             max_completion_tokens            max_output_tokens                  max_tokens (required: the
//	                      (max_tokens read too)                                                caller fills it, see below)
//	Temperature, TopP     temperature, top_p               temperature, top_p                 temperature (0..1), top_p
//	Stop                  stop (string or ≤ 4)             (none: refused)                    stop_sequences
//	Tools                 tools[].function                 tools[] (flat; strict written,     tools[]{name,description,
//	                                                       false unless asked)                 input_schema}
//	ToolChoice            auto/none/required/function      auto/none/required/function        auto/none/any/tool
//	ParallelToolCalls     parallel_tool_calls              parallel_tool_calls                tool_choice.disable_parallel_tool_use
//	ResponseFormat        response_format                  text.format                        output_config.format
//	                      (json_schema from Messages:      (likewise)                         {type json_schema, schema}
//	                      name "response", strict unset)                                      (output_format read too;
//	                                                                                          json_object refused)
//	ReasoningEffort       reasoning_effort                 reasoning.effort                   (dropped and named)
//	Verbosity             verbosity                        text.verbosity                     (dropped and named)
//	Stream                stream (+ stream_options)        stream                             stream
//
// Carried as they are between chat and Responses, which share them (name and meaning), and
// dropped and named for Messages: the prompt-cache hints prompt_cache_key and
// prompt_cache_retention, and service_tier (which the exchange removes, as on the same-format
// path, where the serving upstream's price does not give the tier). But for a Messages upstream that allows it (EncodeOptions
// AutomaticCache, an anthropic-messages provider's prompt_cache), a request from an OpenAI
// format that continues a conversation (an assistant turn or a tool result in it) or carries a
// prompt_cache_key asks for Anthropic's automatic prompt caching, a top-level cache_control
// (an hour's life for prompt_cache_retention "24h", else five minutes), and the two hints
// are then honoured, not named: OpenAI caches every prompt by itself, Anthropic only where
// asked.
//
// Refused with a 400 naming the client's field (they change what the answer must be):
//
//	chat         n > 1 (to Responses, Messages); response_format json_object, or json_schema
//	             without a schema (to Messages); temperature > 1 (to Messages; the scales are not rescaled); stop (to
//	             Responses); more than 4 stop sequences (to chat); logprobs, top_logprobs,
//	             audio, modalities other than text, web_search_options, logit_bias, legacy
//	             functions/function_call, when set; input_audio parts; file parts by
//	             file_id; custom tools
//	             and custom tool calls; allowed_tools and custom tool_choice; the legacy
//	             function role; an assistant's audio reference
//	Responses    text.format json_object, or json_schema without a schema (to Messages); previous_response_id, conversation, prompt,
//	             background, max_tool_calls, top_logprobs, when set; built-in tools
//	             (web_search, file_search, mcp, ...) and their tool_choice; item_reference and
//	             built-in tool items; input_file parts by file_id or file_url, or in a
//	             system message; an inline one in a function_call_output to chat (to
//	             Messages it is a document block of the tool_result); file_id images
//	Messages     stop_sequences (to Responses; more than 4 to chat); container, mcp_servers,
//	             an output_format or output_config.format not json_schema; server tools (a versioned type such as
//	             web_search_20250305); document blocks but of a base64
//	             source, and their title, context and citations; a document in a tool result
//	             to chat (to Responses it is an input_file of the function_call_output);
//	             search_result and server-tool blocks; file image sources
//	any          an empty last user message, or one of whitespace alone (to Messages, which
//	             refuses empty content and text of whitespace alone; such a user message
//	             elsewhere is left out and named as messages[] or input[]); a stop sequence
//	             of whitespace alone or empty (to Messages, which refuses it: chat's "\n");
//	             top_p other than 1 beside a temperature (to Messages, which takes one);
//	             an image of a type Messages does not accept (to Messages: only jpeg, png,
//	             gif, webp) or a non-base64 data: URL; a document of a type Messages does not
//	             accept (to Messages: only application/pdf, and text/plain in UTF-8); a
//	             document in a tool result (to chat), an image or document in an assistant turn; tool
//	             call arguments that are not a JSON object (to Messages); a tool name the target's
//	             API refuses, of an offered tool, a call in the history or the tool choice
//	             (toolnames.go: chat and Responses take ^[a-zA-Z0-9_-]{1,64}$, Messages
//	             ^[a-zA-Z0-9_-]{1,128}$; the 400 names the tool and the pattern)
//
// Refused also when the upstream speaks the client's format (SharedStateFields): ids of state a
// provider keeps for the one account every tenant's requests share, previous_response_id,
// conversation and prompt (Responses) and container (Messages), and, anywhere in the messages,
// file ids (chat file parts, Responses input_file and input_image parts, Messages file
// sources of document and image blocks), Responses item_reference items and Messages
// container_upload blocks (the 400 names the place, such as input[0].content[1].file_id), and
// documents the provider fetches by their URL and bills by their pages, which no reservation
// can cover (Messages document blocks with a url source, Responses input_file parts with a
// file_url);
// and tools the provider runs and bills per
// use, which the gateway (billing tokens only) does not meter: chat web_search_options,
// Responses built-in tools web_search* (web_search_preview, ...), file_search,
// code_interpreter and image_generation (in tools or tool_choice), Messages server tools
// web_search_* and code_execution_*. Tools that pull content into the prompt by themselves,
// billed as input with no bound (Messages web_fetch_* and mcp_servers, Responses mcp tools),
// are removed and named in the dropped list, priced or not. Client tools (function, custom,
// computer use, shell, text editor) pass. A Responses upstream is always sent store: false, and a chat
// upstream when the client asked for store: true (the operator's stored completions); a
// client's store: true is named in the dropped list. A service_tier the price catalog has no price for
// (OpenAI's priority, flex, scale: DropUnpricedTier) is removed and named in the dropped list.
//
// Dropped, and named in the dropped list (advisory: leaving them out cannot change what the
// answer must be):
//
//	chat         user beside a safety_identifier (below), metadata, store, service_tier (to
//	             Messages), seed, presence_penalty, frequency_penalty, reasoning_effort and verbosity (to
//	             Messages), prediction; prompt_cache_key and prompt_cache_retention (to Messages,
//	             unless automatic caching is asked for: above);
//	             modalities ["text"] and the refused fields above when unset
//	             (false, 0, "", []); messages[].name;
//	             image detail low/high and tools[].function.strict: true (to Messages)
//	Responses    reasoning.summary, reasoning.effort and text.verbosity (to Messages), include,
//	             store, metadata, service_tier (to Messages), user beside a
//	             safety_identifier (below), truncation, context_management; prompt_cache_key and
//	             prompt_cache_retention (to Messages, unless automatic caching is asked
//	             for: above); reasoning items; image
//	             detail low/high and tools[].strict (to Messages; a Responses function tool is
//	             strict unless it says strict: false)
//	Messages     service_tier, thinking, top_k, context_management, output_config's members
//	             but format (effort); cache_control (top-level, system, blocks, tools: the OpenAI
//	             formats cache prompts by themselves); citations; thinking and
//	             redacted_thinking blocks; tool_result is_error (to chat, Responses)
//	any          top_p 1 beside a temperature (to Messages, which takes one; 1 changes
//	             nothing); a field this table does not know (unknown fields are dropped and named, never
//	             passed to another format and never silently lost); an unknown key inside a
//	             message, part or tool
//
// End-user identifiers (chat and Responses safety_identifier and user, Messages metadata,
// whose one member is user_id) are consumed, never carried to another format as they came:
// the upstream is sent Request.EndUser in its own field (safety_identifier, metadata.user_id),
// which the gateway sets to its identifier of the client's value for the caller's account
// (ClientEndUser reads that value: safety_identifier, else user, else metadata.user_id); only
// a user sent beside a safety_identifier, which wins, is named. When Request.EndUser is empty
// (a provider that may refuse the target's field, or end_user_ids off) none is sent and the
// client's is dropped and named. On the same-format path ForUpstream puts the account's
// identifiers in place where they stand (UpstreamEdits.EndUser) and, with AddEndUser only
// (end_user_ids namespaced_always), adds the account's own to a request that names none, in the
// same copy as the model's; DropEndUserIDs removes them (off).
// prompt_cache_key is no end-user identifier: it is carried as a cache hint (above).
//
// Carried, not named: the model's refusal in an earlier assistant turn (chat
// messages[].refusal and refusal parts, Responses refusal parts; llm.Message.Refusal) goes to
// chat as the assistant message's refusal, to Responses as a refusal part after the turn's
// output_text, and to Messages, which has no refusal, as a text block of its words after the
// turn's text: what the assistant said in that turn, as a Messages client is answered a
// refusal (its words as text).
//
// Made valid for a Messages upstream (toolhistory.go), since the Messages API refuses tool
// histories the OpenAI formats take: a request whose messages call tools it does not offer
// declares them (any arguments, a description saying they are there for the history), with
// tool_choice none when it offers no tool; a call without its result in the next turn is
// given an error result saying the client sent none, named "<call path> (no tool result: an
// error result added)"; a result in a later turn is moved after its call when that is
// unambiguous, named "<path> (moved after its tool call)"; any other result without its call
// in the turn before becomes text, named "<path> (no matching tool call: sent as text)".
// AnthropicToolTokens counts what this adds. A Messages client's history goes as sent.
//
// Made valid for any upstream of another format: a call whose id an earlier call of the
// history has (ids some upstreams restart every turn, "call_0", "read:0") is sent with a fresh
// one, its id with "_2" (or the next number no id of the request has) appended, and so is the
// result that answers it (in order), named "<call path> (repeated tool call id: a fresh one
// given)": every API refuses a repeated id, and the client replays the history every turn.
//
// Consumed by the gateway, not named: chat stream_options (include_usage is
// Request.IncludeUsage) and Responses stream_options; item ids and statuses of Responses input
// items; the chat tool call type and index.
//
// A Messages upstream requires max_tokens: the caller fills Request.MaxTokens (for instance
// from the model's output limit) before encoding to it when the client gave no bound. A
// Responses upstream receives store: false, since chat and Messages clients do not expect their
// conversation to be kept.
//
// # Answers
//
// EncodeResponse writes what the official SDKs parse: a chat.completion with one choice
// (content null when there are only tool calls or a refusal, refusal null unless the model
// refused, annotations [], logprobs null, usage with both details objects); a Responses object
// (status completed or incomplete with incomplete_details, a message item with an output_text
// part and a refusal part when the model refused, and function_call items with fc_ ids, usage
// with both details objects, and the echo fields, taken from Meta.Request when given); a
// Messages message (text then tool_use blocks, stop_reason, stop_sequence, usage with the cache
// fields). A refusal (Response.Refusal, StopRefusal) is carried exactly between the two OpenAI
// formats, with the stop of a normal end; a Messages client gets its words as text with
// stop_reason refusal (see stopreason.go).
//
// # Usage
//
// Usage follows the convention of llm.Usage: input tokens include those read from and written
// to a prompt cache. Read from an answer:
//
//	chat         usage.prompt_tokens (all input), prompt_tokens_details.cached_tokens (reads),
//	             completion_tokens, completion_tokens_details.reasoning_tokens; service_tier
//	Responses    usage.input_tokens (all input), input_tokens_details.cached_tokens (reads),
//	             output_tokens, output_tokens_details.reasoning_tokens; service_tier
//	Messages     usage.input_tokens (uncached only) + cache_read_input_tokens (reads) +
//	             cache_creation_input_tokens (writes; one-hour ones are
//	             cache_creation.ephemeral_1h_input_tokens, the rest five-minute ones, all of
//	             them when there is no breakdown), output_tokens,
//	             output_tokens_details.thinking_tokens; usage.service_tier
//
// Written for a client, in its format: chat and Responses report every input token as input and
// the reads as cached tokens (they have no place for writes, which are input to them), and the
// reasoning tokens; Messages reports the uncached input as input_tokens, the reads, the writes
// with their breakdown, and the reasoning as output_tokens_details.thinking_tokens when there is
// any. The service tier is reported in the client's words where it has one (Anthropic's standard
// is OpenAI's default; OpenAI answers say default when the upstream's tier has no OpenAI name,
// Messages answers leave it out).
package convert
