// Package llm defines the format-neutral form of an inference exchange that tollgate's
// converters translate through: a request, a complete response, and the events of a streamed
// response. Each wire format (OpenAI chat completions, OpenAI Responses, Anthropic Messages) is
// decoded to these types and encoded from them, so any inbound format can be served by any
// upstream kind. The types carry only what the formats share; fields one format has and the
// others lack are classified by the converters (carried, dropped and named, or refused).
package llm

import (
	"encoding/json"

	"github.com/tollgate/tollgate/impl/price"
)

// Format is a wire format. The values equal the provider kinds of the configuration.
type Format string

// The three wire formats.
const (
	FormatChat      Format = "openai-chat"
	FormatResponses Format = "openai-responses"
	FormatMessages  Format = "anthropic-messages"
)

// Role is the author of a message.
type Role string

// Roles. System and developer instructions are not messages: they are Request.System.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool carries the result of a tool call (ToolCallID says which).
	RoleTool Role = "tool"
)

// Request is an inference request.
type Request struct {
	// Source is the format the request arrived in; Extra holds that format's field names.
	Source Format
	Model  string
	// System is the system / developer / instructions text, joined with blank lines.
	System   string
	Messages []Message
	// MaxTokens bounds the output; 0 means the request gave no bound.
	MaxTokens   int
	Temperature *float64
	TopP        *float64
	Stop        []string
	Tools       []Tool
	ToolChoice  *ToolChoice
	// ParallelToolCalls is nil when the request did not say.
	ParallelToolCalls *bool
	ResponseFormat    *ResponseFormat
	// ReasoningEffort is how much a reasoning model should think, as the OpenAI formats spell
	// it ("none", "minimal", "low", "medium", "high", "xhigh": chat reasoning_effort,
	// Responses reasoning.effort); "" when the request did not say.
	ReasoningEffort string
	// Verbosity is how long an answer should be ("low", "medium", "high": chat verbosity,
	// Responses text.verbosity); "" when the request did not say.
	Verbosity string
	// N is the number of choices asked for (chat completions); 0 or 1 means one.
	N      int
	Stream bool
	// IncludeUsage records a chat request's stream_options.include_usage.
	IncludeUsage bool
	// EndUser is the end-user identifier the upstream is sent (OpenAI safety_identifier,
	// Anthropic metadata.user_id); "" sends none. The decoders leave it empty (the client's
	// own value stays in Extra, see convert.ClientEndUser): the gateway sets it to the
	// identifier it makes of that value for the caller's account (impl/enduserid), or to the
	// value itself where the operator passes values through.
	EndUser string
	// Extra holds the request's other top-level fields, by wire name, exactly as sent. An
	// encoder for the same format passes them through; for another format it carries those it
	// can map and reports the rest (see the converters' field tables).
	Extra map[string]json.RawMessage
	// Raw holds the modelled top-level fields exactly as sent, by wire name (nil when the
	// request was not decoded from a body). The encoder for the Source format re-sends a raw
	// value as long as the fields decoded from it are unchanged, so what the neutral form
	// cannot hold (a developer message in mid-conversation, cache hints, thinking blocks, audio
	// parts) survives a same-format round trip byte for byte; a field group the caller changed
	// is encoded from the neutral form instead. Encoders for other formats never read it.
	Raw map[string]json.RawMessage
	// Unmodelled lists what the decoder found inside modelled fields that the neutral form does
	// not hold (a cache hint on a content block, an audio part, a built-in tool, ...). An
	// encoder for another format drops and names the advisory ones and refuses the request
	// when any other is present; the encoder for the Source format ignores the list (Raw
	// carries the content).
	Unmodelled []Unmodelled
}

