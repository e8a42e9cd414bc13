package streamconv

import (
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// chatDecoder decodes OpenAI chat completion chunks (wire-protocols.md §1.5, §1.7). Only
// choice 0 is followed: a streamed conversion serves one choice.
type chatDecoder struct {
	started bool
	stopped bool
	failed  bool
	// tools holds, by neutral tool index, the chat tool_calls index each call came from and
	// the pair of its arguments.
	tools []chatTool
	chunk chatChunk
	// pair joins a character split between two content deltas.
	pair surrogatePair
	// refused says whether the answer had refusal deltas: one that ends with finish_reason
	// stop stops as a refusal, as a complete one does (convert).
	refused bool
}

// chatTool is a tool call of the stream: its chat tool_calls index, and the pair that joins a
// character split between two fragments of its arguments (a call's fragments may interleave
// with another call's, so each call has its own).
type chatTool struct {
	index int
	pair  surrogatePair
}

type chatChunk struct {
	ID      string       `json:"id"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage"`
	Error   *wireError   `json:"error"`
	// ServiceTier is read from the chunk that carries the usage (OpenAI repeats the tier on
	// every chunk), so that the fast path, which takes no usage chunk, need not read it.
	ServiceTier convert.ServiceTier `json:"service_tier"`
}

type chatChoice struct {
	Index        int       `json:"index"`
	Delta        chatDelta `json:"delta"`
	FinishReason string    `json:"finish_reason"`
}

type chatDelta struct {
	// Content is the content's JSON token, read through the pair on this path as on the fast
	// one.
	Content   deltaToken     `json:"content"`
	Refusal   string         `json:"refusal"`
	ToolCalls []chatToolCall `json:"tool_calls"`
}

type chatToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name string `json:"name"`
		// Arguments is the token, read through the call's pair.
		Arguments deltaToken `json:"arguments"`
	} `json:"function"`
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
		AudioTokens  int64 `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
		AudioTokens     int64 `json:"audio_tokens"`
	} `json:"completion_tokens_details"`
}

// Decode implements Decoder.
func (d *chatDecoder) Decode(ev sse.Event, out []llm.Event) ([]llm.Event, bool, error) {
	if isDone(ev.Data) {
		return d.flush(out), true, nil
	}
	if len(ev.Data) == 0 || d.failed {
		return out, false, nil
	}
	if !disableFastPath {
		if f, ok := chatFast(ev.Data, !d.started); ok && (d.started || f.toolCall == nil) {
			if !d.started {
				d.started = true
				out = append(out, llm.Event{Kind: llm.EventStart, ID: f.id, Model: f.model})
			}
			if f.toolCall == nil {
				text := f.text
				if d.pair.high != 0 || endsWithHighSurrogate(f.textTok) {
					text, _ = d.pair.text(f.textTok) // a token stringOf read
				}
				if text != "" {
					out = append(out, llm.Event{Kind: llm.EventTextDelta, Text: text})
				}
				return out, false, nil
			}
			if n := d.toolIndex(f.toolIndex); n >= 0 {
				out = d.pair.flush(out)
				args := f.text
				if p := &d.tools[n].pair; p.high != 0 || endsWithHighSurrogate(f.textTok) {
					args, _ = p.text(f.textTok) // a token stringOf read
				}
				if args != "" {
					out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: n, Arguments: args})
				}
				return out, false, nil
			}
			// The first fragment of a call: the encoding/json path starts it.
		}
	}
	// Reuse the choices' backing array, zeroed, so that fields absent from this chunk do not
	// keep the values of an earlier one.
	choices := d.chunk.Choices[:cap(d.chunk.Choices)]
	clear(choices)
	d.chunk = chatChunk{Choices: choices[:0]}
	if err := unmarshal("chat", ev.Data, &d.chunk); err != nil {
		return out, false, err
	}
	c := &d.chunk
	if c.Error != nil {
		// In-band error (§1.7), also OpenRouter's error inside a normal chunk.
		d.failed = true
		return append(out, llm.Event{Kind: llm.EventError, Err: c.Error.streamError()}), false, nil
	}
	if !d.started {
		d.started = true
		out = append(out, llm.Event{Kind: llm.EventStart, ID: c.ID, Model: c.Model})
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		// The content is read through the pair, as on the fast path; the pair changes only
		// when a content token is read.
		if text := d.pair.textOf(ch.Delta.Content); text != "" {
			out = append(out, llm.Event{Kind: llm.EventTextDelta, Text: text})
		}
		if ch.Delta.Refusal != "" {
			// A refusal's text is read without the pair: a half held back from the text
			// before becomes U+FFFD, in its place.
			out = d.pair.flush(out)
			d.refused = true
			out = append(out, llm.Event{Kind: llm.EventTextDelta, Text: ch.Delta.Refusal, Refusal: true})
		}
		if len(ch.Delta.ToolCalls) > 0 {
			// Nothing joins a half of the text that a tool call follows.
			out = d.pair.flush(out)
		}
		for j := range ch.Delta.ToolCalls {
			out = d.toolCall(&ch.Delta.ToolCalls[j], out)
		}
		if ch.FinishReason != "" && !d.stopped {
			out = d.flush(out)
			d.stopped = true
			stop := convert.StopReasonFrom(llm.FormatChat, ch.FinishReason)
			if stop == llm.StopEnd && d.refused {
				stop = llm.StopRefusal
			}
			out = append(out, llm.Event{Kind: llm.EventStop, Stop: stop})
		}
	}
	if u := c.Usage; u != nil {
		out = append(out, llm.Event{Kind: llm.EventUsage, Usage: llm.Usage{
			InputTokens:       u.PromptTokens,
			OutputTokens:      u.CompletionTokens,
			CachedInputTokens: u.PromptTokensDetails.CachedTokens,
			ReasoningTokens:   u.CompletionTokensDetails.ReasoningTokens,
			AudioInputTokens:  u.PromptTokensDetails.AudioTokens,
			AudioOutputTokens: u.CompletionTokensDetails.AudioTokens,
			ServiceTier:       string(c.ServiceTier),
		}})
	}
	return out, false, nil
}

// toolCall turns one tool-call fragment into a ToolCallStart (the first fragment of an index)
// and a ToolCallDelta (when it carries arguments). Fragments are keyed by their index; a
// backend that sends a whole call in one fragment yields both events at once.
func (d *chatDecoder) toolCall(tc *chatToolCall, out []llm.Event) []llm.Event {
	n := d.toolIndex(tc.Index)
	if n < 0 {
		n = len(d.tools)
		d.tools = append(d.tools, chatTool{index: tc.Index})
		out = append(out, llm.Event{Kind: llm.EventToolCallStart, ToolIndex: n, ToolCallID: tc.ID, ToolName: tc.Function.Name})
	}
	if args := d.tools[n].pair.textOf(tc.Function.Arguments); args != "" {
		out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: n, Arguments: args})
	}
	return out
}

// toolIndex is the neutral index of the call with the given chat index, or -1.
func (d *chatDecoder) toolIndex(chatIndex int) int {
	for i := range d.tools {
		if d.tools[i].index == chatIndex {
			return i
		}
	}
	return -1
}

// flush gives up the halves the pairs hold when nothing more can join them (the answer stops,
// or the stream ends): each is U+FFFD, in the text or in its call's arguments.
func (d *chatDecoder) flush(out []llm.Event) []llm.Event {
	out = d.pair.flush(out)
	for i := range d.tools {
		out = d.tools[i].pair.flushArguments(i, out)
	}
	return out
}

// chatFastChunk is what the fast path read: text, or a later fragment of a tool call's
// arguments (toolCall set), and the chunk's id and model (which the first chunk's start
// event carries).
type chatFastChunk struct {
	id, model string
	text      string
	textTok   []byte // the JSON string token of the content or the arguments
	toolCall  []byte
	toolIndex int
}

// chatFast reads the common chunks: one choice 0 whose delta has content (and a role) or one
// later fragment of a tool call (index and arguments only), with no finish reason, usage or
// error. ok is false for any other chunk, which the encoding/json path then decodes. The id
// and model are read into f only when ids says so (the stream's first chunk: the decoder's
// start event is the only reader of them); in the other chunks they are checked as the
// encoding/json path would, without a string made of them for each chunk.
func chatFast(data []byte, ids bool) (f chatFastChunk, ok bool) {
	var choices []byte
	it := iterObject(data)
	for {
		k, v, more := it.next()
		if !more {
			break
		}
		switch string(k) {
		case "choices":
			if choices != nil {
				return f, false
			}
			choices = v
		case "usage", "error":
			if !isNull(v) {
				return f, false
			}
		case "id", "model":
			// As encoding/json: null leaves the field as it was, a repeated key wins.
			if isNull(v) {
				continue
			}
			if !ids {
				if !isStringToken(v) {
					return f, false
				}
				continue
			}
			str, ok := stringOf(v)
			if !ok {
				return f, false
			}
			if string(k) == "id" {
				f.id = str
			} else {
				f.model = str
			}
		default:
			if foldable(k) {
				return f, false
			}
		}
	}
	if !it.ok() || choices == nil {
		return f, false
	}
	choice, ok := soleElement(choices)
	if !ok {
		return f, false
	}
	var delta []byte
	index, finish := false, false
	it = iterObject(choice)
	for {
		k, v, more := it.next()
		if !more {
			break
		}
		switch string(k) {
		case "index":
			if index || string(v) != "0" {
				return f, false
			}
			index = true
		case "delta":
			if delta != nil {
				return f, false
			}
			delta = v
		case "finish_reason":
			if finish || !isNull(v) {
				return f, false
			}
			finish = true
		default:
			if foldable(k) {
				return f, false
			}
		}
	}
	if !it.ok() || !index || delta == nil {
		return f, false
	}
	content := false
	var tools []byte
	it = iterObject(delta)
	for {
		k, v, more := it.next()
		if !more {
			break
		}
		switch string(k) {
		case "content":
			if content {
				return f, false
			}
			content = true
			if !isNull(v) {
				if f.text, ok = stringOf(v); !ok {
					return f, false
				}
				f.textTok = v
			}
		case "tool_calls":
			if tools != nil {
				return f, false
			}
			if !isNull(v) {
				tools = v
			}
		case "refusal":
			if !isNull(v) {
				return f, false
			}
		default:
			if foldable(k) {
				return f, false
			}
		}
	}
	if !it.ok() {
		return f, false
	}
	if tools == nil {
		return f, true
	}
	if f.text != "" {
		return f, false
	}
	return chatFastToolFragment(tools)
}

// chatFastToolFragment reads tool_calls holding one fragment with only an index and an
// arguments piece: not a call's first fragment, which has an id, a type and a name.
func chatFastToolFragment(tools []byte) (f chatFastChunk, ok bool) {
	tc, ok := soleElement(tools)
	if !ok {
		return f, false
	}
	var index, fn []byte
	it := iterObject(tc)
	for {
		k, v, more := it.next()
		if !more {
			break
		}
		switch string(k) {
		case "index":
			if index != nil {
				return f, false
			}
			index = v
		case "function":
			if fn != nil {
				return f, false
			}
			fn = v
		default:
			// id, type, and anything else: the encoding/json path decides.
			return f, false
		}
	}
	if !it.ok() || index == nil || fn == nil {
		return f, false
	}
	if f.toolIndex, ok = intOf(index); !ok {
		return f, false
	}
	var args []byte
	it = iterObject(fn)
	for {
		k, v, more := it.next()
		if !more {
			break
		}
		if string(k) != "arguments" || args != nil {
			return f, false
		}
		args = v
	}
	if !it.ok() || args == nil {
		return f, false
	}
	if f.text, ok = stringOf(args); !ok {
		return f, false
	}
	f.textTok = args
	f.toolCall = tc
	return f, true
}
