package streamconv

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// messagesDecoder decodes Anthropic Messages stream events (wire-protocols.md §3.4, §3.5).
//
// Usage: the neutral InputTokens count all input tokens, as OpenAI's prompt_tokens do,
// CachedInputTokens the part of them read from the cache and CacheWrite5mTokens and
// CacheWrite1hTokens the parts written to it. Anthropic's input_tokens exclude the cache reads
// and writes, so InputTokens is input_tokens + cache_read_input_tokens +
// cache_creation_input_tokens (convert.AnthropicCounts), and the compaction iterations a usage
// report lists are added to them (convert.AnthropicCounts.Compaction). message_start carries
// the input, cache and tier counts, message_delta the cumulative output and, in newer API
// versions, the input and cache counts again: each count is the latest non-zero one reported,
// so that a stream cut short keeps message_start's.
type messagesDecoder struct {
	started bool
	stopped bool
	failed  bool
	// blocks holds, per content block index, the neutral tool index of a tool_use block,
	// blockText for a text block, or blockOther for a block the neutral form has no place for
	// (thinking, redacted_thinking, server tools: dropped; their tokens are in the usage).
	blocks []int
	// argsSeen is indexed by neutral tool index.
	argsSeen []bool
	// counts are the Anthropic usage counts so far; inputKnown says whether any input count
	// was reported.
	counts     convert.AnthropicCounts
	inputKnown bool
	// searches is the web searches usage.server_tool_use reported; blockCalls the hosted-tool
	// calls among the server_tool_use blocks seen.
	searches   int64
	blockCalls llm.HostedCalls
	ev         msgEvent
	// pair joins a character split between two text deltas, args one split between two
	// input_json_delta events of the tool call argsTool (blocks do not interleave, §3.4: one
	// pair serves the block open).
	pair     surrogatePair
	args     surrogatePair
	argsTool int
	// chars counts the characters of the text decoded so far; blockAt is the count when the
	// open text block began, and cited the web pages its citations name, sent as citations of
	// the whole block when it stops (Anthropic cites a block's whole text).
	chars   int
	blockAt int
	cited   []llm.Citation
}

const (
	blockText  = -1
	blockOther = -2
)

type msgEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID    string   `json:"id"`
		Model string   `json:"model"`
		Usage msgUsage `json:"usage"`
	} `json:"message"`
	Index        int `json:"index"`
	ContentBlock *struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
		// Text is the block's initial text, read through the text's pair as a delta is.
		Text      deltaToken      `json:"text"`
		Input     json.RawMessage `json:"input"`
		Citations []msgCitation   `json:"citations"`
	} `json:"content_block"`
	Delta *struct {
		Type string `json:"type"`
		// Text and PartialJSON are the tokens, read through the pairs on this path as on
		// the fast one.
		Text         deltaToken `json:"text"`
		PartialJSON  deltaToken `json:"partial_json"`
		StopReason   string     `json:"stop_reason"`
		StopSequence string     `json:"stop_sequence"`
		// Citation is a citations_delta's citation.
		Citation *msgCitation `json:"citation"`
	} `json:"delta"`
	Usage *msgUsage  `json:"usage"`
	Error *wireError `json:"error"`
}

// msgCitation is a citation of a text block; only a web page's (web_search_result_location)
// has a place in the OpenAI formats.
type msgCitation struct {
	Type  string `json:"type"`
	URL   string `json:"url"`
	Title string `json:"title"`
}

// cite notes c, a citation of the open text block.
func (d *messagesDecoder) cite(c *msgCitation) {
	if c != nil && c.Type == "web_search_result_location" {
		d.cited = append(d.cited, llm.Citation{URL: c.URL, Title: c.Title})
	}
}

type msgUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreation            *struct {
		Ephemeral5mInputTokens int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	ServiceTier         convert.ServiceTier `json:"service_tier"`
	OutputTokensDetails *struct {
		ThinkingTokens int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
	ServerToolUse *struct {
		WebSearchRequests int64 `json:"web_search_requests"`
	} `json:"server_tool_use"`
	Iterations []convert.MessagesIterationWire `json:"iterations"`
}

// take records the counts present in an Anthropic usage report. They are cumulative, and a
// later report may repeat only some of them, or repeat them as zeros: an input or cache count
// is the latest non-zero one. message_start's output_tokens is a placeholder, so output counts
// are taken only when output is set.
func (d *messagesDecoder) take(m *msgUsage, output bool) {
	c := &d.counts
	set := func(dst *int64, p *int64) {
		if p != nil {
			d.inputKnown = true
			if *p != 0 {
				*dst = *p
			}
		}
	}
	set(&c.Input, m.InputTokens)
	set(&c.CacheRead, m.CacheReadInputTokens)
	set(&c.CacheWrite, m.CacheCreationInputTokens)
	if b := m.CacheCreation; b != nil {
		set(&c.CacheWrite5m, &b.Ephemeral5mInputTokens)
		set(&c.CacheWrite1h, &b.Ephemeral1hInputTokens)
	}
	if m.ServiceTier != "" {
		c.ServiceTier = string(m.ServiceTier)
	}
	if m.ServerToolUse != nil {
		d.searches = max(d.searches, m.ServerToolUse.WebSearchRequests)
	}
	if len(m.Iterations) > 0 {
		// The iterations so far, each report whole: the compaction steps are summed anew
		// (convert.AnthropicCounts.Compaction), and a report without any keeps the last.
		var k convert.AnthropicCounts
		for _, it := range m.Iterations {
			k.AddIteration(it.Type, it.Counts())
		}
		if k.Compaction != (convert.AnthropicIteration{}) {
			c.Compaction = k.Compaction
		}
	}
	if !output {
		return
	}
	if m.OutputTokens != nil {
		c.Output = *m.OutputTokens
	}
	if m.OutputTokensDetails != nil {
		c.Thinking = m.OutputTokensDetails.ThinkingTokens
	}
}

// usage is the neutral usage of the counts recorded so far.
func (d *messagesDecoder) usage() llm.Usage {
	u := d.counts.Usage()
	u.HostedCalls = d.blockCalls
	u.HostedCalls[llm.HostedWebSearch] = max(u.HostedCalls[llm.HostedWebSearch], d.searches)
	return u
}

// Decode implements Decoder.
func (d *messagesDecoder) Decode(ev sse.Event, out []llm.Event) ([]llm.Event, bool, error) {
	n := len(out)
	out, done, err := d.decode(ev, out)
	for i := n; i < len(out); i++ {
		if out[i].Kind == llm.EventTextDelta {
			d.chars += utf8.RuneCountInString(out[i].Text)
		}
	}
	return out, done, err
}

// decode decodes one event (Decode), but for the count of the text's characters.
func (d *messagesDecoder) decode(ev sse.Event, out []llm.Event) ([]llm.Event, bool, error) {
	if len(ev.Data) == 0 || d.failed {
		return out, false, nil
	}
	typ := ev.Name
	if typ == "" || typ == "message" {
		var err error
		if typ, err = eventType("Messages", ev.Data); err != nil {
			return out, false, err
		}
	}
	switch typ {
	case "message_start", "content_block_start", "content_block_delta", "content_block_stop",
		"message_delta", "error":
	case "message_stop":
		return out, true, nil
	default:
		// ping, and event types added later (clients must tolerate them, §3.4).
		return out, false, nil
	}
	if typ == "content_block_delta" && d.started && !disableFastPath {
		if out, ok := d.fastDelta(ev.Data, out); ok {
			return out, false, nil
		}
	}
	d.ev = msgEvent{}
	if err := unmarshal("Messages", ev.Data, &d.ev); err != nil {
		return out, false, err
	}
	e := &d.ev
	if !d.started && typ != "error" {
		d.started = true
		var id, model string
		if e.Message != nil {
			id, model = e.Message.ID, e.Message.Model
		}
		out = append(out, llm.Event{Kind: llm.EventStart, ID: id, Model: model})
	}
	switch typ {
	case "message_start":
		if e.Message != nil {
			d.take(&e.Message.Usage, false)
			if d.inputKnown {
				out = append(out, llm.Event{Kind: llm.EventUsage, Usage: d.usage()})
			}
		}
	case "content_block_start":
		if e.Index < 0 || e.Index > 1<<16 {
			break
		}
		for len(d.blocks) <= e.Index {
			d.blocks = append(d.blocks, blockOther)
		}
		cb := e.ContentBlock
		if cb == nil {
			break
		}
		switch cb.Type {
		case "server_tool_use":
			if t, hosted := convert.ServerToolCall(cb.Name); hosted {
				// Billed per call: counted as it starts, in case the stream ends early.
				d.blockCalls[t]++
				out = append(out, llm.Event{Kind: llm.EventUsage, Usage: d.usage()})
			}
		case "text":
			d.blocks[e.Index] = blockText
			d.blockAt, d.cited = d.chars, d.cited[:0]
			for i := range cb.Citations {
				d.cite(&cb.Citations[i])
			}
			// The block's initial text is read as its deltas are: a character split between
			// it and the first delta is joined whole.
			if text := d.pair.textOf(cb.Text); text != "" {
				out = append(out, llm.Event{Kind: llm.EventTextDelta, Text: text})
			}
		case "tool_use":
			n := len(d.argsSeen)
			d.blocks[e.Index] = n
			d.argsSeen = append(d.argsSeen, false)
			out = append(out, llm.Event{Kind: llm.EventToolCallStart, ToolIndex: n, ToolCallID: cb.ID, ToolName: cb.Name})
			if in := bytes.TrimSpace(cb.Input); len(in) > 0 && string(in) != "{}" && string(in) != "null" {
				var buf bytes.Buffer
				if json.Compact(&buf, in) == nil {
					d.argsSeen[n] = true
					out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: n, Arguments: buf.String()})
				}
			}
		}
	case "content_block_delta":
		if e.Delta == nil || e.Index < 0 || e.Index >= len(d.blocks) {
			break
		}
		// The pairs change only when a token is read: a delta of another type leaves them.
		switch b := d.blocks[e.Index]; {
		case b == blockText && e.Delta.Type == "text_delta":
			if text := d.pair.textOf(e.Delta.Text); text != "" {
				out = append(out, llm.Event{Kind: llm.EventTextDelta, Text: text})
			}
		case b == blockText && e.Delta.Type == "citations_delta":
			d.cite(e.Delta.Citation)
		case b >= 0 && e.Delta.Type == "input_json_delta":
			if args, _ := d.argsOf(b, e.Delta.PartialJSON, &out); args != "" {
				d.argsSeen[b] = true
				out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: b, Arguments: args})
			}
		}
	case "content_block_stop":
		k := len(out)
		out = d.pair.flush(out)
		if len(d.cited) > 0 {
			// The block's text is whole: its citations cite all of it (Decode counts the
			// characters of the flushed half after this).
			end := d.chars
			for _, t := range out[k:] {
				end += utf8.RuneCountInString(t.Text)
			}
			for _, c := range d.cited {
				c.Start, c.End = d.blockAt, end
				out = append(out, llm.Event{Kind: llm.EventCitation, Citation: &c})
			}
			d.cited = d.cited[:0]
		}
		if e.Index >= 0 && e.Index < len(d.blocks) {
			if b := d.blocks[e.Index]; b >= 0 {
				if d.args.high != 0 && d.argsTool == b {
					d.argsSeen[b] = true
					out = d.args.flushArguments(b, out)
				}
				if !d.argsSeen[b] {
					// A tool called without arguments: its input is the empty object, and an
					// OpenAI client must get arguments it can parse.
					d.argsSeen[b] = true
					out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: b, Arguments: "{}"})
				}
			}
		}
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" && !d.stopped {
			d.stopped = true
			stop := convert.StopReasonFrom(llm.FormatMessages, e.Delta.StopReason)
			ev := llm.Event{Kind: llm.EventStop, Stop: stop}
			if stop == llm.StopSequence {
				ev.StopSequence = e.Delta.StopSequence
			}
			out = append(out, ev)
		}
		if e.Usage != nil {
			d.take(e.Usage, true)
			out = append(out, llm.Event{Kind: llm.EventUsage, Usage: d.usage()})
		}
	case "error":
		d.failed = true
		se := newStreamError("", "", "")
		if e.Error != nil {
			se = e.Error.streamError()
		}
		out = append(out, llm.Event{Kind: llm.EventError, Err: se})
	}
	return out, false, nil
}