// Unmodelled is one piece of a request that the neutral form does not hold.
type Unmodelled struct {
	// Param is where it is, with indexes, e.g. "messages[2].content[0]"; a refusal names it.
	Param string
	// Name is its client-side wire name without indexes, e.g.
	// "messages[].content[].cache_control", or for a content block or item of an unmodelled
	// type the path ending in that type, e.g. "messages[].content[].thinking"; a drop reports it.
	Name string
	// Advisory is true when leaving it out cannot change what the answer must be.
	Advisory bool
	// Size is the length in bytes of its JSON, counted by input-token estimates.
	Size int
}

// Message is one turn of the conversation.
type Message struct {
	Role  Role
	Parts []Part
	// ToolCalls are the calls an assistant turn made.
	ToolCalls []ToolCall
	// ToolCallID names the call a RoleTool message answers.
	ToolCallID string
	// IsError marks a tool result that reports a failure.
	IsError bool
	// Refusal is the model's refusal to answer in an earlier assistant turn, kept apart from
	// its text as the OpenAI formats keep it (chat message.refusal or refusal parts, a
	// Responses refusal part; several are joined); "" when that turn did not refuse.
	Refusal string
	// Path is the wire path of the item this message was decoded from (e.g. "messages[3]",
	// "input[5]", "messages[4].content[0]" for an Anthropic tool result), used to name it in
	// errors; empty when the message was not decoded from a request.
	Path string
}

// PartKind is the kind of a content part.
type PartKind string

// Content part kinds.
const (
	PartText     PartKind = "text"
	PartImage    PartKind = "image"
	PartDocument PartKind = "document"
)

// Part is one piece of message content.
type Part struct {
	Kind PartKind
	Text string
	// An image is either a URL (ImageURL) or inline base64 data (MediaType and Data). A data:
	// URL is decoded into MediaType and Data by the decoders. A document is always inline
	// base64 data (MediaType and Data), with the file name the client gave, if any (Filename).
	ImageURL  string
	MediaType string
	Data      string
	Filename  string
	// Detail is OpenAI's image detail hint ("auto", "low", "high"), if given.
	Detail string
	// Path is the wire path of the content part this was decoded from (e.g.
	// "messages[3].content[1]"), used to name it in errors; empty when not decoded.
	Path string
}

// ToolCall is a function call made by the model.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the JSON text of the arguments.
	Arguments string
	// Path is the wire path of the call in a decoded request (e.g.
	// "messages[2].tool_calls[0]", "input[4]"), used to name it in errors; empty otherwise.
	Path string
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments (nil: none given).
	Parameters json.RawMessage
	Strict     *bool
}

// ToolChoiceMode says how the model may use tools.
type ToolChoiceMode string

// Tool choice modes.
const (
	ToolChoiceAuto     ToolChoiceMode = "auto"
	ToolChoiceNone     ToolChoiceMode = "none"
	ToolChoiceRequired ToolChoiceMode = "required"
	// ToolChoiceTool forces the tool named in ToolChoice.Name.
	ToolChoiceTool ToolChoiceMode = "tool"
)

// ToolChoice is the request's tool choice.
type ToolChoice struct {
	Mode ToolChoiceMode
	Name string
}

// ResponseFormat asks for text, any JSON object, or JSON matching a schema.
type ResponseFormat struct {
	// Type is "text", "json_object" or "json_schema".
	Type        string
	Name        string
	Description string
	Schema      json.RawMessage
	Strict      *bool
}

// StopReason is why the model stopped.
type StopReason string

// Stop reasons.
const (
	StopEnd           StopReason = "end"            // natural end (stop / end_turn / completed)
	StopLength        StopReason = "length"         // the output bound was reached
	StopToolCalls     StopReason = "tool_calls"     // the model called tools
	StopSequence      StopReason = "stop_sequence"  // a stop sequence matched
	StopContentFilter StopReason = "content_filter" // filtered (chat content_filter, Messages refusal)
	// StopRefusal is an answer that ended normally as the model's refusal to answer: a chat
	// message.refusal with finish_reason stop, a Responses refusal part in a completed answer
	// (the refusal's text is Response.Refusal, or the Refusal text deltas of a stream).
	StopRefusal StopReason = "refusal"
)

