package streamconv

import (
	"bytes"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// Relay carries a stream from an upstream of the client's own format to the client event by
// event, as the upstream sent it, so that what the neutral form does not model (thinking blocks
// and their signatures, citations, logprobs, refusal deltas, reasoning items, ...) reaches the
// client untouched. The gateway changes only what it owns: the model name, which is the
// client's and not the upstream's, and on chat the usage chunk, which the gateway asks for to
// meter the stream and which a client that did not ask for it is not shown.
//
// The caller still decodes every upstream event (for the usage, the errors and the end) and
// feeds the neutral events to an Encoder of the same format, whose output it discards: the
// encoder's state is what ends the stream in the format when it fails. Relay keeps that
// encoder's Responses sequence numbers after the upstream's, so that an error and its
// response.failed continue the numbering the client has seen.
type Relay struct {
	f            llm.Format
	model        convert.QuotedModel
	includeUsage bool
	follower     sequenceFollower // the encoder, when it numbers its events (Responses)
	buf          []byte
	unmodelled   int
	counter      UnmodelledCounter
	// items is what a Responses client has of the output so far, for the response.failed the
	// encoder sends when the stream fails (relayedItems).
	items responsesItems
}

// responsesItems records the output items a relayed Responses stream gave its client: each
// item the upstream finished (output_item.done) as it came, and the one still open (added, not
// done) with the text or arguments its deltas carried, so that a failure's response.failed
// lists what the client has, as the Responses API's own does (trial D9: it listed nothing,
// although the client had text).
type responsesItems struct {
	done [][]byte
	// open is the open item as added; openText the raw JSON string content (escapes kept) of
	// its output_text or function-call argument deltas.
	open, openText []byte
}

// relayedItemsSource is an Encoder that lists a relayed stream's items in the response of a
// failure (the Responses encoder).
type relayedItemsSource interface {
	listRelayedItems(appendItems func(dst []byte) []byte)
}

// sequenceFollower is an Encoder whose event numbering continues after the numbers of a stream
// relayed in its place (the Responses encoder).
type sequenceFollower interface {
	follow(seq int64)
}

// NewRelay returns a Relay to a client of format f that knows the model as model;
// includeUsage says whether a chat client asked for the usage chunk. enc is the encoder the
// caller feeds (see Relay).
func NewRelay(f llm.Format, model string, includeUsage bool, enc Encoder) *Relay {
	follower, _ := enc.(sequenceFollower)
	r := &Relay{f: f, model: convert.QuoteModel(model), includeUsage: includeUsage, follower: follower, counter: UnmodelledCounter{f: f}}
	if src, ok := enc.(relayedItemsSource); ok && f == llm.FormatResponses {
		src.listRelayedItems(r.items.appendTo)
	}
	return r
}

// Event appends what the client gets for the upstream event ev to out: ev itself, with the model
// rewritten where the event carries it; the canonical [DONE] for a chat terminal the decoder
// accepts; nothing for an event with no data (which the decoders skip), for a chat usage chunk
// the client did not ask for, or for a chat data line that is not a chunk (an error object of a
// compatible server, say: the decoder reports errors, in the gateway's words). An event whose
// JSON the model rewrite cannot read goes out as it came; the decoder, which read it first,
// judges malformed streams. The events appended share a buffer that the next call reuses:
// write them first.
func (r *Relay) Event(ev sse.Event, out []sse.Event) []sse.Event {
	if len(bytes.TrimSpace(ev.Data)) == 0 {
		return out
	}
	var (
		data []byte
		err  error
	)
	switch r.f {
	case llm.FormatChat:
		if isDone(ev.Data) {
			return append(out, sse.Event{Name: ev.Name, Data: []byte("[DONE]")})
		}
		r.unmodelled += r.counter.Count(ev)
		has, empty := chunkChoices(ev.Data)
		if !has && r.includeUsage && isUsageChunk(ev.Data) {
			// A usage chunk whose choices are null or absent (vLLM and other compatible
			// servers): the client that asked for usage gets it with choices [] (§1.5).
			var v jsonview.View
			if v.Parse(ev.Data) != nil {
				return out
			}
			var edits jsonview.Edits
			edits.Set(&v, "choices", []byte("[]"))
			if data, err = r.model.Set(r.buf[:0], edits.AppendTo(nil, &v)); err != nil {
				return out
			}
			r.buf = data
			return append(out, sse.Event{Name: ev.Name, Data: data})
		}
		if !has || (empty && !r.includeUsage) {
			return out
		}
		data, err = r.model.Set(r.buf[:0], ev.Data)
	case llm.FormatMessages:
		r.unmodelled += r.counter.Count(ev)
		if ev.Name != "message_start" {
			return append(out, ev)
		}
		data, err = r.model.SetMember(r.buf[:0], ev.Data, "message")
	case llm.FormatResponses:
		if isDone(ev.Data) {
			// A [DONE] the stream's terminal event did not come before is no end of it (the
			// decoder takes the stream as cut, and the client gets the error and response.failed
			// instead): the Responses API itself never sends one.
			return out
		}
		if seq, ok := sequenceNumber(ev.Data); ok && r.follower != nil {
			r.follower.follow(seq)
		}
		r.unmodelled += r.counter.Count(ev)
		r.items.note(ev)
		data, err = r.model.SetMember(r.buf[:0], ev.Data, "response")
	default:
		return append(out, ev)
	}
	if err != nil {
		return append(out, ev)
	}
	r.buf = data
	return append(out, sse.Event{Name: ev.Name, Data: data})
}

// Unmodelled is how many characters of output the relayed stream carried that the neutral
// events do not (thinking, reasoning summaries and text; see UnmodelledOutput): the gateway
// bills them, estimated from their length, when the upstream's usage never came.
func (r *Relay) Unmodelled() int { return r.unmodelled }

// UnmodelledOutput is how many characters of output the upstream event ev, of an upstream of
// format f, carries that the decoder's neutral events do not: a Messages thinking delta's
// thinking, a Responses delta other than the text, refusal and arguments deltas (reasoning
// summaries and reasoning text, tool input), what the model wrote in a Responses item the
// stream carries whole in its response.output_item.done and in no delta
// (convert.WholeItemOutput: a local shell or computer call's action, a web search's query, an
// image generation's revised prompt), a chat chunk's reasoning (chatReasoningLen). The provider
// bills that output as it generates it, so a stream cut before the upstream reported its usage
// is billed it, estimated from its length, relayed (Relay.Unmodelled) or translated to another
// format (whose client never sees it) alike.
func UnmodelledOutput(f llm.Format, ev sse.Event) int {
	if f == llm.FormatChat {
		return chatReasoningLen(ev.Data)
	}
	name := ev.Name
	if name == "" || name == "message" {
		// An event without its name (a compatible server's): named by its data's type, as
		// the decoders name it.
		name = dataType(ev.Data)
	}
	switch f {
	case llm.FormatMessages:
		if name == "content_block_delta" {
			return thinkingLen(ev.Data)
		}
	case llm.FormatResponses:
		if strings.HasSuffix(name, ".delta") && !modelledResponsesDeltas[name] {
			return memberLen(ev.Data, "delta")
		}
		if name == "response.output_item.done" {
			return convert.WholeItemOutput(ev.Data)
		}
	}
	return 0
}

// UnmodelledCounter counts, event by event, the output of an upstream stream that the neutral
// events do not carry: UnmodelledOutput's, a Responses item carried whole from its
// response.output_item.added on (wholeItem), and the input of a Messages stream's server tool
// calls (a web search's query, the code a code execution runs), which the model writes and the
// provider bills as output, streamed as input_json_delta to a server_tool_use block
// (platform.claude.com/docs, *Server tools* and *Streaming Messages*) and known by its block,
// which the counter remembers. Its zero value counts nothing: NewUnmodelledCounter.
type UnmodelledCounter struct {
	f llm.Format
	// serverTools are the indexes of the Messages server_tool_use blocks started.
	serverTools []int
	// wholeItems are the Responses items counted when added (wholeItem).
	wholeItems []countedItem
}

// NewUnmodelledCounter returns a counter for a stream of an upstream of format f.
func NewUnmodelledCounter(f llm.Format) *UnmodelledCounter { return &UnmodelledCounter{f: f} }

// Count is how many characters of output the upstream event ev carries that the neutral events
// do not. A Messages event pays a bytes.Contains for a block's start and a length check for a
// delta while no server tool block has started.
func (c *UnmodelledCounter) Count(ev sse.Event) int {
	n := UnmodelledOutput(c.f, ev)
	switch c.f {
	case llm.FormatMessages:
		n += c.serverToolInput(ev)
	case llm.FormatResponses:
		n = c.wholeItem(ev, n)
	}
	return n
}

// wholeItem is the count n of a Responses event, corrected for the items a stream carries
// whole (convert.WholeItemOutput): what an item's response.output_item.added already holds (a
// computer call's action, say) counts when it comes, so that a stream cut before the item's
// done event is billed it, and its done event counts only what it adds.
func (c *UnmodelledCounter) wholeItem(ev sse.Event, n int) int {
	name := ev.Name
	if name == "" || name == "message" {
		name = dataType(ev.Data) // an event without its name
	}
	switch name {
	case "response.output_item.added":
		m := convert.WholeItemOutput(ev.Data)
		if index, ok := outputIndex(ev.Data); ok && m > 0 {
			c.wholeItems = append(c.wholeItems, countedItem{index: index, counted: m})
		}
		return n + m
	case "response.output_item.done":
		index, ok := outputIndex(ev.Data)
		for i := range c.wholeItems {
			if ok && c.wholeItems[i].index == index {
				n, c.wholeItems[i].counted = max(n-c.wholeItems[i].counted, 0), max(n, c.wholeItems[i].counted)
			}
		}
	}
	return n
}

// countedItem is a Responses output item, by its output index, and the characters of it
// counted so far (UnmodelledCounter.wholeItem).
type countedItem struct{ index, counted int }

// outputIndex is a Responses event's top-level output_index.
func outputIndex(data []byte) (int, bool) {
	val, ok := member(data, "output_index")
	if !ok {
		return 0, false
	}
	return intOf(val)
}

// serverToolMark is in every content_block_start of a Messages server tool call.
var serverToolMark = []byte(`"server_tool_use"`)

// serverToolInput is the length of the input a Messages event writes to a server tool call,
// as sent: an input_json_delta's partial_json to a server_tool_use block, or the input a
// block's start carries whole (other than the empty object streamed deltas fill).
func (c *UnmodelledCounter) serverToolInput(ev sse.Event) int {
	start := ev.Name == "content_block_start"
	if ev.Name == "" || ev.Name == "message" {
		start = dataType(ev.Data) == "content_block_start" // an event without its name
	}
	if start {
		if !bytes.Contains(ev.Data, serverToolMark) {
			return 0
		}
		block, _ := member(ev.Data, "content_block")
		if dataType(block) != "server_tool_use" {
			return 0
		}
		if index, ok := blockIndex(ev.Data); ok {
			c.serverTools = append(c.serverTools, index)
		}
		if input, _ := member(block, "input"); len(input) > 0 && input[0] == '{' && !isEmptyObject(input) {
			return len(input)
		}
		return 0
	}
	if len(c.serverTools) == 0 {
		return 0
	}
	if index, ok := blockIndex(ev.Data); !ok || !slices.Contains(c.serverTools, index) {
		return 0
	}
	delta, _ := member(ev.Data, "delta")
	if dataType(delta) != "input_json_delta" {
		return 0
	}
	return memberLen(delta, "partial_json")
}

// blockIndex is a Messages event's top-level index.
func blockIndex(data []byte) (int, bool) {
	val, ok := member(data, "index")
	if !ok {
		return 0, false
	}
	return intOf(val)
}

// isEmptyObject reports whether val is an empty JSON object.
func isEmptyObject(val []byte) bool {
	i := skipWS(val, 1)
	return len(val) > 0 && val[0] == '{' && i < len(val) && val[i] == '}'
}

// dataType is the top-level type of an event's JSON data, or "" when it has none.
func dataType(data []byte) string {
	typ, _ := member(data, "type")
	s, _ := stringOf(typ)
	return s
}

// modelledResponsesDeltas are the Responses delta events the decoder turns into neutral events
// (whose text the caller counts itself): a refusal delta is text to the neutral form.
var modelledResponsesDeltas = map[string]bool{
	"response.output_text.delta":             true,
	"response.refusal.delta":                 true,
	"response.function_call_arguments.delta": true,
}

// chunkChoices reports whether a chat chunk has a choices array, and whether it is empty (the
// usage chunk that stream_options.include_usage adds at the end).
func chunkChoices(chunk []byte) (has, empty bool) {
	val, ok := member(chunk, "choices")
	if !ok || len(val) == 0 || val[0] != '[' {
		return false, false
	}
	return true, isEmptyArray(val)
}

// isUsageChunk reports whether a chat chunk without a choices array carries a usage object.
func isUsageChunk(chunk []byte) bool {
	val, ok := member(chunk, "usage")
	return ok && len(val) > 0 && val[0] == '{'
}

// thinkingLen is the length of a Messages content_block_delta's thinking text (0 for another
// delta).
func thinkingLen(data []byte) int {
	delta, _ := member(data, "delta")
	return memberLen(delta, "thinking")
}

// reasoningMark is in every chat chunk that carries reasoning: the start of the name of a
// reasoning_content or reasoning member.
var reasoningMark = []byte(`"reasoning`)

// chatReasoningLen is the length of the reasoning a chat chunk's choice 0 delta carries, which
// the chat completions API of OpenAI does not have and compatible servers add beside the
// content: DeepSeek's reasoning models stream it as delta.reasoning_content
// (api-docs.deepseek.com, "Reasoning Model (deepseek-reasoner)"), vLLM as delta.reasoning
// (docs.vllm.ai, "Reasoning Outputs"; its earlier versions named it reasoning_content),
// OpenRouter as delta.reasoning and as delta.reasoning_details (openrouter.ai/docs, "Reasoning
// Tokens"; convert.ReasoningDetailsLen reads the array), or in reasoning_details alone. A delta
// with several of the names carries the same text several times: the longest counts. A chunk
// without reasoning (most of a stream) costs one bytes.Contains over its data; only a chunk
// that has the mark is scanned.
func chatReasoningLen(chunk []byte) int {
	if !bytes.Contains(chunk, reasoningMark) {
		return 0
	}
	choices, _ := member(chunk, "choices")
	if len(choices) == 0 || choices[0] != '[' {
		return 0
	}
	// Choice 0, as the decoder follows it: the first whose index is 0 (or absent).
	for i := skipWS(choices, 1); i < len(choices) && choices[i] == '{'; {
		end := scanValue(choices, i)
		if end < 0 {
			return 0
		}
		choice := choices[i:end]
		if index, ok := member(choice, "index"); !ok || string(index) == "0" || isNull(index) {
			delta, _ := member(choice, "delta")
			details, _ := member(delta, "reasoning_details")
			return max(memberLen(delta, "reasoning_content"), memberLen(delta, "reasoning"), convert.ReasoningDetailsLen(details))
		}
		if i = skipWS(choices, end); i < len(choices) && choices[i] == ',' {
			i = skipWS(choices, i+1)
		}
	}
	return 0
}

// memberLen is the length in bytes of the string member name of the object data, as sent
// (escapes included), or 0.
func memberLen(data []byte, name string) int {
	val, ok := member(data, name)
	if !ok || len(val) < 2 || val[0] != '"' {
		return 0
	}
	return len(val) - 2
}

// isEmptyArray reports whether val is an empty JSON array.
func isEmptyArray(val []byte) bool {
	if len(val) < 2 || val[0] != '[' {
		return false
	}
	i := skipWS(val, 1)
	return i < len(val) && val[i] == ']'
}

// sequenceNumber is a Responses event's top-level sequence_number.
func sequenceNumber(data []byte) (int64, bool) {
	val, ok := member(data, "sequence_number")
	if !ok {
		return 0, false
	}
	n, ok := intOf(val)
	return int64(n), ok
}

// note records what the Responses event ev gives the client of the output's items.
func (it *responsesItems) note(ev sse.Event) {
	switch ev.Name {
	case "response.output_item.added":
		if item, ok := member(ev.Data, "item"); ok {
			it.open, it.openText = append(it.open[:0], item...), it.openText[:0]
		}
	case "response.output_item.done":
		if item, ok := member(ev.Data, "item"); ok {
			it.done = append(it.done, bytes.Clone(item))
			it.open, it.openText = it.open[:0], it.openText[:0]
		}
	case "response.output_text.delta", "response.function_call_arguments.delta":
		if d, ok := member(ev.Data, "delta"); ok && len(it.open) > 0 && len(d) >= 2 && d[0] == '"' {
			it.openText = append(it.openText, d[1:len(d)-1]...)
		}
	}
}

// appendTo appends the items, separated by commas, to dst: the finished ones as the upstream
// sent them, then the open one marked incomplete, holding the text (a message) or the arguments
// (a function call) its deltas carried.
func (it *responsesItems) appendTo(dst []byte) []byte {
	for i, item := range it.done {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, item...)
	}
	if len(it.open) == 0 {
		return dst
	}
	var v jsonview.View
	if v.Parse(it.open) != nil {
		return dst
	}
	if len(it.done) > 0 {
		dst = append(dst, ',')
	}
	var edits jsonview.Edits
	edits.Set(&v, "status", []byte(`"incomplete"`))
	text := append(append([]byte{'"'}, it.openText...), '"')
	switch typ, _ := member(it.open, "type"); string(typ) {
	case `"message"`:
		part := append(append([]byte(`[{"type":"output_text","annotations":[],"text":`), text...), "}]"...)
		edits.Set(&v, "content", part)
	case `"function_call"`:
		edits.Set(&v, "arguments", text)
	}
	return edits.AppendTo(dst, &v)
}