// argsOf reads tok, the token of an input_json_delta of tool call n, through the arguments'
// pair, first giving up, into out, a half that another call's block left held (a block that
// ended without content_block_stop). Like surrogatePair.text, it changes nothing when the
// token does not read (ok false).
func (d *messagesDecoder) argsOf(n int, tok []byte, out *[]llm.Event) (string, bool) {
	if d.args.high != 0 && d.argsTool != n {
		if _, ok := stringOf(tok); !ok {
			return "", false
		}
		*out = d.args.flushArguments(d.argsTool, *out)
	}
	s, ok := d.args.text(tok)
	if ok {
		d.argsTool = n
	}
	return s, ok
}

// fastDelta decodes the common content_block_delta events (text_delta, input_json_delta, and
// those the neutral form drops) without encoding/json; ok is false for anything unusual.
func (d *messagesDecoder) fastDelta(data []byte, out []llm.Event) ([]llm.Event, bool) {
	var index, delta []byte
	it := iterObject(data)
	for {
		k, v, more := it.next()
		if !more {
			break
		}
		switch string(k) {
		case "index":
			if index != nil {
				return out, false
			}
			index = v
		case "delta":
			if delta != nil {
				return out, false
			}
			delta = v
		default:
			if foldable(k) {
				return out, false
			}
		}
	}
	if !it.ok() || index == nil || delta == nil {
		return out, false
	}
	idx, ok := intOf(index)
	if !ok {
		return out, false
	}
	var typ, text, partial []byte
	it = iterObject(delta)
	for {
		k, v, more := it.next()
		if !more {
			break
		}
		var dst *[]byte
		switch string(k) {
		case "type":
			dst = &typ
		case "text":
			dst = &text
		case "partial_json":
			dst = &partial
		default:
			if foldable(k) {
				return out, false
			}
			continue
		}
		if *dst != nil {
			return out, false
		}
		*dst = v
	}
	if !it.ok() || typ == nil {
		return out, false
	}
	if idx >= len(d.blocks) {
		return out, true
	}
	b := d.blocks[idx]
	switch string(typ) {
	case `"text_delta"`:
		if text == nil {
			return out, true
		}
		s, ok := d.pair.text(text)
		if !ok {
			return out, false
		}
		if b == blockText && s != "" {
			out = append(out, llm.Event{Kind: llm.EventTextDelta, Text: s})
		}
	case `"input_json_delta"`:
		if partial == nil {
			return out, true
		}
		var s string
		if b < 0 {
			s, ok = stringOf(partial)
		} else {
			s, ok = d.argsOf(b, partial, &out)
		}
		if !ok {
			return out, false
		}
		if b >= 0 && s != "" {
			d.argsSeen[b] = true
			out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: b, Arguments: s})
		}
	case `"citations_delta"`:
		// A text block's citation: read by encoding/json, as it is rare.
		return out, false
	default:
		// thinking_delta, signature_delta: nothing to carry; but a type given with escapes
		// is left to encoding/json.
		if bytes.IndexByte(typ, '\\') >= 0 || typ[0] != '"' {
			return out, false
		}
	}
	return out, true
}