// Usage counts tokens. InputTokens counts every input token, those read from or written to a
// prompt cache included (OpenAI's prompt_tokens / input_tokens; Anthropic's input_tokens +
// cache_read_input_tokens + cache_creation_input_tokens); CachedInputTokens is the part of them
// read from a cache, CacheWrite5mTokens and CacheWrite1hTokens the parts written to it for five
// minutes and for one hour (Anthropic's cache_creation.ephemeral_5m_input_tokens and
// ephemeral_1h_input_tokens; a cache_creation_input_tokens without that breakdown is five-minute
// writes, Anthropic's default). OutputTokens counts every output token, reasoning included;
// ReasoningTokens is the part of them spent on reasoning, when the upstream says.
type Usage struct {
	InputTokens        int64
	OutputTokens       int64
	CachedInputTokens  int64
	CacheWrite5mTokens int64
	CacheWrite1hTokens int64
	ReasoningTokens    int64
	// ServiceTier is the service tier the upstream reported serving the request on
	// (OpenAI's service_tier, Anthropic's usage.service_tier), "" when it did not say.
	ServiceTier string
	// HostedCalls counts the calls of tools the provider ran itself (a web search, say), as
	// the upstream reported them.
	HostedCalls HostedCalls
	// AudioInputTokens and AudioOutputTokens are the parts of InputTokens and OutputTokens
	// that the upstream says were audio (a chat answer's prompt_tokens_details.audio_tokens and
	// completion_tokens_details.audio_tokens). The gateway refuses requests with audio and has no
	// audio price, so they are billed at the text rates with the rest of their kind, and an
	// answer that reports any is logged as not fully metered (impl/exchange).
	AudioInputTokens  int64
	AudioOutputTokens int64
	// CompactionOutputTokens is the part of OutputTokens that server-side compaction wrote
	// (the summaries of Anthropic's usage.iterations items of type compaction): a sampling step
	// of its own, which the request's output bound (max_tokens) does not bound.
	CompactionOutputTokens int64
}

// Response is a complete, non-streamed answer.
type Response struct {
	ID    string
	Model string
	// Text is the answer's text (the concatenation of its text parts).
	Text string
	// Refusal is the model's refusal to answer, kept apart from its text as the OpenAI formats
	// keep it (chat message.refusal, a Responses refusal part); "" when it did not refuse.
	Refusal string
	// Citations are the web pages the answer's text cites (an Anthropic text block's
	// web_search_result_location citations, OpenAI url_citation annotations), in the order of
	// the text they cite.
	Citations []Citation
	ToolCalls []ToolCall
	Stop      StopReason
	// StopSequence is the sequence that matched when Stop is StopSequence.
	StopSequence string
	Usage        Usage
	// Dropped names the parts of the upstream's answer that the neutral answer has no place
	// for (a Messages thinking block, a Responses reasoning item, a citation of a document),
	// each once, as paths in the upstream's format ("content[].thinking"); a client of another
	// format is told them (x-tollgate-dropped-fields), as it is told the request's fields left
	// out.
	Dropped []string
}

// Citation is a web page that a range of the answer's text cites.
type Citation struct {
	URL   string
	Title string
	// Start and End delimit the text that cites the page: offsets in the answer's text (Text,
	// or the text deltas of a stream so far), in characters (Unicode code points), End
	// exclusive, as OpenAI's url_citation start_index and end_index count them.
	Start, End int
}

// EventKind is the kind of a stream event.
type EventKind int

// Stream event kinds, in the order a stream produces them: one Start, then text deltas and tool
// calls (a ToolCallStart before the ToolCallDeltas of the same ToolIndex), then one Stop, then
// Usage (possibly also earlier, with input tokens only). An Error may end a stream at any point.
const (
	EventStart EventKind = iota
	EventTextDelta
	EventToolCallStart
	EventToolCallDelta
	EventStop
	EventUsage
	EventError
	// EventCitation says that the text so far, from Citation.Start to Citation.End, cites a web
	// page; it comes after that text.
	EventCitation
)

