package streamconv

import (
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// chatEncoder writes OpenAI chat completion chunks (wire-protocols.md §1.5, §1.7): data-only
// events, one choice, the role chunk first, the finish chunk, the usage chunk only when asked
// for, then [DONE]. A normal chunk never has an "error" key: openai-go aborts on its presence.
type chatEncoder struct {
	meta    Meta
	em      emitter
	started bool
	ended   bool
	id      string
	// tools records which neutral tool indexes have started.
	tools []bool
	stop  llm.StopReason
	usage llm.Usage
	// prefix is the start of every chunk: {"id":…,"object":…,"created":…,"model":…,
	// "system_fingerprint":null,"service_tier":…, with the tier of tier.
	prefix []byte
	// model is the model every chunk names, and tier the service tier they name: default until
	// the upstream says which served the answer.
	model, tier string
}

// Encode implements Encoder.
func (c *chatEncoder) Encode(ev llm.Event, out []sse.Event) []sse.Event {
	if ev.Kind == llm.EventUsage {
		c.usage = mergeUsage(c.usage, ev.Usage)
		if c.started && convert.OpenAIServiceTier(c.usage.ServiceTier) != c.tier {
			// The chunks from now on name the tier that serves the answer, as OpenAI's do; the
			// SDK accumulators keep the last one.
			c.setPrefix()
		}
		return out
	}
	if c.ended {
		return out
	}
	if ev.Kind == llm.EventError {
		t, m := errorOf(ev.Err)
		return c.Fail(t, m, out)
	}
	c.em.reset()
	switch ev.Kind {
	case llm.EventStart:
		c.start(ev.ID, ev.Model)
	case llm.EventTextDelta:
		if ev.Text == "" || c.stop != "" {
			break
		}
		c.start("", "")
		s := c.chunkStart()
		if ev.Refusal {
			c.em.buf = append(c.em.buf, `{"refusal":`...)
		} else {
			c.em.buf = append(c.em.buf, `{"content":`...)
		}
		c.em.buf = appendString(c.em.buf, ev.Text)
		c.chunkEnd(s, "}")
	case llm.EventToolCallStart:
		if c.stop != "" || ev.ToolIndex < 0 {
			break
		}
		c.start("", "")
		for len(c.tools) <= ev.ToolIndex {
			c.tools = append(c.tools, false)
		}
		c.tools[ev.ToolIndex] = true
		id := ev.ToolCallID
		if id == "" {
			id = derivedID("call_", c.id, ev.ToolIndex)
		}
		s := c.chunkStart()
		c.em.buf = append(c.em.buf, `{"tool_calls":[{"index":`...)
		c.em.buf = appendInt(c.em.buf, int64(ev.ToolIndex))
		c.em.buf = append(c.em.buf, `,"id":`...)
		c.em.buf = appendString(c.em.buf, id)
		c.em.buf = append(c.em.buf, `,"type":"function","function":{"name":`...)
		c.em.buf = appendString(c.em.buf, ev.ToolName)
		c.chunkEnd(s, `,"arguments":""}}]}`)
	case llm.EventToolCallDelta:
		if ev.Arguments == "" || c.stop != "" || ev.ToolIndex < 0 || ev.ToolIndex >= len(c.tools) || !c.tools[ev.ToolIndex] {
			break
		}
		c.start("", "")
		s := c.chunkStart()
		c.em.buf = append(c.em.buf, `{"tool_calls":[{"index":`...)
		c.em.buf = appendInt(c.em.buf, int64(ev.ToolIndex))
		c.em.buf = append(c.em.buf, `,"function":{"arguments":`...)
		c.em.buf = appendString(c.em.buf, ev.Arguments)
		c.chunkEnd(s, `}}]}`)
	case llm.EventStop:
		if c.stop == "" {
			c.stop = ev.Stop
			if c.stop == "" {
				c.stop = llm.StopEnd
			}
		}
	}
	return c.em.flush(out)
}

// Finish implements Encoder.
func (c *chatEncoder) Finish(out []sse.Event) []sse.Event {
	if c.ended {
		return out
	}
	c.ended = true
	c.em.reset()
	c.start("", "")
	s := c.em.begin()
	c.em.buf = append(c.em.buf, c.prefix...)
	c.em.buf = append(c.em.buf, `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":`...)
	c.em.buf = appendString(c.em.buf, convert.StopReasonFor(llm.FormatChat, effectiveStop(c.stop, len(c.tools) > 0)))
	c.em.buf = append(c.em.buf, "}]"...)
	if c.meta.IncludeUsage {
		c.em.buf = append(c.em.buf, `,"usage":null`...)
	}
	c.em.buf = append(c.em.buf, '}')
	c.em.end("", s)
	if c.meta.IncludeUsage {
		s := c.em.begin()
		c.em.buf = append(c.em.buf, c.prefix...)
		c.em.buf = append(c.em.buf, `"choices":[],"usage":`...)
		c.em.buf = convert.AppendChatUsage(c.em.buf, c.usage)
		c.em.buf = append(c.em.buf, '}')
		c.em.end("", s)
	}
	c.done()
	return c.em.flush(out)
}

// Fail implements Encoder: the error envelope as its own event, then [DONE] (§1.7).
func (c *chatEncoder) Fail(errType, message string, out []sse.Event) []sse.Event {
	if c.ended {
		return out
	}
	c.ended = true
	c.em.reset()
	typ, code := openAIErrorTypeCode(errorKind(errType))
	s := c.em.begin()
	c.em.buf = append(c.em.buf, `{"error":{"message":`...)
	c.em.buf = appendString(c.em.buf, message)
	c.em.buf = append(c.em.buf, `,"type":`...)
	c.em.buf = appendString(c.em.buf, typ)
	c.em.buf = append(c.em.buf, `,"param":null,"code":`...)
	c.em.buf = appendStringOrNull(c.em.buf, code)
	c.em.buf = append(c.em.buf, "}}"...)
	c.em.end("", s)
	c.done()
	return c.em.flush(out)
}

// Usage implements Encoder.
func (c *chatEncoder) Usage() llm.Usage { return c.usage }

// start writes the role chunk once, fixing the id and model every chunk repeats.
func (c *chatEncoder) start(id, model string) {
	if c.started {
		return
	}
	c.started = true
	if c.meta.ID != "" {
		id = c.meta.ID
	}
	if c.meta.Model != "" {
		model = c.meta.Model
	}
	c.id, c.model = id, model
	c.setPrefix()
	s := c.chunkStart()
	c.chunkEnd(s, `{"role":"assistant","content":"","refusal":null}`)
}

// setPrefix writes the start every chunk shares.
func (c *chatEncoder) setPrefix() {
	c.tier = convert.OpenAIServiceTier(c.usage.ServiceTier)
	c.prefix = append(c.prefix[:0], `{"id":`...)
	c.prefix = appendString(c.prefix, c.id)
	c.prefix = append(c.prefix, `,"object":"chat.completion.chunk","created":`...)
	c.prefix = appendInt(c.prefix, c.meta.Created)
	c.prefix = append(c.prefix, `,"model":`...)
	c.prefix = appendString(c.prefix, c.model)
	// As api.openai.com sends every chunk: the fingerprint (none) and the tier.
	c.prefix = append(c.prefix, `,"system_fingerprint":null,"service_tier":`...)
	c.prefix = appendString(c.prefix, c.tier)
	c.prefix = append(c.prefix, ',')
}

// chunkStart begins a chunk with one choice, up to its delta.
func (c *chatEncoder) chunkStart() int {
	s := c.em.begin()
	c.em.buf = append(c.em.buf, c.prefix...)
	c.em.buf = append(c.em.buf, `"choices":[{"index":0,"delta":`...)
	return s
}

// chunkEnd appends tail (the rest of the delta) and closes the chunk begun at s.
func (c *chatEncoder) chunkEnd(s int, tail string) {
	c.em.buf = append(c.em.buf, tail...)
	c.em.buf = append(c.em.buf, `,"logprobs":null,"finish_reason":null}]`...)
	if c.meta.IncludeUsage {
		c.em.buf = append(c.em.buf, `,"usage":null`...)
	}
	c.em.buf = append(c.em.buf, '}')
	c.em.end("", s)
}

// done writes the terminal marker.
func (c *chatEncoder) done() {
	s := c.em.begin()
	c.em.buf = append(c.em.buf, "[DONE]"...)
	c.em.end("", s)
}

// errorOf is the type and message of a stream error (nil: an unspecified upstream failure).
func errorOf(e *llm.StreamError) (string, string) {
	if e == nil {
		return "upstream_error", "the upstream reported an error"
	}
	return e.Type, e.Message
}
