package streamconv

import (
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// messagesEncoder writes Anthropic Messages stream events (wire-protocols.md §3.4, §3.5):
// every event named; message_start first; content blocks one after another, each
// content_block_start, deltas, content_block_stop, indexed by position; message_delta with the
// stop reason and the cumulative usage; message_stop. A failure is an error event, after which
// the stream closes without message_stop.
//
// Content blocks must not interleave, but a chat upstream may interleave the fragments of
// parallel tool calls (call 0, call 1, call 0 again; OpenAI sends them one after the other):
// a tool call that begins while the open tool_use block's input is not yet whole (an object
// whose closing brace has not come, argumentsShape) is held, its start and input buffered,
// until that block's input is whole, when the block stops and the held call's block starts
// with its input so far in one input_json_delta; at the end, or when text comes, the held
// calls are let out in order. A client that acts on content_block_stop (Claude Code runs the
// tool) thus gets each input whole. The cost falls on such upstreams alone: the held call's
// input reaches the client later and in one piece, and is kept in memory until then.
//
// message_start is held back until the first content (or the end), so that the input token
// count an upstream reports right after its start (Anthropic's own message_start) is the real
// one; otherwise Meta.InputTokensEstimate stands in, and message_delta repeats the real count
// once known.
//
// Usage: Anthropic's input_tokens exclude the tokens read from and written to the cache, which
// are reported as cache_read_input_tokens and cache_creation_input_tokens (message_start also
// breaks the writes down by time to live and names the service tier); the neutral InputTokens
// include them (convert.AppendMessagesUsage).
type messagesEncoder struct {
	meta      Meta
	em        emitter
	started   bool
	ended     bool
	id        string
	model     string
	startID   string
	startMod  string
	blocks    int
	openBlock int // -1: none
	openText  bool
	// tools are the tool calls by neutral tool index.
	tools []messagesCall
	// held are the neutral indexes of calls held back, in the order they began.
	held    []int
	stop    llm.StopReason
	stopSeq string
	usage   llm.Usage
}

// messagesCall is one tool call of the answer.
type messagesCall struct {
	// block is its content block index, -1 while it is held (or for an index that never
	// began).
	block    int
	id, name string
	// input is the input that came while the call was held.
	input []byte
	// shape follows the input, to tell when it is whole.
	shape argumentsShape
}

// Encode implements Encoder.
func (m *messagesEncoder) Encode(ev llm.Event, out []sse.Event) []sse.Event {
	if ev.Kind == llm.EventUsage {
		m.usage = mergeUsage(m.usage, ev.Usage)
		return out
	}
	if m.ended {
		return out
	}
	if ev.Kind == llm.EventError {
		t, msg := errorOf(ev.Err)
		return m.Fail(t, msg, out)
	}
	m.em.reset()
	switch ev.Kind {
	case llm.EventStart:
		if !m.started {
			m.startID, m.startMod = ev.ID, ev.Model
		}
	case llm.EventTextDelta:
		if ev.Text == "" || m.stop != "" {
			break
		}
		m.start()
		if m.openBlock < 0 || !m.openText {
			m.closeBlock()
			m.releaseHeld(true)
			m.closeBlock()
			m.openBlock, m.openText = m.blocks, true
			m.blocks++
			s := m.em.begin()
			m.em.buf = append(m.em.buf, `{"type":"content_block_start","index":`...)
			m.em.buf = appendInt(m.em.buf, int64(m.openBlock))
			m.em.buf = append(m.em.buf, `,"content_block":{"type":"text","text":""}}`...)
			m.em.end("content_block_start", s)
		}
		s := m.em.begin()
		m.em.buf = append(m.em.buf, `{"type":"content_block_delta","index":`...)
		m.em.buf = appendInt(m.em.buf, int64(m.openBlock))
		m.em.buf = append(m.em.buf, `,"delta":{"type":"text_delta","text":`...)
		m.em.buf = appendString(m.em.buf, ev.Text)
		m.em.buf = append(m.em.buf, "}}"...)
		m.em.end("content_block_delta", s)
	case llm.EventToolCallStart:
		if m.stop != "" || ev.ToolIndex < 0 {
			break
		}
		m.start()
		for len(m.tools) <= ev.ToolIndex {
			m.tools = append(m.tools, messagesCall{block: -1})
		}
		id := ev.ToolCallID
		if id == "" {
			id = derivedID("toolu_", m.id, ev.ToolIndex)
		}
		m.tools[ev.ToolIndex] = messagesCall{block: -1, id: id, name: ev.ToolName}
		if len(m.held) > 0 || m.openToolUnfinished() {
			m.held = append(m.held, ev.ToolIndex)
			break
		}
		m.closeBlock()
		m.startToolBlock(ev.ToolIndex)
	case llm.EventToolCallDelta:
		if ev.Arguments == "" || m.stop != "" || ev.ToolIndex < 0 || ev.ToolIndex >= len(m.tools) || m.tools[ev.ToolIndex].id == "" {
			break
		}
		c := &m.tools[ev.ToolIndex]
		c.shape.feed(ev.Arguments)
		if c.block < 0 {
			c.input = append(c.input, ev.Arguments...)
			break
		}
		// A delta for a call whose block was already closed (input that looked whole and
		// went on, or text came between) is still sent at that block's index: the SDK
		// accumulators address blocks by index.
		m.inputDelta(c.block, ev.Arguments)
		if len(m.held) > 0 && c.block == m.openBlock && c.shape.whole() {
			m.closeBlock()
			m.releaseHeld(false)
		}
	case llm.EventStop:
		if m.stop == "" {
			m.stop, m.stopSeq = ev.Stop, ev.StopSequence
			if m.stop == "" {
				m.stop = llm.StopEnd
			}
		}
	}
	return m.em.flush(out)
}

// Finish implements Encoder.
func (m *messagesEncoder) Finish(out []sse.Event) []sse.Event {
	if m.ended {
		return out
	}
	m.ended = true
	m.em.reset()
	m.start()
	m.closeBlock()
	m.releaseHeld(true)
	m.closeBlock()
	stop := effectiveStop(m.stop, len(m.tools) > 0)
	s := m.em.begin()
	m.em.buf = append(m.em.buf, `{"type":"message_delta","delta":{"stop_reason":`...)
	m.em.buf = appendString(m.em.buf, convert.StopReasonFor(llm.FormatMessages, stop))
	m.em.buf = append(m.em.buf, `,"stop_sequence":`...)
	if stop == llm.StopSequence && m.stopSeq != "" {
		m.em.buf = appendString(m.em.buf, m.stopSeq)
	} else {
		m.em.buf = append(m.em.buf, "null"...)
	}
	m.em.buf = append(m.em.buf, `},"usage":`...)
	if m.usage.InputTokens > 0 {
		// The cumulative counts, input included: message_start had only an estimate when
		// the upstream tells its input count at the end.
		m.em.buf = convert.AppendMessagesDeltaUsage(m.em.buf, m.usage)
	} else {
		m.em.buf = append(m.em.buf, `{"output_tokens":`...)
		m.em.buf = appendInt(m.em.buf, m.usage.OutputTokens)
		m.em.buf = append(m.em.buf, '}')
	}
	m.em.buf = append(m.em.buf, '}')
	m.em.end("message_delta", s)
	s = m.em.begin()
	m.em.buf = append(m.em.buf, `{"type":"message_stop"}`...)
	m.em.end("message_stop", s)
	return m.em.flush(out)
}

// Fail implements Encoder: an error event with the Messages envelope; the stream then closes
// without message_stop (§3.5).
func (m *messagesEncoder) Fail(errType, message string, out []sse.Event) []sse.Event {
	if m.ended {
		return out
	}
	m.ended = true
	m.em.reset()
	s := m.em.begin()
	m.em.buf = append(m.em.buf, `{"type":"error","error":{"type":`...)
	m.em.buf = appendString(m.em.buf, anthropicErrorType(errType))
	m.em.buf = append(m.em.buf, `,"message":`...)
	m.em.buf = appendString(m.em.buf, message)
	m.em.buf = append(m.em.buf, "}}"...)
	m.em.end("error", s)
	return m.em.flush(out)
}

// Usage implements Encoder.
func (m *messagesEncoder) Usage() llm.Usage { return m.usage }

// start sends message_start once, with the input tokens known by now or the estimate.
func (m *messagesEncoder) start() {
	if m.started {
		return
	}
	m.started = true
	m.openBlock = -1
	m.id, m.model = m.startID, m.startMod
	if m.meta.ID != "" {
		m.id = m.meta.ID
	}
	if m.meta.Model != "" {
		m.model = m.meta.Model
	}
	// The counts known by now, or the estimate; the output is a placeholder, as Anthropic's.
	u := llm.Usage{InputTokens: m.meta.InputTokensEstimate, ServiceTier: m.usage.ServiceTier}
	if m.usage.InputTokens > 0 {
		u = m.usage
		u.ReasoningTokens = 0
	}
	u.OutputTokens = 1
	s := m.em.begin()
	m.em.buf = append(m.em.buf, `{"type":"message_start","message":{"id":`...)
	m.em.buf = appendString(m.em.buf, m.id)
	m.em.buf = append(m.em.buf, `,"type":"message","role":"assistant","content":[],"model":`...)
	m.em.buf = appendString(m.em.buf, m.model)
	m.em.buf = append(m.em.buf, `,"stop_reason":null,"stop_sequence":null,"usage":`...)
	m.em.buf = convert.AppendMessagesUsage(m.em.buf, u)
	m.em.buf = append(m.em.buf, "}}"...)
	m.em.end("message_start", s)
}

// openToolUnfinished reports whether the open block is a tool call's whose input is not whole
// yet.
func (m *messagesEncoder) openToolUnfinished() bool {
	if m.openBlock < 0 || m.openText {
		return false
	}
	for i := range m.tools {
		if m.tools[i].block == m.openBlock {
			return !m.tools[i].shape.whole()
		}
	}
	return false
}

// startToolBlock opens the content block of tool call n with content_block_start.
func (m *messagesEncoder) startToolBlock(n int) {
	c := &m.tools[n]
	m.openBlock, m.openText = m.blocks, false
	m.blocks++
	c.block = m.openBlock
	s := m.em.begin()
	m.em.buf = append(m.em.buf, `{"type":"content_block_start","index":`...)
	m.em.buf = appendInt(m.em.buf, int64(m.openBlock))
	m.em.buf = append(m.em.buf, `,"content_block":{"type":"tool_use","id":`...)
	m.em.buf = appendString(m.em.buf, c.id)
	m.em.buf = append(m.em.buf, `,"name":`...)
	m.em.buf = appendString(m.em.buf, c.name)
	m.em.buf = append(m.em.buf, `,"input":{}}}`...)
	m.em.end("content_block_start", s)
}

// inputDelta sends an input_json_delta of block.
func (m *messagesEncoder) inputDelta(block int, partial string) {
	s := m.em.begin()
	m.em.buf = append(m.em.buf, `{"type":"content_block_delta","index":`...)
	m.em.buf = appendInt(m.em.buf, int64(block))
	m.em.buf = append(m.em.buf, `,"delta":{"type":"input_json_delta","partial_json":`...)
	m.em.buf = appendString(m.em.buf, partial)
	m.em.buf = append(m.em.buf, "}}"...)
	m.em.end("content_block_delta", s)
}

// releaseHeld starts the blocks of the held calls, in order, each with the input it has so
// far, once no block is open: each one whose input is whole is stopped and the next let out;
// the first that is not stays open (its later deltas stream as they come) and the rest stay
// held. all lets every held call out, stopping each but the last, whole or not: the answer is
// ending, or text follows.
func (m *messagesEncoder) releaseHeld(all bool) {
	for len(m.held) > 0 {
		n := m.held[0]
		m.held = m.held[1:]
		m.startToolBlock(n)
		c := &m.tools[n]
		if len(c.input) > 0 {
			m.inputDelta(c.block, string(c.input))
			c.input = nil
		}
		if len(m.held) == 0 || !all && !c.shape.whole() {
			return
		}
		m.closeBlock()
	}
}

// closeBlock sends content_block_stop for the open block, if any.
func (m *messagesEncoder) closeBlock() {
	if m.openBlock < 0 {
		return
	}
	s := m.em.begin()
	m.em.buf = append(m.em.buf, `{"type":"content_block_stop","index":`...)
	m.em.buf = appendInt(m.em.buf, int64(m.openBlock))
	m.em.buf = append(m.em.buf, '}')
	m.em.end("content_block_stop", s)
	m.openBlock = -1
}