// Event is one step of a streamed answer.
type Event struct {
	Kind EventKind
	// Start: the upstream's id and model.
	ID    string
	Model string
	// TextDelta: the text; Refusal says it is a piece of the model's refusal to answer (chat
	// delta.refusal, Responses response.refusal.delta) rather than of its answer.
	Text    string
	Refusal bool
	// ToolCallStart / ToolCallDelta: which call (0, 1, ... in order of appearance), and for
	// Start its id and name, for Delta an arguments fragment.
	ToolIndex  int
	ToolCallID string
	ToolName   string
	Arguments  string
	// Stop: why.
	Stop         StopReason
	StopSequence string
	// Usage: the counts so far (cumulative; the last one is final).
	Usage Usage
	// Error: what went wrong, as the upstream said it.
	Err *StreamError
	// Citation: the page and the range of text that cites it.
	Citation *Citation
}

// StreamError is an error reported inside a stream.
type StreamError struct {
	// Type is the upstream's error type (e.g. "overloaded_error", "server_error").
	Type    string
	Message string
}

// HostedTool is a tool that a provider runs itself and bills per call, on top of tokens: a
// web search, a search of the provider's file stores, a code-execution sandbox, an image
// generator. The gateway passes one to an upstream only where the configuration prices its
// calls, and bills every call the upstream reports.
type HostedTool uint8

// The hosted tools, by the names the configuration uses.
const (
	HostedWebSearch       HostedTool = iota // Responses web_search*, Messages web_search_*, chat web_search_options
	HostedFileSearch                        // Responses file_search
	HostedCodeExecution                     // Responses code_interpreter, Messages code_execution_*
	HostedImageGeneration                   // Responses image_generation
	NumHostedTools
)

var hostedToolNames = [NumHostedTools]string{"web_search", "file_search", "code_execution", "image_generation"}

// String is the tool's configuration name.
func (t HostedTool) String() string {
	if t < NumHostedTools {
		return hostedToolNames[t]
	}
	return "unknown"
}

// HostedToolNamed returns the hosted tool whose configuration name is name.
func HostedToolNamed(name string) (HostedTool, bool) {
	for i, n := range hostedToolNames {
		if n == name {
			return HostedTool(i), true
		}
	}
	return 0, false
}

// HostedCalls counts calls per hosted tool.
type HostedCalls [NumHostedTools]int64

// Any reports whether any count is positive.
func (c HostedCalls) Any() bool {
	for _, n := range c {
		if n > 0 {
			return true
		}
	}
	return false
}

// CacheWriteTokens is every input token written to the prompt cache, for any time.
func (u Usage) CacheWriteTokens() int64 { return u.CacheWrite5mTokens + u.CacheWrite1hTokens }

// Tokens are the counts by the kinds they are priced at: the input tokens neither read from
// nor written to the cache are the uncached ones. Whatever an upstream reports, no count is
// below zero and the cached kinds are parts of the input, never more than it (cache reads
// first, then five-minute and one-hour writes): an upstream's cached_tokens above its
// prompt_tokens, which OpenAI's usage object defines as a part of them, billed the cached
// count as input (money trial D4: 900,000 cached tokens of a 100-token prompt).
func (u Usage) Tokens() price.Tokens {
	input := max(u.InputTokens, 0)
	read := min(max(u.CachedInputTokens, 0), input)
	w5 := min(max(u.CacheWrite5mTokens, 0), input-read)
	w1 := min(max(u.CacheWrite1hTokens, 0), input-read-w5)
	return price.Tokens{
		Uncached:     input - read - w5 - w1,
		CacheRead:    read,
		CacheWrite5m: w5,
		CacheWrite1h: w1,
		Output:       max(u.OutputTokens, 0),
		Reasoning:    min(max(u.ReasoningTokens, 0), max(u.OutputTokens, 0)),
	}
}
